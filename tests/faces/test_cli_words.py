"""The CLI in the user's words (issue 18, item 3): counts, names of commands and flags, forms of ids.

Each test runs the real command line (``main()`` or a subprocess) and holds
the exact text a person reads.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import orjson
import pytest

from commands import endless_command
from endless.cli import main
from endless.core.words import agree, count
from endless.faces.cli.doctor import Report, render
from endless.writer.pace import Progress

import rpc_fixtures as F


# -- counts ------------------------------------------------------------------------------------


def test_a_count_takes_the_noun_and_the_verb_it_needs():
    assert count(1, "warning") == "1 warning"
    assert count(0, "error") == "0 errors"
    assert count(3, "file or folder", "files or folders") == "3 files or folders"
    assert count(20000, "message", grouped=True) == "20,000 messages"
    assert f"{count(1, 'message')} {agree(1, 'waits for its line', 'wait for their lines')}" == \
        "1 message waits for its line"
    assert f"{count(3, 'message')} {agree(3, 'waits for its line', 'wait for their lines')}" == \
        "3 messages wait for their lines"


def test_doctor_counts_its_findings_in_words():
    report = Report()
    report.add("a", "ok", "fine")
    report.add("b", "warning", "so-so")
    report.add("c", "error", "broken")
    assert render(report).splitlines()[-1] == "error: 1 ok, 1 warning, 1 error"
    report.add("d", "warning", "again")
    assert render(report).splitlines()[-1] == "error: 1 ok, 2 warnings, 1 error"


def test_the_catch_up_sentence_agrees_with_one_line():
    one = Progress(lines_left=1, messages_without_line=1, calls_per_minute=0.0, seconds_left=30.0)
    assert one.sentence() == ("1 line left to write (1 message without a line of its own), "
                              "0.0 writer calls a minute, done in about 30 s")
    many = Progress(lines_left=3, messages_without_line=2, calls_per_minute=1.5, seconds_left=30.0)
    assert many.sentence() == ("3 lines left to write (2 messages without a line of their own), "
                               "1.5 writer calls a minute, done in about 30 s")


def test_import_says_one_turn(tmp_path: Path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (tmp_path / "xdg").mkdir()
    source = tmp_path / "one.jsonl"
    source.write_text('{"role": "user", "content": "hello", "at": 1772442060, "session": "s"}\n'
                      '{"role": "assistant", "content": "hi", "at": 1772442061, "session": "s"}\n')
    env = {**os.environ, "ENDLESS_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    argv = [*endless_command(), "import", "--workspace", str(workspace), str(source)]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    said = first.stdout.splitlines()[0]
    assert said.startswith("imported 1 turn (2 messages) into memory ")
    assert said.endswith("; 0 turns were there already")
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.stdout.splitlines()[0].endswith("; 1 turn was there already"), again.stdout


# -- the read commands' errors -----------------------------------------------------------------


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-words")
    ws, mid = F.built_workspace(root)
    return root, ws, mid


@pytest.fixture
def env(place, monkeypatch):
    root, ws, mid = place
    for key in list(os.environ):
        if key.startswith("ENDLESS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("ENDLESS_HOME", str(root))
    monkeypatch.setenv("ENDLESS_CONFIG", str(root / "no-config.toml"))
    monkeypatch.chdir(ws)
    return root, ws, mid


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:  # argparse's own usage errors
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def test_an_unknown_memory_names_the_command_that_lists_them(env, capsys):
    code, out, err = run(capsys, "view", "--memory", "ffffffffffffffff")
    assert (code, out, err) == (1, "", "[endless] there is no memory ffffffffffffffff; "
                                        "list them with `endless memories`\n")


def test_an_uppercase_memory_id_is_the_same_memory(env, capsys):
    root, ws, mid = env
    lower = run(capsys, "view", "--memory", mid, "--json")
    upper = run(capsys, "view", "--memory", mid.upper(), "--json")
    assert upper == lower and upper[0] == 0
    code, _, err = run(capsys, "date", "3", "--memory", "FFFFFFFFFFFFFFFF")
    assert code == 1 and err == ("[endless] there is no memory ffffffffffffffff; "
                                 "list them with `endless memories`\n")


def test_a_malformed_memory_id_is_refused_naming_the_flag(env, capsys):
    code, out, err = run(capsys, "view", "--memory", "../../etc")
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == ("endless view: error: argument --memory: '../../etc' is not a memory id: "
                                    "give the 16 hex digits `endless memories` prints")
    assert "memoryId" not in err


@pytest.mark.parametrize("argv,code,says", [
    (["zoom", "11", "1", "--page", "0"], 2, "--page must be at least 1, not 0"),
    (["history", "--limit", "500"], 2, "--limit must be from 1 to 200, not 500"),
    (["history", "--before", "-1"], 2, "--before must be at least 0, not -1"),
    (["zoom", "-4", "4"], 2, "ID must be at least 0, not -4"),
    (["zoom", "0", "0"], 2, "N must be at least 1, not 0"),
])
def test_a_bad_argument_is_named_as_typed(env, capsys, argv, code, says):
    assert run(capsys, *argv) == (code, "", f"[endless] {says}\n")


def test_zoom_says_only_what_is_wrong_with_the_line(env, capsys):
    root, ws, mid = env
    last = orjson.loads(run(capsys, "view", "--json")[1])["lines"][-1]
    total = last["id"] + last["n"]
    assert run(capsys, "zoom", "99999", "1") == (
        1, "", f"[endless] no message 99999: memory {mid} holds messages 0 to {total - 1}\n")
    assert run(capsys, "zoom", "99968", "32") == (
        1, "", f"[endless] no line 99968+32: memory {mid} holds messages 0 to {total - 1}\n")
    assert run(capsys, "zoom", "3", "2") == (
        1, "", "[endless] no line 3+2: a line of 2 messages starts at a multiple of 2, such as 2+2 or 4+2\n")
    assert run(capsys, "zoom", "0", "3") == (
        1, "", "[endless] no line 0+3: a line covers 1, 2, 4, 8, … messages (a power of two), not 3\n")


def test_zoom_takes_the_line_as_view_prints_it(env, capsys):
    code, view, _ = run(capsys, "view")
    name = view.splitlines()[0].split("|", 1)[0]
    ident, n = name.split("+")
    joined = run(capsys, "zoom", name, "--json")
    apart = run(capsys, "zoom", ident, n, "--json")
    assert joined == apart and joined[0] == 0 and len(orjson.loads(joined[1])["lines"]) == 2
    assert run(capsys, "zoom", "11+1") == run(capsys, "zoom", "11", "1")
    assert run(capsys, "zoom", "0+16", "16") == (
        2, "", "[endless] give the line as ID+N or as ID N, not both: `endless zoom 0+16`\n")
    assert run(capsys, "zoom", "11") == (
        2, "", "[endless] say how many messages the line covers: `endless zoom 11+N` (N = 1 opens message 11)\n")
    code, out, err = run(capsys, "zoom", "0+x")
    assert code == 2 and err.splitlines()[-1] == (
        "endless zoom: error: argument ID+N: '0+x' is not a line: give ID+N as `endless view` prints it "
        "(such as 0+16), or ID and N apart")


def test_date_takes_a_message_in_the_forms_lines_name_it(env, capsys):
    plain = run(capsys, "date", "11")
    assert plain[0] == 0
    assert run(capsys, "date", "11+0") == plain and run(capsys, "date", "11+1") == plain
    code, out, err = run(capsys, "date", "0+16")
    assert code == 2 and err.splitlines()[-1] == (
        "endless date: error: argument ID: '0+16' is a line of 16 messages, not one message: "
        "give one of its message numbers, such as 0")


def test_an_empty_history_page_says_so(env, capsys):
    root, ws, mid = env
    assert run(capsys, "history", "--before", "0") == (0, "", "[endless] no turns before turn 0: turn 0 is the first\n")
    assert run(capsys, "history", "--before", "0", "--json") == (
        0, '{\n  "turns": []\n}\n', "[endless] no turns before turn 0: turn 0 is the first\n")
    code, out, err = run(capsys, "history", "--before", "99999", "--limit", "1")
    assert code == 0 and out.startswith("— turn 59 ·")
    assert err == ("[endless] --before 99999 is past the newest turn (59) of memory "
                   f"{mid}: this is the newest page\n[endless] earlier turns: --before 59\n")
    assert run(capsys, "search", "nosuchwordanywhere") == (0, "", "[endless] no hits\n")  # the same convention


def test_an_empty_memory_says_it_holds_nothing_yet(env, capsys, tmp_path, monkeypatch):
    from endless.core.store.keys import workspace_key
    from endless.core.memory import Memory
    from endless.core.settings import load_settings

    monkeypatch.setenv("ENDLESS_HOME", str(tmp_path / "home"))
    empty = tmp_path / "empty"
    empty.mkdir()
    Memory.open(workspace_key(None, empty), settings=load_settings()).close()
    new = workspace_key(None, empty).memory_id
    assert run(capsys, "history", "--workspace", str(empty)) == (0, "", f"[endless] memory {new} holds no turns yet\n")
    assert run(capsys, "view", "--workspace", str(empty)) == (
        0, "", f"[endless] the view is empty: memory {new} holds no messages yet\n")


# -- hermes install ------------------------------------------------------------------------------


def test_hermes_install_refuses_a_folder_that_is_no_hermes_home(tmp_path: Path, capsys):
    missing = tmp_path / "typo"
    assert run(capsys, "hermes", "install", "--home", str(missing)) == (
        2, "", f"[endless.hermes] {missing} does not exist; check --home (or $HERMES_HOME), run Hermes there "
               "once, or add --create to install into it anyway\n")
    assert not missing.exists()
    bare = tmp_path / "bare"
    bare.mkdir()
    assert run(capsys, "hermes", "install", "--home", str(bare)) == (
        2, "", f"[endless.hermes] {bare} is not a Hermes home (no config.yaml, state.db or sessions/); check "
               "--home (or $HERMES_HOME), run Hermes there once, or add --create to install into it anyway\n")
    assert list(bare.iterdir()) == []
    code, out, err = run(capsys, "hermes", "install", "--home", str(missing), "--create")
    assert code == 0 and "plugins.enabled: added 'endless'" in err and (missing / "config.yaml").exists()
    again = run(capsys, "hermes", "install", "--home", str(missing))  # installed once: a home now
    assert again == (0, "", f"[endless.hermes] Endless is already enabled in {missing}\n")


def test_hermes_install_takes_a_home_hermes_has_used(tmp_path: Path, capsys):
    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    (home / "SOUL.md").write_text("a soul\n")
    code, out, err = run(capsys, "hermes", "install", "--home", str(home))
    assert code == 0 and out == "" and "plugins.enabled: added 'endless'" in err


# -- endless config --------------------------------------------------------------------------------


def test_config_reads_as_the_settings_file_is_written(tmp_path: Path):
    settings_file = tmp_path / "endless.toml"
    settings_file.write_text('[endless]\nperson_tag = "me"\nspend_cap_per_day = 0.5\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENDLESS_", "XDG_"))}
    env.update(HOME=str(tmp_path / "user"), ENDLESS_CONFIG=str(settings_file), ENDLESS_RECALL_SEARCH="no",
               ENDLESS_HOME=str(tmp_path / "memories" / ".." / "memories"))
    done = subprocess.run([*endless_command(), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    # Columns: name, value, source, meaning, apart by two spaces or more.
    rows = {line.split()[0]: re.split(r"\s{2,}", line) for line in done.stdout.splitlines()}
    assert len(rows) == len(done.stdout.splitlines())  # one line per setting
    assert rows["recall_search"] == [
        "recall_search", "false", "ENDLESS_RECALL_SEARCH", "whether the chat model is offered the recall_search tool"]
    assert rows["person_tag"] == ["person_tag", '"me"', str(settings_file), "the person's tag in the lines"]
    assert rows["spend_cap_per_day"][1:3] == ["0.5", str(settings_file)]
    assert rows["writer_route"] == [
        "writer_route", "(not set)", "default", "the model that writes lines, as JSON (not set: each chat's own)"]
    assert rows["home"][1:3] == [f'"{tmp_path / "memories"}"', "ENDLESS_HOME"]
    assert rows["line_budget"] == ["line_budget", "512", "default", "bytes of one summary line"]
    assert "None" not in done.stdout and "True" not in done.stdout and "False" not in done.stdout
    as_json = subprocess.run([*endless_command(), "config", "--json"], capture_output=True, env=env, timeout=60)
    by_name = {row["name"]: row for row in orjson.loads(as_json.stdout)}
    assert by_name["recall_search"] == {"name": "recall_search", "value": False, "source": "env ENDLESS_RECALL_SEARCH",
                                        "meaning": "whether the chat model is offered the recall_search tool"}
    assert by_name["writer_route"]["value"] is None and by_name["home"]["value"] == str(tmp_path / "memories")


# -- help and completion ------------------------------------------------------------------------------


def test_every_command_shows_an_example(capsys):
    from endless.cli import COMMANDS

    top = run(capsys, "--help")
    assert top[0] == 0
    listed = top[1].split("examples (`endless COMMAND --help` for each):\n", 1)[1].splitlines()
    for names, _, _ in COMMANDS:
        for name in names:
            code, out, _ = run(capsys, name, "--help")
            assert code == 0
            head, example = out.rstrip("\n").rsplit("\n", 1)
            assert head.endswith("\nexample:") and f"endless {name}" in example, (name, out)
            assert example in listed, name
    code, out, _ = run(capsys, "hermes", "install", "--help")
    assert out.rstrip("\n").endswith("example:\n  endless hermes install --home ~/.hermes")


def completed(script: Path, *words: str, cword: int | None = None) -> list[str]:
    """COMPREPLY after the bash function completes ``endless WORDS…`` (the last word being typed)."""
    import shlex
    import sys

    listed = " ".join(shlex.quote(w) for w in ("endless", *words))
    cword = len(words) if cword is None else cword
    program = (f"source {shlex.quote(str(script))}; COMP_WORDS=({listed}); COMP_CWORD={cword}; "
               "_endless_complete; printf '%s\\n' \"${COMPREPLY[@]}\"")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_bash_completion_completes_commands_options_and_choices(tmp_path: Path):
    import sys

    made = subprocess.run([*endless_command(), "completion", "bash"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0 and made.stderr == ""
    script = tmp_path / "endless.bash"
    script.write_text(made.stdout)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=60).returncode == 0
    assert completed(script, "vi") == ["view"]
    assert completed(script, "hi") == ["history"]
    assert completed(script, "me") == ["memories"]
    if not (Path(sys.executable).parent / "endless").is_file():
        pytest.skip("past the first word the script runs `endless`, which is not installed here")
    assert completed(script, "zoom", "--pa") == ["--page"]
    assert completed(script, "hermes", "") == ["install", "uninstall"]
    assert completed(script, "hermes", "install", "--c") == ["--create"]
    assert completed(script, "chat", "--api-style", "") == ["openai", "anthropic"]
    assert completed(script, "view", "--memory", "") == []  # a value to type: the shell's own completion


@pytest.mark.parametrize("shell,marks", [("zsh", ("#compdef endless", "compdef _endless endless")),
                                         ("fish", ("complete -c endless",))])
def test_zsh_and_fish_scripts_name_every_command(capsys, shell, marks):
    from endless.cli import COMMANDS

    code, out, _ = run(capsys, "completion", shell)
    assert code == 0 and all(mark in out for mark in marks)
    assert all(name in out for names, _, _ in COMMANDS for name in names)


def test_history_pages_forward_from_a_turn_or_a_day(env, capsys):
    """``--from`` and ``--since`` read on from the oldest turn or a day; the flags are named as typed."""
    from endless.core import moments
    code, out, err = run(capsys, "history", "--from", "0", "--limit", "2")
    assert code == 0 and re.findall(r"^— turn (\d+) ·", out, re.M) == ["0", "1"]
    assert err == "[endless] later turns: --from 2\n"
    # the fixture's 60 turns span 3 days: turn 20 is the first at or after START + 1 day
    day_two = moments.local(F.START + F.DAY, unknown="?")[:16].replace(" ", "T")
    code, out, err = run(capsys, "history", "--since", day_two, "--limit", "1")
    assert code == 0 and re.findall(r"^— turn (\d+) ·", out, re.M) == ["20"], (day_two, out)
    assert err == "[endless] earlier turns: --before 20\n[endless] later turns: --from 21\n"
    assert run(capsys, "history", "--from", "99999") == (0, "", "[endless] no turns from turn 99999: "
                                                                 "the newest is turn 59\n"
                                                                 "[endless] earlier turns: --before 60\n")
    code, out, err = run(capsys, "history", "--since", "yesterday-ish")
    assert code == 2 and out == "" and err == (
        "[endless] --since 'yesterday-ish' is not a date or time; write it as 2026-11-30 or "
        "2026-11-30T14:05 (local time) or 2026-11-30T13:05Z\n")
    code, out, err = run(capsys, "search", "billing", "--before", "soon")  # the search's filters too
    assert code == 2 and out == "" and err == (
        "[endless] --before 'soon' is not a date or time; write it as 2026-11-30 or "
        "2026-11-30T14:05 (local time) or 2026-11-30T13:05Z\n")
    code, out, err = run(capsys, "history", "--from", "3", "--before", "9")
    assert code == 2 and err.splitlines()[-1] == (
        "endless history: error: argument --before: not allowed with argument --from")
    code, _, err = run(capsys, "history", "--from", "-1")
    assert code == 2 and err == "[endless] --from must be at least 0, not -1\n"
