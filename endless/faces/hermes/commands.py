"""``/endless …`` inside a Hermes chat and ``hermes endless …`` in the terminal.

Hermes owns ``/history``, so everything lives under ``/endless``.  Slash
handlers get only the text after the command (no session): the chat is found
in the front end that dispatched it (``internals.find_chat``), so the commands
work before a chat's first message, on the memory that message will go to.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from endless import prompts
from endless.core.words import agree, count
from endless.faces.hermes.runtime import log, runtime

USAGE = ("/endless history (the History page's address) | view | search <words> | status | "
         "forget <ids> | forget turn <n> | forget matching <words> (then again with confirm) | "
         "off (this chat runs on Hermes's own history) | on")
FORGET_SHOWN = 10  # messages a /endless forget lists before it is confirmed


def slash(raw_args: str = "") -> str:
    """The answer to ``/endless …``, through the terminal filter: Hermes prints it as it is, and
    it holds stored text (view lines, titles, snippets, messages to forget)."""
    from endless.faces.kit.terminal import shown

    return shown(_slash(raw_args))


def _slash(raw_args: str = "") -> str:
    from endless.core.errors import NoMemory
    from endless.faces.hermes.plugin import PLUGIN

    words = (raw_args or "").strip().split(None, 1)
    command = words[0].lower() if words else "status"
    rest = words[1] if len(words) > 1 else ""
    chat = PLUGIN.command_chat()
    if chat is None:  # not typed in a Hermes chat this build knows (SEAMS.md, seam 18)
        return ("Endless cannot tell which chat this command was typed in; "
                "send a message first, then run /endless again.")
    try:
        if command in ("off", "on"):
            held = _forgotten_in_transcript(PLUGIN, chat) if command == "off" else 0
            if held:
                return (f"Endless stays on for this chat: {count(held, 'message')} of it "
                        f"{agree(held, 'was', 'were')} forgotten while this Hermes runs, and Hermes still "
                        "holds their words in the chat's transcript in memory; with Endless off it would "
                        "send them to the model's provider with every request. Start a new chat (/new), or "
                        f"quit and resume this one (hermes --resume {chat.session}: Hermes reads the "
                        "transcript again from its state.db, where they are tombstones), then /endless off.")
            PLUGIN.switch(chat, on=command == "on")
            if command == "off":
                return ("Endless is off for this chat: from the next message Hermes sends its own history. "
                        "Turns meanwhile are not remembered. /endless on switches it back.")
            return "Endless is on for this chat again: the next message starts from its memory's view."
        if command not in ("history", "view", "search", "status", "forget"):
            return f"Unknown /endless command {command!r}. {USAGE}"
        if command == "search" and not rest.strip():
            return "Usage: /endless search <words>"
        if command == "forget" and not rest.strip():
            return "Usage: /endless forget <message ids> | turn <n> | matching <words>, then the same with confirm"
        try:
            memory = PLUGIN.command_memory(chat)
        except NoMemory:
            if command == "history":
                return history_address(None)
            where = "this folder" if chat.conversation is None else "this conversation"
            off = " Endless is off for this chat." if PLUGIN.is_off(chat) else ""
            return f"Endless has no memory for {where} yet: the first message starts it.{off}"
        if command == "history":
            return history_address(memory)
        if command == "view":
            return runtime().loop.call(render_view, memory)
        if command == "forget":
            answer = runtime().loop.call(forget_text, memory, rest)
            if PLUGIN.is_off(chat) and _forgotten_in_transcript(PLUGIN, chat):
                PLUGIN.switch(chat, on=True)  # off, the next request would send Hermes's transcript, words and all
                answer += ("\nEndless is on again for this chat: Hermes's transcript in memory still holds what "
                           "was forgotten, and with Endless off it would be sent to the provider. /new or "
                           f"hermes --resume {chat.session} starts from the tombstones; then /endless off.")
            return answer
        if command == "search":
            from endless.core import lookback
            return runtime().loop.call(lookback.call, memory, "recall_search", {"query": rest})
        return runtime().loop.call(status_text, memory, PLUGIN.is_off(chat))
    except Exception as exc:
        log(f"/endless {command} failed: {exc!r}")
        return f"/endless {command} failed: {exc}"


STARTED = time.time()  # this Hermes process's start: a forget before it is in the transcript Hermes loaded


def _forgotten_in_transcript(plugin, chat) -> int:
    """Messages of the chat's session forgotten since this Hermes started: their words are still in the
    transcript Hermes keeps in memory (forget reaches its state.db, not the running agent's list), which
    Hermes sends whole when Endless is off."""
    from endless.core.errors import NoMemory

    try:
        memory = plugin.command_memory(chat)
    except NoMemory:
        return 0

    def held() -> int:
        memory.catch_up()
        since = [mid for mid, at in memory.log.forgotten.items() if at >= STARTED]
        return sum(1 for mid in since if (m := memory.message(mid)) is not None and m.session == chat.session)

    return runtime().loop.call(held)


def forget_text(memory, rest: str) -> str:
    """``/endless forget …``: first what would go; only ``… confirm`` forgets (a chat has no dialog)."""
    from endless.core.privacy import forget, derived as forget_derived
    from endless.core.errors import MemoryUseError
    from endless.faces.kit import forgetting
    from endless.faces.kit.hermes_copy import HermesCopyError, installed

    words = rest.split()
    confirmed = bool(words) and words[-1].lower() == "confirm"
    words = words[:-1] if confirmed else words
    query = None
    try:
        if words and words[0].lower() == "matching":
            if len(words) < 2:
                return "Usage: /endless forget matching <words>"
            query = " ".join(words[1:])
            chosen = forget.select(memory, query=query)
        elif words and words[0].lower() == "turn":
            chosen = forget.select(memory, turns=[int(w) for w in words[1:]])
        else:
            chosen = forget.select(memory, ids=[int(w.split("+")[0]) for w in words])
        matched = forget_derived.matching(memory, query)
        if not chosen and not matched:
            return "Nothing to forget: no message matched (or it was forgotten already)."
        home = _hermes_home()  # Hermes's copy is changed first (see forget_value), and always from a chat
        copy = forgetting.hermes_copy(memory, home, chosen, not confirmed, query) if installed(home) else None
        outcome = forget.forget(memory, chosen, dry_run=not confirmed, purge=False, query=query)
        if confirmed:  # the index's merge takes a minute at a million messages: not on the chat's loop
            import threading
            threading.Thread(target=forget.purge_index, args=(memory,), name="endless-forget-merge",
                             daemon=True).start()
    except ValueError:
        return "Give message numbers (as /endless history and zoom show them), turn <n>, or matching <words>."
    except MemoryUseError as exc:
        return f"Nothing was forgotten: {exc}"
    except HermesCopyError as exc:
        return str(exc)
    reach = prompts.text("forget/unreachable_hermes.txt").strip() if copy else outcome.unreachable
    titles = f" and {count(len(outcome.titles), 'chat title')}" if outcome.titles else ""
    if not confirmed:
        shown = "\n".join([f"  {m.id} ({m.kind}): {m.text[:80]!r}" for m in outcome.previews[:FORGET_SHOWN]]
                          + [f"  title: {t[:80]!r}" for t in outcome.titles[:FORGET_SHOWN]])
        more = f"\n  … and {count(len(chosen) - FORGET_SHOWN, 'more message')}" if len(chosen) > FORGET_SHOWN else ""
        return (f"This would forget {count(len(chosen), 'message')}{titles} for good:\n{shown}{more}\n"
                + (f"Hermes's own copy goes too: {count(copy.rows, 'row')} of its state.db and "
                   f"{count(copy.files, 'session file')} get the tombstone"
                   + (f", {count(copy.titles, 'session title')} {agree(copy.titles, 'is', 'are')} cleared"
                      if copy.titles else "")
                   + " (a forget here always includes it).\n"
                   if copy else "")
                + f"To do it, send: /endless forget {rest.strip()} confirm\n"
                + (reach.split(". ", 1)[1] if copy else reach))
    hermes = (f"; Hermes's copy: {count(copy.rows, 'row')} of state.db, {count(copy.files, 'session file')}"
              + (f", {count(copy.titles, 'session title')} cleared" if copy.titles else "")
              if copy else "")
    return (f"Forgot {count(len(outcome.ids), 'message')}{titles}; their ids stay as tombstones and "
            f"{count(outcome.nodes, 'summary line')} are written again{hermes}. {reach}")


def _hermes_home() -> Path:
    """The home of the Hermes this runs in (its own rule, profiles included)."""
    try:
        from hermes_constants import get_hermes_home

        return Path(get_hermes_home())
    except ImportError:
        from endless.faces.kit.hermes_files import hermes_home

        return hermes_home()


def render_view(memory) -> str:
    memory.catch_up()
    text, _ = memory.views.render()
    return text or "(the memory is empty)"


def status_text(memory, off: bool = False) -> str:
    memory.catch_up()
    lines, p = memory.views.written_prefix()
    import time

    from endless.faces.kit.catching_up import writer_state
    from endless.turn.head import recent_bytes

    writer = writer_state(memory, time.time())  # who writes the lines now: this chat, a catch-up, nothing
    return (f"Endless memory {memory.memory_id} ({memory.key.agent} · {memory.key.project}): "
            f"{count(memory.turns, 'turn')}, {count(memory.total, 'message')}; "
            f"view {count(len(memory.views.view_lines()), 'line')}, {len(lines)} written; recent block {recent_bytes(memory)} of "
            f"{memory.settings.recent_block_bytes} bytes; writer: {writer.sentence}"
            + (f" ({writer.fix})" if writer.fix else "")
            + ("; OFF for this chat" if off else ""))


_SERVED: dict[str, Any] = {}


def history_address(memory) -> str:
    """The History page's one-time address, served in this process on the configured port."""
    try:
        from endless.faces.rpc import start_in_thread
    except ImportError:
        return ("The History page is not available in this build of Endless "
                "(it needs the endless.faces.rpc module).")
    rt = runtime()
    served = _SERVED.get("page")
    moved = ""
    if served is None:
        current = memory.memory_id if memory is not None else None
        try:
            served = start_in_thread(rt.settings, rt.settings.rpc_port, current=current)
        except OSError as exc:
            if rt.settings.rpc_port == 0:
                return f"The History page could not listen on 127.0.0.1 ({exc})."
            # the configured port is taken (another Hermes, an `endless serve`): any free one will do,
            # since the address is handed out here and the slash command has no --port
            log(f"the History page's port {rt.settings.rpc_port} is taken ({exc}); serving on a free one")
            try:
                served = start_in_thread(rt.settings, 0, current=current)
            except OSError as again:
                return f"The History page could not listen on 127.0.0.1 ({again})."
            moved = f" (port {rt.settings.rpc_port} is in use, so it is on {served.port})"
        _SERVED["page"] = served
        url = served.url
    else:
        url = served.new_url()  # each address works once
    where = f" (memory {memory.memory_id})" if memory is not None else ""
    from endless.faces.rpc import credential

    lifetime = rt.settings.rpc_page_token_seconds
    expires = count(round(lifetime / 60), "minute") if lifetime >= 120 else count(round(lifetime), "second")
    return (f"Endless History page{where}: {url}{moved}\n(open it within {expires}, in one browser; "
            f"programs of yours call its host RPC with the token in "
            f"{credential.token_path(served.app.state.endless.root)})")


# -- hermes endless … ------------------------------------------------------------------------


def setup_cli(parser: argparse.ArgumentParser) -> None:
    """``hermes endless memories|view|zoom|date|search|history`` (the ``endless`` read commands) and ``status``."""
    from endless.faces.kit.read_commands import add_read_parsers

    commands = parser.add_subparsers(dest="endless_command")
    add_read_parsers(commands)
    status = commands.add_parser("status", help="turns, messages, view and recent-block size of a memory")
    status.add_argument("--memory", help="a memory id (16 hex digits)")
    status.add_argument("--workspace", help="the workspace whose memory to use (default: this folder)")
    status.set_defaults(run=_status)


def run_cli(args: argparse.Namespace) -> int:
    """Runs the chosen command on this Hermes profile's memory of the workspace, and exits with its code.

    Hermes 0.19.0 calls the handler and drops what it returns
    (``hermes_cli/main.py:15314-15315``, then ``main()`` returns None: exit 0),
    so the code ``endless …`` exits with is given to ``sys.exit`` here.
    """
    sys.exit(_run_cli(args))


def _run_cli(args: argparse.Namespace) -> int:
    from endless.faces.hermes.internals import profile_name
    from endless.core.store import InvalidKey

    if not getattr(args, "run", None):
        print("usage: hermes endless {memories,view,zoom,date,search,history,status} ...", file=sys.stderr)
        return 2
    if hasattr(args, "memory") and not args.memory and profile_name() != "default":
        # a named profile's chats live under its own agent name (DESIGN 2.1)
        from endless.core.settings import load_settings
        from endless.faces.kit.choose import folder_memory_id

        try:
            args.memory = folder_memory_id(load_settings(), Path(args.workspace or "."), profile_name())
        except InvalidKey as exc:
            print(f"[endless] {exc}", file=sys.stderr)
            return 2
    try:
        return args.run(args)
    except BrokenPipeError:  # ``hermes endless view | head``: the reader left; nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file the command may not read, a link refused: one line, no traceback
        from endless.faces.kit.oserrors import os_error_said

        print(f"[endless] {os_error_said(exc)}", file=sys.stderr)
        return 1


def _status(args: argparse.Namespace) -> int:
    from endless.faces.hermes.internals import profile_name
    from endless.core.store import workspace_key
    from endless.core.memory import Memory, MemoryUseError
    from endless.core.settings import load_settings
    from endless.faces.kit.terminal import shown

    settings = load_settings()
    try:
        if args.memory:
            memory = Memory.open(memory_id=args.memory, settings=settings, readonly=True)
        else:
            key = workspace_key(profile_name(), Path(args.workspace or "."))
            memory = Memory.open(key, settings=settings, create=False, readonly=True)
    except (MemoryUseError, ValueError) as exc:
        print(f"[endless.hermes] {exc}", file=sys.stderr)
        return 1
    with memory:
        sys.stdout.write(shown(status_text(memory)) + "\n")
    return 0
