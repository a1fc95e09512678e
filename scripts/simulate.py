"""The scripted-run benchmark: cache share, avoidable misses, waits, writer cost and recall, against baselines.

Runs a seeded conversation (``endless.sim.script``: per 100 turns 60 chat
turns, 25 tool turns, 10 long pastes, 5 heavy tool turns; three chats in one
workspace; gaps with a 30 s median) through the real turn protocol, the real
writer pool, the real SDK clients and the provider simulator on its simulated
clock, in several passes:

* ``auto``: OpenAI wire, DeepSeek route; DeepSeek and OpenAI-automatic caches see the same traffic;
* ``breakpoints``: OpenAI wire, a GPT-5.6 route with explicit breakpoints;
* ``anthropic``: Anthropic wire with its four cache marks;
* ``back-to-back``: the ``auto`` pass with no gap between turns (waits);
* ``spec``: the specification as written (5 tries, no tolerance, one line per call,
  whole messages as input, every turn waits until every line is written), baseline (c);

and replays the ``auto`` pass's transcript as baselines (a) (the harness's own
summarisation) and (b) (oldest turns dropped at the window) against all four
cache models.  Passes run in parallel processes (``--jobs``).  Prints one
markdown table per run size; writes ``simulate-N.json`` and, for the largest
run, ``simulate-N.png`` (top: DeepSeek cache share of each turn's first
request; bottom: the view's size in bytes per turn, the sawtooth).

    .venv/bin/python scripts/simulate.py [--turns 201 2000] [--seed 7] [--jobs 2] [--out bench-results]
    .venv/bin/python scripts/simulate.py --turns 10 --writer-base-url http://127.0.0.1:8080/v1 --writer-model gemma
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from endless.core.memory import Memory  # noqa: E402
from endless.demo.recall_check import reachable  # noqa: E402
from endless.demo.replay import Replay, ReplayConfig, median, percentile  # noqa: E402
from endless.core.settings import Settings  # noqa: E402
from endless.sim.script import make_script, mix_summary  # noqa: E402

WINDOW = 200_000
PASSES = ("auto", "breakpoints", "anthropic", "back-to-back", "spec")
PRICE_NAMES = {"deepseek": "DeepSeek v4-pro", "openai-auto": "OpenAI gpt-5.2 (automatic)",
               "openai-breakpoints": "OpenAI gpt-5.6-terra (breakpoints)", "anthropic": "Anthropic claude-sonnet-5"}


def _settings(name: str, writer_calls: int | None = None) -> Settings:
    base = Settings(settle_poll_seconds=1.0)
    if writer_calls:
        base = base.replace(writer_calls=writer_calls)
    if name == "spec":
        # As written: whole messages as the writer's input, too.
        return base.replace(tries_per_line=5, line_accept_ratio=1.0, lines_per_call=1, recent_block_bytes=1,
                            turn_wait_seconds=7 * 86_400.0, writer_result_keep_chars=10 ** 9,
                            writer_input_keep_chars=10 ** 9)
    return base


def _config(name: str, seed: int, writer: dict | None, writer_calls: int | None = None) -> ReplayConfig:
    caches = {"auto": ("deepseek", "openai-auto"), "breakpoints": ("openai-breakpoints",),
              "anthropic": ("anthropic",), "back-to-back": ("deepseek",), "spec": ("deepseek", "openai-auto")}[name]
    return ReplayConfig(api="anthropic" if name == "anthropic" else "openai", caches=caches, window_tokens=WINDOW,
                        settings=_settings(name, writer_calls), seed=seed, writer_route=writer)


def run_pass(name: str, turns: int, seed: int, writer: dict | None, writer_calls: int | None = None) -> dict:
    """One pass in its own process; returns plain data."""
    # With a real writer the run goes in real time: shorter gaps keep it to minutes.
    script = make_script(turns, seed, gaps=name != "back-to-back", median_gap=5.0 if writer else 30.0)
    root = Path(tempfile.mkdtemp(prefix=f"endless-sim-{name}-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            print(f"[endless.simulate] {name}: {done}/{total} turns", file=sys.stderr, flush=True)

    replay = Replay(root, script, _config(name, seed, writer, writer_calls), progress=progress)
    result = replay.run()
    facts = [f for t in script for f in t.facts]
    memory = Memory.open(memory_id=result.memory_id, settings=_settings(name), root=root, readonly=True)
    with memory:
        reached = sum(1 for f in facts if reachable(memory, f))
        view_bytes = memory.views.size()
    models = list(result.requests[0].read) if result.requests else []
    per_model = {}
    for model in models:
        firsts = [(t.first.read[model] / t.first.tokens if t.first.tokens else 1.0, t.batch)
                  for t in result.turns if t.first]
        plain = [s for s, batch in firsts if not batch]
        batch = [s for s, b in firsts if b]
        agent_read = sum(r.read[model] for r in result.requests)
        agent_input = sum(r.tokens for r in result.requests)
        writer = result.writer_tokens[model]
        per_model[model] = {
            "median": median(plain), "min": min(plain) if plain else 0.0,
            "batch_median": median(batch), "batch_turns": len(batch),
            "weighted_agent": agent_read / agent_input if agent_input else 0.0,
            "weighted_all": (agent_read + writer["read"]) / max(1, agent_input + writer["input"]),
            "avoidable_tokens": sum(r.avoidable.get(model, 0) for r in result.requests),
            "avoidable_requests": sum(1 for r in result.requests if r.avoidable.get(model, 0) > 0),
            "avoidable_outside_batches": sum(r.avoidable.get(model, 0) for r in result.requests
                                             if not (r.batch or _in_batch_turn(r, result))),
            "agent_cost": sum(r.cost[model] for r in result.requests),
            "writer_cost": result.writer_cost[model],
            "agent_input": agent_input, "writer_input": writer["input"],
            "writer_read": writer["read"], "writer_uncached": writer["uncached"], "writer_output": writer["output"],
            "agent_output": sum(r.output for r in result.requests),
            "shares": [s for s, _ in firsts],
        }
    stats = result.stats
    written = stats.model_lines + stats.trimmed
    waits = [t.wait for t in result.turns]
    return {
        "pass": name, "turns": turns, "models": per_model,
        "waits": {"median": median(waits), "p90": percentile(waits, 0.9), "max": max(waits, default=0.0)},
        "refused": sum(1 for t in result.turns if t.refused),
        "writer": {"calls": stats.calls, "model_lines": written, "calls_per_line": stats.calls / max(1, written),
                   "trimmed": stats.trimmed, "invented": stats.invented, "offline_fallbacks": stats.offline_fallbacks,
                   "offline_lines": stats.offline_lines, "rejected": dict(stats.rejected)},
        "facts": {"planted": len(facts), "reachable": reached},
        "view_sizes": result.view_sizes, "view_bytes": view_bytes,
        "messages": memory.total, "simulated_hours": result.simulated_seconds / 3600,
        "real_seconds": result.real_seconds,
        "transcript": result.transcript if name == "auto" else None,
        "outputs": [[r.turn, r.step, r.output, r.at] for r in result.requests] if name == "auto" else None,
    }


def _in_batch_turn(row, result) -> bool:
    turn = result.turns[row.turn] if row.turn < len(result.turns) else None
    return bool(turn and turn.batch)


def run_baseline(kind: str, auto: dict, facts: list[str]) -> dict:
    """One baseline replayed over the ``auto`` pass's transcript (its own process)."""
    from baselines import MODELS, replay_baseline

    outputs = {(t, s): o for t, s, o, _ in auto["outputs"]}
    times = {(t, s): at for t, s, _, at in auto["outputs"]}
    r = replay_baseline(kind, auto["transcript"], outputs, times, WINDOW, facts)
    turns = len(auto["transcript"])
    return {
        "input_per_turn": r.input / turns,
        "models": {m: {"median": median(r.first_share[m]), "min": min(r.first_share[m], default=0.0),
                       "weighted": r.read[m] / max(1, r.input), "cost_per_turn": r.cost[m] / turns}
                   for m in MODELS},
        "waits": {"median": median(r.waits), "p90": percentile(r.waits, 0.9), "max": max(r.waits, default=0.0)},
        "summaries": r.summaries, "reviews": r.reviews, "facts": r.facts_reachable,
        "largest_request": r.largest_request,
    }


