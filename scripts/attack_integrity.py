"""Attacks on a memory's files and on its commits (issue #17 items 1-4); prints one markdown table.

Each row damages a fresh memory the way the issue describes (or races two
real processes at it), then looks as a person would: the messages and lines
read back, the view, search, ``endless doctor``.  "held" says whether the
expected outcome was seen.  The same attacks are tests in
``tests/core/test_integrity.py``, ``tests/faces/test_import_race.py`` and
``tests/faces/test_doctor.py``; this script uses only what every version of
Endless has, so it can be run against an older checkout too
(``PYTHONPATH=/old/checkout python scripts/attack_integrity.py``).

    .venv/bin/python scripts/attack_integrity.py [--turns 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from array import array
from collections import Counter
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store.keys import workspace_key
from endless.core.store.locks import ChangeLock
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.core.store.turns import TurnRecord

SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}
ENDLESS = [sys.executable, "-c", "import sys; from endless.cli import main; sys.exit(main(sys.argv[1:]))"]


class Place:
    def __init__(self, base: Path) -> None:
        self.home, self.ws = base / "home", base / "ws"
        self.ws.mkdir(parents=True)
        self.key = workspace_key(None, self.ws)
        self.env = {**os.environ, "ENDLESS_HOME": str(self.home), "XDG_CONFIG_HOME": str(base / "xdg"),
                    "PYTHONUNBUFFERED": "1"}
        self.env.pop("ENDLESS_WRITER_ROUTE", None)

    def open(self, readonly: bool = False, small: bool = True) -> Memory:
        settings = Settings(home=str(self.home), **(SMALL if small else {}))
        return Memory.open(self.key, settings=settings, readonly=readonly, create=not readonly)

    @property
    def folder(self) -> Path:
        return self.home / "memories" / self.key.memory_id

    def doctor(self) -> tuple[int, dict]:
        proc = subprocess.run([*ENDLESS, "doctor", "--json", "--memory", self.key.memory_id], capture_output=True,
                              env=self.env, timeout=60)
        return proc.returncode, orjson.loads(proc.stdout)


def fill(place: Place, turns: int, write: bool = True) -> None:
    from endless.writer.queue import ready_work

    with place.open() as memory:
        memory.commit_turns([TurnRecord("s", "attack", [Message("user", f"MARK-{k:06d}U", float(k)),
                                                        Message("reply", f"MARK-{k:06d}A", float(k))])
                             for k in range(turns)])
        while write:
            jobs = list(ready_work(memory))
            if not jobs:
                break
            for job in jobs:
                memory.store_line(job.level, job.index, f"summary {job.level}/{job.index}")


def texts(memory: Memory) -> list:
    return [None if memory.message(i) is None else memory.message(i).text for i in range(memory.total)]


def view_text(memory: Memory) -> str:
    return "\n".join(str(line.text) for line in memory.views.view_lines())


def replace_line(path: Path, k: int, garbage: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[k] = garbage[:len(lines[k])].ljust(len(lines[k]), b" ")
    path.write_bytes(b"\n".join(lines))


# -- the attacks: each returns (what was seen, held) ------------------------------------------------


def source(path: Path, turns: int) -> Path:
    with open(path, "w") as handle:
        for k in range(turns):
            for role, tail in (("user", "U"), ("assistant", "A")):
                handle.write(orjson.dumps({"role": role, "content": f"MARK-{k:06d}{tail}", "at": 1.7e9 + 60 * k,
                                           "session": f"s{k % 3}"}).decode() + "\n")
    return path


def planned(pid: int, src: Path, folder: Path) -> bool:
    """An importer has read ``src`` to its end and holds its plan (a real condition, not a delay).

    The plan is an unlinked spill file in the memory's folder (``.import-…``, or ``#N`` as O_TMPFILE).
    """
    links = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            links.append(os.readlink(fd))
        except OSError:
            pass
    return (any(link.startswith(str(folder)) and link.endswith("(deleted)") for link in links)
            and not any(link.startswith(str(src)) for link in links))


def _wait_planned(procs: list, src: Path, folder: Path) -> None:
    steady, deadline = 0, time.monotonic() + 120
    while steady < 3 and time.monotonic() < deadline:
        steady = steady + 1 if all(planned(p.pid, src, folder) for p in procs) else 0
        time.sleep(0.005)


def _import(place: Place, src: Path) -> subprocess.Popen:
    return subprocess.Popen([*ENDLESS, "import", "--workspace", str(place.ws), "--no-progress", "--all-sessions",
                             str(src)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=place.env, text=True)


def two_imports(place: Place, turns: int) -> tuple[str, bool]:
    with place.open() as memory:
        memory.commit_turn("earlier", "E", [Message("user", "earlier", 1.0)])
    src = source(place.folder.parent.parent.parent / "src.jsonl", turns)
    with ChangeLock(place.folder / "lock"):
        procs = [_import(place, src), _import(place, src)]
        _wait_planned(procs, src, place.folder)
    for p in procs:
        p.communicate(timeout=300)
    with place.open(readonly=True) as memory:
        seen = Counter(texts(memory))
    return f"{len(seen) - 1} distinct, {sum(seen.values()) - 1} logged", sum(seen.values()) - 1 == 2 * turns


LIVE = """
import sys
from endless.core.memory import Memory
from endless.core.settings import load_settings
memory = Memory.open(memory_id=sys.argv[1], settings=load_settings())
turn = memory.journal("live", "Live chat")
turn.add("user", "How often do the backups run?", at=1777626001.0)
print("J", flush=True)
sys.stdin.readline()
turn.add("reply", "Every night at 03:00.", at=1777626004.0)
turn.commit()
print("C", flush=True)
"""


def import_vs_live(place: Place, turns: int) -> tuple[str, bool]:
    with place.open() as memory:
        memory.commit_turn("earlier", "E", [Message("user", "earlier", 1.0)])
    src = place.folder.parent.parent.parent / "live.jsonl"
    src.write_text(orjson.dumps({"role": "user", "content": "How often do the backups run?", "at": 1777626001.0,
                                 "session": "live"}).decode() + "\n" +
                   orjson.dumps({"role": "assistant", "content": "Every night at 03:00.", "at": 1777626004.0,
                                 "session": "live"}).decode() + "\n")
    live = subprocess.Popen([sys.executable, "-c", textwrap.dedent(LIVE), place.key.memory_id],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=place.env, text=True)
    try:
        assert live.stdout.readline().startswith("J")
        with ChangeLock(place.folder / "lock"):
            proc = _import(place, src)
            _wait_planned([proc], src, place.folder)
            live.stdin.write("go\n")
            live.stdin.flush()
        proc.communicate(timeout=120)
        live.stdin.close()
        live.stdout.readline()
    finally:
        live.kill()
        live.wait(30)
    with place.open(readonly=True) as memory:
        logged = Counter(texts(memory))
    n = logged["How often do the backups run?"]
    return f"the turn's message logged {n}×", n == 1


def shortened(place: Place, turns: int, how: str) -> tuple[str, bool]:
    fill(place, turns)
    log = next(place.folder.glob("turns.*.jsonl"))
    data = log.read_bytes()
    if how == "cut":
        log.write_bytes(data[:data[:-1].rfind(b"\n") + 1])
    else:
        with open(log, "r+b") as handle:
            handle.seek(len(data) - 40)
            handle.write(b"\x00" * 40)
    with place.open() as memory:
        memory.commit_turns([TurnRecord("s", "after", [Message("user", f"NEW-{k}", 5.0)]) for k in range(5)])
    lost = f"MARK-{turns - 1:06d}U"
    with place.open(readonly=True) as memory:
        new = memory.node_text(0, 2 * turns - 2)
        ok = memory.message(2 * turns - 2).text == "NEW-0" and new == "you: NEW-0" and lost not in view_text(memory)
    return f"line {2 * turns - 2}+1 reads {new!r}", ok


def shortened_search(place: Place, turns: int) -> tuple[str, bool]:
    from endless.core.search.finder import corpus_of, search

    fill(place, turns, write=False)
    with place.open() as memory:
        search(corpus_of(memory), f"{turns - 1:06d}U", 0, 5, 5.0)  # the index holds the last turn
    log = next(place.folder.glob("turns.*.jsonl"))
    data = log.read_bytes()
    log.write_bytes(data[:data[:-1].rfind(b"\n") + 1])
    with place.open() as memory:
        memory.commit_turns([TurnRecord("s", "after", [Message("user", "freshword", 5.0)])])
        hits = [h.id for h in search(corpus_of(memory), f"{turns - 1:06d}U", 0, 5, 5.0).hits]
    return f"search for the lost message: {hits}", hits == []


def mid_damage(place: Place, turns: int, garbage: bytes) -> tuple[str, bool]:
    fill(place, turns)
    replace_line(next(place.folder.glob("turns.*.jsonl")), 7, garbage)
    code, report = place.doctor()
    named = [f["message"] for f in report["findings"] if f["check"] == "memory.damage" and f["status"] == "error"]
    return f"doctor exit {code}", code == 1 and bool(named) and "turn 7 (messages 14..15)" in named[0]


def damaged_tail_indexed(place: Place, turns: int) -> tuple[str, bool]:
    fill(place, turns)
    with open(next(place.folder.glob("turns.*.jsonl")), "ab") as handle:
        handle.write(b"{not a turn}\n")
    with place.open() as memory:
        memory.commit_turn("s", "later", [Message("user", "later", 1.0)])
    with place.open() as memory:
        pass
    code, _ = place.doctor()
    return f"doctor exit {code} after a writer indexed past it", code == 1


def swapped_rows(place: Place, turns: int) -> tuple[str, bool]:
    fill(place, turns)
    with place.open(readonly=True) as memory:
        before = texts(memory)
    path = place.folder / "index" / "turns.v1.bin"
    rows = array("Q")
    rows.frombytes(path.read_bytes())
    rows[25:30], rows[45:50] = rows[45:50], rows[25:30]
    path.write_bytes(rows.tobytes())
    with place.open(readonly=True) as memory:
        after = texts(memory)
    bad = sum(1 for a, b in zip(before, after) if a != b)
    return f"{bad} messages read wrong or damaged", bad == 0


def swapped_slots(place: Place, turns: int) -> tuple[str, bool]:
    fill(place, turns)
    with place.open(readonly=True) as memory:
        t10, t20 = memory.node_text(0, 10), memory.node_text(0, 20)
    path = next((place.folder / "index").glob("tree-L00.*.bin"))
    slots = array("Q")
    slots.frombytes(path.read_bytes())
    slots[10], slots[20] = slots[20], slots[10]
    path.write_bytes(slots.tobytes())
    with place.open(readonly=True) as memory:
        seen = memory.node_text(0, 10)
    return f"line 10+1 reads {seen!r}", seen == t10 and t10 != t20


def garbage_tree_line(place: Place, turns: int) -> tuple[str, bool]:
    from endless.writer.queue import ready_work

    fill(place, turns)
    with place.open() as memory:
        offset = memory.tree.slots[1][3] - 1
    tree = next(place.folder.glob("tree.*.jsonl"))
    data = bytearray(tree.read_bytes())
    end = data.index(b"\n", offset)
    data[offset:end] = b"#" * (end - offset)
    tree.write_bytes(bytes(data))
    with place.open() as memory:
        memory.node_text(1, 3)
        again = (1, 3) in [j.part for j in ready_work(memory)]
    return f"line 1/3 offered to the writer again: {again}", again


def fifo_view(place: Place, turns: int) -> tuple[str, bool]:
    fill(place, turns)
    view = place.folder / "view.json"
    view.unlink()
    os.mkfifo(view)
    try:
        code, report = place.doctor()
    except subprocess.TimeoutExpired:
        return "doctor hung", False
    named = any(f["check"] == "memory.files" and f.get("fix") for f in report["findings"])
    return f"doctor exit {code}", code == 1 and named


ATTACKS: list[tuple[str, str, Callable[[Place, int], tuple[str, bool]]]] = [
    ("two imports of one source at once", "each turn logged once", two_imports),
    ("an import racing a live chat's turn", "the turn logged once", import_vs_live),
    ("log's last line cut, then 5 turns imported", "the new message shows, the lost one nowhere",
     lambda p, n: shortened(p, n, "cut")),
    ("log's last block zeroed, then 5 turns imported", "the new message shows, the lost one nowhere",
     lambda p, n: shortened(p, n, "zeroed")),
    ("log's last line cut: the search index", "no hit past the log's end", shortened_search),
    ("garbage line mid-log, index covers it", "doctor exits 1 naming turn 7 (messages 14..15)",
     lambda p, n: mid_damage(p, n, b"#garbage, not a turn")),
    ("NUL line mid-log, index covers it", "doctor exits 1 naming turn 7 (messages 14..15)",
     lambda p, n: mid_damage(p, n, b"\x00" * 64)),
    ("damaged last line, a writer indexes past it", "doctor still exits 1", damaged_tail_indexed),
    ("two turn-index rows swapped", "every message reads as written", swapped_rows),
    ("two tree slots swapped", "line 10 shows its own text", swapped_slots),
    ("garbage tree line whose slot is set", "the line is written again", garbage_tree_line),
    ("a fifo in place of view.json", "doctor names it and says what to do, no hang", fifo_view),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="turns in each attacked memory (default 1000)")
    args = parser.parse_args()
    print("| attack | expected | seen | held |")
    print("|---|---|---|---|")
    failed = 0
    for name, expected, attack in ATTACKS:
        with tempfile.TemporaryDirectory(prefix="endless-attack-") as tmp:
            try:
                seen, held = attack(Place(Path(tmp)), args.turns)
            except Exception as exc:  # an attack that crashes the code under test did not hold
                seen, held = f"{type(exc).__name__}: {exc}"[:80], False
                traceback.print_exc(file=sys.stderr)
        failed += not held
        print(f"| {name} | {expected} | {seen} | {'yes' if held else '**no**'} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
