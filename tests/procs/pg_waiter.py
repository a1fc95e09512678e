"""A process standing in for a machine that waits for another machine's turn (tests/core/test_store_postgres.py).

Usage: pg_waiter.py HOME PROJECT (the store from ENDLESS_STORE).  It opens the memory under its own
``HOME``, waits until its store listens for the memory's notifications, prints ``waiting N`` (N: the
messages it holds), then settles until the memory holds more, and prints ``woke T S`` (the messages it
holds then, and the seconds the wait took).  Its settings poll only every 600 s, so only a notification
can wake it in time.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

from endless.core.memory import Memory
from endless.core.settings import load_settings
from endless.core.store import workspace_key


def main() -> None:
    home, project = sys.argv[1], sys.argv[2]
    settings = load_settings().replace(settle_poll_seconds=600.0)
    with Memory.open(workspace_key(None, project), root=Path(home), settings=settings) as memory:
        live = threading.Event()
        deadline = time.monotonic() + 60
        while not memory.store.watch(live.set) and time.monotonic() < deadline:
            live.wait(1.0)  # (set when the listening thread is connected and listening)
            live.clear()
        before = memory.total
        print(f"waiting {before}", flush=True)
        start = time.monotonic()
        woke = asyncio.run(memory.settle(lambda m: m.total > before, timeout=120.0))
        print(f"woke {memory.total if woke else -1} {time.monotonic() - start:.3f}", flush=True)


if __name__ == "__main__":
    main()
