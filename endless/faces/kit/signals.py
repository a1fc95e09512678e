"""Stopping a command the way a person expects: Ctrl-C or SIGTERM, no traceback, no process left.

Ctrl-C raises ``KeyboardInterrupt`` in the main thread; SIGTERM, by default,
kills the process on the spot, before any ``finally`` runs, so worker
processes and the server socket would be left behind.  Here SIGTERM raises
:class:`Terminated` the same way, so every command cleans up on both, and
ends with the shell's codes for them (130 and 143).  A terminal's Ctrl-C
reaches the whole process group: worker processes ignore it and leave the
stopping to their parent, which shuts them down.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from typing import Any, Callable, Iterator

EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived (raised in the main thread, like ``KeyboardInterrupt`` for Ctrl-C)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def raise_on_sigterm() -> None:
    """From now on, SIGTERM raises :class:`Terminated` in the main thread (call it from there)."""
    signal.signal(signal.SIGTERM, _raise_terminated)


def raise_on_ctrl_c() -> None:
    """From now on, Ctrl-C raises ``KeyboardInterrupt`` in the main thread, even in a process started
    with SIGINT ignored (``nohup``, a script's background job, some CI runners): Python then never
    installs its handler, yet uvicorn catches SIGINT anyway, stops the server, and raises the signal
    again into the ignored disposition, so ``endless serve`` ended as if it had finished (exit 0).
    For commands that stop on SIGINT whatever they inherited; call it from the main thread."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def wait_for_stop() -> None:
    """Block the main thread until Ctrl-C or SIGTERM raises there (``KeyboardInterrupt``, :class:`Terminated`).

    The kernel hands a signal sent to the process to any of its threads.
    Python runs the handler in the main thread only, and a main thread asleep
    on a lock or in ``sleep`` does not wake for a signal another thread took:
    ``endless demo`` once ignored a SIGTERM for good that way.  Python's own C
    handler, in whichever thread caught the signal, writes its number to the
    wakeup fd, so the main thread sleeps on that pipe and runs the handler at
    once.  Call it from the main thread, after the handlers are set.
    """
    reader, writer = os.pipe()
    os.set_blocking(writer, False)  # the C handler must never block on a full pipe
    previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    try:
        while True:
            select.select([reader], [], [])
            os.read(reader, 512)  # the handler runs before the next line does
    finally:
        signal.set_wakeup_fd(previous)
        os.close(reader)
        os.close(writer)


@contextlib.contextmanager
def stops_ask(ask: Callable[[], None]) -> Iterator[list[int]]:
    """Inside the block Ctrl-C and SIGTERM call ``ask`` and are noted, never raised (main thread only).

    For an event loop run in the main thread (``endless serve``): an
    exception raised by a handler inside the loop escapes it past its tasks,
    and the loop is closed with the server's start-up half done (a
    ``Task was destroyed`` traceback on stderr, once in CI).  uvicorn
    installs its own handlers while it serves and raises a caught signal
    again after it shut down; both land here as a note.  Yields the signal
    numbers seen, for :func:`stopped_code`.
    """
    seen: list[int] = []

    def note(signum: int, frame: Any) -> None:
        seen.append(signum)
        ask()

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stopped_code(seen: list[int]) -> int:
    """The exit code for a run that noted the stops ``seen`` (0 when none came)."""
    if not seen:
        return 0
    return EXIT_TERMINATED if signal.SIGTERM in seen else EXIT_INTERRUPTED


def end_at_once_on_stop() -> None:
    """From now on, Ctrl-C and SIGTERM end the process at once with 130 or 143 (main thread only).

    For a read-only server whose event loop reads a blocking stream on a
    worker thread (``endless mcp`` on stdio): unwinding would wait for that
    read, which ends only when the client closes the stream, so a stop
    raised into the loop could hang.  Nothing of such a process needs
    finishing: it holds no lock and writes no file.  The main thread may be
    asleep in its event loop's poll when another thread catches the signal
    (see :func:`wait_for_stop`), so a thread of its own reads the signal's
    number from the wakeup fd and ends the process from there.
    """
    def end(signum: int) -> None:
        try:
            sys.stderr.flush()
        finally:
            os._exit(EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED)

    def watch(reader: int) -> None:
        while True:
            for signum in os.read(reader, 512):  # one byte a signal: its number
                if signum in (signal.SIGTERM, signal.SIGINT):
                    end(signum)

    signal.signal(signal.SIGTERM, lambda signum, frame: end(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: end(signum))
    reader, writer = os.pipe()
    os.set_blocking(writer, False)  # the C handler must never block on a full pipe
    signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    threading.Thread(target=watch, args=(reader,), name="endless-stop", daemon=True).start()


def quiet_worker() -> None:
    """In a worker process: ignore Ctrl-C, which the parent handles for the whole group."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def children_ignore_ctrl_c() -> Iterator[None]:
    """Processes started inside this block ignore Ctrl-C from their first instruction on.

    A spawned worker imports Python for a second or so before its own code
    runs; a terminal's Ctrl-C in that time killed it with a traceback.  An
    ignored signal stays ignored across ``exec``, so the parent ignores it
    for the moment it starts them (from the main thread only; elsewhere the
    workers' own ``quiet_worker`` has to do).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_code(stop: BaseException) -> int:
    """The exit code for a command stopped by ``stop`` (a Ctrl-C or a SIGTERM)."""
    return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
