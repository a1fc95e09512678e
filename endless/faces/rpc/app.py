"""The host RPC and the History page: one Starlette app on 127.0.0.1 (DESIGN §6).

``POST /api/endless.<method>`` takes ``{"type": "client-request", "rpcId",
"method", "payload": {"args": {...}}}`` and answers ``{"type":
"server-response", "rpcId", "result": {"ok": true, "value"}}`` or ``"result":
{"ok": false, "error": {"code", "message"}}``.

Who may call, checked on every route before anything else:

* only loopback peers;
* the host RPC needs ``Authorization: Bearer <token>``, the token in
  ``<root>/rpc-token`` (0600: only the memories' owner can read it), so other
  users of the machine can neither read memories nor bind sessions;
* ``Host`` must be the loopback address (or ``localhost``) and the port the
  server listens on, so a web page whose name was rebound to 127.0.0.1 is
  refused;
* the host RPC refuses any request with an ``Origin`` header (no web page may
  call it); the page's own ``POST /api/endless-ui.<method>`` routes (the five
  read methods, and ``forget`` for the page's Forget buttons) need the page's
  cookie *and* an ``Origin`` equal to the page's own origin.

Refusals before a method runs (a caller not allowed, a body too large or not
an envelope) get a 4xx status; once a method runs, the answer is HTTP 200 with
``ok`` true or false.  Besides the four codes of the DESIGN table a method may
end in ``endless/timeout`` (it ran past ``rpc_request_seconds``),
``endless/busy`` (too many searches and history pages queued) or
``endless/internal`` (a bug; the message never carries a stack trace, which
goes to stderr).

Every method is one entry of ``METHODS`` (its handler, arguments, whether the
page may call it, where it runs).  View and zoom run on the event loop itself
(a catch-up, then cached text or one record); memories and bind on a small
thread pool; history pages and searches in worker processes with a bounded
queue, so a slow search can neither hold the interpreter lock nor stand in
line before a view.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import html
import multiprocessing
import re
import secrets
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request, cookie_parser
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from endless.faces.kit import answers
from endless.core.store import durable
from endless.faces.kit.answers import AnswerError
from endless.faces.rpc import credential, readers
from endless.faces.rpc.readers import Readers
from endless.core.settings import Settings, search_workers
from endless.core.words import agree, count

TIMEOUT = "endless/timeout"
BUSY = "endless/busy"
INTERNAL = "endless/internal"
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})


class Runs(enum.Enum):
    """Where a method runs."""

    LOOP = "loop"  # on the event loop once its memory is open (short work); its first use on THREADS
    THREADS = "threads"  # the small thread pool
    PROCESSES = "processes"  # the worker processes, behind a bounded queue (endless/busy past it)


@dataclass(frozen=True)
class Method:
    """One method of the host RPC, ``POST /api/endless.<name>``."""

    name: str
    handler: Callable[[Readers, dict], Any]  # (the open readers, args) -> value (or raw JSON bytes)
    args: frozenset[str]  # the arguments it takes
    required: frozenset[str]  # the arguments it needs (not null)
    page: bool  # the page may call it too, on ``POST /api/endless-ui.<name>``
    runs: Runs


def _method(name: str, handler: Callable[[Readers, dict], Any], args: set[str], required: set[str],
            page: bool, runs: Runs) -> Method:
    return Method(name, handler, frozenset(args), frozenset(required), page, runs)


# The one table of the host RPC: the routes, the envelope checks, ``call`` and ``run`` all read it
# (in this order the refusals list the methods).
METHODS: dict[str, Method] = {m.name: m for m in (
    _method("bind", readers.bind, {"sessionId", "agent", "project", "agentName"},
            {"sessionId", "agent", "project"}, page=False, runs=Runs.THREADS),
    _method("memories", readers.memories, {"agent"}, set(), page=True, runs=Runs.THREADS),
    _method("view", readers.view, {"memoryId"}, {"memoryId"}, page=True, runs=Runs.LOOP),
    _method("zoom", readers.zoom, {"memoryId", "id", "n", "page"}, {"memoryId", "id", "n"},
            page=True, runs=Runs.LOOP),
    _method("history", readers.history, {"memoryId", "before", "from", "since", "limit"}, {"memoryId"},
            page=True, runs=Runs.PROCESSES),
    _method("search", readers.search, {"memoryId", "query", "limit", "offset", "below", "chat", "kind",
                                       "since", "before", "scope"}, {"memoryId", "query"},
            page=True, runs=Runs.PROCESSES),
    _method("forget", readers.forget, {"memoryId", "ids", "turns", "since", "before", "query", "dryRun"},
            {"memoryId"}, page=True, runs=Runs.THREADS),
)}


def method_named(name: str) -> Method:
    method = METHODS.get(name)
    if method is None:
        raise AnswerError(answers.BAD_REQUEST, f"there is no method endless.{name}")
    return method


RPC_ID_LIMIT = 200
STATIC = ("index.html", "app.css", "app.js")
_CONTENT_TYPES = {"html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
                  "js": "text/javascript; charset=utf-8"}
_SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
_JSON = "application/json"


class Refused(Exception):
    """A request turned away before any method ran."""

    def __init__(self, status: int, message: str, rpc_id: Any = None) -> None:
        super().__init__(message)
        self.status, self.message, self.rpc_id = status, message, rpc_id


EXPIRED = "expired"
_FORGET_AFTER = 50  # an unused token is forgotten after this many lifetimes (then it reads as used)


@dataclass
class PageKeys:
    """One-time tokens of the page's address (with when each was made), and the cookies they became.

    A token works once and only within ``lifetime`` seconds: an address left in
    a terminal's scrollback or a shell history is worthless by the time someone
    else finds it.
    """

    lifetime: float = 600.0
    clock: Callable[[], float] = time.monotonic
    tokens: dict[str, float] = field(default_factory=dict)
    sessions: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new_token(self) -> str:
        token = secrets.token_urlsafe(32)
        now = self.clock()
        with self.lock:
            for old in [t for t, made in self.tokens.items() if now - made > self.lifetime * _FORGET_AFTER]:
                del self.tokens[old]
            self.tokens[token] = now
        return token

    def redeem(self, token: str) -> str | None:
        """A new cookie value for a fresh token not used before; None if unknown or used;
        :data:`EXPIRED` if it was issued more than ``lifetime`` seconds ago."""
        with self.lock:
            match = next((t for t in self.tokens if secrets.compare_digest(t, token)), None)
            if match is None:
                return None
            made = self.tokens.pop(match)
            if self.clock() - made > self.lifetime:
                return EXPIRED
            value = secrets.token_urlsafe(32)
            self.sessions.add(value)
            return value

    def valid(self, cookie: str | None) -> bool:
        if not cookie:
            return False
        with self.lock:
            return any(secrets.compare_digest(s, cookie) for s in self.sessions)


class EndlessApp:
    """The state behind the routes: settings, open readers, thread pools and page keys."""

    def __init__(self, settings: Settings, root: Path | None = None, current: str | None = None) -> None:
        self.settings = settings
        self.root = Path(root) if root is not None else settings.memory_root()
        self.current = current
        self.readers = Readers(settings, self.root)
        self.quick = ThreadPoolExecutor(4, thread_name_prefix="endless-rpc")
        self._slow: ProcessPoolExecutor | None = None
        self._slow_waiting = 0
        self._slow_lock = threading.Lock()
        self.keys = PageKeys(settings.rpc_page_token_seconds)
        self.rpc_token = credential.ensure_token(self.root)

    @property
    def slow(self) -> ProcessPoolExecutor:
        """The worker processes for searches and history pages, started on first use."""
        with self._slow_lock:
            if self._slow is None:
                from endless.faces.rpc import workers
                self._slow = ProcessPoolExecutor(
                    search_workers(self.settings), mp_context=multiprocessing.get_context("spawn"),
                    initializer=workers.start, initargs=(self.settings, str(self.root)))
            return self._slow

    def warm_up(self) -> None:
        """Start the worker processes now, so the first search does not wait for them."""
        from endless.faces.rpc import workers
        from endless.faces.kit.signals import children_ignore_ctrl_c

        with children_ignore_ctrl_c():
            for _ in range(search_workers(self.settings)):
                self.slow.submit(workers.ready)

    def cookie_name(self, port: int) -> str:
        return f"endless_page_{port}"

    def close(self) -> None:
        self.quick.shutdown(wait=False, cancel_futures=True)
        with self._slow_lock:
            slow, self._slow = self._slow, None
        if slow is not None:
            slow.shutdown(wait=True, cancel_futures=True)
        self.readers.close()

    # -- running a method ------------------------------------------------------------

    def call(self, method: str, args: dict) -> Any:
        """Run one method on this thread; returns its value (or raw JSON bytes for the view)."""
        return method_named(method).handler(self.readers, args)

    async def run(self, method: str, args: dict) -> Any:
        loop = asyncio.get_running_loop()
        spec = method_named(method)
        if spec.runs is Runs.LOOP and self.readers.is_open(args.get("memoryId")):
            # Short work on an open memory (a catch-up, then cached text or one record): answered
            # on the event loop itself, so a queue of slower requests never stands before them.
            # A memory's first use (opening it) goes to the thread pool instead.
            return self.call(method, args)
        if spec.runs is not Runs.PROCESSES:
            return await loop.run_in_executor(self.quick, self.call, method, args)
        with self._slow_lock:
            if self._slow_waiting >= self.settings.rpc_search_queue:
                raise AnswerError(BUSY, f"{count(self._slow_waiting, 'search or history page', 'searches and history pages')} "
                                        f"{agree(self._slow_waiting, 'is', 'are')} waiting already; try again in a moment")
            self._slow_waiting += 1
        from endless.faces.rpc import workers
        try:
            future = self.slow.submit(workers.run, spec.handler, args)
        except BaseException:
            self._done_slow(None)
            raise
        # Counted until the work ends, even when its caller gave up waiting (a time limit).
        future.add_done_callback(self._done_slow)
        try:
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            with self._slow_lock:
                if self._slow is not None:
                    self._slow.shutdown(wait=False, cancel_futures=True)
                    self._slow = None  # a worker died: the next search starts new ones
            raise

    def _done_slow(self, _future: Any) -> None:
        with self._slow_lock:
            self._slow_waiting -= 1


# -- envelopes ---------------------------------------------------------------------------


def ok_parts(rpc_id: Any, value: Any) -> list[bytes]:
    """The success envelope in pieces: a value serialized once and kept (the view) is never copied."""
    raw = value if isinstance(value, bytes) else orjson.dumps(value)
    return [b'{"type":"server-response","rpcId":' + orjson.dumps(rpc_id) + b',"result":{"ok":true,"value":',
            raw, b"}}"]


def error_body(rpc_id: Any, code: str, message: str) -> bytes:
    return orjson.dumps({"type": "server-response", "rpcId": rpc_id,
                         "result": {"ok": False, "error": {"code": code, "message": message}}})


# -- the checks -----------------------------------------------------------------------------


def _port(scope: dict) -> int:
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0


def check_caller(scope: dict, host: str) -> str:
    """Loopback peer and a loopback ``Host`` naming our port; returns the page's own origin."""
    client = scope.get("client")
    if not client or client[0] not in LOOPBACK:
        raise Refused(403, "only callers on this machine (loopback) may use this server")
    port = _port(scope)
    if host not in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        raise Refused(403, f"the Host header must be 127.0.0.1:{port} (this server's loopback address)")
    return f"http://{host}"