BASELINES = ("harness", "drop")


def run_all(turns: int, seed: int, names: list[str], jobs: int, writer: dict | None,
            writer_calls: int | None) -> tuple[dict, dict]:
    """Every pass, and the baselines as soon as the ``auto`` pass is done, on ``jobs`` processes.

    The ``auto`` pass goes first: the baselines need its transcript, so they
    then run beside the remaining passes instead of after all of them.
    """
    script = make_script(turns, seed)
    facts = [f for t in script for f in t.facts]
    names = sorted(names, key=lambda n: n != "auto")
    passes: dict[str, dict] = {}
    baselines: dict[str, dict] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_pass, name, turns, seed, writer, writer_calls): ("pass", name) for name in names}
        pending = set(futures)
        while pending:
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                kind, name = futures[future]
                if kind == "baseline":
                    baselines[name] = future.result()
                    continue
                passes[name] = future.result()
                print(f"[endless.simulate] pass {name} done in {passes[name]['real_seconds']:.0f} s",
                      file=sys.stderr)
                if name == "auto":
                    for baseline in BASELINES:
                        started = pool.submit(run_baseline, baseline, passes["auto"], facts)
                        futures[started] = ("baseline", baseline)
                        pending.add(started)
    return passes, {b: baselines[b] for b in BASELINES if b in baselines}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def partial_table(turns: int, passes: dict) -> str:
    """Without the ``auto`` pass (no baselines): each pass's cache shares, misses and waits."""
    lines = [f"### {turns} turns: {', '.join(passes)}", "",
             "| pass | cache model | turn share median (min) | avoidable misses outside batches | "
             "wait median / p90 / max (s) | refused |", "|---|---|---|---|---|---|"]
    for name, p in passes.items():
        for model, m in p["models"].items():
            lines.append(f"| {name} | {model} | {_pct(m['median'])} ({_pct(m['min'])}) | "
                         f"{m['avoidable_outside_batches']} tokens | {p['waits']['median']:.2f} / "
                         f"{p['waits']['p90']:.2f} / {p['waits']['max']:.2f} | {p['refused']} |")
    return "\n".join(lines)


