"""The ``endless`` command line.  Data goes to stdout, diagnostics to stderr."""

from __future__ import annotations

import argparse
import sys

import orjson

from endless import __version__
from endless.settings import SettingsError, describe, load_settings
from endless.sim.server import add_sim_parser


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
