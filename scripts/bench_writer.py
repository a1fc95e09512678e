"""Writer benchmark: 300 scripted turns against the simulator's scripted writer.

Runs the real writer pool, through the real SDK client and the provider
simulator on its simulated clock, once with one line per call and once with up
to six, and prints one table with both side by side: model calls per
model-written line (free and offline-written lines counted apart), trimmed
lines, tries rejected for invented facts, offline fallbacks, and the share of
writer input read from the cache.

    .venv/bin/python scripts/bench_writer.py [--turns 300] [--seed 7] [--cache deepseek]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from endless.core.store.keys import workspace_key  # noqa: E402
from endless.core.memory import Memory  # noqa: E402
from endless.core.store.messages import Message  # noqa: E402
from endless.core.settings import Settings  # noqa: E402
from endless.sim.cache import make_cache  # noqa: E402
from endless.sim.clock import SimClock, run  # noqa: E402
from endless.sim.simulator import Route as SimRoute, Simulator  # noqa: E402
from endless.sim.transport import sdk_http_client  # noqa: E402
from endless.sim.writer_model import ScriptedWriter  # noqa: E402
from endless.writer.pool import WriterPool  # noqa: E402
from endless.llm.connect import make_provider  # noqa: E402
from endless.llm.routes import Route  # noqa: E402
from endless.writer.queue import ready_work
from endless.writer.recorded import recorded_routes

WORDS = ("deploy config port schema test migration cache index server client build release branch "
         "review token budget latency error retry queue worker lease journal view line merge").split()
SYSTEM = "You are a careful coding assistant working in the user's repository. " * 40


def sentence(rng: random.Random, size: int) -> str:
    words = []
    total = 0
    while total < size:
        pick = rng.random()
        if pick < 0.08:
            word = f"{rng.randint(10, 99999)}"
        elif pick < 0.14:
            word = f"src/{rng.choice(WORDS)}_{rng.randint(1, 99)}.py"
        else:
            word = rng.choice(WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words).capitalize() + "."


def turn_messages(rng: random.Random, at: float) -> list[Message]:
    roll = rng.random()
    person = Message("user", sentence(rng, rng.randint(50, 300)), at)
    reply = Message("reply", sentence(rng, rng.randint(300, 1500)), at)
    if roll < 0.6:
        return [person, reply]
    if roll < 0.85:
        steps = "\n".join(f"did: run_tool {{\"path\": \"src/{rng.choice(WORDS)}.py\"}}\nresult: "
                          + sentence(rng, rng.randint(200, 2000)) for _ in range(rng.randint(2, 8)))
        return [person, Message("trace", steps, at), reply]
    if roll < 0.95:
        return [Message("user", sentence(rng, rng.randint(4000, 20000)), at), reply]
    steps = "\n".join(f"did: grep {{\"q\": \"{rng.choice(WORDS)}\"}}\nresult: " + sentence(rng, 6000)
                      for _ in range(rng.randint(4, 8)))
    return [person, Message("trace", steps, at), reply]


def measure(batch: int, turns: int, seed: int, cache: str) -> dict:
    clock = SimClock()
    writer = ScriptedWriter(seed=seed, latency_median=2.0)
    flavour = "anthropic" if cache == "anthropic" else ("deepseek" if cache == "deepseek" else "openai")
    sim = Simulator(SimRoute(writer, make_cache(cache), context_length=1_000_000, flavour=flavour))
    route = (Route("anthropic", "claude-sonnet-5", api_key_env="SIM_KEY") if cache == "anthropic"
             else Route("openai", "deepseek-v4-pro", base_url="https://api.deepseek.com", api_key_env="SIM_KEY"))
    root = Path(tempfile.mkdtemp(prefix="endless-bench-writer-"))
    settings = Settings(lines_per_call=batch)
    memory = Memory.open(workspace_key(None, root / "ws"), settings=settings, root=root, clock=clock.wall)
    recorded_routes(memory).record("chat", route.to_json(), SYSTEM, [])

    def providers(r: Route):
        return make_provider(r, api_key="sim", http_client=sdk_http_client(r.provider, sim))

    pool = WriterPool(memory, providers)
    rng = random.Random(seed)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(pool.run(stop))
        for _ in range(turns):
            memory.commit_turn("chat", "Benchmark chat", turn_messages(rng, clock.wall()))
            await asyncio.sleep(rng.lognormvariate(3.4, 0.8))  # median about 30 s
        await memory.settle(lambda m: all(m.is_built(0, i) for i in range(m.total)) and not ready_work(m),
                            24 * 3600)
        stop.set()
        await task

    started = time.perf_counter()
    run(main(), clock)
    elapsed = time.perf_counter() - started
    lines = [orjson.loads(line) for line in memory.tree.path.read_bytes().splitlines()]
    usage = [orjson.loads(line) for line in (memory.folder / "usage.jsonl").read_bytes().splitlines()]
    stats = pool.stats
    written = stats.model_lines + stats.trimmed
    cached = sum(u.get("cached", 0) for u in usage)
    total_in = sum(u.get("cached", 0) + u.get("uncached", 0) + u.get("cache_write", 0) for u in usage)
    memory.close()
    return {
        "messages": memory.total,
        "lines in the tree": len(lines),
        "free lines": len(lines) - written - stats.offline_fallbacks - stats.offline_lines,
        "model-written lines": written,
        "model calls": stats.calls,
        "calls per model-written line": stats.calls / max(1, written),
        "lines trimmed": stats.trimmed,
        "tries rejected for invented facts": stats.invented,
        "tries rejected, all reasons": sum(stats.rejected.values()),
        "offline fallbacks": stats.offline_fallbacks,
        "cached share of writer input": cached / max(1, total_in),
        "simulated hours": clock.now / 3600,
        "real seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", default="deepseek", choices=["deepseek", "openai-auto", "anthropic"])
    args = parser.parse_args()
    print(f"[endless.bench] {args.turns} turns, seed {args.seed}, cache model {args.cache}", file=sys.stderr)
    one = measure(1, args.turns, args.seed, args.cache)
    six = measure(6, args.turns, args.seed, args.cache)
    print(f"| {args.turns} scripted turns ({args.cache}) | 1 line per call | up to 6 lines per call |")
    print("|---|---|---|")
    for key in one:
        a, b = one[key], six[key]
        if isinstance(a, float):
            fmt = "{:.1%}" if "share" in key else "{:.2f}"
            a, b = fmt.format(a), fmt.format(b)
        print(f"| {key} | {a} | {b} |")
    target = six["calls per model-written line"]
    print(f"\ntarget: ≤ 1.3 calls per model-written line with batching: "
          f"{'met' if target <= 1.3 else 'MISSED'} ({target:.2f})")


if __name__ == "__main__":
    main()
