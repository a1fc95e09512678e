"""``endless config`` (the effective settings and their sources) and ``endless writer status|resume``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from endless.core.settings import describe, load_settings
from endless.core.words import count
from endless.faces.cli.choose import ChoiceError, add_memory_arguments, choose


def add_config_parser(sub: Any) -> None:
    config = sub.add_parser("config", help="show the effective settings and where each came from")
    config.add_argument("--json", action="store_true", help="print JSON")
    config.set_defaults(run=_config)


def add_writer_parser(sub: Any) -> None:
    writer = sub.add_parser("writer", help="show the writer's spending, or lift its spend-cap pause for today")
    writer.add_argument("action", choices=["status", "resume"])
    add_memory_arguments(writer)
    writer.add_argument("--json", action="store_true", help="print JSON")
    writer.set_defaults(run=_writer)


def _config(args: argparse.Namespace) -> int:
    settings = load_settings()
    rows = describe(settings)
    if args.json:
        sys.stdout.write(orjson.dumps([{"name": n, "value": v, "source": s} for n, v, s in rows],
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    width = max(len(n) for n, _, _ in rows)
    for name, value, source in rows:
        sys.stdout.write(f"{name:<{width}}  {value!s:<24}  {source}\n")
    return 0


def _writer(args: argparse.Namespace) -> int:
    from endless.writer.spend import is_paused, lift_pause, read_pause
    from endless.writer.usage import UsageLog

    try:
        memory = choose(args, readonly=args.action == "status")
    except ChoiceError as exc:
        print(f"[endless] {exc}", file=sys.stderr)
        return 1
    with memory:
        now = time.time()
        if args.action == "resume":
            lift_pause(memory, now)
            print(f"[endless] the writer of memory {memory.memory_id} may spend past its cap for the rest of today",
                  file=sys.stderr)
        usage = UsageLog(memory.folder, readonly=True)
        cap = memory.settings.spend_cap_per_day
        spent = usage.spent_today(now)
        state = {"memoryId": memory.memory_id, "writerUsage": usage.totals(), "spentToday": spent,
                 "spendCap": cap, "paused": is_paused(memory, spent, cap, now),
                 "pause": read_pause(memory)}
    if args.json:
        sys.stdout.write(orjson.dumps(state, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        totals = state["writerUsage"]
        sys.stdout.write(f"memory {state['memoryId']}: {count(totals['calls'], 'writer call')}, "
                         f"{totals['cacheRead']} cached and {totals['miss']} uncached input tokens, "
                         f"{totals['output']} output, {totals['cost']:.4f} USD\n")
        cap_text = "no cap" if cap is None else f"cap {cap:.4f} USD"
        sys.stdout.write(f"today: {spent:.4f} USD spent, {cap_text}"
                         f"{', paused' if state['paused'] else ''}\n")
    return 0
