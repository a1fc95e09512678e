"""The provider simulator: HTTP-shaped requests in, provider-shaped answers out, on asyncio time.

One :class:`Simulator` serves OpenAI chat completions (``/v1/chat/completions``),
OpenAI responses (``/v1/responses``, ``/v1/responses/input_tokens``), Anthropic messages (``/v1/messages``, ``/v1/messages/count_tokens``) and the
model list (``/v1/models``, ``/v1/models/{id}``), each also without ``/v1``.
It is transport-agnostic: :mod:`endless.sim.transport` hands it the SDK
clients' requests in-process, :mod:`endless.sim.server` serves it over
loopback HTTP.

A **route** per model name says who answers (a scripted
:class:`~endless.sim.model.Responder`), which prompt cache the provider has (a
:class:`~endless.sim.model.CacheModel`, or None for no cache), the context
length and the provider *flavour* (which usage fields the OpenAI wire carries:
``"deepseek"`` adds ``prompt_cache_hit_tokens``/``prompt_cache_miss_tokens``).
The route ``"*"`` answers every model no other route names.

Per request, :meth:`Simulator.handle`: parses the body into a
:class:`~endless.sim.model.SimRequest`; tokenises it segment by segment; asks
the route's responder for a :class:`~endless.sim.model.SimReply`; asks the
cache model what was read and written (sent at the loop's time, first byte and
completion from the reply's latencies; failed and stalled replies are passed
``failed=True`` and write nothing); appends a record to the request log; then
waits the reply's latency with ``asyncio.sleep`` (on a
:class:`~endless.sim.clock.SimEventLoop` that costs no real time) and answers:
a whole body after ``duration``, or a stream whose first event comes after
``first_byte`` and whose last comes at ``duration``.  A stalled reply never
answers: the client's timeout ends it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping

import orjson

from . import wire_anthropic, wire_openai, wire_responses
from .model import CacheModel, CacheUsage, Responder, SimReply, SimRequest
from .wire import WireError, dumps, loads

log = logging.getLogger("endless.sim")

FLAVOURS = ("openai", "deepseek", "anthropic")
DEFAULT_ROUTE = "*"


@dataclass
class Route:
    """How one model answers: who replies, what cache the provider has, how long a context it takes."""

    responder: Responder
    cache: CacheModel | None = None
    context_length: int = 131_072
    flavour: str = "openai"  # "openai", "deepseek" or "anthropic"

    def __post_init__(self) -> None:
        if self.flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {self.flavour!r}; expected one of {FLAVOURS}")


class EchoResponder:
    """The plainest scripted model: answers every request at once with fixed text (``endless sim serve``'s
    fallback when no scripted models are installed)."""

    def __init__(self, text: str = "OK", first_byte: float = 0.0, duration: float = 0.0) -> None:
        self.text = text
        self.first_byte = first_byte
        self.duration = duration

    def reply(self, request: SimRequest, now: float) -> SimReply:
        return SimReply(text=self.text, first_byte=self.first_byte, duration=self.duration)


class ParrotResponder:
    """A broken model that answers every request with its last user message, word for word.

    Small local models behind a wrong chat template do this: asked for a
    summary they return the task, and asked again they return the retry
    message.  A writer must store neither.
    """

    def __init__(self) -> None:
        self.replies: list[str] = []  # every reply, in order, for tests to read

    def reply(self, request: SimRequest, now: float) -> SimReply:
        self.replies.append(request.last_user_text())
        return SimReply(text=self.replies[-1], first_byte=0.1, duration=0.2)


@dataclass
class SimResponse:
    """An answer ready to send: status, headers, then either a whole ``body`` or ``chunks`` to stream."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None

    async def aiter(self) -> AsyncIterator[bytes]:
        if self.chunks is None:
            if self.body:
                yield self.body
            return
        async for chunk in self.chunks:
            yield chunk

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter()])

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class _Prompt:
    tokens: Any  # list[int] or array
    block_ends: list[int]
    marks: dict[int, str]
    segment_ends: list[int]
    text: str
    mark_records: list[dict] = field(default_factory=list)


