"""Serving the app: standalone (``endless serve``) or from a harness's process on a thread.

A harness plugin calls :func:`start_in_thread` once and gets the page's
one-time address and a ``stop()``; ``endless serve`` runs the same app in the
foreground and prints the address on stdout (logs go to stderr).
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from endless.core.store import durable
from endless.core.settings import Settings
from endless.faces.kit.choose import memory_id_word

HOST = "127.0.0.1"
START_SECONDS = 10.0


@dataclass
class Served:
    """A running server: ``url`` is the page's one-time address (with its token)."""

    url: str
    stop: Callable[[], None]
    port: int
    new_url: Callable[[], str]  # another one-time address, for a second browser
    app: Any = None  # the Starlette app (``app.state.endless`` holds its state)

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"


def bind_socket(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: any free port)."""
    # IPPROTO_TCP named: asyncio turns Nagle off only on sockets whose proto says TCP, and small
    # answers would otherwise wait for the client's delayed ACK (40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; choose another port "
                      "with --port or the rpc_port setting") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _server(app: Any, sock: socket.socket, settings: Settings, in_thread: bool = True) -> Any:
    """A uvicorn server for ``app`` on ``sock``.

    Standalone it uses uvicorn's fastest loop (uvloop where installed); in a
    harness's process it keeps plain asyncio, since uvloop would be installed as
    the process-wide event loop policy.  HTTP parsing uses httptools where
    installed (about half the CPU of h11 per request).
    """
    import uvicorn

    from endless.faces.rpc.guard import guarded_protocol

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            loop="asyncio" if in_thread else "auto", http=guarded_protocol(settings),
                            timeout_keep_alive=5, limit_concurrency=4096, backlog=2048,
                            proxy_headers=False, server_header=False)
    server = uvicorn.Server(config)
    if in_thread:  # signals belong to the harness's main thread
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # (older uvicorn)
    return server, [sock]


def start_in_thread(settings: Settings, port: int | None = None, *, root: Path | None = None,
                    current: str | None = None, sock: socket.socket | None = None) -> Served:
    """Serve the RPC and the History page from a background thread; returns once it accepts connections.

    ``port``: default ``settings.rpc_port`` (0: any free port).  ``current``:
    the memory id the page opens first.  Raises ``OSError`` if the port is taken.  ``sock``: a
    socket from :func:`bind_socket` already listening (a caller that checks its port before long work).
    """
    from endless.faces.rpc.app import create_app, issue_address

    app = create_app(settings, root=root, current=current)
    if sock is None:
        sock = bind_socket(settings.rpc_port if port is None else port)
    actual = sock.getsockname()[1]
    server, sockets = _server(app, sock, settings)
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets},
                              name=f"endless-rpc-{actual}", daemon=True)
    thread.start()
    app.state.endless.warm_up()
    deadline = time.monotonic() + START_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the Endless server did not start on {HOST}:{actual}")
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(START_SECONDS)
        app.state.endless.close()
        sock.close()

    return Served(issue_address(app, HOST, actual), stop, actual, lambda: issue_address(app, HOST, actual), app)


# -- the command line: ``endless serve`` ---------------------------------------------------------


def add_serve_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve the host RPC and the History page on 127.0.0.1",
                           epilog="example:\n  endless serve --port 8765",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--port", type=int, help="TCP port (default: the rpc_port setting; 0: any free port)")
    serve.add_argument("--memory", type=memory_id_word,
                       help="the memory the page opens first (default: this folder's, if any)")
    serve.set_defaults(run=_serve_command)


def _serve_command(args: argparse.Namespace) -> int:
    from endless.core.store import InvalidKey, find_memory, workspace_key
    from endless.core.memory import memories_dir
    from endless.faces.rpc import credential
    from endless.faces.rpc.app import create_app, issue_address
    from endless.core.settings import load_settings

    settings = load_settings()
    current = args.memory
    if current is None:
        try:
            found = find_memory(workspace_key(None, Path(".")), settings)
        except InvalidKey as exc:  # a bad .endless-id here: the page opens on no memory, and says why
            print(f"[endless.serve] {exc}", file=sys.stderr)
            found = None
        if found is not None and (memories_dir(settings.memory_root()) / found.memory_id / "key.json").exists():
            current = found.memory_id
    port = settings.rpc_port if args.port is None else args.port
    if not 0 <= port <= 65535:
        print(f"[endless.serve] --port must be from 0 to 65535, not {port}", file=sys.stderr)
        return 2
    from endless.faces.kit.signals import (Terminated, exit_code, raise_on_ctrl_c, raise_on_sigterm, stops_ask,
                                           stopped_code)

    raise_on_sigterm()  # uvicorn shuts down on a signal, then raises it again: it lands below
    raise_on_ctrl_c()  # uvicorn stops on Ctrl-C even when it was ignored: a stop is 130, never 0
    app = create_app(settings, current=current)
    try:
        sock = bind_socket(port)
    except OSError as exc:
        print(f"[endless.serve] {exc}", file=sys.stderr)
        return 2
    code = 0
    try:
        actual = sock.getsockname()[1]
        server, sockets = _server(app, sock, settings, in_thread=False)
        app.state.endless.warm_up()
        durable.log("serve", f"memories under {settings.memory_root()}; open the address below once "
                             "(it sets a cookie); Ctrl-C stops")
        durable.log("serve", f"hosts send the header Authorization: Bearer <the content of "
                             f"{credential.token_path(settings.memory_root())}>")
        sys.stdout.write(issue_address(app, HOST, actual) + "\n")
        sys.stdout.flush()
        # A Ctrl-C before uvicorn's loop started leaves its coroutine unrun: no warning about it.
        warnings.filterwarnings("ignore", message="coroutine .* was never awaited")
        with stops_ask(lambda: setattr(server, "should_exit", True)) as seen:
            server.run(sockets=sockets)  # a stop, even one before uvicorn's own handlers, ends it gracefully
        code = stopped_code(seen)
    except (KeyboardInterrupt, Terminated) as stop:
        code = exit_code(stop)
    finally:
        app.state.endless.close()
        sock.close()
    return code
