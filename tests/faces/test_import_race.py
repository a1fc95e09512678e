"""Issue #17 item 1: "already there?" is decided under the memory's lock, at commit time.

Real processes race: two ``endless import`` runs of one source, and an import
of a Hermes ``state.db`` against a live chat logging the same turn.  The
test holds the memory's change lock while the imports plan, so each plan is
made before the other's commit, as in the reported race; it releases the
lock once every importer has read its source to the end (seen in
``/proc/PID/fd``: the source is closed, the import's spill file is open).
Every turn must land once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from endless.core.store.keys import workspace_key
from endless.core.store.locks import ChangeLock
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from commands import endless_command, fresh_home
from paths import REPO
from state_db_schema import SCHEMA

sys.path.insert(0, str(REPO / "scripts"))
from attack_integrity import planned  # noqa: E402  (the attack script's own check)

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see a child's files")

SESSION = "20260501_0900_ab12"


@pytest.fixture
def place(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    env["PYTHONUNBUFFERED"] = "1"
    key = workspace_key(None, workspace)
    with Memory.open(key, settings=Settings(home=str(home))) as memory:  # the memory exists before the race
        memory.commit_turn("earlier", "Earlier", [Message("user", "an earlier chat", 1.0)])
    return home, workspace, env, key


def start_import(place, source: Path) -> subprocess.Popen:
    home, workspace, env, _ = place
    return subprocess.Popen([*endless_command(), "import", "--workspace", str(workspace), "--all-sessions",
                             "--no-progress", str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)


def wait_until_planned(procs: list[subprocess.Popen], source: Path, folder: Path) -> None:
    deadline = time.monotonic() + 120
    steady = 0  # seen on three polls in a row: not the instant between two opens of the source
    while steady < 3:
        steady = steady + 1 if all(planned(p.pid, source, folder) for p in procs) else 0
        for p in procs:
            assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the imports never finished reading their source"
        time.sleep(0.005)  # polling a real condition (the child's open files)


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    return out


def everything(place) -> list[tuple[str, str, str]]:
    home, _, _, key = place
    with Memory.open(key, settings=Settings(home=str(home)), readonly=True) as memory:
        return [(m.session, m.kind, m.text) for m in (memory.message(i) for i in range(memory.total))]


def source_of(path: Path, turns: int) -> Path:
    with open(path, "w") as handle:
        for k in range(turns):
            at = 1_760_000_000 + 60 * k
            handle.write(orjson.dumps({"role": "user", "content": f"MARK-{k:06d}U", "at": at,
                                       "session": f"s{k % 3}"}).decode() + "\n")
            handle.write(orjson.dumps({"role": "assistant", "content": f"MARK-{k:06d}A", "at": at + 1,
                                       "session": f"s{k % 3}"}).decode() + "\n")
    return path


def test_two_imports_of_one_source_at_once_add_each_turn_once(place, tmp_path) -> None:
    source = source_of(tmp_path / "big.jsonl", 10_000)
    lock = ChangeLock(place[0] / "memories" / place[3].memory_id / "lock")
    with lock:  # both plan against the memory as it is now; neither can commit yet
        procs = [start_import(place, source), start_import(place, source)]
        wait_until_planned(procs, source, lock.path.parent)
    outs = [finish(p) for p in procs]
    held = everything(place)
    texts = Counter(text for _, _, text in held)
    assert len(held) == 1 + 20_000, (len(held), outs)
    assert max(texts.values()) == 1, texts.most_common(3)
    landed = sorted(int(out.split()[1]) for out in outs)  # "imported N turns …"
    assert sum(landed) == 10_000, outs
    assert any(f"{10_000 - landed[0]} turns were there already" in out for out in outs if landed[0] == 0) \
        or landed[0] > 0, outs


LIVE = """
import sys
from endless.core.memory import Memory
from endless.core.settings import load_settings
memory = Memory.open(memory_id=sys.argv[1], settings=load_settings())
since = memory.turns  # the turn begins (pre_llm_call): Hermes stores the message from now on
print("B", flush=True)
sys.stdin.readline()
turn = memory.journal(sys.argv[2], "Backup plan", since=since)
turn.add("user", "How often do the backups run?", at=1777626001.0)
print("J", flush=True)
sys.stdin.readline()
turn.add("reply", "Every night at 03:00.", at=1777626004.0)
info = turn.commit()
print("C", info is not None, flush=True)
"""


def state_db(path: Path, workspace: Path) -> Path:
    """The turn as Hermes 0.19.0 stores it in its state.db (the tables and columns the import reads)."""
    import sqlite3

    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO sessions VALUES (?, 'cli', 'm', 'Backup plan', ?, NULL, 1777626000, NULL)",
               (SESSION, str(workspace)))
    db.executemany("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                   [(SESSION, "user", "How often do the backups run?", 1777626001.0),
                    (SESSION, "assistant", "Every night at 03:00.", 1777626004.0)])
    db.commit()
    db.close()
    return path


class Live:
    """A live chat in another process, logging the turn through the journal as the Hermes plugin does."""

    def __init__(self, place) -> None:
        env = place[2]
        self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(LIVE), place[3].memory_id, SESSION],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)

    def expect(self, word: str) -> str:
        line = self.proc.stdout.readline()
        assert line.startswith(word), (line, self.proc.poll())
        return line

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def assert_once(place) -> None:
    held = everything(place)
    turn = [(k, x) for s, k, x in held if s == SESSION]
    assert turn == [("user", "How often do the backups run?"), ("reply", "Every night at 03:00.")], held


def test_an_import_racing_a_live_chat_logs_the_turn_once(place, tmp_path) -> None:
    """The live turn commits while the import, planned before, waits for the lock (either may win it)."""
    db = state_db(tmp_path / "state.db", place[1])
    live = Live(place)
    try:
        live.expect("B")
        live.go()
        live.expect("J")  # the turn is in flight
        lock = ChangeLock(place[0] / "memories" / place[3].memory_id / "lock")
        with lock:
            proc = start_import(place, db)
            wait_until_planned([proc], db, lock.path.parent)  # planned while the turn was not in the log
            live.go()  # the live commit now waits for the lock too
        out = finish(proc)
        live.proc.stdin.close()
        assert live.proc.stdout.readline().startswith("C"), live.proc.poll()
    finally:
        live.close()
    assert_once(place)
    assert out.startswith("imported 0 turns"), out


def test_an_import_landing_before_the_live_journal_starts(place, tmp_path) -> None:
    """Hermes stored the turn, an import logged it, then the live turn journals and commits it: once."""
    db = state_db(tmp_path / "state.db", place[1])
    live = Live(place)
    try:
        live.expect("B")
        out = finish(start_import(place, db))
        assert out.startswith("imported 1 turn "), out
        live.go()
        live.expect("J")
        live.go()
        assert live.expect("C").split() == ["C", "False"]  # nothing left to log
    finally:
        live.close()
    assert_once(place)