async def read_body(receive: Any, headers: dict[str, str], limit: int) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (declared or not)."""
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Refused(400, "the Content-Length header is not a number")
        if int(declared) > limit:
            raise Refused(413, f"the request body is larger than {limit} bytes")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refused(400, "the client hung up before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def parse_envelope(body: bytes, method: str) -> tuple[Any, dict]:
    """``(rpcId, args)`` of a client request for ``endless.<method>``; refuses anything else."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise Refused(400, "the body is not JSON; send {\"type\": \"client-request\", \"rpcId\", "
                           "\"method\", \"payload\": {\"args\": {...}}}") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body must be a JSON object (a client-request envelope)")
    rpc_id = data.get("rpcId")
    if not (isinstance(rpc_id, str) and len(rpc_id) <= RPC_ID_LIMIT) and not (
            isinstance(rpc_id, int) and not isinstance(rpc_id, bool) and abs(rpc_id) < 2 ** 53):
        raise Refused(400, f"rpcId must be a string of at most {RPC_ID_LIMIT} characters or an integer")
    if data.get("type") != "client-request":
        raise Refused(400, "type must be \"client-request\"", rpc_id)
    if data.get("method") != f"endless.{method}":
        raise Refused(400, f"method must be \"endless.{method}\" on this route", rpc_id)
    payload = data.get("payload", {})
    if not isinstance(payload, dict):
        raise Refused(400, "payload must be an object holding args", rpc_id)
    args = payload.get("args", {})
    if not isinstance(args, dict):
        raise Refused(400, "payload.args must be an object of named arguments", rpc_id)
    spec = METHODS[method]
    unknown = set(args) - spec.args
    if unknown:
        raise Refused(400, f"endless.{method} takes no argument {', '.join(sorted(unknown))}; "
                           f"its arguments are {', '.join(sorted(spec.args)) or 'none'}", rpc_id)
    missing = spec.required - {k for k, v in args.items() if v is not None}
    if missing:
        raise Refused(400, f"endless.{method} needs {', '.join(sorted(missing))}", rpc_id)
    return rpc_id, args


