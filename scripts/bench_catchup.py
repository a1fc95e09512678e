"""Measure the engine's own time while the writer catches up after a long import.

An import commits N messages nobody has summarised yet, so the view is long,
over its ceiling, and waits for thousands of parents: it is "shrinking".  Here
a stand-in writer (no model: each line is a fixed 300-byte text) takes the
memory's ready work six lines at a time, as one writer call does, and stores
it, until nothing is left.  What is timed is only the memory's side of each
store (the view passes, the index, the files), which a host process pays
whatever model writes the lines.  Two settings run side by side:
``shrink_replan_share`` at its default (the view is re-planned once that share
of the parents it waits for is built) and at 0 (re-planned at every store, as
before the setting existed); the second is skipped above ``--each-max``
messages, where it takes too long.

Usage: python scripts/bench_catchup.py [--sizes 2000,5000,20000] [--each-max 5000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.turns import TurnRecord
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.writer.queue import ready_work


def say(text: str) -> None:
    print(f"[endless.bench] {text}", file=sys.stderr, flush=True)


def catch_up(root: Path, size: int, settings: Settings) -> dict:
    memory = Memory.open(workspace_key(None, root / "ws"), settings=settings, root=root)
    started = time.perf_counter()
    for first in range(0, size, 2000):
        memory.commit_turns([TurnRecord("chat", "Imported", [Message("user", f"q {i} " + "word " * 200, 1.0),
                                                             Message("reply", f"a {i} " + "word " * 200, 1.0)])
                             for i in range(first, min(size, first + 2000), 2)], sync=False)
    imported = time.perf_counter() - started
    times: list[float] = []
    changes = 0
    while jobs := ready_work(memory)[:6]:
        before = len(memory.views.chat.parts)
        lines = [(j.level, j.index, f"line {j.name} " + "w" * 300) for j in jobs]
        t0 = time.perf_counter()
        memory.store_lines(lines, sync=False)
        times.append(time.perf_counter() - t0)
        changes += len(memory.views.chat.parts) != before
    memory.close()
    times.sort()
    return {"import": imported, "stores": len(times), "changes": changes, "total": sum(times),
            "median": statistics.median(times), "p99": times[int(0.99 * (len(times) - 1))],
            "max": times[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,5000,20000")
    parser.add_argument("--each-max", type=int, default=5_000)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    default = Settings()
    every = Settings(**{f.name: getattr(default, f.name) for f in fields(Settings) if f.name != "sources"}
                     | {"shrink_replan_share": 0.0})
    results: dict[tuple[int, str], dict] = {}
    for size in sizes:
        for name, settings in (("share", default), ("each", every)):
            if name == "each" and size > args.each_max:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                say(f"{size:,} messages, re-plan {name}")
                results[(size, name)] = catch_up(Path(tmp), size, settings)
                say(f"  done: {results[(size, name)]['total']:.1f} s in stores")

    def ms(value: float) -> str:
        return f"{value * 1000:.1f} ms"

    share = f"{default.shrink_replan_share:.4g}"
    print(f"Writer catch-up after importing N unwritten messages (engine time only; "
          f"`shrink_replan_share` {share} vs 0)\n")
    print("| messages | stores | view changes (share / each) | engine time in stores (share / each) "
          "| each ÷ share | store median | store p99 | store max |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        a = results[(size, "share")]
        b = results.get((size, "each"))
        changes = f"{a['changes']:,} / {b['changes']:,}" if b else f"{a['changes']:,} / –"
        total = f"{a['total']:.1f} s / {b['total']:.1f} s" if b else f"{a['total']:.1f} s / –"
        ratio = f"{b['total'] / a['total']:.1f}×" if b else "–"
        print(f"| {size:,} | {a['stores']:,} | {changes} | {total} | {ratio} | {ms(a['median'])} "
              f"| {ms(a['p99'])} | {ms(a['max'])} |")


if __name__ == "__main__":
    main()