def table(turns: int, passes: dict, baselines: dict, script_mix: dict) -> str:
    if "auto" not in passes:
        return partial_table(turns, passes)
    auto = passes["auto"]
    lines = [f"### {turns} turns (seed mix: {script_mix}; window {WINDOW:,} tokens; 3 chats)", ""]
    lines.append("| cache model | turn share median (min) | batch turns (median share) | run share, agent / with writer "
                 "| avoidable misses outside batches (requests) | writer share of bill |")
    lines.append("|---|---|---|---|---|---|")
    for name, model in (("auto", "deepseek"), ("auto", "openai-auto"), ("breakpoints", "openai-breakpoints"),
                        ("anthropic", "anthropic")):
        if name not in passes or model not in passes[name]["models"]:
            continue
        m = passes[name]["models"][model]
        bill = m["agent_cost"] + m["writer_cost"]
        lines.append(f"| {model} | {_pct(m['median'])} ({_pct(m['min'])}) | {m['batch_turns']} "
                     f"({_pct(m['batch_median'])}) | {_pct(m['weighted_agent'])} / {_pct(m['weighted_all'])} | "
                     f"{m['avoidable_outside_batches']} tokens ({m['avoidable_requests']}) | "
                     f"{_pct(m['writer_cost'] / bill if bill else 0.0)} |")
    w = auto["writer"]
    lines += ["", "| writer | value |", "|---|---|",
              f"| model calls per model-written line | {w['calls_per_line']:.2f} ({w['calls']} calls, "
              f"{w['model_lines']} lines) |",
              f"| lines trimmed | {w['trimmed']} |", f"| tries rejected for invented facts | {w['invented']} |",
              f"| offline fallbacks | {w['offline_fallbacks']} |"]
    lines += ["", "| waits before a turn (simulated s) | median | p90 | max | refused |", "|---|---|---|---|---|"]
    for name in ("auto", "back-to-back", "spec"):
        if name in passes:
            p = passes[name]
            label = {"auto": "Endless, gaps", "back-to-back": "Endless, back-to-back",
                     "spec": "(c) spec as written, gaps"}[name]
            lines.append(f"| {label} | {p['waits']['median']:.2f} | {p['waits']['p90']:.2f} | "
                         f"{p['waits']['max']:.2f} | {p['refused']} |")
    for kind, label in (("harness", "(a) harness summarises"), ("drop", "(b) drop oldest")):
        if kind in baselines:
            b = baselines[kind]
            lines.append(f"| {label} | {b['waits']['median']:.2f} | {b['waits']['p90']:.2f} | "
                         f"{b['waits']['max']:.2f} | 0 |")
    # Ratios to Endless.
    endless_input = (sum(r["agent_input"] for r in [auto["models"]["deepseek"]]) +
                     auto["models"]["deepseek"]["writer_input"]) / turns
    lines += ["", "| per turn, ratio to Endless | Endless | (a) harness | (b) drop oldest | (c) spec |",
              "|---|---|---|---|---|"]
    spec = passes.get("spec")
    spec_input = ((spec["models"]["deepseek"]["agent_input"] + spec["models"]["deepseek"]["writer_input"]) / turns
                  if spec else None)
    row = f"| input tokens per turn | {endless_input:,.0f} |"
    for kind in ("harness", "drop"):
        row += f" {baselines[kind]['input_per_turn'] / endless_input:.2f}× |" if kind in baselines else " – |"
    row += f" {spec_input / endless_input:.2f}× |" if spec_input else " – |"
    lines.append(row)
    for name, model in (("auto", "deepseek"), ("auto", "openai-auto"), ("breakpoints", "openai-breakpoints"),
                        ("anthropic", "anthropic")):
        if name not in passes:
            continue
        m = passes[name]["models"][model]
        mine = (m["agent_cost"] + m["writer_cost"]) / turns
        row = f"| cost per turn, {PRICE_NAMES[model]} | ${mine:.4f} |"
        for kind in ("harness", "drop"):
            row += (f" {baselines[kind]['models'][model]['cost_per_turn'] / mine:.2f}× |"
                    if kind in baselines and mine else " – |")
        if spec and model in spec["models"]:
            s = spec["models"][model]
            row += f" {((s['agent_cost'] + s['writer_cost']) / turns) / mine:.2f}× |" if mine else " – |"
        else:
            row += " – |"
        lines.append(row)
        row = f"| turn cache share median, {model} | {_pct(m['median'])} |"
        for kind in ("harness", "drop"):
            row += f" {_pct(baselines[kind]['models'][model]['median'])} |" if kind in baselines else " – |"
        row += f" {_pct(spec['models'][model]['median'])} |" if spec and model in spec["models"] else " – |"
        lines.append(row)
    facts = auto["facts"]
    row = f"| planted facts reachable word for word | {facts['reachable']}/{facts['planted']} |"
    for kind in ("harness", "drop"):
        row += f" {baselines[kind]['facts']}/{facts['planted']} |" if kind in baselines else " – |"
    row += f" {spec['facts']['reachable']}/{facts['planted']} |" if spec else " – |"
    lines.append(row)
    lines.append("")
    lines.append(f"Simulated {auto['simulated_hours']:.1f} h; real seconds per pass: " + ", ".join(
        f"{n} {p['real_seconds']:.0f}" for n, p in passes.items()) + "; "
        + (f"(a) made {baselines['harness']['summaries']} summarisation and {baselines['harness']['reviews']} "
           "review calls." if "harness" in baselines else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[201, 2000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--passes", nargs="+", default=list(PASSES), choices=PASSES)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--writer-base-url", help="a real OpenAI-compatible endpoint for the writer (real time)")
    parser.add_argument("--writer-model", help="the writer's model at --writer-base-url")
    parser.add_argument("--writer-calls", type=int, help="concurrent writer calls (a local server: 1)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    writer = None
    if args.writer_base_url:
        writer = {"provider": "openai", "model": args.writer_model or "local", "base_url": args.writer_base_url,
                  "api_key_env": "ENDLESS_WRITER_KEY", "timeout": 600.0}
    started = time.perf_counter()
    for turns in args.turns:
        script = make_script(turns, args.seed)
        print(f"[endless.simulate] {turns} turns: passes {', '.join(args.passes)} on {args.jobs} processes",
              file=sys.stderr)
        passes, baselines = run_all(turns, args.seed, args.passes, args.jobs, writer, args.writer_calls)
        print(table(turns, passes, baselines, mix_summary(script)))
        print()
        record = {"turns": turns, "seed": args.seed, "mix": mix_summary(script), "passes": {
            n: {k: v for k, v in p.items() if k not in ("transcript", "outputs")} for n, p in passes.items()},
            "baselines": baselines}
        (out / f"simulate-{turns}.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
        if turns == max(args.turns) and "auto" in passes:
            from pngchart import write_chart
            auto = passes["auto"]
            write_chart(out / f"simulate-{turns}.png",
                        [[auto["models"]["deepseek"]["shares"]], [[float(v) for v in auto["view_sizes"]]]])
    print(f"[endless.simulate] done in {time.perf_counter() - started:.0f} s; results in {out}/", file=sys.stderr)


if __name__ == "__main__":
    main()
