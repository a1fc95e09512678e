"""The two stores side by side: a 3-message turn committed through ``Memory.commit_turn`` (issue 31).

Each backend gets a fresh memory under a fresh ``ENDLESS_HOME``; the same
turns (a question, a reply of about 300 bytes, a short follow-up) are committed
one at a time, each timed from the call to its return (the lock, the catch-up,
the durable append, the view and the search index's upkeep: what a chat turn
pays).  The first turns warm up (imports, prepared statements) and are not
counted.  Then 1, 2 and 4 processes commit at once to one memory (for files:
one ``ENDLESS_HOME`` on this machine; for PostgreSQL: each process its own, as
machines): turns per second from the moment they all start to the last commit,
and the p99 of one commit.  PostgreSQL runs on a throwaway cluster this script
starts the way the tests do (``tests/pg_server.py``: loopback TCP, default
durability), or on ``--dsn``.

Usage: python scripts/bench_store.py [--turns 300] [--warmup 20] [--procs 1,2,4] [--proc-turns 100]
       [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
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


def child(home: str, store: str, project: str, turns: int) -> int:
    """One committing process: ``ready``, then a line on stdin, then its commit times as JSON."""
    rng = random.Random(home)
    settings = Settings(store=store)
    with Memory.open(workspace_key(None, project), root=Path(home), settings=settings) as memory:
        memory.commit_turn("warm", "Bench", [Message("user", "warm up", 1.0)])
        print("ready", flush=True)
        sys.stdin.readline()
        times = []
        for k in range(turns):
            messages = [Message("user", _text(rng, 80) + "?", 1.7e9 + k), Message("reply", _text(rng, 300), 1.7e9 + k),
                        Message("user", "thanks", 1.7e9 + k)]
            start = time.perf_counter()
            memory.commit_turn(f"bench-{os.getpid()}", "Bench", messages)
            times.append(time.perf_counter() - start)
    print(json.dumps(times), flush=True)
    return 0


def at_once(store: str, procs: int, turns: int, base: Path) -> tuple[float, float]:
    """``procs`` processes committing ``turns`` each at once: (turns per second, p99 ms of one commit)."""
    project = str(base / "project")
    homes = [base / ("home" if not store else f"home-{k}") for k in range(procs)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    running = [subprocess.Popen([sys.executable, __file__, "--child", str(home), store, project, str(turns)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for home in homes]
    for proc in running:
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("a committing process did not start; see its errors above")
    start = time.perf_counter()
    for proc in running:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    times: list[float] = []
    for proc in running:
        out, _ = proc.communicate(timeout=900)
        times += json.loads(out.strip().splitlines()[-1])
    wall = time.perf_counter() - start
    return procs * turns / wall, p99(times) * 1e3


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--procs", default="1,2,4", help="processes committing at once, e.g. 1,2,4")
    parser.add_argument("--proc-turns", type=int, default=100, help="turns each of those processes commits")
    parser.add_argument("--dsn", help="a PostgreSQL database to use (default: a throwaway cluster)")
    parser.add_argument("--child", nargs=4, metavar=("HOME", "STORE", "PROJECT", "TURNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        home, store, project, turns = args.child
        return child(home, store, project, int(turns))
    cluster = None
    dsn = args.dsn
    if dsn is None:
        import pg_server

        cluster = pg_server.start_cluster()
        dsn = cluster.dsn()
    rows = []
    counts = [int(n) for n in args.procs.split(",") if n.strip()]
    shared: dict[tuple[str, int], tuple[float, float]] = {}
    try:
        for name, settings in (("files", Settings()), ("postgresql", Settings(store=dsn))):
            with tempfile.TemporaryDirectory(prefix=f"endless-bench-{name}-") as home:
                times = commit_times(settings, args.turns, args.warmup, Path(home))
            rows.append((name, statistics.median(times) * 1e3, p99(times) * 1e3, len(times)))
            for procs in counts:
                with tempfile.TemporaryDirectory(prefix=f"endless-bench-{name}-{procs}-") as home:
                    shared[(name, procs)] = at_once(settings.store, procs, args.proc_turns, Path(home))
    finally:
        if cluster is not None:
            cluster.remove()
    print(f"commit of a 3-message turn (Memory.commit_turn), {args.turns} turns after {args.warmup} warm-up; "
          f"postgresql: {masked_store(dsn) if args.dsn else 'a throwaway local cluster over loopback TCP'}")
    print(f"{'store':<12}{'median ms':>12}{'p99 ms':>10}{'turns':>8}")
    for name, median, tail, n in rows:
        print(f"{name:<12}{median:>12.2f}{tail:>10.2f}{n:>8}")
    print()
    print(f"processes committing at once to one memory, {args.proc_turns} turns each "
          "(files: one ENDLESS_HOME; postgresql: one each)")
    print(f"{'store':<12}{'processes':>10}{'turns/s':>10}{'p99 ms':>10}")
    for (name, procs), (rate, tail) in shared.items():
        print(f"{name:<12}{procs:>10}{rate:>10.1f}{tail:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
