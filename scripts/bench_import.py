"""Import at scale: ``endless import`` of N messages, timed as a person runs it (a subprocess).

For each size a generic JSONL of N messages is imported into a fresh
``ENDLESS_HOME``: the wall time, the rate, the peak resident memory of the
import process (from ``wait4``), the rate relative to the same run's smallest
size (1.00 is linear), and the memory's bytes on disk per byte of the source.
Then, on that memory whose lines are not written yet (the import runs with
``--no-catch-up``), what opening it costs: a cold ``endless search`` (the
median of three whole processes, and its peak memory), and a cold open for
writing (what a chat or ``endless catch-up`` pays first), both flat as the
history grows when opening does not depend on the unwritten messages.
The default mix is realistic (``--mix real``): messages of 100 to 300 bytes
from a Zipf vocabulary, a third from the user, the rest the assistant's
replies and tool results with their tool's name; ``--mix short`` is the old
one (about 30 bytes, a question and its answer per turn), which hides the
per-byte costs.  After the cold reads, a chat's commit in a fresh process
on that memory (the median of 30 three-message turns): what the first chat
after an import pays per turn while no line is written.
``--optmem "COMMAND"`` runs another tool's import on the same records for a
column side by side (``$HOME`` a fresh folder): ``{source}`` is the JSONL
file; ``{dated}`` the same messages as ``YYYY-MM-DD text`` lines, one a line,
each cut to 280 bytes (OptMem's ``memo import`` format and limit), e.g.
``--optmem "sh -c 'python3 memo init >/dev/null && python3 memo import {dated}'"``
with ``memo`` from a checkout of VictorTaelin/OptMem (not part of this project).
``--optmem-search "COMMAND"`` then times that tool's search of its memory
(the median of three processes; ``$HOME`` as its import left it), e.g.
``"python3 memo recall 'database.*billing.*export.*queue'"``, and the table
adds, for each tool, its import plus three searches: what a person waits
for in all when a tool that defers its work to each search is set against
one that does it once at import.  With ``--compare PYTHON`` the same imports run a second time with
another Python that has another version of Endless installed (e.g. a venv
with the last release), side by side in the same run.  Each Python first
compiles its Endless to bytecode, so every run loads compiled modules as an
installed package does (an editable checkout under ``PYTHONDONTWRITEBYTECODE``
would otherwise compile its changed modules in every timed run).

Usage: python scripts/bench_import.py [--sizes 10000,100000,1000000] [--mix real|short] [--compare PYTHON]
       [--optmem "COMMAND {source}|{dated}" [--optmem-search "COMMAND"]]
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson


def say(text: str) -> None:
    print(f"[endless.bench] {text}", file=sys.stderr, flush=True)


def source(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        for i in range(size):
            role = "user" if i % 2 == 0 else "assistant"
            handle.write(orjson.dumps({"role": role, "content": f"message {i} about topic {i % 97}",
                                       "at": 1_700_000_000 + 10 * i}) + b"\n")


STEMS = ("cache index query server client error retry timeout queue worker billing export database schema "
         "migration branch commit review merge patch file module function method table column request "
         "response token session search ranking result page limit offset batch thread lock lease deploy "
         "build test config").split()
GLUE = "the a of to and in is for on with that this it as at by from be are was we you not but".split()
TOOLS = ("terminal", "read_file", "patch", "search_files")


def realistic(path: Path, size: int, seed: int = 7) -> None:
    """Messages as a coding chat has them: 100-300 bytes, mixed roles, tool results (seeded, so both
    columns read the same bytes)."""
    rng = random.Random(seed)
    vocab = GLUE + STEMS + [a + b for a in ("re", "un", "pre", "sub", "multi") for b in STEMS]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf: a few words most of the time

    def words(low: int, high: int) -> str:
        picked: list[str] = []
        length = rng.randint(low, high)
        while sum(len(w) + 1 for w in picked) < length:
            picked.extend(rng.choices(vocab, weights, k=4))
        return " ".join(picked)[:length].rstrip()

    at = 1_700_000_000
    with open(path, "wb") as handle:
        for _ in range(size):
            at += rng.randint(1, 40)
            kind = rng.random()
            if kind < 0.33:
                record = {"role": "user", "content": words(100, 300).capitalize() + "?", "at": at}
            elif kind < 0.73:
                record = {"role": "assistant", "content": words(100, 300).capitalize() + ".", "at": at}
            else:
                record = {"role": "tool", "name": rng.choice(TOOLS), "at": at,
                          "content": f'{{"cmd": "{words(10, 30)}"}} -> {words(80, 260)}'}
            handle.write(orjson.dumps(record) + b"\n")


DATED_BYTES = 280  # OptMem's longest memory, in bytes


def dated(path: Path, out: Path) -> None:
    """The JSONL's messages as ``YYYY-MM-DD text`` lines (UTC days), each on one line and cut to
    DATED_BYTES at a character boundary: what another tool's import reads of the same records."""
    with open(path, "rb") as source, open(out, "w", encoding="utf-8") as handle:
        for line in source:
            record = orjson.loads(line)
            text = " ".join(str(record["content"]).split())
            text = text.encode("utf-8")[:DATED_BYTES].decode("utf-8", "ignore").strip()
            day = datetime.datetime.fromtimestamp(record["at"], datetime.timezone.utc).strftime("%Y-%m-%d")
            handle.write(f"{day} {text}\n")