class Simulator:
    """Model providers in one object: see the module docstring.

    ``routes``: a mapping of model name → :class:`Route` (``"*"`` is the
    default), or a single :class:`Route` used for every model.  ``tokenizer``:
    anything with ``encode(text) -> list[int]`` (``encode_segments`` is used
    when present); default :func:`endless.sim.tokens.default_tokenizer`.
    ``log_path``: a JSONL file that gets one line per request, appended.
    ``clock``: a callable or an object with ``monotonic()`` giving the time
    the cache models and responders see; default the running loop's
    ``time()`` (simulated on a SimEventLoop).  ``advertise``: the model names
    ``GET /v1/models`` lists for the default route (named routes are always
    listed).  ``log_prompts=False`` leaves the prompt text out of the log
    records (long runs).  ``piece_chars``: about how many characters each
    streamed delta carries.
    """

    def __init__(self, routes: Mapping[str, Route] | Route, tokenizer: Any = None,
                 log_path: str | os.PathLike | None = None, clock: Any = None, *,
                 advertise: list[str] | None = None, log_prompts: bool = True,
                 piece_chars: int = 48, observer: Any = None) -> None:
        self.routes: dict[str, Route] = ({DEFAULT_ROUTE: routes} if isinstance(routes, Route)
                                         else dict(routes))
        if tokenizer is None:
            from .tokens import default_tokenizer
            tokenizer = default_tokenizer()
        self.tokenizer = tokenizer
        self.log_path = os.fspath(log_path) if log_path is not None else None
        self._clock = clock
        self.advertise = list(advertise) if advertise else []
        self.log_prompts = log_prompts
        self.piece_chars = piece_chars
        self.observer = observer
        self.records: list[dict] = []
        self._seq = itertools.count(1)
        self._log_lock = threading.Lock()
        self.responses = wire_responses.ResponseStore()  # for previous_response_id

    # -- time ------------------------------------------------------------------------

    def now(self) -> float:
        if self._clock is None:
            return asyncio.get_running_loop().time()
        if callable(self._clock):
            return float(self._clock())
        return float(self._clock.monotonic())

    @staticmethod
    def wall() -> float:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return time.time()
        clock = getattr(loop, "clock", None)
        return clock.wall() if clock is not None and hasattr(clock, "wall") else time.time()

    # -- routes ----------------------------------------------------------------------

    def route_for(self, model: str) -> tuple[str, Route] | None:
        if model in self.routes:
            return model, self.routes[model]
        if DEFAULT_ROUTE in self.routes:
            return DEFAULT_ROUTE, self.routes[DEFAULT_ROUTE]
        return None

    def models(self) -> list[tuple[str, int]]:
        """(name, context length) of every model ``GET /v1/models`` lists."""
        out = [(name, route.context_length) for name, route in self.routes.items() if name != DEFAULT_ROUTE]
        default = self.routes.get(DEFAULT_ROUTE)
        if default is not None:
            names = self.advertise or ([] if out else ["sim"])
            out.extend((name, default.context_length) for name in names if name not in self.routes)
        return out

    # -- tokens ----------------------------------------------------------------------

    def _encode(self, request: SimRequest) -> _Prompt:
        segments = request.segments
        encode_segments = getattr(self.tokenizer, "encode_segments", None)
        if encode_segments is not None:
            encoded = encode_segments(segments)
            tokens, block_ends, marks = encoded.tokens, list(encoded.block_ends), dict(encoded.marks)
            segment_ends = list(encoded.segment_ends)
        else:
            tokens, block_ends, marks, segment_ends = [], [], {}, []
            for segment in segments:
                tokens.extend(self.tokenizer.encode(segment.text))
                end = len(tokens)
                segment_ends.append(end)
                if segment.block_end and (not block_ends or block_ends[-1] != end):
                    block_ends.append(end)
                if segment.mark is not None:
                    marks[end] = segment.mark
        text = "".join(s.text for s in segments)
        prompt = _Prompt(tokens, block_ends, marks, segment_ends, text)
        chars = 0
        for segment, end in zip(segments, segment_ends):
            chars += len(segment.text)
            if segment.mark is not None:
                prompt.mark_records.append({"char": chars, "token": end, "mark": segment.mark})
        return prompt

    def _output_tokens(self, reply: SimReply) -> int:
        count = getattr(self.tokenizer, "count", None) or (lambda t: len(self.tokenizer.encode(t)))
        total = count(reply.text) if reply.text else 0
        for call in reply.tool_calls:
            total += count(call.name) + (count(call.arguments) if call.arguments else 0) + 4
        return total

    # -- the request log -------------------------------------------------------------

    def _record(self, record: dict) -> None:
        self.records.append(record)
        if self.log_path is not None:
            line = orjson.dumps(record) + b"\n"
            with self._log_lock, open(self.log_path, "ab") as handle:
                handle.write(line)
        usage = record.get("usage") or {}
        log.info("%.3f %s %s %s %s tokens=%s read=%s write=%s out=%s", record["time"], record["api"],
                 record["model"], "stream" if record["stream"] else "whole", record["status"],
                 record.get("tokens"), usage.get("read"), usage.get("write"), usage.get("output"))

    # -- handling --------------------------------------------------------------------

    async def handle(self, method: str, path: str, headers: Mapping[str, str] | None = None,
                     body: bytes | str | dict | None = None) -> SimResponse:
        """Answer one HTTP request (``path`` with or without ``/v1``, a query string is ignored)."""
        headers = {k.lower(): v for k, v in (headers or {}).items()}
        route_path = path.split("?", 1)[0].rstrip("/")
        if route_path.startswith("/v1/") or route_path == "/v1":
            route_path = route_path[3:]
        anthropic_client = "anthropic-version" in headers
        method = method.upper()
        api = "anthropic" if route_path.startswith("/messages") else "openai"
        try:
            if method == "GET" and route_path == "/models":
                return self._models(anthropic_client)
            if method == "GET" and route_path.startswith("/models/"):
                return self._model(route_path[len("/models/"):], anthropic_client)
            if method == "POST" and route_path == "/chat/completions":
                return await self._generate("openai", headers, body)
            if method == "POST" and route_path == "/messages":
                return await self._generate("anthropic", headers, body)
            if method == "POST" and route_path == "/responses":
                return await self._generate("responses", headers, body)
            if method == "POST" and route_path == "/responses/input_tokens":
                return self._count_response_tokens(body)
            if method == "POST" and route_path == "/messages/count_tokens":
                return self._count_tokens(body)
            api = "anthropic" if anthropic_client else api
            raise WireError(404, f"Unknown request URL: {method} {path}", code="unknown_url")
        except WireError as exc:
            return self._error(api, exc.status, exc.message, code=exc.code, param=exc.param,
                               retry_after=exc.retry_after)

    def _error(self, api: str, status: int, message: str, *, code: str | None = None,
               param: str | None = None, retry_after: float | None = None,
               request_id: str | None = None) -> SimResponse:
        if api == "anthropic":
            status, headers, body = wire_anthropic.error_response(status, message, retry_after=retry_after,
                                                                  request_id=request_id)
        else:
            status, headers, body = wire_openai.error_response(status, message, code=code, param=param,
                                                               retry_after=retry_after)
        return SimResponse(status, headers, body)

    @staticmethod
    def _json(value: Any, status: int = 200, extra: Mapping[str, str] | None = None) -> SimResponse:
        return SimResponse(status, {"content-type": "application/json", **(extra or {})}, dumps(value))

    def _models(self, anthropic_client: bool) -> SimResponse:
        if anthropic_client:
            return self._json(wire_anthropic.models_json(self.models(), "2026-01-01T00:00:00Z"))
        return self._json(wire_openai.models_json(self.models(), int(self.wall())))

    def _model(self, name: str, anthropic_client: bool) -> SimResponse:
        found = self.route_for(name)
        if found is None:
            raise WireError(404, f"The model '{name}' does not exist", code="model_not_found")
        length = found[1].context_length
        if anthropic_client:
            return self._json(wire_anthropic.model_json(name, length, "2026-01-01T00:00:00Z"))
        return self._json(wire_openai.model_json(name, length, int(self.wall())))

    def _count_tokens(self, body: Any) -> SimResponse:
        request = wire_anthropic.parse_request(self._body(body), count_only=True)
        return self._json({"input_tokens": len(self._encode(request).tokens)})

    def _count_response_tokens(self, body: Any) -> SimResponse:
        body = self._body(body)
        if isinstance(body, dict) and "model" not in body:
            body = {**body, "model": "sim"}  # the count endpoint does not require a model
        request, _ = wire_responses.parse_request(body, self.responses)
        return self._json({"object": "response.input_tokens", "input_tokens": len(self._encode(request).tokens)})

    @staticmethod
    def _body(body: Any) -> Any:
        if isinstance(body, (bytes, bytearray, str)):
            return loads(body) if body else None
        return body

    async def _generate(self, api: str, headers: dict[str, str], body: Any) -> SimResponse:
        items: list[dict] = []
        if api == "responses":
            request, items = wire_responses.parse_request(self._body(body), self.responses)
        else:
            wire = wire_anthropic if api == "anthropic" else wire_openai
            request = wire.parse_request(self._body(body))
        found = self.route_for(request.model)
        if found is None:
            raise WireError(404, f"The model '{request.model}' does not exist or you do not have access "
                                 f"to it.", code="model_not_found")
        route_name, route = found
        seq = next(self._seq)
        response_id = {"anthropic": f"msg_sim{seq:08d}", "responses": f"resp_sim{seq:08d}"}.get(
            api, f"chatcmpl-sim{seq:08d}")
        prompt = self._encode(request)
        length = len(prompt.tokens)
        sent_at = self.now()
        record: dict[str, Any] = {
            "seq": seq, "time": sent_at, "wall": self.wall(), "route": route_name, "api": api,
            "model": request.model, "stream": request.stream, "cache_key": request.cache_key,
            "prompt": prompt.text if self.log_prompts else None, "chars": len(prompt.text),
            "marks": prompt.mark_records, "tokens": length, "blocks": len(prompt.block_ends),
        }

        if length > route.context_length:
            message = (f"This model's maximum context length is {route.context_length} tokens. However, "
                       f"your messages resulted in {length} tokens.")
            if api == "anthropic":
                message = f"prompt is too long: {length} tokens > {route.context_length} maximum"
            record.update(status=400, usage=None, first_byte=0.0, latency=0.0, stall=False,
                          error=message, id=response_id)
            self._record(record)
            raise WireError(400, message, code="context_length_exceeded",
                            param="input" if api == "responses" else "messages")

        reply = route.responder.reply(request, sent_at)
        failed = reply.stall or reply.status != 200
        first_byte = max(0.0, reply.first_byte)
        duration = max(first_byte, reply.duration)
        if route.cache is not None:
            usage = route.cache.request(prompt.tokens, prompt.block_ends, prompt.marks, request.cache_key,
                                        sent_at, sent_at + first_byte, sent_at + duration, failed=failed)
        else:
            usage = CacheUsage(input=length, read=0)
        output = 0 if failed else self._output_tokens(reply)
        record.update(
            id=response_id, status=None if reply.stall else reply.status, stall=reply.stall,
            first_byte=first_byte, latency=None if reply.stall else (first_byte if failed else duration),
            error=reply.error or None,
            usage={"input": usage.input, "read": usage.read, "write": usage.write,
                   "write_1h": usage.write_1h, "uncached": usage.uncached, "output": output},
            reply={"text_chars": len(reply.text), "tool_calls": [c.name for c in reply.tool_calls]})
        self._record(record)
        if self.observer is not None:
            self.observer(request, prompt, record)

        if reply.stall:
            await asyncio.Event().wait()  # never set: the client's timeout (or disconnect) ends this
        if failed:
            await _sleep(first_byte)
            return self._error(api, reply.status, reply.error, retry_after=reply.retry_after,
                               request_id=response_id if api == "anthropic" else None)

        ids = {"request-id": response_id} if api == "anthropic" else {"x-request-id": response_id}
        if api == "responses" and request.raw.get("store", True) is not False:
            self.responses.put(response_id, wire_responses.stored_items(
                items, wire_responses.output_items(reply, response_id, request)))
        if not request.stream:
            await _sleep(duration)
            if api == "responses":
                payload = wire_responses.response_json(
                    request, wire_responses.output_items(reply, response_id, request),
                    wire_responses.usage_json(usage, output), response_id=response_id,
                    created=int(self.wall()))
            elif api == "anthropic":
                payload = wire_anthropic.message_json(request, reply, usage, output, response_id=response_id)
            else:
                payload = wire_openai.completion_json(request, reply, usage, output, response_id=response_id,
                                                      created=int(self.wall()), flavour=route.flavour)
            return self._json(payload, extra=ids)

        if api == "responses":
            events = wire_responses.stream_events(request, reply, usage, output, response_id=response_id,
                                                  created=int(self.wall()), piece_chars=self.piece_chars)
        elif api == "anthropic":
            events = wire_anthropic.stream_events(request, reply, usage, output, response_id=response_id,
                                                  piece_chars=self.piece_chars)
        else:
            events = wire_openai.stream_events(request, reply, usage, output, response_id=response_id,
                                               created=int(self.wall()), flavour=route.flavour,
                                               piece_chars=self.piece_chars)
        await _sleep(first_byte)
        gap = (duration - first_byte) / max(1, len(events) - 1)
        headers_out = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
                       **ids}
        return SimResponse(200, headers_out, chunks=_paced(events, gap))


async def _sleep(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


async def _paced(events: list[bytes], gap: float) -> AsyncIterator[bytes]:
    for index, event in enumerate(events):
        if index:
            await _sleep(gap)
        yield event
