"""``endless config`` (the effective settings and their sources) and ``endless writer status|resume``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from endless.core.settings import MEANINGS, Settings, describe, load_settings
from endless.core.words import count
from endless.faces.kit.choose import ChoiceError, add_memory_arguments, choose


NOT_SET = "(not set)"
COLUMN_MAX = 24  # characters of the value and source columns before a long one overflows


def add_config_parser(sub: Any) -> None:
    config = sub.add_parser("config", help="show the effective settings and where each came from",
                            epilog="example:\n  endless config --json",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    config.add_argument("--json", action="store_true",
                        help="print [{name, value, source, meaning}] as JSON (value: null when not set)")
    config.set_defaults(run=_config)


def add_writer_parser(sub: Any) -> None:
    writer = sub.add_parser("writer", help="show the writer's spending, or lift its spend-cap pause for today",
                            epilog="example:\n  endless writer status --workspace ~/code/project",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    writer.add_argument("action", choices=["status", "resume"])
    add_memory_arguments(writer)
    writer.add_argument("--json", action="store_true", help="print JSON")
    writer.set_defaults(run=_writer)


def effective(settings: Settings) -> list[tuple[str, Any, str]]:
    """(name, value, source) as they take effect: ``home`` resolved to the folder memories live in,
    an empty ``writer_route`` as not set (None)."""
    rows = []
    for name, value, source in describe(settings):
        if name == "home":
            value = str(settings.memory_root().resolve())
        elif name == "writer_route" and not str(value).strip():
            value = None
        rows.append((name, value, source))
    return rows


def toml_value(value: Any) -> str:
    """A value as a person writes it in the TOML settings file (``true``, ``2.0``, ``"you"``)."""
    if value is None:
        return NOT_SET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return orjson.dumps(str(value)).decode()  # a JSON string is a TOML basic string


def source_words(source: str) -> str:
    """Where a value came from: ``default``, the settings file's path, or the variable's name."""
    if source.startswith("file "):
        return source[len("file "):]
    if source.startswith("env "):
        return source[len("env "):]
    return source


def _config(args: argparse.Namespace) -> int:
    settings = load_settings()
    rows = effective(settings)
    if args.json:
        sys.stdout.write(orjson.dumps([{"name": n, "value": v, "source": s, "meaning": MEANINGS[n]}
                                       for n, v, s in rows], option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    table = [(name, toml_value(value), source_words(source), MEANINGS[name]) for name, value, source in rows]
    # A long path or route overflows its column rather than widen it for every line.
    widths = [max((len(row[k]) for row in table if len(row[k]) <= COLUMN_MAX), default=0) for k in range(3)]
    for name, value, source, meaning in table:
        sys.stdout.write(f"{name:<{widths[0]}}  {value:<{widths[1]}}  {source:<{widths[2]}}  {meaning}\n")
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
