"""The commands of the coding-agents face: ``endless claude …``, ``endless codex …``, ``endless hook …``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _root() -> Path:
    from endless.core.settings import load_settings

    return load_settings().memory_root()


def _setup_module(agent: str) -> Any:
    if agent == "claude":
        from endless.faces.agents import claude_setup as module
    else:
        from endless.faces.agents import codex_setup as module
    return module


def _setup_command(args: argparse.Namespace) -> int:
    module = _setup_module(args.agent)
    workspace = Path(args.workspace or ".").resolve()
    root = _root()
    name = {"claude": "Claude Code", "codex": "Codex"}[args.agent]
    try:
        if args.action == "install":
            files = module.install(root, args.scope, workspace)
            if args.json:
                sys.stdout.write(orjson.dumps({"installed": files, "scope": args.scope}).decode() + "\n")
            else:
                sys.stdout.write(f"{name} now captures into Endless and has its tools (zoom, date, recall_search); "
                                 f"changed: {', '.join(files)}\n"
                                 f"undo with `endless {args.agent} uninstall"
                                 + (" --scope user" if args.scope == "user" else "") + "`\n")
        elif args.action == "uninstall":
            said = module.uninstall(root, args.scope, workspace)
            if args.json:
                sys.stdout.write(orjson.dumps({"uninstalled": said, "scope": args.scope}).decode() + "\n")
            elif not said:
                sys.stdout.write(f"nothing to take back: Endless was not installed into {name} "
                                 f"at {args.scope} scope here\n")
            else:
                sys.stdout.write("\n".join(said) + "\n")
        else:
            found = module.status(root, args.scope, workspace)
            sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n")
    except module.SetupError as exc:
        print(f"[endless.{args.agent}] {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"[endless.{args.agent}] cannot change {exc.filename or 'a settings file'}: "
              f"{exc.strerror or exc}; nothing more was changed", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _hook(args: argparse.Namespace) -> int:
    from endless.faces.agents.hook import hook_command

    return hook_command(args)


def add_agent_parsers(sub: Any) -> None:
    for agent, name, files in (("claude", "Claude Code", ".claude/settings.json and .mcp.json"),
                               ("codex", "Codex", "config.toml and hooks.json")):
        parser = sub.add_parser(agent, help=f"capture {name} sessions into Endless and give it the look-back tools",
                                description=(f"Install (or take back) Endless in {name}: hooks that capture each "
                                             "session live into the folder's memory and hand over at a session's "
                                             f"start, and the MCP server with zoom, date and recall_search ({files}). "
                                             "Uninstall takes back exactly what install added."),
                                epilog=f"example:\n  endless {agent} install",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("action", choices=("install", "uninstall", "status"))
        parser.add_argument("--scope", choices=("project", "user"), default="project",
                            help="this folder only (default) or every folder of this user")
        parser.add_argument("--workspace", metavar="DIR", help="the project folder (default: the current folder)")
        parser.add_argument("--json", action="store_true", help="say what changed as JSON")
        parser.set_defaults(run=_setup_command, agent=agent)
    hook = sub.add_parser("hook", help="run by Claude Code's and Codex's hooks (reads the hook's JSON on stdin)",
                          description=("What an installed hook runs: captures the session's transcript into the "
                                       "folder's memory in the background and, at a session's start, prints the "
                                       "hand-over. Always exits 0; problems go to agents.log under the memory root."),
                          epilog="example:\n  echo '{\"session_id\":\"…\",\"transcript_path\":\"…\",\"cwd\":\".\"}' | "
                                 "endless hook claude Stop",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    hook.add_argument("agent", choices=("claude", "codex"))
    hook.add_argument("event", help="the hook event (SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd; "
                                    "Codex's notify program: notify)")
    hook.add_argument("payload", nargs="?", help="the hook's JSON as an argument (Codex's notify passes it so)")
    hook.set_defaults(run=_hook)
