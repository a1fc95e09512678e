"""A writer that the crash test SIGKILLs at random moments.

Usage: crash_child.py ROOT WORKSPACE RUN SEED SETTINGS_JSON

It imports everything, then waits for one line on stdin before it opens the
memory (so the parent can start it early and check the memory meanwhile).
Then it loops forever: a turn of 1-4 messages through the journal, its
commit, and a few ready lines.  After every durable step it prints one
progress line, so whatever the parent read before the kill was acknowledged:

    O                              the memory is open
    B run turn tid n               a turn begins (n messages planned)
    J run turn k                   message k is fsynced in the journal
    C run turn first count number  the turn is committed (its ids and turn number)
    L level index stored           a line was offered (stored: 1 if it was new)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.writer.queue import ready_work


def message_text(run: int, turn: int, k: int, rng: random.Random) -> str:
    return f"r{run}-t{turn}-m{k}|" + "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(0, 160)))


def line_text(level: int, index: int) -> str:
    return f"line {level}/{index} " + "z" * ((level * 7 + index) % 23 + 28)


def main() -> None:
    root, workspace, run, seed, settings = sys.argv[1:6]
    run = int(run)
    rng = random.Random(int(seed))
    settings = Settings(**json.loads(settings))
    if not sys.stdin.readline():
        return
    out = sys.stdout

    def emit(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    memory = Memory.open(workspace_key(None, workspace), settings=settings, root=Path(root))
    emit("O")
    session = f"session-{run % 3}"
    turn = 0
    while True:
        pending = memory.journal(session, f"run {run}")
        n = rng.randint(1, 4)
        emit(f"B {run} {turn} {pending.journal.tid} {n}")
        for k in range(n):
            pending.add("user" if k == 0 else rng.choice(("reply", "trace", "work")),
                        message_text(run, turn, k, rng))
            emit(f"J {run} {turn} {k}")
        info = pending.commit()
        emit(f"C {run} {turn} {info.first} {info.count} {info.turn}")
        for job in ready_work(memory)[:rng.randint(0, 5)]:
            stored = memory.store_line(job.level, job.index, line_text(job.level, job.index))
            emit(f"L {job.level} {job.index} {int(stored)}")
        turn += 1


if __name__ == "__main__":
    main()
