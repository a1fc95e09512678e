#!/usr/bin/env python
"""Forget benchmark: ``forget`` of one message at 100k and 1M messages (issue #19).

Builds each memory with the engine benchmark's builder (``scripts/bench_engine.py``:
seeded texts, every line of the tree stored), catches its full-text index up,
then in a fresh process forgets one old message (a third of the way in) and
measures:

* time of the whole forget, and of its steps (file patches inside the index
  transaction, the FTS ``optimize`` of both tables, the one-time ``VACUUM`` of
  an index made before freed pages were zeroed, the WAL checkpoint);
* bytes patched in place in the log and the tree, and bytes the process
  wrote in all (``/proc/self/io``: SQLite's rewrite of the index included);
* tree lines erased, and the writer calls it causes: the erased lines not
  free again at once, each of which the writer writes once more (a chain:
  each parent waits for its child, so about one call a level).

A second forget in the same memory follows (the index is then ``zeroed``:
no ``VACUUM``).  Logs go to stderr, the table to stdout.

    .venv/bin/python scripts/bench_forget.py --sizes 100000,1000000 --keep /tmp/bench-forget
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_engine as engine  # noqa: E402


def _written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def child(root: Path, which: int, at: float) -> dict:
    from endless.core.privacy import forget
    from endless.core.search import finder as search
    from endless.core.memory import Memory

    settings = engine.bench_settings(root)
    memory = Memory.open(engine.KEY, settings=settings, root=root)
    t0 = time.perf_counter()
    search.search(search.corpus_of(memory), "qz9missmark", 0, 5, 3600.0)  # the index caught up (untimed)
    catch_up_s = time.perf_counter() - t0
    target = int(memory.total * at) + which * 7
    while memory.message(target).kind != "user" or len(memory.message(target).text) < 40:
        target += 1
    built_before = [p for p in _ancestors(target, memory.total) if memory.is_built(*p)]
    steps: list[tuple[str, float]] = []
    forget.step = lambda name: steps.append((name, time.perf_counter()))
    io0 = _written_bytes()
    t0 = time.perf_counter()
    outcome = forget.forget(memory, [target])
    seconds = time.perf_counter() - t0
    io = _written_bytes() - io0
    spans: dict[str, float] = {}
    last = t0
    for name, at in steps:
        spans[name] = spans.get(name, 0.0) + at - last
        last = at
    spans["end"] = t0 + seconds - last
    locked = next(at for name, at in steps if name == "unlocked") - t0
    unwritten = sum(1 for part in built_before if not memory.is_built(*part))  # erased, not free again
    result = {"target": target, "seconds": seconds, "locked": locked, "patched": outcome.bytes_rewritten, "io_written": io,
              "nodes": outcome.nodes, "writer_lines": unwritten, "spans": spans, "catch_up_s": catch_up_s,
              "index_bytes": memory.search_index.path.stat().st_size}
    memory.close()
    return result


def _ancestors(mid: int, total: int) -> list[tuple[int, int]]:
    found, level, index = [], 0, mid
    while ((index + 1) << level) <= total:
        found.append((level, index))
        level, index = level + 1, index >> 1
    return found


def run_child(root: Path, which: int, at: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(which), "--root", str(root), "--at", str(at)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--keep", default="/tmp/bench-forget", help="build the fixtures in DIR and keep them")
    parser.add_argument("--reuse", action="store_true", help="measure fixtures already built in --keep")
    parser.add_argument("--at", type=float, default=1 / 3,
                        help="where the forgotten message is, as a share of the history (pick a fresh place "
                             "with --reuse: a place forgotten before has fewer lines left to erase)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(Path(args.root), args.child, args.at)))
        return
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    base = Path(args.keep)
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in sizes:
        folder = base / f"forget-{engine.label(size)}"
        if not (args.reuse and (folder / "build.json").exists()):
            if folder.exists():
                import shutil
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            engine.say(f"{size:,}: building in {folder}")
            built = engine.build(folder, size, engine.SEED, 2000, 2000, 10, 8)
            (folder / "build.json").write_text(json.dumps(built))
        for which in (0, 1):
            result = run_child(folder, which, args.at)
            engine.say(f"{size:,} forget #{which + 1}: {json.dumps(result)}")
            rows.append((size, which, result))
    print("| messages | forget | time | under the memory's lock | patched in place | bytes written (all) "
          "| lines erased | writer lines caused | slowest step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, which, r in rows:
        slowest = max(r["spans"].items(), key=lambda kv: kv[1])
        print(f"| {size:,} | #{which + 1} (message {r['target']:,}) | {r['seconds']:.2f} s | {r['locked']:.3f} s "
              f"| {r['patched']:,} B "
              f"| {r['io_written'] / 1e6:.1f} MB | {r['nodes']} | {r['writer_lines']} "
              f"| {slowest[0]} {slowest[1]:.2f} s |")
    print()
    names = list(dict.fromkeys(name for _, _, r in rows for name in r["spans"]))
    print("| messages | forget | " + " | ".join(f"{n} (s)" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for size, which, r in rows:
        print(f"| {size:,} | #{which + 1} | " + " | ".join(f"{r['spans'].get(n, 0.0):.3f}" for n in names) + " |")


if __name__ == "__main__":
    main()
