"""The ``endless`` command line.  Data goes to stdout, diagnostics to stderr."""

from __future__ import annotations

import argparse
import sys

import orjson

from endless import __version__
from endless.core.settings import SettingsError, describe, load_settings
from endless.faces.hermes.install import add_hermes_parser
from endless.demo.run import add_demo_parser
from endless.faces.cli.chat import add_chat_parser
from endless.faces.cli.doctor import add_doctor_parser
from endless.faces.importers.importer import add_import_parser
from endless.faces.mcp_server import add_mcp_parser
from endless.faces.cli.read import add_read_parsers
from endless.faces.rpc.serve import add_serve_parser
from endless.sim.server import add_sim_parser
from endless.faces.cli.choose import add_memory_arguments


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
    import time

    from endless.faces.cli.choose import ChoiceError, choose
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
        sys.stdout.write(f"memory {state['memoryId']}: {totals['calls']} writer calls, "
                         f"{totals['cacheRead']} cached and {totals['miss']} uncached input tokens, "
                         f"{totals['output']} output, {totals['cost']:.4f} USD\n")
        cap_text = "no cap" if cap is None else f"cap {cap:.4f} USD"
        sys.stdout.write(f"today: {spent:.4f} USD spent, {cap_text}"
                         f"{', paused' if state['paused'] else ''}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="endless", description=(
        "Endless keeps one AI conversation going forever: every turn logged word for word, "
        "summarised into a tree of lines, and shown to the model as a view that stays cached."))
    parser.add_argument("--version", action="version", version=f"endless {__version__}")
    sub = parser.add_subparsers(dest="command")
    config = sub.add_parser("config", help="show the effective settings and where each came from")
    config.add_argument("--json", action="store_true", help="print JSON")
    config.set_defaults(run=_config)
    add_sim_parser(sub)
    add_hermes_parser(sub)
    add_demo_parser(sub)
    add_mcp_parser(sub)
    add_doctor_parser(sub)
    add_import_parser(sub)
    add_chat_parser(sub)
    add_read_parsers(sub)
    add_serve_parser(sub)
    writer = sub.add_parser("writer", help="show the writer's spending, or lift its spend-cap pause for today")
    writer.add_argument("action", choices=["status", "resume"])
    add_memory_arguments(writer)
    writer.add_argument("--json", action="store_true", help="print JSON")
    writer.set_defaults(run=_writer)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except SettingsError as exc:
        print(f"[endless] {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