# -- the routes -----------------------------------------------------------------------------


def create_app(settings: Settings, root: Path | None = None, current: str | None = None,
               state: EndlessApp | None = None) -> Starlette:
    """The app; ``root``: the memory root (default the settings'); ``current``: the memory the page opens first.

    ``app.state.endless`` is the :class:`EndlessApp`; ``app.state.endless.keys.new_token()`` makes a page token.
    """
    core = state or EndlessApp(settings, root, current)

    async def page(request: Request) -> Response:
        try:
            check_caller(request.scope, request.headers.get("host", ""))
        except Refused as refused:
            return _text(refused.message, refused.status)
        cookie_name = core.cookie_name(_port(request.scope))
        token = request.query_params.get("token")
        if token:
            value = core.keys.redeem(token)
            if value == EXPIRED:
                return _help_page("This address has expired",
                                  f"An address of the History page works for "
                                  f"{_minutes(core.settings.rpc_page_token_seconds)} after it is made, "
                                  "and this one is older; ask for a new one.", 403)
            if value is None:
                return _help_page("This address was used already",
                                  "Each address of the History page works once, in one browser; this one "
                                  "was opened before, or belongs to a server that has stopped since.", 403)
            target = "/" + (f"?memory={core.current}" if core.current else "")
            response = RedirectResponse(target, status_code=303, headers=_SECURITY_HEADERS)
            response.set_cookie(cookie_name, value, httponly=True, samesite="strict", path="/")
            return response
        if not core.keys.valid(request.cookies.get(cookie_name)):
            return _help_page("Open the History page with its address",
                              "The page opens only from the one-time address the server prints (it ends "
                              "in ?token=…); this browser has not opened one since this server started.", 403)
        return _static("index.html")

    async def asset(request: Request) -> Response:
        try:
            check_caller(request.scope, request.headers.get("host", ""))
        except Refused as refused:
            return _text(refused.message, refused.status)
        name = request.path_params["name"]
        if name not in STATIC or name == "index.html":
            return _not_found()
        return _static(name)

    async def not_found(request: Request, _exc: Exception) -> Response:
        try:
            check_caller(request.scope, request.headers.get("host", ""))
        except Refused as refused:
            return _text(refused.message, refused.status)
        return _not_found()

    routes = [Route("/", page, methods=["GET"]),
              Route("/static/{name}", asset, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):
        yield
        core.close()  # the worker processes and open memories end with the server

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(ApiRoutes, core=core)],
                    exception_handlers={404: not_found})
    app.state.endless = core
    return app


