"""``/endless …`` inside a Hermes chat and ``hermes endless …`` in the terminal.

Hermes owns ``/history``, so everything lives under ``/endless``.  Slash
handlers get only the text after the command (no session), so they act on
the chat that ran the latest turn in this process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from endless.hermes.runtime import log, runtime

USAGE = ("/endless history (the History page's address) | view | search <words> | status | "
         "off (this chat runs on Hermes's own history) | on")


def slash(raw_args: str = "") -> str:
    from endless.hermes.plugin import PLUGIN

    words = (raw_args or "").strip().split(None, 1)
    command = words[0].lower() if words else "status"
    rest = words[1] if len(words) > 1 else ""
    session = PLUGIN.last_session
    try:
        if command in ("off", "on"):
            if not session:
                return "No chat has run a turn yet; send a message first."
            if command == "off":
                PLUGIN.off_sessions.add(session)
                return ("Endless is off for this chat: from the next message Hermes sends its own history. "
                        "Turns meanwhile are not remembered. /endless on switches it back.")
            PLUGIN.off_sessions.discard(session)
            return "Endless is on for this chat again: the next message starts from its memory's view."
        memory = PLUGIN.memory_for(session)
        if command == "history":
            return history_address(memory)
        if memory is None:
            return "Endless has no memory open for this chat yet; send a message first."
        if command == "view":
            return runtime().loop.call(render_view, memory)
        if command == "search":
            if not rest.strip():
                return "Usage: /endless search <words>"
            from endless import tools as lookback
            return runtime().loop.call(lookback.call, memory, "recall_search", {"query": rest})
        if command == "status":
            return runtime().loop.call(status_text, memory, session in PLUGIN.off_sessions)
    except Exception as exc:
        log(f"/endless {command} failed: {exc!r}")
        return f"/endless {command} failed: {exc}"
    return f"Unknown /endless command {command!r}. {USAGE}"


def render_view(memory) -> str:
    memory.refresh()
    text, _ = memory.render_view()
    return text or "(the memory is empty)"


def status_text(memory, off: bool = False) -> str:
    memory.refresh()
    lines, p = memory.written_prefix()
    from endless.turn import recent_bytes
    return (f"Endless memory {memory.memory_id} ({memory.key.agent} · {memory.key.project}): "
            f"{memory.turns} turns, {memory.total} messages; view {len(memory.view_lines())} lines, "
            f"{len(lines)} written; recent block {recent_bytes(memory)} of "
            f"{memory.settings.recent_block_bytes} bytes" + ("; OFF for this chat" if off else ""))


_SERVED: dict[str, Any] = {}


def history_address(memory) -> str:
    """The History page's one-time address, served in this process on the configured port."""
    try:
        from endless.rpc import start_in_thread
    except ImportError:
        return ("The History page is not available in this build of Endless "
                "(it needs the endless.rpc module).")
    rt = runtime()
    served = _SERVED.get("page")
    if served is None:
        served = start_in_thread(rt.settings, rt.settings.rpc_port)
        _SERVED["page"] = served
    url = getattr(served, "url_with_token", None) or getattr(served, "url", "")
    where = f" (memory {memory.memory_id})" if memory is not None else ""
    return f"Endless History page{where}: {url}"


# -- hermes endless … ------------------------------------------------------------------------


def setup_cli(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="endless_command")
    for name, helptext in (("view", "print the view of this workspace's memory"),
                           ("status", "turns, messages, view and recent-block size"),
                           ("search", "search this workspace's memory word for word")):
        command = commands.add_parser(name, help=helptext)
        command.add_argument("--memory", help="a memory id (16 hex digits)")
        command.add_argument("--workspace", help="the workspace whose memory to use (default: this folder)")
        if name == "search":
            command.add_argument("words", nargs="+")


def run_cli(args: argparse.Namespace) -> int:
    from endless.hermes.plugin import profile_name
    from endless.keys import workspace_key
    from endless.memory import Memory, MemoryError_
    from endless.settings import load_settings

    command = getattr(args, "endless_command", None) or "status"
    settings = load_settings()
    try:
        if getattr(args, "memory", None):
            memory = Memory.open(memory_id=args.memory, settings=settings, readonly=True)
        else:
            key = workspace_key(profile_name(), Path(getattr(args, "workspace", None) or "."))
            memory = Memory.open(key, settings=settings, create=False, readonly=True)
    except (MemoryError_, ValueError) as exc:
        print(f"[endless.hermes] {exc}", file=sys.stderr)
        return 1
    with memory:
        if command == "view":
            sys.stdout.write(render_view(memory) + "\n")
        elif command == "search":
            from endless import tools as lookback
            sys.stdout.write(lookback.call(memory, "recall_search", {"query": " ".join(args.words)}) + "\n")
        else:
            sys.stdout.write(status_text(memory) + "\n")
    return 0
