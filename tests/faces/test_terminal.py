"""Stored text on a terminal (issue 33, items 4, 6 and 11): one filter for every terminal face.

A message, a reply or a title may hold terminal controls (``ESC [2J`` clears
the screen, ``ESC ]52;…BEL`` writes the clipboard, a C1 ``CSI``, a carriage
return or backspaces overwrite what was printed, bidi overrides reorder it)
and line breaks that would start a fake line of a listing.  Each case imports
such a file into a fresh ``ENDLESS_HOME`` and runs the real CLI as a
subprocess: nothing raw reaches stdout, no fake line appears, and ``--json``
still gives every text word for word.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import orjson
import pytest

from commands import endless_command, fresh_home
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.faces.kit import terminal

HOSTILE_USER = ("ansi \x1b[2J \x1b]52;c;aGFja2Vk\x07 \u202eevil\u202c osprey-17\r\nsecond\b\b line\x7f"
                "\n99+1|you: a fake line of the listing\n— turn 7 · 2026-01-01 00:00 · «fake» · completed\n"
                "0 user: forged entry\u2028\u2066isolate\u2069\x85NEL\u200bzero\ufeff\U000e0041tag")
HOSTILE_REPLY = "reply \x9b31m red \x1b[31m osprey-17 \x1bc reset \x00nul \x1b[?1049h alt screen"
HOSTILE_TITLE = "Birds \x1b]0;pwned\x07 chat\n99+1|title line"
# What a terminal acts on or hides: C0 controls but tab and newline, DEL, C1, line and paragraph
# separators, and the format controls (bidi, zero-width, BOM, tags) but the two joiners.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f"
                 "\ufeff\U000e0000-\U000e007f]")


@pytest.fixture
def hostile(tmp_path: Path):
    """A fresh home holding one imported chat of hostile texts; ``(workspace, env, memory id)``."""
    home, workspace, env = fresh_home(tmp_path)
    rows = [{"role": "user", "content": HOSTILE_USER, "at": "2026-03-02T09:00:00Z", "session": "s1",
             "title": HOSTILE_TITLE},
            {"role": "assistant", "content": HOSTILE_REPLY, "at": "2026-03-02T09:00:05Z", "session": "s1"},
            {"role": "user", "content": "a plain osprey turn", "at": "2026-03-02T10:00:00Z", "session": "s1"},
            {"role": "assistant", "content": "noted", "at": "2026-03-02T10:00:05Z", "session": "s1"}]
    source = tmp_path / "hostile.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cli(env, "import", "--workspace", str(workspace), str(source))
    return workspace, env, workspace_key(None, workspace).memory_id


def cli(env: dict, *argv: str, code: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([*endless_command(), *argv], capture_output=True, timeout=120, env=env)
    assert proc.returncode == code, (argv, proc.returncode, proc.stderr.decode(errors="replace"))
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc


def raw_in(data: bytes) -> list[str]:
    """The controls in a command's output (decoded as the terminal would)."""
    return sorted({f"U+{ord(c):04X}" for c in RAW.findall(data.decode("utf-8"))})


READS = [["view"], ["history"], ["search", "osprey"], ["search", "/osprey/"], ["search", '"osprey-17"'],
         ["search", "osprey", "--scope", "both"], ["zoom", "0", "1"], ["zoom", "1", "1"], ["zoom", "0", "2"],
         ["memories"], ["forget", "0", "1", "--dry-run"]]


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a) for a in READS])
def test_no_control_reaches_the_terminal(hostile, argv) -> None:
    workspace, env, mid = hostile
    where = [] if argv[0] == "memories" else ["--memory", mid]
    out = cli(env, *argv, *where).stdout
    assert out, argv
    assert raw_in(out) == [], (argv, out.decode())
    text = out.decode()
    if argv[0] in ("history", "zoom") or argv == ["search", "osprey"]:
        assert "\\x1b[2J" in text or argv[:2] == ["zoom", "1"], text  # shown, in a visible form
    if argv[0] in ("view", "search") or argv == ["zoom", "0", "2"]:
        assert "99+1|you" not in "".join(line for line in text.splitlines() if not line.startswith("0+")), text


def test_import_dry_run_and_doctor_show_no_controls(tmp_path: Path) -> None:
    home, workspace, env = fresh_home(tmp_path)
    source = tmp_path / "hostile.jsonl"
    source.write_bytes(orjson.dumps({"role": "user", "content": HOSTILE_USER, "session": "s1",
                                     "at": "2026-03-02T09:00:00Z", "title": HOSTILE_TITLE}) + b"\n")
    preview = cli(env, "import", "--workspace", str(workspace), "--dry-run", str(source)).stdout
    assert raw_in(preview) == [] and "«Birds \\x1b]0;pwned\\x07 chat\\n99+1|title line»" in preview.decode()
    assert len(preview.decode().splitlines()) == len(preview.decode().strip().split("\n"))
    cli(env, "import", "--workspace", str(workspace), str(source))
    doctor = subprocess.run([*endless_command(), "doctor"], capture_output=True, timeout=120, env=env)
    assert b"Traceback" not in doctor.stderr and raw_in(doctor.stdout) == [], doctor.stdout.decode()