_API_PATH = re.compile(r"/api/(endless|endless-ui)\.([A-Za-z0-9_-]{1,64})")
# JSON is never rendered, so the page's policy headers are left off (uvicorn checks each header it sends).
_API_HEADERS = [(b"content-type", b"application/json"), (b"x-content-type-options", b"nosniff"),
                (b"cache-control", b"no-store")]


class ApiRoutes:
    """``POST /api/endless.<method>`` and ``/api/endless-ui.<method>`` as plain ASGI.

    Starlette's request and response objects and its routing cost about as
    much as a view or a zoom itself, so these two routes are answered here,
    before the router; every other path goes on to the Starlette app.
    """

    def __init__(self, app: Any, core: EndlessApp) -> None:
        self.app, self.core = app, core

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        status, parts = await _handle(scope, receive, self.core)
        length = sum(len(part) for part in parts)
        headers = _API_HEADERS + [(b"content-length", str(length).encode())]
        if status == 408:  # the rest of the body may never come: the connection ends with the answer
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if len(parts) == 1 or length < 16384:
            await send({"type": "http.response.body", "body": b"".join(parts)})
            return
        for k, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": k < len(parts) - 1})


async def _handle(scope: dict, receive: Any, core: EndlessApp) -> tuple[int, list[bytes]]:
    """``(status, body pieces)`` of one API request: the checks, the envelope, the method."""
    settings = core.settings
    rpc_id = None
    try:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        origin = check_caller(scope, headers.get("host", ""))
        route = _API_PATH.fullmatch(scope["path"])
        if route is None:
            raise Refused(404, f"there is no route {scope['path'][:80]}; the host RPC is POST /api/endless.<method>")
        ui, method = route.group(1) == "endless-ui", route.group(2)
        if scope["method"] != "POST":
            raise Refused(405, "send the envelope with POST")
        spec = METHODS.get(method)
        if spec is None or (ui and not spec.page):
            raise Refused(404, f"there is no method endless.{method} here; the methods are "
                               + ", ".join(f"endless.{m.name}" for m in METHODS.values() if m.page or not ui))
        sent_origin = headers.get("origin")
        if ui:
            if sent_origin != origin:
                raise Refused(403, "the page's routes answer only the page itself (Origin must be "
                                   f"{origin})")
            cookies = cookie_parser(headers.get("cookie", ""))
            if not core.keys.valid(cookies.get(core.cookie_name(_port(scope)))):
                raise Refused(403, "open the page's address with its token first (no valid cookie)")
        elif sent_origin is not None:
            raise Refused(403, "the host RPC refuses requests from web pages (an Origin header was sent)")
        elif not credential.matches(headers.get(credential.HEADER), core.rpc_token):
            raise Refused(401, "the host RPC needs its credential: send the header Authorization: Bearer "
                               f"<token>, the token being the content of {credential.token_path(core.root)} "
                               "(readable only by the memories' owner)")
        if headers.get("content-type", _JSON).split(";")[0].strip().lower() != _JSON:
            raise Refused(415, "send the envelope as application/json")
        async with asyncio.timeout(settings.rpc_request_seconds):
            try:
                async with asyncio.timeout(settings.rpc_body_seconds):
                    body = await read_body(receive, headers, settings.rpc_body_bytes)
            except TimeoutError:
                raise Refused(408, f"the request body did not arrive within {settings.rpc_body_seconds:g} s "
                                   "(the rpc_body_seconds setting)") from None
            rpc_id, args = parse_envelope(body, method)
            value = await core.run(method, args)
        return 200, ok_parts(rpc_id, value)
    except Refused as refused:
        return refused.status, [error_body(refused.rpc_id if refused.rpc_id is not None else rpc_id,
                                           answers.BAD_REQUEST, refused.message)]
    except AnswerError as exc:
        return 200, [error_body(rpc_id, exc.code, exc.message)]
    except TimeoutError:
        return 200, [error_body(rpc_id, TIMEOUT, f"the request took longer than "
                                                 f"{settings.rpc_request_seconds:g} s and was abandoned")]
    except OSError as exc:  # a file the server may not read, or a link it refuses: said, not a bug
        durable.log("rpc", f"a request failed on a file: {exc}")
        return 200, [error_body(rpc_id, INTERNAL, f"the server cannot use {exc.filename or 'a file'}: "
                                                  f"{exc.strerror or exc}; run `endless doctor` as the "
                                                  "memories' owner")]
    except Exception:  # noqa: BLE001 - a bug must not leak a stack trace to the caller
        durable.log("rpc", "a request failed:\n" + traceback.format_exc())
        return 200, [error_body(rpc_id, INTERNAL, "the server failed to answer; see its log")]


