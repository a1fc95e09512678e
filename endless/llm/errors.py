"""One error for every way a model call can fail, whichever SDK made it.

The SDKs retry and time out on their own (``max_retries`` and ``timeout``
from the route); what is left after them has to be told apart by callers
that know nothing of either SDK: the writer pool backs off on some kinds and
gives up on others, a turn or chat says what went wrong.  So every SDK error
comes out as one :class:`ProviderError` whose ``kind`` says what happened
(``rate_limit``, ``overloaded``, ``server``, ``timeout``, ``connection``,
``bad_request``, ``auth``, ``not_found``) and, when the provider said so, how
long to wait (``retry_after``).  Provider errors are never content rounds.
"""

from __future__ import annotations

import asyncio
import email.utils
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from endless.llm.routes import Route

ERROR_KINDS = ("rate_limit", "overloaded", "server", "timeout", "connection", "bad_request", "auth",
               "not_found")
RETRYABLE_KINDS = frozenset({"rate_limit", "overloaded", "server", "timeout", "connection"})


class ProviderError(Exception):
    """What the SDK raised once its own retries were spent, as one of :data:`ERROR_KINDS`.

    ``status``: the HTTP status, if there was an answer.  ``retry_after``:
    seconds the provider asked to wait (``retry-after-ms`` / ``retry-after``),
    or None.  ``retryable``: worth another call later (rate limits, overload,
    5xx, timeouts, connection failures); the rest need a person (bad request,
    key, model name).
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None,
                 retry_after: float | None = None, route: str | None = None) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown provider error kind {kind!r}")
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.route = route
        text = f"{kind}" + (f" ({status})" if status is not None else "") + f": {message}"
        if retry_after is not None:
            text += f" [retry after {retry_after:g} s]"
        if route:
            text = f"{route}: {text}"
        super().__init__(text)

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


def kind_for_status(status: int) -> str:
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status == 408:
        return "timeout"
    if status in (401, 402, 403):
        return "auth"  # 402: DeepSeek's "insufficient balance": a person has to act
    if status == 404:
        return "not_found"
    if status >= 500 or status == 409:
        return "server"
    return "bad_request"


def retry_after_from(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        value = headers.get("retry-after-ms")
        if value is not None:
            return max(0.0, float(value) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now())


def _sdk_classes(module_name: str) -> tuple[type, type, type] | None:
    """(APIStatusError, APITimeoutError, APIConnectionError) of an SDK, if it is imported."""
    module = sys.modules.get(module_name)
    if module is None:
        return None
    return module.APIStatusError, module.APITimeoutError, module.APIConnectionError


def provider_error(exc: BaseException, route: Route | None = None, *,
                   overloaded: type | None = None) -> ProviderError:
    """The :class:`ProviderError` for an exception the ``openai`` or ``anthropic`` SDK raised.

    ``overloaded``: the SDK's own class for an overloaded server (Anthropic's
    ``OverloadedError``), whatever its status; None: the status alone decides.
    """
    where = route.describe() if route is not None else None
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    for module_name in ("openai", "anthropic"):
        classes = _sdk_classes(module_name)
        if classes is None:
            continue
        status_error, timeout_error, connection_error = classes
        if isinstance(exc, timeout_error):  # a subclass of the connection error: test it first
            return ProviderError("timeout", message, route=where)
        if isinstance(exc, connection_error):
            cause = exc.__cause__ or exc.__context__
            detail = f"{message} ({type(cause).__name__}: {cause})" if cause else message
            return ProviderError("connection", detail, route=where)
        if isinstance(exc, status_error):
            status = int(exc.status_code)
            kind = "overloaded" if overloaded is not None and isinstance(exc, overloaded) \
                else kind_for_status(status)
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return ProviderError(kind, message, status=status, retry_after=retry_after_from(headers),
                                 route=where)
    for module_name in ("openai", "anthropic"):  # anything else the SDK raised: a reply it could not use
        module = sys.modules.get(module_name)
        if module is not None and isinstance(exc, module.APIError):
            status = getattr(exc, "status_code", None)
            return ProviderError("server", message, status=status, route=where)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return ProviderError("timeout", message, route=where)
    if isinstance(exc, (ConnectionError, OSError)):
        return ProviderError("connection", message, route=where)
    raise TypeError(f"not a provider error: {exc!r}") from exc
