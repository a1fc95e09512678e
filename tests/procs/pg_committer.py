"""A process standing in for one machine on a shared PostgreSQL memory (tests/core/test_store_postgres.py).

Usage: pg_committer.py HOME PROJECT TAG TURNS (the store from ENDLESS_STORE).  It opens the
memory under its own ``HOME``, prints ``ready``, waits for a line on stdin (so every machine
commits at once), commits ``TURNS`` turns of its own, each with a tid it prints, then ``done``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from endless.core.memory import Memory
from endless.core.settings import load_settings
from endless.core.store import Message, workspace_key


def main() -> None:
    home, project, tag, turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with Memory.open(workspace_key(None, project), root=Path(home), settings=load_settings()) as memory:
        print("ready", flush=True)
        sys.stdin.readline()
        for n in range(turns):
            info = memory.commit_turn(f"chat-{tag}", "Shared", [Message("user", f"{tag} asks {n}", 1e9 + n),
                                                                 Message("reply", f"{tag} hears {n}", 1e9 + n)])
            print(f"tid {info.tid}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
