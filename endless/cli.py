"""The ``endless`` command line.  Data goes to stdout, diagnostics to stderr.

This is the one module above every layer: it wires each face's commands
together (the ``sim`` and ``demo`` commands come from the simulator and the
harness, which no face may import).  A command imports only its own module,
so ``endless search`` or ``endless --version`` never loads the simulator, the
demo, an SDK or a web server; only ``endless --help`` (and a mistyped
command) loads every parser, to list them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from endless import __version__

# (the commands a module adds, that module, the function that adds them), in --help order.
COMMANDS: list[tuple[tuple[str, ...], str, str]] = [
    (("config",), "endless.faces.cli.settings_cmd", "add_config_parser"),
    (("sim",), "endless.sim.server", "add_sim_parser"),
    (("hermes",), "endless.faces.hermes.install", "add_hermes_parser"),
    (("demo",), "endless.demo.run", "add_demo_parser"),
    (("mcp",), "endless.faces.mcp_server", "add_mcp_parser"),
    (("doctor",), "endless.faces.cli.doctor", "add_doctor_parser"),
    (("import",), "endless.faces.importers.importer", "add_import_parser"),
    (("capture",), "endless.faces.importers.live", "add_capture_parser"),
    (("catch-up",), "endless.faces.cli.catch_up", "add_catch_up_parser"),
    (("claude", "codex", "hook"), "endless.faces.agents.commands", "add_agent_parsers"),
    (("chat",), "endless.faces.cli.chat", "add_chat_parser"),
    (("memories", "view", "zoom", "date", "search", "history"), "endless.faces.kit.read_commands", "add_read_parsers"),
    (("forget",), "endless.faces.cli.forget_cmd", "add_forget_parser"),
    (("serve",), "endless.faces.rpc.serve", "add_serve_parser"),
    (("writer",), "endless.faces.cli.settings_cmd", "add_writer_parser"),
    (("completion",), "endless.faces.cli.completion", "add_completion_parser"),
]


def _command_word(argv: list[str]) -> str | None:
    """The command the person typed: the first word that is not an option (the top level has none
    taking a value)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with ``command``'s subcommand only, or with every command when it is None or unknown."""
    parser = argparse.ArgumentParser(prog="endless", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description=(
        "Endless keeps one AI conversation going forever: every turn logged word for word, "
        "summarised into a tree of lines, and shown to the model as a view that stays cached."))
    parser.add_argument("--version", action="version", version=f"endless {__version__}")
    # The completion command builds the parser of the command being typed, and nothing more.
    parser.set_defaults(parser_for=build_parser, command_names=[n for names, _, _ in COMMANDS for n in names])
    sub = parser.add_subparsers(dest="command")
    known = any(command in names for names, _, _ in COMMANDS)
    added: set[tuple[str, str]] = set()
    for names, module, function in COMMANDS:
        if known and command not in names:
            continue
        if (module, function) in added:
            continue
        added.add((module, function))
        adder: Any = getattr(importlib.import_module(module), function)
        adder(sub)
    if not known:
        parser.epilog = "examples (`endless COMMAND --help` for each):\n" + "\n".join(_examples(sub))
    return parser


def _examples(sub: Any) -> list[str]:
    """The example line of each command's ``--help``, gathered for ``endless --help``."""
    lines = []
    for name, command in sub.choices.items():
        epilog = command.epilog or ""
        example = next((line.strip() for line in epilog.splitlines()[1:] if line.strip()), None)
        if example:
            lines.append(f"  {example}")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if sys.stdout is None:  # started with stdout closed (`endless view >&-`): Python gives None, not a stream
        if sys.stderr is not None:
            print("[endless] standard output is closed (`>&-`), so there is nowhere to write the answer; "
                  "send it to a file, or to /dev/null to drop it (`> /dev/null`)", file=sys.stderr)
        return 1
    command = _command_word(argv)
    if command is None and "--version" in argv:
        print(f"endless {__version__}")
        return 0
    if command == "hook" and argv[:1] == ["hook"]:  # run by an agent at every turn: no parser to build
        from endless.faces.agents.hook import fast_main

        code = fast_main(argv[1:])
        if code is not None:
            return code
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    from endless.core.settings import SettingsError

    try:
        return args.run(args)
    except SettingsError as exc:
        print(f"[endless] {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of stdout left (``endless view | head``): nothing more to say, and nowhere to say
        # it; stdout goes to /dev/null so the interpreter's own flush at exit cannot fail either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file or folder we may not read, a link refused, a full disk
        from endless.faces.kit.oserrors import os_error_said

        print(f"[endless] {os_error_said(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
