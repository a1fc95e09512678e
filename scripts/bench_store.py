"""The two stores side by side in one run: commits, processes at once, import, open and search at scale.

1. **Commit.**  Each backend gets a fresh memory under a fresh ``ENDLESS_HOME``; the same
turns (a question, a reply of about 300 bytes, a short follow-up) are committed
one at a time, each timed from the call to its return (the lock, the catch-up,
the durable append, the view and the search index's upkeep: what a chat turn
pays).  The first turns warm up (imports, prepared statements) and are not
counted.  Then 1, 2 and 4 processes commit at once to one memory (for files:
one ``ENDLESS_HOME`` on this machine; for PostgreSQL: each process its own, as
machines): turns per second from the moment they all start to the last commit,
and the p99 of one commit.  With them, the CPU each turn cost: the committing
processes' own, and (on the throwaway cluster) the server's, read from
``/proc`` for the postmaster and its children.  Their sum bounds the rate on
this machine: with every core busy with nothing else, no way of committing
gets past ``cores × 1000 / CPU ms per turn``; the last two columns print that
bound and the bound over one process's measured rate.
2. **At scale** (``--sizes 100000,1000000``): the messages of
   ``scripts/bench_recall.py``'s scale corpus (about 125 bytes each, a Zipf
   vocabulary, 40 four-word queries with 5 planted messages holding all four)
   as a JSONL file, imported by ``endless import`` as a person runs it (a
   subprocess: messages per second, the import process's peak RSS from
   ``wait4``); then, in a child process, the memory's open and the 40 ranked
   searches (median, p99, and the share whose planted messages come first),
   on one corpus made once as ``scripts/bench_recall.py`` does (making one
   walks the view: after an import of a million messages with no line written
   yet, that is a million parts, the same on both stores).
   For PostgreSQL the open is timed twice: on the machine that imported, and
   on another machine (a fresh ``ENDLESS_HOME``: its first open copies the log
   and the tree from the database).

PostgreSQL runs on a throwaway cluster this script starts the way the tests
do (``tests/pg_server.py``: loopback TCP, default durability), or on ``--dsn``.

Usage: python scripts/bench_store.py [--turns 300] [--warmup 20] [--procs 1,2,4] [--proc-turns 100]
       [--sizes 100000,1000000] [--skip-commit] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

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
        cpu = time.process_time()
        for k in range(turns):
            messages = [Message("user", _text(rng, 80) + "?", 1.7e9 + k), Message("reply", _text(rng, 300), 1.7e9 + k),
                        Message("user", "thanks", 1.7e9 + k)]
            start = time.perf_counter()
            memory.commit_turn(f"bench-{os.getpid()}", "Bench", messages)
            times.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
    print(json.dumps({"times": times, "cpu": cpu}), flush=True)
    return 0


def server_cpu(pid: int | None) -> float | None:
    """CPU seconds the server has used: the postmaster's own and its reaped children's, and its live
    children's (None: no local server to read)."""
    if pid is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def fields(process: str) -> list[str] | None:
        try:
            text = Path(f"/proc/{process}/stat").read_text()
        except OSError:
            return None
        return text[text.rindex(")") + 2:].split()  # (after the command's name, which may hold spaces)

    own = fields(str(pid))
    if own is None:
        return None
    total = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(pid):
            stat = fields(entry)
            if stat is not None and stat[1] == str(pid):  # ppid
                total += int(stat[11]) + int(stat[12])
    return total / tick


