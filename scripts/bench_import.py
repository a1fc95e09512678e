"""Import at scale: ``endless import`` of N short messages, timed as a person runs it (a subprocess).

For each size a generic JSONL of N short messages (a question and its answer
per turn, times in order) is imported into a fresh ``ENDLESS_HOME``: the wall
time, the rate, the peak resident memory of the import process (from
``wait4``), and the rate relative to the same run's smallest size (1.00 is
linear).  With ``--compare PYTHON`` the same imports run a second time with
another Python that has another version of Endless installed (e.g. a venv
with the last release), side by side in the same run.  Each Python first
compiles its Endless to bytecode, so every run loads compiled modules as an
installed package does (an editable checkout under ``PYTHONDONTWRITEBYTECODE``
would otherwise compile its changed modules in every timed run).

Usage: python scripts/bench_import.py [--sizes 10000,100000,1000000] [--compare PYTHON]
"""

from __future__ import annotations

import argparse
import os
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
    proc = subprocess.Popen([str(python or sys.executable), "-m", "endless.cli", "import", str(path), "--workspace",
                             str(root / "ws"), "--no-progress"], env=env, cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"the import failed ({proc.returncode}): {err}")
    return {"seconds": seconds, "rss": usage.ru_maxrss / 1024, "out": out.strip().splitlines()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--compare", type=Path, default=None,
                        help="a Python with another version of Endless installed, run side by side")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    runs = [("this", None)] + ([("compare", args.compare)] if args.compare else [])
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, checkout in runs:
            compile_endless(checkout)
        for size in sizes:
            path = Path(tmp) / f"short{size}.jsonl"
            source(path, size)
            for name, checkout in runs:
                root = Path(tmp) / f"{name}-{size}"
                root.mkdir()
                say(f"{size:,} messages ({name})")
                results[(name, size)] = run_import(path, root, checkout)
                say(f"  {results[(name, size)]['seconds']:.1f} s: {results[(name, size)]['out']}")
            path.unlink()
    print(f"`endless import` of N short messages (a subprocess each, fresh home; on {os.cpu_count()} cores)\n")
    head = "| messages | wall | messages/s | peak RSS | rate ÷ first size's |"
    if args.compare:
        head += " wall (compared) | messages/s | peak RSS | time, this ÷ compared |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    base = {name: size and sizes[0] / results[(name, sizes[0])]["seconds"] for name, _ in runs}
    for size in sizes:
        a = results[("this", size)]
        rate = size / a["seconds"]
        row = (f"| {size:,} | {a['seconds']:.1f} s | {rate:,.0f} | {a['rss']:.0f} MB | "
               f"{rate / base['this']:.2f} |")
        if args.compare:
            b = results[("compare", size)]
            row += (f" {b['seconds']:.1f} s | {size / b['seconds']:,.0f} | {b['rss']:.0f} MB | "
                    f"{a['seconds'] / b['seconds']:.2f} |")
        print(row)


if __name__ == "__main__":
    main()