def disk_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (allocated blocks: a sparse file counts what it holds)."""
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def run_other(template: str, path: Path, root: Path) -> dict:
    """Another tool's import of the same file, with a fresh ``$HOME`` (its own state lands there)."""
    home = root / "home"
    home.mkdir(parents=True)
    dated_path = root / "dated.txt"
    if "{dated}" in template:
        dated(path, dated_path)
    command = [part.replace("{source}", str(path)).replace("{dated}", str(dated_path))
               for part in shlex.split(template)]
    started = time.perf_counter()
    proc = subprocess.Popen(command, env={**os.environ, "HOME": str(home)}, cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed: {proc.stderr.read().decode()[-2000:]}")
    return {"seconds": seconds, "rss": usage.ru_maxrss / 1024, "disk": disk_bytes(home)}


def other_search(template: str, root: Path) -> float:
    """Another tool's search of the memory its import left under ``root``: the median of three processes."""
    command = shlex.split(template)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        proc = subprocess.run(command, env={**os.environ, "HOME": str(root / "home")}, cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"{command[0]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return sorted(times)[1]


COMPILE = ("import compileall, sys, endless, endless.writer, endless.prompts\n"
           "sys.exit(not all(compileall.compile_dir(d, quiet=1) for m in (endless, endless.writer, endless.prompts)"
           " for d in m.__path__))")


def compile_endless(python: Path | None) -> None:
    """Bytecode for every module of that Python's Endless (an editable install has none of its own)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([str(python or sys.executable), "-c", COMPILE], env=env, check=True, cwd="/")  # (not a checkout)


def run_import(path: Path, root: Path, python: Path | None) -> dict:
    env = {**os.environ, "ENDLESS_HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "xdg")}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    (root / "ws").mkdir()
    started = time.perf_counter()
    # --no-catch-up: the import alone (by default it would go on writing its lines, here or detached)
    proc = subprocess.Popen([str(python or sys.executable), "-m", "endless.cli", "import", str(path), "--workspace",
                             str(root / "ws"), "--no-progress", "--no-catch-up"], env=env, cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"the import failed ({proc.returncode}): {err}")
    return {"seconds": seconds, "rss": usage.ru_maxrss / 1024, "out": out.strip().splitlines()[0],
            "disk": disk_bytes(root / "home")}


SEARCH = "database billing export queue"
OPEN_FOR_WRITING = ("import sys, time; from pathlib import Path; from endless.core.memory import Memory; "
                    "started = time.perf_counter(); Memory.open(memory_id=sys.argv[1], root=Path(sys.argv[2])).close(); "
                    "print(time.perf_counter() - started)")


COMMIT_AFTER = ("import statistics, sys, time; from pathlib import Path; from endless.core.memory import Memory; "
                "from endless.core.store.messages import Message\n"
                "memory = Memory.open(memory_id=sys.argv[1], root=Path(sys.argv[2])); took = []\n"
                "for k in range(30):\n"
                "    turn = [Message('user', f'question {k}', time.time()), Message('trace', f'did: ls {k}', time.time()),"
                " Message('reply', f'answer {k}', time.time())]\n"
                "    started = time.perf_counter(); memory.commit_turn('bench', 'bench', turn)\n"
                "    took.append(time.perf_counter() - started)\n"
                "memory.close(); print(statistics.median(took))")


def cold_reads(root: Path, python: Path | None) -> dict:
    """A cold search (median of three processes, and the largest peak) and a cold open for writing."""
    env = {**os.environ, "ENDLESS_HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "xdg")}
    memory_id = next((root / "home" / "memories").iterdir()).name
    times, peaks = [], []
    for _ in range(3):
        started = time.perf_counter()
        proc = subprocess.Popen([str(python or sys.executable), "-m", "endless.cli", "search", *SEARCH.split(),
                                 "--memory", memory_id, "--limit", "5"], env=env, cwd=root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - started)
        peaks.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"endless search failed ({os.waitstatus_to_exitcode(status)})")
    opened = subprocess.run([str(python or sys.executable), "-c", OPEN_FOR_WRITING, memory_id, str(root / "home")],
                            env=env, cwd=root, capture_output=True, text=True, check=True)
    committed = subprocess.run([str(python or sys.executable), "-c", COMMIT_AFTER, memory_id, str(root / "home")],
                               env=env, cwd=root, capture_output=True, text=True, check=True)
    return {"search": sorted(times)[1], "search_rss": max(peaks), "open": float(opened.stdout.strip()),
            "commit": float(committed.stdout.strip())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--compare", type=Path, default=None,
                        help="a Python with another version of Endless installed, run side by side")
    parser.add_argument("--mix", choices=("real", "short"), default="real")
    parser.add_argument("--optmem", metavar="COMMAND", default=None,
                        help='another tool\'s import, e.g. "memo import {source}", run side by side')
    parser.add_argument("--optmem-search", metavar="COMMAND", default=None,
                        help="that tool's search of what it imported, e.g. \"memo recall 'billing.*queue'\"")
    args = parser.parse_args()
    if args.optmem_search and not args.optmem:
        parser.error("--optmem-search searches what --optmem imported: give --optmem too")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    runs = [("this", None)] + ([("compare", args.compare)] if args.compare else [])
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, checkout in runs:
            compile_endless(checkout)
        for size in sizes:
            path = Path(tmp) / f"{args.mix}{size}.jsonl"
            (realistic if args.mix == "real" else source)(path, size)
            results[("bytes", size)] = {"source": path.stat().st_size}
            if args.optmem:
                say(f"{size:,} messages (optmem)")
                results[("optmem", size)] = run_other(args.optmem, path, Path(tmp) / f"optmem-{size}")
                if args.optmem_search:
                    results[("optmem", size)]["search"] = other_search(args.optmem_search, Path(tmp) / f"optmem-{size}")
            for name, checkout in runs:
                root = Path(tmp) / f"{name}-{size}"
                root.mkdir()
                say(f"{size:,} messages ({name})")
                results[(name, size)] = run_import(path, root, checkout)
                say(f"  {results[(name, size)]['seconds']:.1f} s: {results[(name, size)]['out']}")
                results[(name, size)].update(cold_reads(root, checkout))
            path.unlink()
    mix = "realistic (100-300 bytes, mixed roles, tool results)" if args.mix == "real" else "short (about 30 bytes)"
    print(f"`endless import` of N {mix} messages (a subprocess each, fresh home; on {os.cpu_count()} cores)\n")
    head = ("| messages | source MB | wall | messages/s | peak RSS | rate ÷ first size's | disk ÷ source "
            "| cold search | open to write | a commit after |")
    if args.compare:
        head += (" wall (compared) | messages/s | peak RSS | disk ÷ source | cold search | open to write "
                 "| a commit after | time, this ÷ compared |")
    if args.optmem:
        head += " wall (optmem) | messages/s | peak RSS | disk ÷ source | time, this ÷ optmem |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    base = {name: size and sizes[0] / results[(name, sizes[0])]["seconds"] for name, _ in runs}
    for size in sizes:
        a = results[("this", size)]
        source_bytes = results[("bytes", size)]["source"]
        rate = size / a["seconds"]
        row = (f"| {size:,} | {source_bytes / 1e6:.0f} | {a['seconds']:.1f} s | {rate:,.0f} | {a['rss']:.0f} MB | "
               f"{rate / base['this']:.2f} | {a['disk'] / source_bytes:.2f} | {_cold(a)} | {a['open']:.1f} s | "
               f"{a['commit'] * 1000:.1f} ms |")
        for other in ("compare", "optmem"):
            if (other, size) in results:
                b = results[(other, size)]
                row += (f" {b['seconds']:.1f} s | {size / b['seconds']:,.0f} | {b['rss']:.0f} MB | "
                        f"{b['disk'] / source_bytes:.2f} |"
                        + (f" {_cold(b)} | {b['open']:.1f} s | {b['commit'] * 1000:.1f} ms |" if "open" in b else "")
                        + f" {a['seconds'] / b['seconds']:.2f} |")
        print(row)
    if args.optmem_search:
        _print_with_searches(sizes, results)


SEARCHES = 3  # searches after the import, in the table that adds them


def _print_with_searches(sizes: list[int], results: dict[tuple[str, int], dict]) -> None:
    """Each tool's import plus three cold searches (each the median search of its three processes)."""
    print(f"\nimport, then {SEARCHES} searches (each a whole process, cold)\n")
    head = ("| messages | import | a search | import + 3 searches | import (optmem) | a search (optmem) "
            "| import + 3 searches (optmem) | this ÷ optmem |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for size in sizes:
        a, b = results[("this", size)], results[("optmem", size)]
        ours = a["seconds"] + SEARCHES * a["search"]
        theirs = b["seconds"] + SEARCHES * b["search"]
        print(f"| {size:,} | {a['seconds']:.1f} s | {a['search']:.2f} s | {ours:.1f} s | {b['seconds']:.1f} s | "
              f"{b['search']:.2f} s | {theirs:.1f} s | {ours / theirs:.2f} |")


def _cold(result: dict) -> str:
    return f"{result['search']:.2f} s, {result['search_rss']:.0f} MB"


if __name__ == "__main__":
    main()
