"""The simulator over loopback HTTP, for Hermes and other harnesses: ``endless sim serve``.

A Starlette app hands every request to :meth:`Simulator.handle` (which knows
``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``, ``/v1/models`` and the same
without ``/v1``); uvicorn serves it on 127.0.0.1 in real time.  A client that
hangs up ends its request, so a stalled reply does not linger.

Starlette and uvicorn are imported only when an app is built, so the command
line stays quick to start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
import sys
import threading
import time
from typing import Any, Iterator

from .simulator import EchoResponder, Route, Simulator

log = logging.getLogger("endless.sim")

CACHE_NAMES = ("deepseek", "openai-auto", "openai-breakpoints", "anthropic", "none")
_FLAVOUR_OF_CACHE = {"deepseek": "deepseek", "anthropic": "anthropic"}


def build_app(simulator: Simulator) -> Any:
    """A Starlette app that serves ``simulator`` on every path."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route as StarletteRoute

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        work = asyncio.ensure_future(simulator.handle(request.method, path, dict(request.headers), body))
        hangup = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({work, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hangup.cancel()
            if not work.done():
                work.cancel()
        if not work.done() or work.cancelled():
            return Response(status_code=499)
        answer = work.result()
        if answer.chunks is None:
            return Response(answer.body, status_code=answer.status, headers=answer.headers)
        return StreamingResponse(answer.aiter(), status_code=answer.status, headers=answer.headers)

    methods = ["GET", "POST"]
    return Starlette(routes=[StarletteRoute("/{path:path}", endpoint, methods=methods)])


async def _disconnected(request: Any) -> None:
    """Returns when the client hangs up (the request body has been read already)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


def _config(simulator: Simulator, host: str, port: int, log_level: str) -> Any:
    import uvicorn

    return uvicorn.Config(build_app(simulator), host=host, port=port, log_level=log_level,
                          access_log=False, lifespan="off")


def serve(simulator: Simulator, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Serve until interrupted (blocks)."""
    import uvicorn

    uvicorn.Server(_config(simulator, host, port, log_level)).run()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(simulator: Simulator, host: str = "127.0.0.1", port: int | None = None,
            timeout: float = 10.0) -> Iterator[str]:
    """Serve ``simulator`` from a thread for the ``with`` block; yields the base URL (``http://host:port``).

    Waits until the port accepts connections; shuts the server down after.
    """
    import uvicorn

    port = port or free_port(host)
    server = uvicorn.Server(_config(simulator, host, port, "warning"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # (older uvicorn)
    thread = threading.Thread(target=server.run, name=f"endless-sim-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                break
        except OSError:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"simulator server did not start on {host}:{port}") from None
            time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)


# -- the command line: ``endless sim serve`` --------------------------------------------------


def add_sim_parser(sub: Any) -> None:
    """Adds ``sim serve`` to the ``endless`` command's subparsers."""
    sim = sub.add_parser("sim", help="the provider simulator (for tests, benchmarks and the demo)",
                         epilog="example:\n  endless sim serve --port 18931 --log requests.jsonl",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = sim.add_subparsers(dest="sim_command")
    serve_parser = commands.add_parser("serve", help="serve simulated model providers on 127.0.0.1",
                                       epilog="example:\n  endless sim serve --port 18931 --log requests.jsonl",
                                       formatter_class=argparse.RawDescriptionHelpFormatter)
    serve_parser.add_argument("--port", type=int, required=True, help="TCP port (0: any free port)")
    serve_parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve_parser.add_argument("--cache", choices=CACHE_NAMES, default="deepseek",
                              help="the prompt-cache model every route uses (default deepseek)")
    serve_parser.add_argument("--flavour", choices=("openai", "deepseek", "anthropic"),
                              help="usage fields of the OpenAI wire (default: from --cache)")
    serve_parser.add_argument("--context-length", type=int, default=131_072,
                              help="context length every model reports and enforces (default 131072)")
    serve_parser.add_argument("--model", action="append", default=[],
                              help="a model name GET /v1/models lists (repeatable; every name is answered)")
    serve_parser.add_argument("--log", help="append the request log (JSONL) to this file")
    serve_parser.add_argument("--seed", type=int, default=0, help="seed of the scripted models (default 0)")
    serve_parser.add_argument("--latency", type=float,
                              help="median seconds per reply of the scripted models (default: theirs, "
                                   "about 1.5 s for turns and 2 s for writer calls)")
    serve_parser.set_defaults(run=_serve_command)
    sim.set_defaults(run=lambda args: (sim.print_help(), 0)[1])


def default_responder(seed: int = 0, latency: float | None = None) -> Any:
    """The scripted models (the writer for ``Compaction:`` requests, the agent for the rest), or a fixed
    answer where they are not installed.  ``latency``: the median seconds of both (their defaults if None)."""
    try:
        from .agent_model import ScriptedAgent
        from .responder import route_responder
        from .writer_model import ScriptedWriter
    except ImportError:  # pragma: no cover - the scripted models ship with the package
        return EchoResponder()
    medians = {} if latency is None else {"latency_median": latency}
    return route_responder(ScriptedWriter(seed=seed, **medians), ScriptedAgent(seed=seed, **medians))


def _serve_command(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[endless.sim] %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    cache = None
    if args.cache != "none":
        from .cache import make_cache
        cache = make_cache(args.cache)
    flavour = args.flavour or _FLAVOUR_OF_CACHE.get(args.cache, "openai")
    route = Route(default_responder(args.seed, args.latency), cache=cache,
                  context_length=args.context_length, flavour=flavour)
    simulator = Simulator(route, log_path=args.log, advertise=args.model)
    port = args.port or free_port(args.host)
    log.info("serving on http://%s:%d (cache %s, flavour %s, context %d)%s", args.host, port, args.cache,
             flavour, args.context_length, f", log {args.log}" if args.log else "")
    try:
        serve(simulator, args.host, port)
    except KeyboardInterrupt:
        pass
    return 0
