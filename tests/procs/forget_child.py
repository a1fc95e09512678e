"""A child for the forget tests: forgets (reporting each durable step), commits turns, searches or reads.

``forget ROOT MID SETTINGS ID STOP [WORDS]``: forget message ID (or what WORDS match), printing each step of
:mod:`endless.core.privacy.forget`; at step number (or name) STOP (if not -1) it waits on stdin,
so the parent kills it exactly there.  ``commit ROOT MID SETTINGS N``: commit N
turns, one line each.  ``search ROOT MID SETTINGS N WORDS``: search N times.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from endless.core.privacy import forget
from endless.core.search import finder as search
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings


def say(**answer) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode, root, mid, settings = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Settings(**json.loads(sys.argv[4]))
    memory = Memory.open(memory_id=mid, settings=settings, root=root)
    if mode == "forget":
        target, stop = int(sys.argv[5]), sys.argv[6]  # (STOP: a step's number, or its name)
        count = [0]

        def step(name: str) -> None:
            say(step=name, n=count[0])
            if stop in (str(count[0]), name):
                sys.stdin.readline()  # killed here
            count[0] += 1

        forget.step = step
        query = sys.argv[7] if len(sys.argv) > 7 else None  # a forget by match: its titles and lines too
        ids = forget.select(memory, query=query) if query else [target]
        outcome = forget.forget(memory, ids, query=query)
        say(done=outcome.ids)
    elif mode == "commit":
        for k in range(int(sys.argv[5])):
            info = memory.commit_turn("c2", "Other chat", [Message("user", f"later turn {k} about tulips", time.time())])
            say(committed=info.first)
    elif mode == "search":
        words = sys.argv[6]
        for _ in range(int(sys.argv[5])):
            memory.catch_up()
            result = search.search(search.corpus_of(memory), words, 0, 20, 5.0)
            say(hits=[h.id for h in result.hits])
    elif mode == "read":  # read-only, as a History page reads: the message is whole or a tombstone
        reader = Memory.open(memory_id=mid, settings=settings, root=root, readonly=True)
        for _ in range(int(sys.argv[5])):
            reader.catch_up()
            stored = reader.message(int(sys.argv[6]))
            neighbour = reader.message(int(sys.argv[6]) + 1)
            say(text=None if stored is None else stored.text, neighbour=None if neighbour is None else neighbour.text)
        reader.close()
    memory.close()


if __name__ == "__main__":
    main()
