"""``endless chat``: a minimal terminal chat with Endless memory, for trying Endless without Hermes.

Any OpenAI-compatible endpoint or Anthropic's (``--base-url``, ``--model``,
``--api-style``; the key from ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` or the
variable ``--key-env`` names, none for a server on this machine).  Every turn
goes through the turn protocol (:func:`endless.chat_loop.run_turn`): the view
instead of the history, the three look-back tools, the turn committed to the
workspace's memory.  The writer pool runs in the background on the chat's own
route (the route is recorded with the session, as DESIGN §3.4 says).

Lines are read from stdin, so the chat can be scripted; replies go to stdout,
everything else to stderr.  Ctrl-C during a reply stops the turn and keeps it
in the memory as ``stopped``, with the person's message; Ctrl-C at the prompt
ends the chat (exit 130), SIGTERM too (143, a running turn kept as stopped),
and so does the end of input: exit 0, or 1 when the last turn failed, with
its cause said in the person's words.  On a terminal, a line on stderr says
what a slow turn is waiting for.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import secrets
import signal
import sys
import threading
from typing import Any

from endless import prompts
from endless.core import diagnostics
from endless.core.store import durable
from endless.turn.run import run_turn
from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose
from endless.faces.kit.terminal import shown
from endless.faces.kit.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, exit_code, raise_on_sigterm
from endless.core.memory import Memory, MemoryUseError
from endless.core.store import Message
from endless.core.words import agree, count
from endless.core.view import state_line
from endless.turn.head import system_prompt, turn_tools
from endless.turn.protocol import Turn


def log(message: str) -> None:
    durable.log("chat", message)


class HeldDiagnostics(logging.Handler):
    """Diagnostics kept while the person may be typing, written out just before the next prompt.

    On a terminal the prompt and what the person types share a line; a log record written then
    (the writer pool speaks from the background at any time) would land in the middle of it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(diagnostics.FORMAT))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # logging holds self.lock around emit

    def write_out(self) -> None:
        with self.lock:
            lines, self.lines = self.lines, []
        for line in lines:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def turn_state(now: float) -> str:
    """Per-turn state (DESIGN §4, item 6): the time, which changes every turn."""
    moment = dt.datetime.fromtimestamp(now).astimezone()
    return state_line(moment.strftime('%A %Y-%m-%d %H:%M %Z').strip())