def at_once(store: str, procs: int, turns: int, base: Path,
            server: int | None = None) -> tuple[float, float, float, float | None]:
    """``procs`` processes committing ``turns`` each at once: (turns per second, p99 ms of one commit,
    the committing processes' CPU ms per turn while they commit, and the server's (pid ``server``):
    on shared cores their sum bounds the rate)."""
    project = str(base / "project")
    homes = [base / ("home" if not store else f"home-{k}") for k in range(procs)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    running = [subprocess.Popen([sys.executable, __file__, "--child", str(home), store, project, str(turns)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for home in homes]
    for proc in running:
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("a committing process did not start; see its errors above")
    server_before = server_cpu(server)
    start = time.perf_counter()
    for proc in running:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    times: list[float] = []
    cpu = 0.0
    for proc in running:
        out, _ = proc.communicate(timeout=900)
        said = json.loads(out.strip().splitlines()[-1])
        times += said["times"]
        cpu += said["cpu"]
    wall = time.perf_counter() - start
    server_after = server_cpu(server)
    served = None if server_before is None or server_after is None else (
        (server_after - server_before) * 1e3 / (procs * turns))
    return procs * turns / wall, p99(times) * 1e3, cpu * 1e3 / (procs * turns), served


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def write_source(path: Path, size: int) -> list[tuple[str, list[int]]]:
    """The scale corpus as a JSONL file ``endless import`` reads; returns the queries and their planted ids."""
    from bench_recall import scale_messages

    messages, queries, _ = scale_messages(size)
    with open(path, "wb") as handle:
        for kind, text, at, title in messages:
            handle.write(json.dumps({"role": "user" if kind == "user" else "assistant", "content": text, "at": at,
                                     "session": title}).encode() + b"\n")
    return queries


def run_import(source: Path, home: Path, store: str) -> tuple[float, float]:
    """``endless import`` of ``source`` into a fresh home: (seconds, peak RSS in MB of the import process).
    ``--no-catch-up``: the import alone (else a detached writer goes on after it, and the searches timed
    next would share the cores with it)."""
    (home / "ws").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_HOME": str(home / "root"), "ENDLESS_STORE": store,
           "ENDLESS_CONFIG": str(home / "none.toml")}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "endless.cli", "import", str(source), "--workspace",
                             str(home / "ws"), "--no-progress", "--no-catch-up"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the import failed: {proc.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


# The open and the searches, in a process of their own (a person's next command).
_SEARCH_CHILD = r"""
import json, sys, time
from pathlib import Path
from endless.core.memory import Memory
from endless.core.search import finder
from endless.core.settings import Settings
from endless.core.store import workspace_key
root, workspace, store, job = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(open(sys.argv[4]).read())
started = time.perf_counter()
memory = Memory.open(workspace_key(None, workspace), root=Path(root), settings=Settings(store=store))
opened = time.perf_counter() - started
corpus = finder.corpus_of(memory)  # (once, as bench_recall.py: what is timed is the search itself)
finder.search(corpus, "warm", 0, 20, 60.0)
times, first = [], []
for query, planted in job:
    started = time.perf_counter()
    result = finder.search(corpus, query, 0, 20, 10.0)
    times.append(time.perf_counter() - started)
    first.append(sorted(h.id for h in result.hits[:len(planted)]) == sorted(planted))
print(json.dumps({"open": opened, "times": times, "first": first, "total": memory.total}))
"""


def search_child(home: Path, root: Path, store: str, job: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _SEARCH_CHILD, str(root), str(home / "ws"), store, str(job)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=home)
    if done.returncode != 0:
        raise SystemExit(f"the searches failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def at_scale(size: int, stores: list[tuple[str, str]], base: Path) -> list[tuple]:
    """One size: the same source imported into each store, then opened and searched."""
    source = base / f"source-{size}.jsonl"
    queries = write_source(source, size)
    job = base / f"queries-{size}.json"
    job.write_text(json.dumps(queries))
    rows = []
    for name, store in stores:
        home = base / f"{name}-{size}"
        seconds, rss = run_import(source, home, store)
        here = search_child(home, home / "root", store, job)
        elsewhere = search_child(home, home / "other-machine", store, job) if store else None
        rows.append((size, name, size / seconds, rss, here["open"], elsewhere["open"] if elsewhere else None,
                     statistics.median(here["times"]) * 1e3, p99(here["times"]) * 1e3,
                     sum(here["first"]) / len(here["first"]), here["total"]))
        shutil.rmtree(home, ignore_errors=True)
    source.unlink()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--procs", default="1,2,4", help="processes committing at once, e.g. 1,2,4")
    parser.add_argument("--proc-turns", type=int, default=100, help="turns each of those processes commits")
    parser.add_argument("--sizes", default="100000,1000000", help="messages imported and searched at scale")
    parser.add_argument("--skip-commit", action="store_true", help="only the scale part")
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
    sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
    shared: dict[tuple[str, int], tuple[float, float, float, float | None]] = {}
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0]) if cluster is not None else None
    scaled: list[tuple] = []
    try:
        for name, settings in (("files", Settings()), ("postgresql", Settings(store=dsn))):
            if args.skip_commit:
                break
            with tempfile.TemporaryDirectory(prefix=f"endless-bench-{name}-") as home:
                times = commit_times(settings, args.turns, args.warmup, Path(home))
            rows.append((name, statistics.median(times) * 1e3, p99(times) * 1e3, len(times)))
            for procs in counts:
                with tempfile.TemporaryDirectory(prefix=f"endless-bench-{name}-{procs}-") as home:
                    shared[(name, procs)] = at_once(settings.store, procs, args.proc_turns, Path(home),
                                                    postmaster if settings.store else None)
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix=f"endless-bench-scale-{size}-") as base:
                scaled += at_scale(size, [("files", ""), ("postgresql", dsn)], Path(base))
    finally:
        if cluster is not None:
            cluster.remove()
    where = masked_store(dsn) if args.dsn else "a throwaway local cluster over loopback TCP"
    if rows:
        print(f"commit of a 3-message turn (Memory.commit_turn), {args.turns} turns after {args.warmup} warm-up; "
              f"postgresql: {where}")
        print(f"{'store':<12}{'median ms':>12}{'p99 ms':>10}{'turns':>8}")
        for name, median, tail, n in rows:
            print(f"{name:<12}{median:>12.2f}{tail:>10.2f}{n:>8}")
        print()
        print(f"processes committing at once to one memory, {args.proc_turns} turns each "
              "(files: one ENDLESS_HOME; postgresql: one each)")
        cores = os.cpu_count() or 1
        print(f"{'store':<12}{'processes':>10}{'turns/s':>10}{'p99 ms':>10}{'vs one':>8}{'client CPU ms/turn':>20}"
              f"{'server CPU ms/turn':>20}{f'bound on {cores} cores':>20}{'bound vs one':>14}")
        for (name, procs), (rate, tail, cpu, served) in shared.items():
            spent = cpu + (served or 0.0)
            bound = cores * 1e3 / spent if spent else float("inf")
            one = shared[(name, counts[0])][0]
            print(f"{name:<12}{procs:>10}{rate:>10.1f}{tail:>10.2f}{rate / one:>8.2f}{cpu:>20.2f}"
                  f"{'-' if served is None else format(served, '.2f'):>20}{bound:>20.1f}{bound / one:>14.2f}")
    if scaled:
        print()
        print("at scale: `endless import` of the scale corpus (peak RSS: the import process), then in a new "
              "process the open and 40 ranked searches (all-words first: the 5 planted messages are the top 5)")
        print(f"{'messages':>10} {'store':<11}{'import msg/s':>13}{'peak RSS MB':>12}{'open s':>8}"
              f"{'open elsewhere s':>17}{'search median ms':>17}{'p99 ms':>8}{'all-words first':>16}")
        for size, name, rate, rss, opened, other, median, tail, first, total in scaled:
            assert total == size, (name, total)
            print(f"{size:>10,} {name:<11}{rate:>13,.0f}{rss:>12.0f}{opened:>8.2f}"
                  f"{'-' if other is None else format(other, '.2f'):>17}{median:>17.1f}{tail:>8.1f}{first:>16.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
