"""A process standing in for one machine's chat on a PostgreSQL memory (tests/core/test_store_postgres.py).

Usage: pg_turns.py HOME PROJECT (the store from ENDLESS_STORE).  It opens the memory under its own
``HOME`` and prints ``ready``; then for each line ``turn WORDS`` on stdin it logs a turn as a chat
does (journalled message by message, then committed) and prints ``ok TID`` once the commit returned
(acknowledged), or ``error MESSAGE`` (the journal stays, as a chat's does); ``quit`` ends it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from endless.core.memory import Memory
from endless.core.settings import load_settings
from endless.core.store import workspace_key


def main() -> None:
    home, project = sys.argv[1], sys.argv[2]
    with Memory.open(workspace_key(None, project), root=Path(home), settings=load_settings()) as memory:
        print("ready", flush=True)
        for line in sys.stdin:
            command, _, words = line.strip().partition(" ")
            if command != "turn":
                break
            turn = memory.journal("chat", "Shared")
            turn.add("user", words, 1e9)
            turn.add("reply", f"noted: {words}", 1e9)
            try:
                info = turn.commit()
            except OSError as exc:
                print(f"error {exc}".replace("\n", " "), flush=True)
                continue
            print(f"ok {info.tid}", flush=True)


if __name__ == "__main__":
    main()