class Lines:
    """Stdin lines as an asyncio queue, read by a daemon thread (a blocked read never holds up the exit)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = loop
        threading.Thread(target=self._read, name="endless-chat-stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in sys.stdin:
                self._loop.call_soon_threadsafe(self.queue.put_nowait, line)
        except (OSError, ValueError):
            pass
        self._loop.call_soon_threadsafe(self.queue.put_nowait, None)


def stop_turn(turn: Turn, memory: Memory, text: str) -> None:
    """Keep a turn the person stopped: what it logged so far, closed as ``stopped``."""
    if turn.head is not None:  # the message is journalled: commit it with whatever the turn did
        turn.finish("", "stopped")
    else:  # stopped while waiting for the memory to catch up: keep the message anyway
        memory.commit_turn(turn.session, turn.title, [Message("user", text, memory.clock())], "stopped")


def failure_words(error: Any, route: Any) -> str:
    """What went wrong with the provider, and what to do, in the words the person types."""
    where = route.effective_base_url or "the provider's default address"
    detail = error.message
    status = f" ({error.status})" if error.status is not None else ""
    if error.kind == "connection":
        return f"cannot reach {where} ({detail}); is the server running there? Check --base-url"
    if error.kind == "auth":
        variable = route.key_env or "the key's variable"
        return f"{where} refused the key{status}: {detail}. Check the key in ${variable} (or --key-env)"
    if error.kind == "not_found":
        return f"{where} does not know model {route.model!r}{status}: {detail}. Check --model"
    if error.kind == "bad_request":
        return f"{where} refused the request{status}: {detail}"
    return (f"{where} is failing or busy ({error.kind}{status}: {detail}); try again in a while")


async def _say_progress(turn: Turn, memory: Memory) -> None:
    """On a terminal: after a second, one line on stderr saying what the turn waits for."""
    started = asyncio.get_running_loop().time()
    try:
        await asyncio.sleep(1.0)
        while True:
            seconds = asyncio.get_running_loop().time() - started
            if turn.waiting:
                _, stop = memory.views.written_prefix()
                behind = memory.total - stop
                what = (f"waiting for the memory to catch up ({count(behind, 'message', grouped=True)} "
                        f"without {agree(behind, 'a line', 'lines')})")
            else:
                what = "waiting for the model"
            sys.stderr.write(f"\r\033[K… {what}, {seconds:.0f} s")
            sys.stderr.flush()
            await asyncio.sleep(1.0)
    finally:
        if asyncio.get_running_loop().time() - started >= 1.0:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


async def chat(memory: Memory, provider: Any, route: Any, session: str, title: str, system: str,
               providers_factory: Any, interactive: bool, held: HeldDiagnostics | None = None) -> int:
    """The chat loop; ``held`` keeps diagnostics off the prompt's line (written before each prompt)."""
    from endless.writer.pool import WriterPool
    from endless.llm.errors import ProviderError

    loop = asyncio.get_running_loop()
    lines = Lines(loop)
    quit_ = asyncio.Event()
    current: dict[str, Any] = {"task": None, "stopping": False}
    ended = {"by": None, "failed": False}  # by: "interrupt" or "terminate"; failed: the last turn did

    def on_interrupt() -> None:
        task = current["task"]
        if task is not None and not task.done():
            current["stopping"] = True
            task.cancel()
        else:
            ended["by"] = "interrupt"
            quit_.set()

    def on_terminate() -> None:
        ended["by"] = "terminate"
        task = current["task"]
        if task is not None and not task.done():
            current["stopping"] = True
            task.cancel()
        quit_.set()

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    loop.add_signal_handler(signal.SIGTERM, on_terminate)
    stop_pool = asyncio.Event()
    pool = asyncio.ensure_future(WriterPool(memory, providers_factory).run(stop_pool))
    tools = turn_tools([])
    try:
        while True:
            if interactive:
                if held is not None:
                    held.write_out()
                print("you> ", end="", file=sys.stderr, flush=True)
            getter = asyncio.ensure_future(lines.queue.get())
            quitter = asyncio.ensure_future(quit_.wait())
            await asyncio.wait({getter, quitter}, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (getter, quitter):
                if not waiter.done():
                    waiter.cancel()
            if quit_.is_set() or getter.cancelled() or getter.result() is None:
                break
            text = getter.result().rstrip("\n")
            if not text.strip():
                continue
            turn = Turn(memory, session, title, system, tools)
            current.update(task=asyncio.ensure_future(
                run_turn(turn, text, provider, state=turn_state(memory.clock()), route=route.to_json())),
                stopping=False)
            progress = asyncio.ensure_future(_say_progress(turn, memory)) if sys.stderr.isatty() else None
            try:
                outcome = await current["task"]
            except asyncio.CancelledError:
                if not current["stopping"]:
                    raise
                stop_turn(turn, memory, text)
                log("stopped: the turn is kept in the memory as stopped")
                if ended["by"] == "terminate":
                    break
                continue
            except ProviderError as error:
                ended["failed"] = True
                log(f"the turn failed: {failure_words(error, route)}. It is kept in the memory as "
                    "interrupted; type again to retry.")
                continue
            finally:
                current["task"] = None
                if progress is not None:
                    progress.cancel()
                    await asyncio.gather(progress, return_exceptions=True)
            ended["failed"] = outcome.refused
            sys.stdout.write(shown(outcome.reply.rstrip("\n")) + "\n")  # a model may echo what it read
            sys.stdout.flush()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        stop_pool.set()
        await asyncio.gather(pool, return_exceptions=True)
        await provider.aclose()
        if held is not None:
            if interactive:
                sys.stderr.write("\n")  # off the last prompt's line
            held.write_out()
    if ended["by"] == "terminate":
        return EXIT_TERMINATED
    if ended["by"] == "interrupt":
        return EXIT_INTERRUPTED
    return EXIT_FAILED if ended["failed"] else EXIT_OK


def _chat_command(args: argparse.Namespace) -> int:
    raise_on_sigterm()  # until the chat's own loop takes Ctrl-C and SIGTERM over
    try:
        return _chat(args)
    except (KeyboardInterrupt, Terminated) as stop:
        return exit_code(stop)


def _chat(args: argparse.Namespace) -> int:
    from endless.llm.connect import make_provider
    from endless.llm.routes import Route, RouteError

    try:
        route = Route(args.api_style, args.model, base_url=args.base_url, api_key_env=args.key_env)
        provider = make_provider(route)
    except RouteError as exc:
        print(f"[endless.chat] {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        memory = choose(args, readonly=False, create=True)
    except ChoiceError as exc:
        print(f"[endless.chat] {exc}", file=sys.stderr)
        return EXIT_USAGE
    session = args.session or f"chat-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    title = args.title or f"Terminal chat {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}"
    system = system_prompt(args.system if args.system is not None else prompts.text("chat/system.txt").strip())
    with memory:
        try:
            if args.window:
                memory.set_window(args.window)
        except MemoryUseError as exc:
            print(f"[endless.chat] {exc}", file=sys.stderr)
            return EXIT_USAGE
        log(f"memory {memory.memory_id} ({count(memory.total, 'message')}), session {session!r}, "
            f"model {route.describe()}; Ctrl-C stops a reply, Ctrl-C again or Ctrl-D ends the chat")

        def providers(writer_route: Route):
            return make_provider(writer_route)

        interactive = sys.stdin.isatty()
        held = HeldDiagnostics() if interactive else None
        try:
            if held is None:
                return asyncio.run(chat(memory, provider, route, session, title, system, providers, False))
            with diagnostics.diverted_to(held):
                return asyncio.run(chat(memory, provider, route, session, title, system, providers, True, held))
        except (MemoryUseError, OSError) as exc:
            log(f"stopped: {exc}")
            return EXIT_FAILED
        finally:
            if held is not None:
                held.write_out()


def add_chat_parser(sub: Any) -> None:
    parser = sub.add_parser("chat", help="a minimal terminal chat with Endless memory on any OpenAI or Anthropic endpoint",
                            epilog="example:\n  endless chat --base-url http://127.0.0.1:8080/v1 --model qwen3",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=("Chat in the terminal with Endless memory for this workspace. Lines are read "
                                         "from stdin; replies go to stdout. Ctrl-C during a reply stops the turn (kept "
                                         "as stopped); Ctrl-C at the prompt or Ctrl-D ends the chat."))
    parser.add_argument("--base-url", required=True, help="the endpoint, e.g. https://api.deepseek.com or "
                                                          "http://127.0.0.1:8080/v1")
    parser.add_argument("--model", required=True, help="the model name the endpoint knows")
    parser.add_argument("--api-style", choices=("openai", "anthropic"), default="openai",
                        help="the wire format (default openai: any OpenAI-compatible server)")
    parser.add_argument("--key-env", metavar="NAME",
                        help="the environment variable holding the API key (default OPENAI_API_KEY or "
                             "ANTHROPIC_API_KEY; none needed on this machine)")
    add_memory_arguments(parser)
    parser.add_argument("--session", help="the session id (default: a new one)")
    parser.add_argument("--title", help="the chat's title in the memory")
    parser.add_argument("--system", help="the system prompt (default: prompts/chat/system.txt)")
    parser.add_argument("--window", type=int, metavar="TOKENS", help="the model's context window in tokens")
    parser.set_defaults(run=_chat_command)
