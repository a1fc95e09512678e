"""Measure the CLI faces as a person runs them: ``endless import``, ``endless mcp``, ``endless doctor``.

For each size, a generic JSONL of N turns (a question, a reply; every 10th
turn with a tool step, every 50th with a 20 KB paste) is imported into a
fresh memory by the ``endless`` command (wall time, Python start included),
imported again (every turn found already there: the dedupe cost), and
dry-run.  On the largest memory, ``endless mcp`` is started through the real
``mcp`` client and each tool is called (latency p50/p99 per tool, stdio
round trip included), and ``endless doctor --json`` is timed.

Usage: python scripts/bench_faces.py [--sizes 1000,10000,50000] [--calls 200]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson


def endless_command() -> list[str]:
    script = Path(sys.executable).parent / "endless"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "endless.cli"]


def write_source(path: Path, turns: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    lines = 0
    with open(path, "w") as handle:
        for k in range(turns):
            at = 1_760_000_000 + 90 * k
            session = f"chat-{k // 400}"
            rows = [{"role": "user", "content": f"Question {k}: what about item {rng.randint(1, 10**6)}?",
                     "at": at, "session": session, "title": f"Chat {k // 400}"}]
            if k % 10 == 0:
                rows.append({"role": "assistant", "content": "Let me look.", "at": at + 1, "session": session})
                rows.append({"role": "tool", "content": "result " * rng.randint(5, 200), "at": at + 2,
                             "session": session})
            if k % 50 == 0:
                rows[0]["content"] += "\n" + "pasted text " * 1700
            rows.append({"role": "assistant", "content": f"Answer {k}: " + "word " * rng.randint(5, 80),
                         "at": at + 3, "session": session})
            for row in rows:
                handle.write(orjson.dumps(row).decode() + "\n")
                lines += 1
    return lines


def timed(args: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr}")
    return elapsed, proc.stdout


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def mcp_latencies(workspace: Path, env: dict, calls: int, total: int) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = endless_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", "--workspace", str(workspace)],
                                   env=env)
    rng = random.Random(1)
    out: dict[str, list[float]] = {"zoom": [], "date": [], "recall_search": [], "view": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            uri = (await session.list_resources()).resources[0].uri
            for _ in range(calls):
                for name, args in (("zoom", {"id": rng.randrange(total), "n": 1}),
                                   ("date", {"id": rng.randrange(total)})):
                    started = time.perf_counter()
                    await session.call_tool(name, args)
                    out[name].append(time.perf_counter() - started)
            for k in range(max(5, calls // 10)):
                started = time.perf_counter()
                await session.call_tool("recall_search", {"query": f"item {rng.randint(1, 10**6)}"})
                out["recall_search"].append(time.perf_counter() - started)
                started = time.perf_counter()
                await session.read_resource(uri)
                out["view"].append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="endless-bench-faces-"))
    rows = []
    last = None
    for size in sizes:
        home, workspace = base / f"home-{size}", base / f"work-{size}"
        workspace.mkdir(parents=True)
        env = {**os.environ, "ENDLESS_HOME": str(home), "TZ": "UTC"}
        env.pop("ENDLESS_WRITER_ROUTE", None)
        source = base / f"source-{size}.jsonl"
        lines = write_source(source, size)
        run = [*endless_command(), "import", "--workspace", str(workspace), "--no-progress", "--no-catch-up", "--json",
               str(source)]
        first, out = timed(run, env)
        summary = orjson.loads(out)
        again, out2 = timed(run, env)
        dry, _ = timed([*endless_command(), "import", "--workspace", str(workspace), "--dry-run", "--json",
                        str(source)], env)
        assert orjson.loads(out2)["turns"] == 0
        rows.append((size, lines, summary["messages"], first, size / first, again, dry))
        last = (workspace, env, summary["messages"])
    print(f"{'turns':>7} {'lines':>7} {'messages':>9} {'import s':>9} {'turns/s':>8} {'re-import s':>12} "
          f"{'dry-run s':>10}")
    for size, lines, messages, first, rate, again, dry in rows:
        print(f"{size:>7} {lines:>7} {messages:>9} {first:>9.2f} {rate:>8.0f} {again:>12.2f} {dry:>10.2f}")
    workspace, env, total = last
    latencies = anyio.run(mcp_latencies, workspace, env, options.calls, total)
    print(f"\nendless mcp on {total} messages (stdio round trip, ms)")
    print(f"{'call':>14} {'n':>5} {'p50':>8} {'p99':>8}")
    for name, values in latencies.items():
        print(f"{name:>14} {len(values):>5} {1000 * statistics.median(values):>8.2f} "
              f"{1000 * percentile(values, 0.99):>8.2f}")
    doctor, _ = timed([*endless_command(), "doctor", "--json"], env)
    print(f"\nendless doctor --json on {total} messages: {doctor:.2f} s")


if __name__ == "__main__":
    main()