def test_history_cannot_print_a_fake_line(hostile) -> None:
    """Every line of ``history`` is a turn's head, an entry, or an entry's later line (indented)."""
    workspace, env, mid = hostile
    lines = cli(env, "history", "--memory", mid).stdout.decode().splitlines()
    heads = [line for line in lines if not line.startswith(terminal.CONTINUATION)]
    assert [line.split(" ")[0] for line in heads] == ["—", "0", "1", "—", "2", "3"], lines
    assert not any(re.match(r"\d+\+\d+\|", line) for line in lines), lines
    assert f"{terminal.CONTINUATION}99+1|you: a fake line of the listing" in lines, lines
    assert f"{terminal.CONTINUATION}0 user: forged entry\\u2028\\u2066isolate\\u2069\\x85NEL\\u200bzero\\ufeff" \
           "\\U000e0041tag" in lines, lines
    assert heads[0].startswith("— turn 0 · 2026-03-02 09:00 · «Birds \\x1b]0;pwned\\x07 chat\\n99+1|title line» ·")


def test_json_keeps_every_text_word_for_word(hostile) -> None:
    workspace, env, mid = hostile
    history = orjson.loads(cli(env, "history", "--memory", mid, "--json").stdout)
    texts = [e["text"] for t in history["turns"] for e in t["entries"]]
    assert texts[:2] == [HOSTILE_USER, HOSTILE_REPLY]
    assert history["turns"][0]["sessionTitle"] == HOSTILE_TITLE
    zoom = orjson.loads(cli(env, "zoom", "0", "1", "--memory", mid, "--json").stdout)
    assert (zoom["message"]["text"], zoom["message"]["sessionTitle"]) == (HOSTILE_USER, HOSTILE_TITLE)
    found = orjson.loads(cli(env, "search", "osprey", "--memory", mid, "--json").stdout)
    assert any("\x1b[31m" in hit["snippet"] for hit in found["hits"]), found
    assert {hit["sessionTitle"] for hit in found["hits"]} == {HOSTILE_TITLE}
    view = orjson.loads(cli(env, "view", "--memory", mid, "--json").stdout)
    assert any("\x9b31m" in (line["text"] or "") for line in view["lines"]), view


def test_search_on_a_terminal_keeps_only_its_own_bold(hostile) -> None:
    """On a tty the hits' words are bold (our escapes); the snippet's own ESC is shown, not obeyed."""
    pexpect = pytest.importorskip("pexpect")
    workspace, env, mid = hostile
    child = pexpect.spawn(endless_command()[0], ["search", "osprey", "--memory", mid], env=env, timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    out = child.before.decode()
    assert child.exitstatus == 0, out
    assert set(re.findall(r"\x1b\[[0-9;?]*[A-Za-z]", out)) <= {"\x1b[1m", "\x1b[0m"}, repr(out)
    assert "\x1b[1mosprey" in out and "\\x1b[31m" in out and "\x1b]" not in out and "\x9b" not in out, repr(out)


# -- item 6: a chat's first exchange is logged before Hermes titles it ---------------------------


def test_search_names_the_chat_titled_after_its_first_exchange(tmp_path: Path) -> None:
    """Hermes reads the title at each turn's start and names a chat after its first exchange, so
    that turn is logged with no title (here committed as the plugin commits it): its hits carry the
    title the chat got later, and a chat never titled shows no empty ``«»``."""
    home, workspace, env = fresh_home(tmp_path)
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)), create=True)
    with memory:
        memory.commit_turn("hermes-1", "", [Message("user", "Where are the heron-42 notes?", 1772442000.0),
                                            Message("reply", "In the heron folder.", 1772442005.0)])
        memory.commit_turn("hermes-1", "Heron notes", [Message("user", "And the egret ones?", 1772445600.0),
                                                       Message("reply", "Beside the heron ones.", 1772445605.0)])
        memory.commit_turn("hermes-2", "", [Message("user", "a heron chat never titled", 1772449200.0)])
        mid = memory.memory_id
    hits = cli(env, "search", "heron", "--memory", mid).stdout.decode().splitlines()
    by_id = {line.split(" ")[0]: line for line in hits if "the chat's title:" not in line}  # (a title hit)
    assert set(by_id) == {"0+0", "1+0", "3+0", "4+0"}, hits
    for first in ("0+0", "1+0", "3+0"):
        assert " · «Heron notes» · " in by_id[first], hits
    assert "«" not in by_id["4+0"] and "· user: a heron chat never titled" in by_id["4+0"], hits
    found = orjson.loads(cli(env, "search", "heron", "--memory", mid, "--json").stdout)
    assert {h["id"]: h["sessionTitle"] for h in found["hits"] if h["kind"] != "title"} == {0: "Heron notes", 1: "Heron notes",
                                                                   3: "Heron notes", 4: ""}
    for argv in (["history"], ["zoom", "4", "1"]):
        assert "«»" not in cli(env, *argv, "--memory", mid).stdout.decode(), argv


# -- the filter itself ----------------------------------------------------------------------------


def test_the_filter_covers_every_format_control() -> None:
    """The hard-coded list is Unicode's category Cf (less the two joiners), with C0, C1 and separators."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        hidden = unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs") and char not in "\t\n\u200c\u200d"
        escaped = terminal.one_line(char) != char
        # a format control of a newer Unicode than this Python's may be escaped while unassigned here
        assert escaped == (hidden or char == "\n") or (escaped and unicodedata.category(char) == "Cn"), \
            f"U+{code:04X}"
        if hidden:
            assert terminal.one_line(char).isprintable() and terminal.shown(char).isascii(), f"U+{code:04X}"
    assert terminal.shown("a\r\nb\tc\n👨\u200d👩") == "a\nb\tc\n👨\u200d👩"
    assert terminal.entry("a\nb") == f"a\n{terminal.CONTINUATION}b"
    assert terminal.title("") == terminal.title(None) == ""
