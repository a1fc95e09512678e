"""The two stores side by side: a 3-message turn committed through ``Memory.commit_turn`` (issue 31).

Each backend gets a fresh memory under a fresh ``ENDLESS_HOME``; the same
turns (a question, a reply of about 300 bytes, a short follow-up) are committed
one at a time, each timed from the call to its return (the lock, the catch-up,
the durable append, the view and the search index's upkeep: what a chat turn
pays).  The first turns warm up (imports, prepared statements) and are not
counted.  PostgreSQL runs on a throwaway cluster this script starts the way
the tests do (``tests/pg_server.py``: loopback TCP, default durability), or on
``--dsn``.

Usage: python scripts/bench_store.py [--turns 300] [--warmup 20] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from endless.core.memory import Memory  # noqa: E402
from endless.core.settings import Settings, masked_store  # noqa: E402
from endless.core.store import Message, workspace_key  # noqa: E402

WORDS = ("garden tulip bulb soil depth water frost spring autumn compost root leaf light shade seed "
         "pot clay sand drain mulch prune bloom petal stem").split()


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def commit_times(settings: Settings, turns: int, warmup: int, home: Path) -> list[float]:
    rng = random.Random(31)
    key = workspace_key(None, str(home / "project"))
    times: list[float] = []
    with Memory.open(key, root=home / "root", settings=settings) as memory:
        for k in range(warmup + turns):
            at = 1.7e9 + k
            messages = [Message("user", _text(rng, 80) + "?", at), Message("reply", _text(rng, 300), at),
                        Message("user", "thanks", at)]
            start = time.perf_counter()
            memory.commit_turn("bench", "Bench", messages)
            if k >= warmup:
                times.append(time.perf_counter() - start)
        assert memory.total == 3 * (warmup + turns)
    return times


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--dsn", help="a PostgreSQL database to use (default: a throwaway cluster)")
    args = parser.parse_args()
    cluster = None
    dsn = args.dsn
    if dsn is None:
        import pg_server

        cluster = pg_server.start_cluster()
        dsn = cluster.dsn()
    rows = []
    try:
        for name, settings in (("files", Settings()), ("postgresql", Settings(store=dsn))):
            with tempfile.TemporaryDirectory(prefix=f"endless-bench-{name}-") as home:
                times = commit_times(settings, args.turns, args.warmup, Path(home))
            rows.append((name, statistics.median(times) * 1e3, p99(times) * 1e3, len(times)))
    finally:
        if cluster is not None:
            cluster.remove()
    print(f"commit of a 3-message turn (Memory.commit_turn), {args.turns} turns after {args.warmup} warm-up; "
          f"postgresql: {masked_store(dsn) if args.dsn else 'a throwaway local cluster over loopback TCP'}")
    print(f"{'store':<12}{'median ms':>12}{'p99 ms':>10}{'turns':>8}")
    for name, median, tail, n in rows:
        print(f"{name:<12}{median:>12.2f}{tail:>10.2f}{n:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
