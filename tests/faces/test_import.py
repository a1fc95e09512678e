"""``endless import`` on fixtures of each format, run as a person runs it (a subprocess).

Checked for every format: the turns land with their kinds, titles and
original times, after what the memory held, in time order; a second import
of the same source adds nothing; a malformed line names its file and line
and nothing is written.  Also: an import overlapping turns the Hermes plugin
captured live (same session id, same words) adds only the missing turns;
an import killed mid-way is resumed by running it again; ``--dry-run``
writes nothing and prints the turns and the writer's estimate.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import IMPORT_FOLLOWER_FROM, Settings
from commands import endless_command, fresh_home
from paths import FIXTURES as ALL_FIXTURES, REPO
from state_db_schema import SCHEMA

FIXTURES = ALL_FIXTURES / "import"
CLAUDE_SESSION = "0b6f3c1e-5a2d-4c1e-9f00-3e1d2a7c9b10"



@pytest.fixture
def place(tmp_path: Path):
    return fresh_home(tmp_path)


def run_import(place, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    home, workspace, env = place
    proc = subprocess.run([*endless_command(), "import", "--workspace", str(workspace), *args],
                          capture_output=True, timeout=120, env=env, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def open_memory(place, readonly: bool = True) -> Memory:
    home, workspace, _ = place
    return Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)), readonly=readonly,
                       create=not readonly)


def turns_of(memory: Memory) -> list[tuple]:
    out = []
    for t in range(memory.turns):
        info = memory.turn(t)
        out.append((info.session, info.title, info.at, [(m.kind, m.text, m.at) for m in memory.turn_messages(t)]))
    return out


def iso(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- generic JSONL -------------------------------------------------------------------------


def test_generic_jsonl(place) -> None:
    proc = run_import(place, str(FIXTURES / "generic.jsonl"))
    assert "imported 4 turns (8 messages)" in proc.stdout
    with open_memory(place) as memory:
        turns = turns_of(memory)
    # Time order, not file order: the note of 1 March comes first.
    assert [t[0] for t in turns] == ["notes", "planning", "planning", "errands"]
    assert turns[0][3] == [("note", "The team moved staging to a new host in February.", iso("2026-03-01T08:00:00Z"))]
    session, title, at, messages = turns[1]
    assert (title, at) == ("Staging setup", iso("2026-03-02T09:00:00Z"))
    assert [m[0] for m in messages] == ["user", "trace", "reply"]
    assert messages[1][1] == 'said: Let me check the compose file.\nresult: services:\n  db:\n    ports: ["5433:5432"]'
    assert messages[2] == ("reply", "Staging listens on port 5433.", iso("2026-03-02T09:00:09Z"))
    # A line without 'at' keeps the previous line's time; a number is Unix seconds.
    assert turns[2][3] == [("user", "And production?", 1772442060.0),
                           ("reply", "Production uses the default, 5432.", 1772442060.0)]
    assert turns[3][1] == "Errands"

    again = run_import(place, str(FIXTURES / "generic.jsonl"))
    assert "imported 0 turns (0 messages)" in again.stdout and "4 turns were there already" in again.stdout
    with open_memory(place) as memory:
        assert turns_of(memory) == turns


def test_a_malformed_line_names_file_and_line_and_writes_nothing(place, tmp_path) -> None:
    source = tmp_path / "bad.jsonl"
    lines = (FIXTURES / "generic.jsonl").read_text().splitlines()
    lines.insert(6, '{"role": "user", "content": "unterminated')
    source.write_text("\n".join(lines) + "\n")
    proc = run_import(place, str(source), check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{source}:7: not valid JSON" in proc.stderr and "Nothing was imported" in proc.stderr
    home = place[0]
    assert not (home / "memories").exists()  # not even the memory was created

    # Into a memory that exists: it stays exactly as it was.
    run_import(place, str(FIXTURES / "generic.jsonl"))
    with open_memory(place) as memory:
        before = (memory.total, memory.log.path.read_bytes())
    wrong_role = tmp_path / "role.jsonl"
    wrong_role.write_text('{"role": "user", "content": "new words"}\n{"role": "robot", "content": "beep"}\n')
    proc = run_import(place, str(wrong_role), check=False)
    assert proc.returncode == 2 and f"{wrong_role}:2: role must be one of" in proc.stderr
    with open_memory(place) as memory:
        assert (memory.total, memory.log.path.read_bytes()) == before


@pytest.mark.parametrize("at", ["1.7e15", "-5", "1e300", '"33658-01-01T00:00:00Z"', '"2300-01-01T00:00:00Z"',
                                "1e16"])
def test_a_time_that_is_no_real_moment_is_refused_with_file_and_line(place, tmp_path, at) -> None:
    """Times between 1970 and 2200 only (issue 14): a microsecond epoch, a negative time, 1e300 …"""
    run_import(place, str(FIXTURES / "generic.jsonl"))
    with open_memory(place) as memory:
        before = (memory.total, memory.log.path.read_bytes())
    source = tmp_path / "times.jsonl"
    source.write_text('{"role": "user", "content": "fine", "at": 1767225600}\n'
                      f'{{"role": "assistant", "content": "odd time", "at": {at}}}\n')
    proc = run_import(place, str(source), check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert f"{source}:2: " in proc.stderr, proc.stderr
    assert "is not a moment between 1970 and 2200" in proc.stderr or "is not a time" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    with open_memory(place) as memory:
        assert (memory.total, memory.log.path.read_bytes()) == before


def test_a_memory_holding_impossible_times_still_reads(place) -> None:
    """Written before the check (here: straight through the engine): every reader shows "unknown"."""
    from endless.core.store.turns import TurnRecord

    home, workspace, env = place
    with open_memory(place, readonly=False) as memory:
        memory.commit_turns([TurnRecord("s", "Odd", [Message("user", "pelican hour", 1.7e15),
                                                      Message("reply", "noted", -5.0)], at=1e300)])
        mid = memory.memory_id
    for argv in (["date", "0"], ["date", "1"], ["search", "pelican"], ["history"], ["view"], ["zoom", "0", "1"],
                 ["search", "pelican", "--json"], ["history", "--json"], ["memories"]):
        proc = subprocess.run([*endless_command(), *argv, "--memory", mid] if argv[0] != "memories"
                              else [*endless_command(), *argv], capture_output=True, timeout=60, env=env, text=True)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (argv, proc.stderr)
    date = subprocess.run([*endless_command(), "date", "0", "--memory", mid], capture_output=True, timeout=60,
                          env=env, text=True)
    assert "unknown" in date.stdout, date.stdout
    from endless.core import lookback
    with open_memory(place) as memory:
        assert lookback.date(memory, 0) == "Message 0 has no known time (its record holds 1700000000000000.0)."
        assert "(time unknown)" in lookback.recall_search(memory, "pelican")


# -- Claude Code ---------------------------------------------------------------------------


def test_claude_code_transcript(place) -> None:
    proc = run_import(place, str(FIXTURES / "claude_session.jsonl"))
    assert "imported 2 turns (5 messages)" in proc.stdout
    with open_memory(place) as memory:
        turns = turns_of(memory)
    assert [(t[0], t[1]) for t in turns] == [(CLAUDE_SESSION, "Fix the flaky upload test")] * 2
    first = turns[0][3]
    assert [m[0] for m in first] == ["user", "trace", "reply"]
    assert first[0] == ("user", "The upload test fails one run in ten. Can you find out why?",
                        iso("2026-04-10T14:00:05Z"))
    trace = first[1][1]
    assert trace.startswith("said: I'll look at the test first.\n"
                            'did: Read {"file_path":"/home/ana/proj/tests/test_upload.py"}\n'
                            "result: def test_upload(tmp_path):")
    assert ('did: Bash {"command":"pytest -x tests/test_upload.py --count 20","description":"Run the test 20 times"}'
            in trace)
    assert "result: (error) 2 failed, 18 passed: OSError: [Errno 98] Address already in use" in trace
    text = orjson.dumps(turns).decode()
    assert "temp dir cleanup" not in text  # thinking is never logged
    assert "init is analyzing" not in text and "Subagent" not in text  # meta lines and sidechains
    assert turns[1][3][0][1] == "Great, please do that."
    assert run_import(place, str(FIXTURES / "claude_session.jsonl")).stdout.startswith("imported 0 turns")


def test_a_malformed_claude_line(place, tmp_path) -> None:
    source = tmp_path / "session.jsonl"
    lines = (FIXTURES / "claude_session.jsonl").read_text().splitlines()
    lines[9] = '{"type":"assistant","sessionId":"x","timestamp":"2026-04-10T14:00:14.000Z"}'
    source.write_text("\n".join(lines) + "\n")
    proc = run_import(place, str(source), check=False)
    assert proc.returncode == 2
    assert f"{source}:10: a assistant event without a message" in proc.stderr
    assert not (place[0] / "memories").exists()


# -- Hermes state.db ---------------------------------------------------------------------------


def make_state_db(path: Path, workspace: Path) -> None:
    """A state.db with the tables and columns Hermes 0.19.0 keeps sessions in (the ones read here)."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO sessions VALUES ('20260501_0900_ab12', 'cli', 'm', 'Backup plan', ?, NULL, 1777626000, NULL)",
               (str(workspace),))
    db.execute("INSERT INTO sessions VALUES ('20260502_1000_cd34', 'telegram', 'm', 'Elsewhere', NULL, NULL, 1777716000, NULL)")
    rows = [
        ("20260501_0900_ab12", "system", "You are Hermes.", None, None, None, 1777626000.0, 1, 0),
        ("20260501_0900_ab12", "user", "How often do the backups run?", None, None, None, 1777626001.0, 0, 1),
        ("20260501_0900_ab12", "assistant", "", None,
         orjson.dumps([{"id": "call_1", "type": "function",
                        "function": {"name": "terminal", "arguments": "{\"command\": \"crontab -l\"}"}}]).decode(),
         None, 1777626002.0, 0, 1),
        ("20260501_0900_ab12", "tool", "0 3 * * * /usr/local/bin/backup.sh", "call_1", None, "terminal",
         1777626003.0, 0, 1),
        ("20260501_0900_ab12", "assistant", "Every night at 03:00.", None, None, None, 1777626004.0, 0, 1),
        ("20260501_0900_ab12", "user", "Scratch that question.", None, None, None, 1777626100.0, 0, 0),  # rewound
        ("20260501_0900_ab12", "user", "\x00json:" + orjson.dumps([{"type": "text", "text": "Move them to 04:00."}]).decode(),
         None, None, None, 1777626200.0, 1, 0),
        ("20260501_0900_ab12", "assistant", "Done: backups now run at 04:00.", None, None, None, 1777626210.0, 1, 0),
        ("20260502_1000_cd34", "user", "Unrelated telegram chat", None, None, None, 1777716001.0, 1, 0),
    ]
    db.executemany("INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp,"
                   " active, compacted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   [(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]) for r in rows])
    db.commit()
    db.close()


def test_hermes_state_db(place, tmp_path) -> None:
    db = tmp_path / "state.db"
    make_state_db(db, place[1])
    proc = run_import(place, str(db))
    assert "imported 2 turns (5 messages)" in proc.stdout  # only the session run in this workspace
    with open_memory(place) as memory:
        turns = turns_of(memory)
    assert [(t[0], t[1], t[2]) for t in turns] == [("20260501_0900_ab12", "Backup plan", 1777626001.0),
                                                   ("20260501_0900_ab12", "Backup plan", 1777626200.0)]
    assert turns[0][3] == [("user", "How often do the backups run?", 1777626001.0),
                           ("trace", 'did: terminal {"command": "crontab -l"}\nresult: 0 3 * * * /usr/local/bin/backup.sh',
                            1777626003.0),
                           ("reply", "Every night at 03:00.", 1777626004.0)]
    assert turns[1][3][0][1] == "Move them to 04:00."
    assert "Scratch that" not in orjson.dumps(turns).decode()
    everything = run_import(place, str(db), "--all-sessions")
    assert "imported 1 turn (1 message)" in everything.stdout and "2 turns were there already" in everything.stdout


def test_a_malformed_hermes_row(place, tmp_path) -> None:
    db = tmp_path / "state.db"
    make_state_db(db, place[1])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET tool_calls = '[{\"function\": ' WHERE id = 3")
    proc = run_import(place, str(db), check=False)
    assert proc.returncode == 2 and f"{db}: messages row 3: tool_calls is not valid JSON" in proc.stderr
    assert not (place[0] / "memories").exists()
    not_db = tmp_path / "notes.db"
    not_db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    proc = run_import(place, str(not_db), check=False)
    assert proc.returncode == 2 and str(not_db) in proc.stderr


def test_overlap_with_turns_captured_live(place, tmp_path) -> None:
    """The plugin logged the second turn live; the import adds the first, after it, and nothing twice."""
    db = tmp_path / "state.db"
    make_state_db(db, place[1])
    with open_memory(place, readonly=False) as memory:
        memory.commit_turn("live-other", "Other chat", [Message("user", "an earlier chat", 1777000000.0)])
        memory.commit_turn("20260501_0900_ab12", "Backup plan", [
            Message("user", "Move them to 04:00.", 1777626200.0),
            Message("reply", "Done: backups now run at 04:00.", 1777626210.0)])
    proc = run_import(place, str(db))
    assert "imported 1 turn (3 messages)" in proc.stdout and "1 turn was there already" in proc.stdout
    with open_memory(place) as memory:
        turns = turns_of(memory)
    assert [(t[0], t[3][0][1]) for t in turns] == [("live-other", "an earlier chat"),
                                                   ("20260501_0900_ab12", "Move them to 04:00."),
                                                   ("20260501_0900_ab12", "How often do the backups run?")]
    assert run_import(place, str(db)).stdout.startswith("imported 0 turns")


def test_turns_holding_secrets_are_recognised_when_imported_again(place, tmp_path) -> None:
    """A turn is known by its first message as the memory keeps it, secrets redacted: importing the
    same source again adds nothing, and a turn logged live with a secret is not imported twice.
    (It was known by its words before redaction, so every turn with a secret was added again.)"""
    token = "ghp_" + "A1b2C3d4" * 5
    lines = [{"role": "user", "content": f"my token is {token}", "session": "s", "at": 1_770_000_000},
             {"role": "assistant", "content": "noted", "session": "s", "at": 1_770_000_001},
             {"role": "user", "content": f"again {token}", "session": "s", "at": 1_770_000_002},
             {"role": "assistant", "content": f"it was {token}", "session": "s", "at": 1_770_000_003},
             {"role": "note", "content": f"keys: {token}", "session": "s", "at": 1_770_000_004},
             {"role": "user", "content": "word " * 9_000 + token, "session": "s", "at": 1_770_000_005},
             {"role": "user", "content": f"live {token}", "session": "live", "at": 1_770_000_006},
             {"role": "assistant", "content": "ok", "session": "live", "at": 1_770_000_007}]
    source = tmp_path / "secrets.jsonl"
    source.write_text("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    with open_memory(place, readonly=False) as memory:  # the last turn was logged live (redacted) first
        memory.commit_turn("live", "", [Message("user", f"live {token}", 1_770_000_006.0),
                                        Message("reply", "ok", 1_770_000_007.0)])
    first = run_import(place, str(source))
    assert "imported 4 turns" in first.stdout and "1 turn was there already" in first.stdout
    with open_memory(place) as memory:
        total = memory.total
        assert token not in memory.log.path.read_text()
    again = run_import(place, str(source))
    assert again.stdout.startswith("imported 0 turns") and "5 turns were there already" in again.stdout
    with open_memory(place) as memory:
        assert memory.total == total


# -- dry run, long imports, interruption -----------------------------------------------------------


def test_dry_run_writes_nothing_and_estimates(place, tmp_path) -> None:
    home, workspace, env = place
    proc = run_import(place, "--dry-run", str(FIXTURES / "generic.jsonl"), str(FIXTURES / "claude_session.jsonl"))
    lines = proc.stdout.splitlines()
    assert sum(1 for line in lines if line.startswith("+ ")) == 6
    assert "«Staging setup»  1 user, 1 trace, 1 reply  user: Which port does the staging database use?" in proc.stdout
    assert "would add 6 turns (13 messages)" in proc.stdout
    assert "offline writer" in proc.stdout
    assert not (home / "memories").exists()
    route = '{"provider": "openai", "model": "deepseek-v4-flash", "base_url": "https://api.deepseek.com"}'
    priced = subprocess.run([*endless_command(), "import", "--workspace", str(workspace), "--dry-run", "--json",
                             str(FIXTURES / "generic.jsonl")], capture_output=True, text=True, timeout=60,
                            env={**env, "ENDLESS_WRITER_ROUTE": route})
    summary = orjson.loads(priced.stdout)
    assert summary["turns"] == 4 and summary["messages"] == 8 and len(summary["new"]) == 4
    assert summary["writer"]["calls"] >= 1 and summary["writer"]["cost"] > 0
    assert "deepseek-v4-flash" in summary["writer"]["route"]
    assert not (home / "memories").exists()


def big_source(path: Path, turns: int) -> None:
    with open(path, "w") as handle:
        for k in range(turns):
            at = 1_760_000_000 + 60 * k
            handle.write(orjson.dumps({"role": "user", "content": f"question number {k}", "at": at,
                                       "session": f"s{k % 3}"}).decode() + "\n")
            handle.write(orjson.dumps({"role": "assistant", "content": f"answer number {k}", "at": at + 1,
                                       "session": f"s{k % 3}"}).decode() + "\n")


def kill_import_once_written(place, source: Path, name: str) -> None:
    """Start ``endless import source`` and SIGKILL it the moment the memory's file ``name`` has bytes."""
    home, workspace, env = place
    proc = subprocess.Popen([*endless_command(), "import", "--workspace", str(workspace), str(source)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    path = home / "memories" / workspace_key(None, workspace).memory_id / name
    deadline = time.monotonic() + 120
    while not (path.exists() and path.stat().st_size > 0):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.005)  # polling a real condition (the file grew), not a timed wait
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def test_an_interrupted_import_resumes(place, tmp_path) -> None:
    """SIGKILL an import once its first batch has landed; running it again adds exactly the rest."""
    home, workspace, env = place
    source = tmp_path / "big.jsonl"
    big_source(source, 20_000)
    kill_import_once_written(place, source, "turns.turn.v1.jsonl")
    with open_memory(place) as memory:
        landed = memory.turns
    if landed == 20_000:
        pytest.skip("the import finished before it could be interrupted")
    assert 0 < landed < 20_000
    rerun = run_import(place, str(source))
    assert f"imported {20_000 - landed} turns" in rerun.stdout
    with open_memory(place) as memory:
        assert memory.turns == 20_000 and memory.total == 40_000
        texts = [memory.message(2 * t).text for t in range(0, 20_000, 997)]
        assert texts == [f"question number {t}" for t in range(0, 20_000, 997)]  # in time order, each once
        firsts = {memory.turn_messages(t)[0].text for t in range(memory.turns)}
        assert len(firsts) == 20_000


def helpers_of(home: Path) -> list[int]:
    """Processes running an import's index helper for this home (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"endless.faces.importers.index_follower" in words and any(str(home).encode() in w for w in words):
            found.append(int(cmdline.parent.name))
    return found


def test_a_long_import_is_searchable_when_it_returns_and_leaves_no_helper(place, tmp_path) -> None:
    """From IMPORT_FOLLOWER_FROM messages on, a helper process keeps the search index; the import waits for it."""
    home, workspace, env = place
    turns = IMPORT_FOLLOWER_FROM // 2 + 7
    source = tmp_path / "long.jsonl"
    big_source(source, turns)
    run_import(place, str(source))
    assert helpers_of(home) == []
    with open_memory(place) as memory:
        mark = memory.search_index.watermark()  # read before any search could catch the index up itself
        assert (mark.turns, mark.messages, mark.log_end, mark.tree_end) == (
            turns, 2 * turns, memory.log.end, memory.tree.end)
    found = subprocess.run([*endless_command(), "search", "--workspace", str(workspace), "--json",
                            f'"answer number {turns - 1}"'], capture_output=True, text=True, env=env, timeout=120)
    assert found.returncode == 0, found.stderr
    hits = orjson.loads(found.stdout)["hits"]
    assert [(h["id"], h["snippet"]) for h in hits][:1] == [(2 * turns - 1, f"answer number {turns - 1}")]



def test_lines_written_while_a_long_import_runs_are_all_in_its_index(place, tmp_path) -> None:
    """A writer stores summary lines between the import's batches while the index is busy, so it
    leaves them to the import's helper: told only of the import's own free stretches, the helper
    indexes every one of them (none is stepped over as free).

    The first line is stored with the memory's lock held once the helper runs, so the import is
    still running, whatever the machine's speed; more are stored as its batches land."""
    import math

    from endless.core.search import upkeep as index_upkeep
    from endless.core.store.messages import Message
    from endless.core.search.index import SearchIndex
    from endless.core.store.turns import TurnRecord

    home, workspace, env = place
    turns = 2 * IMPORT_FOLLOWER_FROM
    source = tmp_path / "long.jsonl"
    big_source(source, turns)
    memory = open_memory(place, readonly=False)
    # 32 messages before the import, shaped as its own (16 fit a line, 32 do not): line 0+32 is the writer's
    memory.commit_turns([TurnRecord("early", "t", [Message("user", f"question number {k}", 1_750_000_000.0 + k),
                                                  Message("reply", f"answer number {k}", 1_750_000_000.5 + k)],
                                    tid=f"{k:016x}") for k in range(16)], sync=False)
    assert memory.is_built(4, 0) and memory.is_built(4, 1) and not memory.is_built(5, 0)
    blocker = SearchIndex(memory.folder)
    proc = subprocess.Popen([*endless_command(), "import", "--workspace", str(workspace), str(source),
                             "--no-progress"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stored: list[str] = []

    def store_newest() -> None:
        memory.catch_up()
        index = (memory.total >> 5) - 1  # the newest level-5 line, once both its halves are free lines
        if memory.is_built(4, 2 * index) and memory.is_built(4, 2 * index + 1) and not memory.is_built(5, index):
            text = f"zanzibar summary {len(stored)}"
            with blocker.write():  # the index is busy: the writer leaves its line to the helper
                if memory.store_line(5, index, text, sync=False):
                    stored.append(text)

    try:
        while not helpers_of(home) and proc.poll() is None:
            pass
        with memory.lock:  # the import cannot commit meanwhile: it runs on past this line
            assert proc.poll() is None, "the import ended before its index helper was seen"
            store_newest()
        while proc.poll() is None:
            store_newest()
    finally:
        out, err = proc.communicate(timeout=120)
        blocker.close()
        memory.close()
    assert proc.returncode == 0, err
    assert f"imported {turns} turns" in out
    assert stored
    with open_memory(place) as memory:
        assert index_upkeep.catch_up(memory.search_index, memory.index_sources(), math.inf)
        rows = memory.search_index.db().execute(
            "SELECT count(*) FROM line_words WHERE line_words MATCH 'zanzibar'").fetchone()[0]
    assert rows == len(stored)


HERMES_PYTHON = Path(os.environ.get("ENDLESS_HERMES_PYTHON",
                                    REPO / ".venv-hermes" / "bin" / "python"))

WRITE_WITH_HERMES = """
import sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = "20260601_120000_real"
db.create_session(sid, "cli", model="sim-model", cwd=sys.argv[2])
db.set_session_title(sid, "Real Hermes session")
db.append_message(sid, "user", content="Where are the nightly logs kept?")
db.append_message(sid, "assistant", content="",
                  tool_calls=[{"id": "call_9", "type": "function",
                               "function": {"name": "terminal", "arguments": "{\\"command\\": \\"ls /var/log/nightly\\"}"}}])
db.append_message(sid, "tool", content="run-01.log run-02.log", tool_call_id="call_9", tool_name="terminal")
db.append_message(sid, "assistant", content="They are in /var/log/nightly.")
db.append_message(sid, "user", content=[{"type": "text", "text": "Thanks!"}])
db.append_message(sid, "assistant", content="You're welcome.")
db.close()
"""


@pytest.mark.skipif(not HERMES_PYTHON.is_file(), reason=f"no Hermes venv at {HERMES_PYTHON}")
def test_a_state_db_written_by_the_real_hermes(place, tmp_path) -> None:
    """Hermes Agent 0.19.0's own SessionDB writes the state.db; the import reads it."""
    home, workspace, env = place
    db = tmp_path / "state.db"
    hermes_env = {**env, "HERMES_HOME": str(tmp_path / "hermes"), "HOME": str(tmp_path)}
    written = subprocess.run([str(HERMES_PYTHON), "-c", WRITE_WITH_HERMES, str(db), str(workspace)],
                             capture_output=True, text=True, timeout=120, env=hermes_env)
    assert written.returncode == 0, written.stderr
    proc = run_import(place, str(db))
    assert "imported 2 turns (5 messages)" in proc.stdout, proc.stdout + proc.stderr
    with open_memory(place) as memory:
        turns = turns_of(memory)
    assert [(t[0], t[1]) for t in turns] == [("20260601_120000_real", "Real Hermes session")] * 2
    assert [(m[0], m[1]) for m in turns[0][3]] == [
        ("user", "Where are the nightly logs kept?"),
        ("trace", 'did: terminal {"command": "ls /var/log/nightly"}\nresult: run-01.log run-02.log'),
        ("reply", "They are in /var/log/nightly.")]
    assert [(m[0], m[1]) for m in turns[1][3]] == [("user", "Thanks!"), ("reply", "You're welcome.")]
    assert run_import(place, str(db)).stdout.startswith("imported 0 turns")


# -- the catch-up after an import: its price, its time, the person's choice of writer ------------------


def test_the_end_of_an_import_names_the_catch_up_and_records_the_offline_choice(place, tmp_path) -> None:
    from endless.writer.pace import lines_left
    from endless.writer.stretches import offline_stretches

    home, workspace, env = place
    source = tmp_path / "big.jsonl"
    big_source(source, 400)
    proc = run_import(place, "--json", str(source))
    summary = orjson.loads(proc.stdout)
    with open_memory(place) as memory:
        left = lines_left(memory.built_slots(), memory.total)
        assert summary["writer"]["writer"] == "offline" and summary["writer"]["lines"] == left > 0
        assert summary["writer"]["calls"] == 0 and summary["writer"]["cost"] == 0
        assert [(s.first, s.end) for s in offline_stretches(memory).all()] == [(0, memory.total)]
    doctor = subprocess.run([*endless_command(), "doctor"], capture_output=True, text=True, timeout=60, env=env)
    assert f"catching up: {left} lines left to write" in doctor.stdout.replace("\n", " "), doctor.stdout
    # The same import again adds nothing, records nothing more, and says so plainly.
    again = run_import(place, str(source))
    assert again.stdout.startswith("imported 0 turns") and "catching up" not in again.stdout
    with open_memory(place) as memory:
        assert len(offline_stretches(memory).all()) == 1


def test_writer_model_without_a_route_is_refused_before_anything_is_written(place, tmp_path) -> None:
    home, workspace, env = place
    proc = run_import(place, "--writer", "model", str(FIXTURES / "generic.jsonl"), check=False)
    assert proc.returncode == 2
    assert "--writer offline" in proc.stderr and "writer_route" in proc.stderr and "Traceback" not in proc.stderr
    assert "fix the source" not in proc.stderr  # the source is fine: the choice is what to change
    assert not (home / "memories").exists()


def test_the_estimate_uses_the_memorys_measured_pace_and_the_choice(place, tmp_path) -> None:
    from endless.llm.routes import Route
    from endless.writer.usage import UsageLog

    home, workspace, env = place
    run_import(place, str(FIXTURES / "generic.jsonl"))
    with open_memory(place) as memory:
        folder = memory.folder
    route = Route("openai", "deepseek-v4-flash", base_url="https://api.deepseek.com")
    usage = UsageLog(folder)
    now = time.time()
    for k in range(5):
        usage.record(now - 60 + k, route, [f"{k}+1"] * 6, {"cached": 1000, "uncached": 100, "output": 300},
                     duration=3.0)
    usage.close()
    source = tmp_path / "more.jsonl"
    big_source(source, 300)
    routed = {**env, "ENDLESS_WRITER_ROUTE": orjson.dumps(route.to_json()).decode()}
    guess = subprocess.run([*endless_command(), "import", "--workspace", str(workspace), "--dry-run", "--json",
                            str(source)], capture_output=True, text=True, timeout=60, env=routed)
    writer = orjson.loads(guess.stdout)["writer"]
    assert writer["writer"] == "model" and writer["calls"] >= 1 and writer["cost"] > 0
    assert writer["seconds"] > 0 and "3.0 s a call" in writer["rate"]
    offline = subprocess.run([*endless_command(), "import", "--workspace", str(workspace), "--dry-run",
                              "--writer", "offline", str(source)], capture_output=True, text=True, timeout=60,
                             env=routed)
    assert "by the offline writer: no model calls, no cost" in offline.stdout
    assert "(choose with --writer model)" in offline.stdout


def test_a_source_read_as_a_stream_still_takes_titles_given_late(place, tmp_path) -> None:
    """A session's title may come on its last line; every turn of it carries that title."""
    source = tmp_path / "late.jsonl"
    lines = [{"role": "user", "content": "first question", "at": 1_760_000_000, "session": "s"},
             {"role": "assistant", "content": "first answer", "at": 1_760_000_001, "session": "s"},
             {"role": "user", "content": "second question", "at": 1_760_000_002, "session": "s",
              "title": "Named at the end"}]
    source.write_text("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    run_import(place, str(source))
    with open_memory(place) as memory:
        assert [t[1] for t in turns_of(memory)] == ["Named at the end", "Named at the end"]


def test_an_interrupted_offline_import_keeps_the_choice_for_what_landed(place, tmp_path) -> None:
    """The offline stretch is recorded batch by batch: killed after its first batch, the import's landed
    messages are already offline; the rerun extends the same stretch over the rest."""
    from endless.writer.stretches import offline_stretches

    home, workspace, env = place
    source = tmp_path / "big.jsonl"
    big_source(source, 20_000)
    kill_import_once_written(place, source, "offline.jsonl")
    with open_memory(place) as memory:
        landed, covered = memory.total, offline_stretches(memory).all()
    assert landed < 40_000, "killed after its first batch, not at its end"
    assert covered and covered[0].first == 0 and covered[-1].end <= landed
    run_import(place, str(source))
    with open_memory(place) as memory:
        assert memory.total == 40_000
        assert [(s.first, s.end) for s in offline_stretches(memory).all()] == [(0, 40_000)]


def test_a_hermes_row_that_is_not_utf8_is_a_bad_row(place, tmp_path) -> None:
    """sqlite3 failed the whole query (``OperationalError: Could not decode to UTF-8``) without naming the row."""
    db = tmp_path / "state.db"
    make_state_db(db, place[1])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET content = CAST(X'4d6f766520ff7468656d' AS TEXT) WHERE id = 5")
    proc = run_import(place, str(db), check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"{db}: messages row 5: its content is not UTF-8 text (byte 5 of it)" in proc.stderr, proc.stderr
    assert "--session" in proc.stderr and "Traceback" not in proc.stderr
    assert not (place[0] / "memories").exists()


@pytest.mark.parametrize("line,said", [
    ('{"role": "user", "content": "x", "at": "0001-01-01"}', "'0001-01-01' is not a moment between 1970 and 2200"),
    ('{"role": "user", "content": "x", "at": "9999-12-31T23:59-05:00"}', "is not a moment between 1970 and 2200"),
    ('{"role": "user", "content": "x", "at": 0}', "'at' is 0, the Unix epoch"),
    ('{"role": "user", "content": "x", "at": "1970-01-01T00:00:00Z"}', "the Unix epoch"),
    ('{"role": "user", "content": "x", "at": null}', "'at' is null"),
])
def test_a_time_no_memory_holds_is_a_bad_line(place, tmp_path, line, said) -> None:
    """A year-1 date crashed the import (``ValueError: year 0 is out of range``); ``at: 0`` was kept as
    1970 and ``at: null`` took the previous line's time, both silently."""
    source = tmp_path / "chat.jsonl"
    source.write_text('{"role": "user", "content": "first", "at": 1760000000}\n'
                      '{"role": "assistant", "content": "reply", "at": 1760000005}\n' + line + "\n")
    proc = run_import(place, str(source), check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"{source}:3: " in proc.stderr and said in proc.stderr, proc.stderr
    assert "Nothing was imported" in proc.stderr and "Traceback" not in proc.stderr
    assert not (place[0] / "memories").exists()


def test_a_source_without_newlines_is_refused_within_bounded_memory(place) -> None:
    """``endless import /dev/zero`` read one endless line until MemoryError; now the line past the limit is
    a bad line.  The child gets an address-space cap, so the old code failed fast instead of filling the machine."""
    import resource

    from endless.core.settings import IMPORT_LINE_BYTES_MAX

    cap = IMPORT_LINE_BYTES_MAX * 6 + (512 << 20)

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    home, workspace, env = place
    proc = subprocess.run([*endless_command(), "import", "--workspace", str(workspace), "/dev/zero", "--no-progress"],
                          capture_output=True, timeout=300, env=env, text=True, preexec_fn=capped)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"/dev/zero:1: a line longer than {IMPORT_LINE_BYTES_MAX >> 20} MB" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert not (home / "memories").exists()
