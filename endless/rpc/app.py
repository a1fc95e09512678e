"""The host RPC and the History page: one Starlette app on 127.0.0.1 (DESIGN §6).

``POST /api/endless.<method>`` takes ``{"type": "client-request", "rpcId",
"method", "payload": {"args": {...}}}`` and answers ``{"type":
"server-response", "rpcId", "result": {"ok": true, "value"}}`` or ``"result":
{"ok": false, "error": {"code", "message"}}``.

Who may call, checked on every route before anything else:

* only loopback peers;
* ``Host`` must be the loopback address (or ``localhost``) and the port the
  server listens on, so a web page whose name was rebound to 127.0.0.1 is
  refused;
* the host RPC refuses any request with an ``Origin`` header (no web page may
  call it); the page's own ``POST /api/endless-ui.<method>`` routes (the five
  read methods) need the page's cookie *and* an ``Origin`` equal to the
  page's own origin.

Refusals before a method runs (a caller not allowed, a body too large or not
an envelope) get a 4xx status; once a method runs, the answer is HTTP 200 with
``ok`` true or false.  Besides the four codes of the DESIGN table a method may
end in ``endless/timeout`` (it ran past ``rpc_request_seconds``),
``endless/busy`` (too many searches and history pages queued) or
``endless/internal`` (a bug; the message never carries a stack trace, which
goes to stderr).

View, zoom, memories and bind run on a small thread pool of their own;
history pages and searches on another, bounded one, so a slow search cannot
hold up a view.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from endless import answers, durable
from endless.answers import AnswerError
from endless.rpc.readers import Readers
from endless.settings import Settings

TIMEOUT = "endless/timeout"
BUSY = "endless/busy"
INTERNAL = "endless/internal"
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})
RPC_METHODS = ("bind", "memories", "view", "zoom", "history", "search")
UI_METHODS = ("memories", "view", "zoom", "history", "search")
ARGS = {
    "bind": {"sessionId", "agent", "project", "agentName"},
    "memories": {"agent"},
    "view": {"memoryId"},
    "zoom": {"memoryId", "id", "n", "page"},
    "history": {"memoryId", "before", "limit"},
    "search": {"memoryId", "query", "limit"},
}
REQUIRED = {"bind": {"sessionId", "agent", "project"}, "memories": set(), "view": {"memoryId"},
            "zoom": {"memoryId", "id", "n"}, "history": {"memoryId"}, "search": {"memoryId", "query"}}
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


@dataclass
class PageKeys:
    """One-time tokens of the page's address, and the cookie values they were exchanged for."""

    tokens: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new_token(self) -> str:
        token = secrets.token_urlsafe(32)
        with self.lock:
            self.tokens.add(token)
        return token

    def redeem(self, token: str) -> str | None:
        """A new cookie value for a token not used before, else None (a token works once)."""
        with self.lock:
            match = next((t for t in self.tokens if secrets.compare_digest(t, token)), None)
            if match is None:
                return None
            self.tokens.discard(match)
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
        self.slow = ThreadPoolExecutor(settings.rpc_search_threads, thread_name_prefix="endless-rpc-slow")
        self._slow_waiting = 0
        self._slow_lock = threading.Lock()
        self.keys = PageKeys()

    def cookie_name(self, port: int) -> str:
        return f"endless_page_{port}"

    def close(self) -> None:
        self.quick.shutdown(wait=False, cancel_futures=True)
        self.slow.shutdown(wait=False, cancel_futures=True)
        self.readers.close()

    # -- running a method ------------------------------------------------------------

    def call(self, method: str, args: dict) -> Any:
        """Run one method on this thread; returns its value (or raw JSON bytes for the view)."""
        if method == "bind":
            return answers.bind(self.settings, args, self.root)
        if method == "memories":
            return answers.memories(self.settings, args, self.root, summary_of=self.readers.summary)
        reader = self.readers.get(args.get("memoryId"))
        if method == "view":
            return reader.view_json()
        if method == "zoom":
            return reader.zoom(args)
        if method == "history":
            return reader.history(args, self.settings)
        if method == "search":
            return reader.search(args, self.settings)
        raise AnswerError(answers.BAD_REQUEST, f"there is no method endless.{method}")

    async def run(self, method: str, args: dict) -> Any:
        loop = asyncio.get_running_loop()
        if method not in ("history", "search"):
            return await loop.run_in_executor(self.quick, self.call, method, args)
        with self._slow_lock:
            if self._slow_waiting >= self.settings.rpc_search_queue:
                raise AnswerError(BUSY, f"{self._slow_waiting} searches and history pages are "
                                        "waiting already; try again in a moment")
            self._slow_waiting += 1
        return await loop.run_in_executor(self.slow, self._slow_call, method, args)

    def _slow_call(self, method: str, args: dict) -> Any:
        # Counted until the work ends, even when its caller gave up waiting (a time limit).
        try:
            return self.call(method, args)
        finally:
            with self._slow_lock:
                self._slow_waiting -= 1


# -- envelopes ---------------------------------------------------------------------------


def _envelope(rpc_id: Any, result: bytes) -> bytes:
    return b'{"type":"server-response","rpcId":' + orjson.dumps(rpc_id) + b',"result":' + result + b"}"


def ok_body(rpc_id: Any, value: Any) -> bytes:
    raw = value if isinstance(value, bytes) else orjson.dumps(value)
    return _envelope(rpc_id, b'{"ok":true,"value":' + raw + b"}")


def error_body(rpc_id: Any, code: str, message: str) -> bytes:
    return _envelope(rpc_id, orjson.dumps({"ok": False, "error": {"code": code, "message": message}}))


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=_JSON, headers=_SECURITY_HEADERS)


