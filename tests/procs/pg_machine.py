"""A machine on a shared PostgreSQL memory, turn by turn (tests/core/test_store_postgres.py).

Usage: pg_machine.py HOME PROJECT NAME (the store from ENDLESS_STORE, small views from
ENDLESS_VIEW_*).  Keeps the memory open for its life, as Hermes does, and for each
``turn T`` line on stdin: catches up, builds the turn's head (the request the model
reads), commits the turn, writes every line ready (tagged with its NAME, as the writer of
this machine would), and prints one JSON line: the head's view text compared with this
machine's previous one (a byte prefix, or a batch: fewer view parts), the messages it saw,
and the lines it saw that the other machine wrote (it prints after its commit, so the other
machine's next turn sees it).  ``quit`` ends it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import orjson

from endless.core.memory import Memory
from endless.core.settings import load_settings
from endless.core.store import Message, workspace_key
from endless.turn.head import build_request
from endless.writer.queue import ready_work


def main() -> None:
    home, project, name = sys.argv[1], sys.argv[2], sys.argv[3]
    previous, previous_parts = None, 0
    with Memory.open(workspace_key(None, project), root=Path(home), settings=load_settings()) as memory:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            turn = int(line.split()[1])
            memory.catch_up()
            seen = memory.total
            head = build_request(memory, "SYSTEM", [], [], "", f"message {turn}")
            view = "".join(head.messages[0].blocks[:head.view_blocks])
            parts = len(memory.views.chat.parts)
            memory.commit_turn(f"chat-{name}", "Shared", [Message("user", f"q{turn} from {name} " + "x" * 300, 1e9),
                                                         Message("reply", f"a{turn} " + "y" * 400, 1e9)], sync=False)
            while jobs := ready_work(memory):
                memory.store_lines([(j.level, j.index, f"line by {name} {j.name} " + "w" * 180) for j in jobs],
                                   sync=False)
            said = orjson.dumps({
                "turn": turn, "seen": seen, "parts": parts, "batched": parts < previous_parts,
                "prefix": previous is None or view.startswith(previous), "bytes": len(view.encode()),
                "digest": hashlib.sha256(view.encode()).hexdigest()[:16],
                "others": view.count("|line by ") - view.count(f"|line by {name} "),
            }).decode()
            print(said, flush=True)  # (after the commit: the other machine reads it next)
            previous, previous_parts = view, parts
    print("done", flush=True)


if __name__ == "__main__":
    main()
