"""The first turns after a long import: is every head inside the window, and how much of it is cached?

An import leaves N messages nobody has summarised; the person chats at once.
Here N long messages are committed as ``endless import`` commits them (in
batches, the views planned once at the end), then 50 turns follow.  Before
each turn the head is built as a turn builds it (``endless.turn.head``) and
measured: its tokens (our safe count, o200k with its margin) against the
window, and the share of it that repeats the previous turn's head from its
first byte (what a provider's prefix cache can serve).  Between turns a
stand-in writer (no model: a fixed 300-byte line) makes ``--calls`` calls of
six lines each, as the pool does while a person types.  A head showing a
placeholder line (a stretch left out, named for ``zoom``) is counted.

Usage: python scripts/bench_first_turns.py [--sizes 10000,100000] [--window 131072] [--calls 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.core.store.turns import TurnRecord
from endless.llm import tokens
from endless.turn.head import build_request, system_prompt, turn_tools
from endless.writer.pace import lines_left
from endless.writer.queue import ready_work

TURNS = 50
HARNESS_TOOLS = [{"name": "terminal", "description": "run a shell command and return what it printed",
                  "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def say(text: str) -> None:
    print(f"[endless.bench] {text}", file=sys.stderr, flush=True)


def common_prefix(a: str, b: str) -> int:
    """Characters ``a`` and ``b`` share from their start (bisection over slices: fast in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def imported(root: Path, size: int, window: int) -> Memory:
    memory = Memory.open(workspace_key(None, root / "ws"), settings=Settings(), root=root, window_tokens=window)
    for start in range(0, size, 2000):
        memory.commit_turns([TurnRecord("imported", "An old chat",
                                        [Message("user", f"question {i}: " + "about the build queue " * 30, 1e9 + i),
                                         Message("reply", f"answer {i}: " + "the port is 5433 and " * 30, 1e9 + i)],
                                        at=1e9 + i)
                             for i in range(start, min(size, start + 2000), 2)], sync=False, plan=False)
    memory.plan_views(sync=False)
    return memory


def first_turns(root: Path, size: int, window: int, calls: int) -> dict:
    started = time.perf_counter()
    memory = imported(root, size, window)
    import_seconds = time.perf_counter() - started
    system = system_prompt("You are a careful coding agent.")
    tools = turn_tools(HARNESS_TOOLS)
    room_window = window
    heads: list[int] = []
    shares: list[float] = []
    placeholders = 0
    writer_calls = 0
    previous = ""
    for turn in range(TURNS):
        question = f"Turn {turn}: what did we decide about the build queue?"
        head = build_request(memory, system, tools, [], "", question)
        text = head.rendered()
        heads.append(tokens.estimate(head))
        if previous:
            shares.append(common_prefix(previous, text) / len(text))
        placeholders += "+0|note: (" in text
        previous = text
        memory.commit_turn("live", "Today", [Message("user", question, 2e9 + turn),
                                              Message("reply", "We chose a queue of 8 workers.", 2e9 + turn)],
                           sync=False)
        for _ in range(calls):
            jobs = ready_work(memory)[:6]
            if not jobs:
                break
            memory.store_lines([(j.level, j.index, f"line {j.name} " + "w" * 300) for j in jobs], sync=False)
            writer_calls += 1
    left = lines_left(memory.built_slots(), memory.total)
    memory.close()
    return {"import": import_seconds, "first": heads[0], "max": max(heads), "window": room_window,
            "median_share": statistics.median(shares), "min_share": min(shares),
            "share_p10": sorted(shares)[len(shares) // 10], "placeholders": placeholders,
            "calls": writer_calls, "left": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--window", type=int, default=131_072)
    parser.add_argument("--calls", type=int, default=8, help="writer calls between two turns")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            say(f"{size:,} messages, then {TURNS} turns")
            rows[size] = first_turns(Path(tmp), size, args.window, args.calls)
    print(f"The first {TURNS} turns after importing N long messages (window {args.window:,} tokens; "
          f"{args.calls} writer calls of 6 lines between turns; on {os.cpu_count()} cores)\n")
    print("| messages | import | first head | largest head | window | cache share median | p10 | min "
          "| turns with a placeholder | writer calls | lines left after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size, r in rows.items():
        print(f"| {size:,} | {r['import']:.1f} s | {r['first']:,} tok | {r['max']:,} tok | {r['window']:,} "
              f"| {r['median_share']:.1%} | {r['share_p10']:.1%} | {r['min_share']:.1%} | {r['placeholders']} "
              f"| {r['calls']} | {r['left']:,} |")


if __name__ == "__main__":
    main()
