"""The one contract every model call goes through, whichever SDK answers it.

The writer pool, turns, chat, replay and the Hermes plugin all call models,
and none of them should know which SDK is behind a route.  They hold a
:class:`Provider`, made by :func:`endless.llm.connect.make_provider` from a
:class:`~endless.llm.routes.Route`; its one call, ``await
provider.complete(request)``, sends a neutral
:class:`~endless.llm.request.Request` through the SDK
(``chat.completions.create`` or ``messages.create``, not streamed) and
returns a :class:`Completion`: the text, the token counts split by what the
prompt cache did (:class:`Usage`), the duration, the model and the stop
reason.  An SDK is imported only when a route needs it.

The two clients (:mod:`endless.llm.openai_api`,
:mod:`endless.llm.anthropic_api`) share what an SDK call does the same way
through the plain functions here, not a base class.  Both SDK generations
work: the current ones (``openai`` 3.x, ``anthropic`` 2.x on ``httpx2``) and
the ones Hermes 0.19.0 pins (``openai`` 2.24, ``anthropic`` 0.87 on
``httpx``).  ``http_client`` is passed through untouched, so a caller (or a
test, with :func:`endless.sim.transport.transport_for`) builds the one that
fits the installed SDK.  A keyword an installed SDK does not know is sent in
``extra_body`` instead, so an older SDK still sends it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from endless.llm.errors import provider_error
from endless.llm.request import Request, ToolCallOut
from endless.llm.routes import Route

# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Input tokens split by what the prompt cache did, and output tokens.

    ``cached`` read from the cache, ``uncached`` neither read nor written,
    ``cache_write`` written to the cache (billed extra on Anthropic and
    OpenAI GPT-5.6+); all three add up to the whole prompt.
    ``cache_write_long`` is the part of ``cache_write`` kept for the long
    time-to-live (Anthropic's 1 h), billed at its own price.
    """

    cached: int = 0
    uncached: int = 0
    cache_write: int = 0
    output: int = 0
    cache_write_long: int = 0

    @property
    def input(self) -> int:
        return self.cached + self.uncached + self.cache_write

    def to_json(self) -> dict:
        out = {"cached": self.cached, "uncached": self.uncached, "cache_write": self.cache_write,
               "output": self.output}
        if self.cache_write_long:
            out["cache_write_long"] = self.cache_write_long
        return out


@dataclass(frozen=True)
class Completion:
    """One answer: ``stop_reason`` is ``"stop"``, ``"length"``, ``"refusal"``, ``"tool_calls"``,
    ``"content_filter"`` or the provider's own word for anything else."""

    text: str
    usage: Usage
    duration: float
    model: str
    stop_reason: str
    tool_calls: tuple[ToolCallOut, ...] = ()  # a turn's calls (writer calls send tool choice none)


# -- the contract --------------------------------------------------------------------------------


class Provider(Protocol):
    """One route's client: ``await complete(request)``; ``await aclose()`` when done."""

    route: Route

    async def complete(self, request: Request) -> Completion:
        """Send ``request``; a :class:`Completion`, or :class:`~endless.llm.errors.ProviderError`
        after the SDK's retries."""
        ...

    async def aclose(self) -> None: ...


# -- what both clients do the same way -----------------------------------------------------------


def _clock_function(clock: Any) -> Callable[[], float]:
    if clock is None:
        def loop_time() -> float:
            try:
                return asyncio.get_running_loop().time()
            except RuntimeError:
                return time.monotonic()
        return loop_time
    if callable(clock):
        return clock
    if hasattr(clock, "monotonic"):
        return clock.monotonic
    raise TypeError(f"clock must be a callable or have monotonic(), not {clock!r}")


# Typed keywords that appeared in later SDK releases: an older SDK still sends them, in extra_body.
_OPTIONAL_KEYWORDS = ("prompt_cache_key", "prompt_cache_options", "reasoning_effort", "max_completion_tokens",
                      "thinking", "output_config")


@functools.lru_cache(maxsize=None)
def _keyword_names(function: Any) -> frozenset | None:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def fit_kwargs(method: Callable[..., Any], kwargs: dict) -> dict:
    """Optional keywords the installed SDK's method does not name go into ``extra_body`` (older SDKs)."""
    names = _keyword_names(getattr(method, "__func__", method))
    if names is None:
        return kwargs
    for key in _OPTIONAL_KEYWORDS:
        if key in kwargs and key not in names:
            kwargs.setdefault("extra_body", {})[key] = kwargs.pop(key)
    return kwargs


_BULK = ("system", "messages", "tools")


def bulk_in_extra_body(kwargs: dict) -> dict:
    """The same keywords, with the bulky plain-JSON ones sent through ``extra_body``.

    Both SDKs walk every typed argument with runtime type introspection before
    sending it (``_transform_recursive``), which for messages and tools of
    plain strings changes nothing yet costs about 37 ms of blocked event loop
    for a request with 80 content parts (openai-python, anthropic-sdk-python
    issue #1195).  ``extra_body`` is merged into the JSON body as it is, so the
    provider receives the very same body.  ``messages`` stays as an empty
    list, as both SDKs require the argument.
    """
    out = {key: value for key, value in kwargs.items() if key not in _BULK}
    extra = dict(kwargs.get("extra_body") or {})
    for key in _BULK:
        if key in kwargs:
            extra[key] = kwargs[key]
            if key == "messages":
                out[key] = []
    out["extra_body"] = extra
    return out


def as_int(value: Any) -> int:
    """A token count from an SDK's usage field; 0 when absent or not a number."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


async def complete_with(route: Route, now: Callable[[], float], kwargs: dict,
                        call: Callable[[dict], Awaitable[Any]], sdk_errors: tuple[type, ...],
                        parse: Callable[[Any, float], Completion], *,
                        overloaded: type | None = None) -> Completion:
    """``await call(kwargs)`` timed on ``now``, the answer ``parse``d with its duration.

    What ``sdk_errors`` catches (after the SDK's own retries) comes out as a
    :class:`~endless.llm.errors.ProviderError`; ``overloaded`` is the SDK's
    class for an overloaded server, if it has one.
    """
    started = now()
    try:
        response = await call(kwargs)
    except sdk_errors as exc:
        raise provider_error(exc, route, overloaded=overloaded) from exc
    return parse(response, now() - started)


async def close_client(client: Any) -> None:
    """Close an SDK client, whether its ``close`` is a coroutine or not."""
    close = getattr(client, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


class SDKClient:
    """What both providers hold: the route, the SDK's client, and the clock durations are read on.

    The one piece of state the two clients share; what differs (the wire
    form, the call, reading the answer) is each provider's own.
    """

    def __init__(self, route: Route, client: Any, clock: Any = None) -> None:
        self.route = route
        self.client = client
        self._now = _clock_function(clock)

    async def aclose(self) -> None:
        await close_client(self.client)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.route.describe()}>"