# -- the checks -----------------------------------------------------------------------------


def _port(request: Request) -> int:
    server = request.scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0


def check_caller(request: Request) -> str:
    """Loopback peer and a loopback ``Host`` naming our port; returns the page's own origin."""
    client = request.client
    if client is None or client.host not in LOOPBACK:
        raise Refused(403, "only callers on this machine (loopback) may use this server")
    port = _port(request)
    host = request.headers.get("host", "")
    allowed = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    if host not in allowed:
        raise Refused(403, f"the Host header must be 127.0.0.1:{port} (this server's loopback address)")
    return f"http://{host}"


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Refused(400, "the Content-Length header is not a number")
        if int(declared) > limit:
            raise Refused(413, f"the request body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
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
    unknown = set(args) - ARGS[method]
    if unknown:
        raise Refused(400, f"endless.{method} takes no argument {', '.join(sorted(unknown))}; "
                           f"its arguments are {', '.join(sorted(ARGS[method])) or 'none'}", rpc_id)
    missing = REQUIRED[method] - {k for k, v in args.items() if v is not None}
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

    async def rpc(request: Request) -> Response:
        return await _handle(request, core, ui=False)

    async def ui(request: Request) -> Response:
        return await _handle(request, core, ui=True)

    async def page(request: Request) -> Response:
        try:
            check_caller(request)
        except Refused as refused:
            return _text(refused.message, refused.status)
        cookie_name = core.cookie_name(_port(request))
        token = request.query_params.get("token")
        if token:
            value = core.keys.redeem(token)
            if value is None:
                return _text("This address was used already or is not valid. Ask `endless serve` "
                             "(or your host) for a new one.", 403)
            target = "/" + (f"?memory={core.current}" if core.current else "")
            response = RedirectResponse(target, status_code=303, headers=_SECURITY_HEADERS)
            response.set_cookie(cookie_name, value, httponly=True, samesite="strict", path="/")
            return response
        if not core.keys.valid(request.cookies.get(cookie_name)):
            return _text("Open the address with a token that `endless serve` printed; it works once "
                         "and then this page remembers you.", 403)
        return _static("index.html")

    async def asset(request: Request) -> Response:
        try:
            check_caller(request)
        except Refused as refused:
            return _text(refused.message, refused.status)
        name = request.path_params["name"]
        if name not in STATIC or name == "index.html":
            return _text("not found", 404)
        return _static(name)

    routes = [Route("/", page, methods=["GET"]),
              Route("/static/{name}", asset, methods=["GET"]),
              Route("/api/endless.{method}", rpc, methods=["POST"]),
              Route("/api/endless-ui.{method}", ui, methods=["POST"])]
    app = Starlette(routes=routes)
    app.state.endless = core
    return app


async def _handle(request: Request, core: EndlessApp, ui: bool) -> Response:
    settings = core.settings
    rpc_id = None
    try:
        origin = check_caller(request)
        method = request.path_params["method"]
        allowed = UI_METHODS if ui else RPC_METHODS
        if method not in allowed:
            raise Refused(404, f"there is no method endless.{method} here; the methods are "
                               + ", ".join(f"endless.{m}" for m in allowed))
        sent_origin = request.headers.get("origin")
        if ui:
            if sent_origin != origin:
                raise Refused(403, "the page's routes answer only the page itself (Origin must be "
                                   f"{origin})")
            if not core.keys.valid(request.cookies.get(core.cookie_name(_port(request)))):
                raise Refused(403, "open the page's address with its token first (no valid cookie)")
        elif sent_origin is not None:
            raise Refused(403, "the host RPC refuses requests from web pages (an Origin header was sent)")
        if request.headers.get("content-type", _JSON).split(";")[0].strip().lower() != _JSON:
            raise Refused(415, "send the envelope as application/json")
        async with asyncio.timeout(settings.rpc_request_seconds):
            body = await read_body(request, settings.rpc_body_bytes)
            rpc_id, args = parse_envelope(body, method)
            value = await core.run(method, args)
        return _json(ok_body(rpc_id, value))
    except Refused as refused:
        return _json(error_body(refused.rpc_id if refused.rpc_id is not None else rpc_id,
                                answers.BAD_REQUEST, refused.message), refused.status)
    except AnswerError as exc:
        return _json(error_body(rpc_id, exc.code, exc.message))
    except TimeoutError:
        return _json(error_body(rpc_id, TIMEOUT, f"the request took longer than "
                                                 f"{settings.rpc_request_seconds:g} s and was abandoned"))
    except Exception:  # noqa: BLE001 - a bug must not leak a stack trace to the caller
        durable.log("rpc", "a request failed:\n" + traceback.format_exc())
        return _json(error_body(rpc_id, INTERNAL, "the server failed to answer; see its log"))


def _text(message: str, status: int) -> Response:
    return Response(message + "\n", status_code=status, media_type="text/plain; charset=utf-8",
                    headers=_SECURITY_HEADERS)


_static_cache: dict[str, bytes] = {}


def _static(name: str) -> Response:
    data = _static_cache.get(name)
    if data is None:
        data = _static_cache[name] = resources.files("endless.rpc").joinpath("static", name).read_bytes()
    return Response(data, media_type=_CONTENT_TYPES[name.rsplit(".", 1)[1]], headers=_SECURITY_HEADERS)


def issue_address(app: Starlette, host: str, port: int) -> str:
    """A new one-time address of the page (a token that becomes its cookie)."""
    return f"http://{host}:{port}/?token={app.state.endless.keys.new_token()}"