def _minutes(seconds: float) -> str:
    return count(round(seconds / 60), "minute") if seconds >= 120 else count(round(seconds), "second")


def _text(message: str, status: int) -> Response:
    return Response(message + "\n", status_code=status, media_type="text/plain; charset=utf-8",
                    headers=_SECURITY_HEADERS)


# How a person gets an address of the page, on every page that turns a browser away.
_HOW_TO_OPEN = ("To get an address, run <code>endless serve</code> in a terminal and open the address it "
                "prints, or type <code>/endless history</code> in a Hermes chat. An address works once, "
                "within minutes of being made; then this browser keeps the page open until the server stops.")


def _help_page(title: str, why: str, status: int) -> Response:
    """A small HTML page saying why the History page is not shown and how to open it.

    It carries no token, memory or path, keeps the page's security headers,
    and uses only the page's own stylesheet (the policy allows nothing else).
    """
    body = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">'
            f'<title>Endless · {html.escape(title)}</title><link rel="stylesheet" href="/static/app.css">'
            f'</head><body><main class="help"><h1>{html.escape(title)}</h1>'
            f'<p>{html.escape(why)}</p><p>{_HOW_TO_OPEN}</p></main></body></html>\n')
    return Response(body, status_code=status, media_type="text/html; charset=utf-8", headers=_SECURITY_HEADERS)


def _not_found() -> Response:
    return _help_page("There is no page at this address",
                      "This server shows the History page at its one-time address; other addresses "
                      "lead nowhere.", 404)


_static_cache: dict[str, bytes] = {}


def _static(name: str) -> Response:
    data = _static_cache.get(name)
    if data is None:
        data = _static_cache[name] = resources.files(__package__).joinpath("static", name).read_bytes()
    return Response(data, media_type=_CONTENT_TYPES[name.rsplit(".", 1)[1]], headers=_SECURITY_HEADERS)


def issue_address(app: Starlette, host: str, port: int) -> str:
    """A new one-time address of the page (a token that becomes its cookie)."""
    return f"http://{host}:{port}/?token={app.state.endless.keys.new_token()}"

