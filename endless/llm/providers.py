"""Model providers for the writer: one small interface, two implementations on the official SDKs.

A :class:`Route` names who answers (``provider`` ``"openai"`` for every
OpenAI-compatible endpoint: OpenAI, DeepSeek, OpenRouter, vLLM, llama.cpp,
Ollama; ``"anthropic"`` for Claude), the model, where, which environment
variable holds the key, the cache-mark style (DESIGN §3.4) and the reasoning
effort.  :func:`make_provider` turns it into a :class:`Provider` whose one
call, ``await provider.complete(request)``, sends a neutral
:class:`endless.request.Request` through the SDK (``chat.completions.create``
or ``messages.create``, not streamed) and returns a :class:`Completion`: the
text, the token counts split by what the prompt cache did (:class:`Usage`),
the duration, the model and the stop reason.

Retries and timeouts are the SDKs' own (``max_retries`` and ``timeout`` from
the route); what is left after them comes out as one :class:`ProviderError`
whose ``kind`` says what happened (``rate_limit``, ``overloaded``, ``server``,
``timeout``, ``connection``, ``bad_request``, ``auth``, ``not_found``) and,
when the provider said so, how long to wait (``retry_after``).  The pool does
its own backoff on those kinds; provider errors are never content rounds.

Per-model knowledge (flavours and their default URLs and key variables, which
OpenAI models cache only at breakpoints, the lowest reasoning effort each
route accepts) lives in ``models.json`` beside this module, not here.

Both SDK generations work: the current ones (``openai`` 3.x, ``anthropic`` 2.x
on ``httpx2``) and the ones Hermes 0.19.0 pins (``openai`` 2.24, ``anthropic``
0.87 on ``httpx``).  ``http_client`` is passed through untouched, so a caller
(or a test, with :func:`endless.sim.transport.transport_for`) builds the one
that fits the installed SDK.  A keyword an installed SDK does not know is sent
in ``extra_body`` instead, so an older SDK still sends it.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import email.utils
import fnmatch
import functools
import inspect
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from endless.llm.request import MARK_STYLES, Request, ToolCallOut, to_anthropic, to_openai

PROVIDERS = ("openai", "anthropic")
FLAVOURS = ("openai", "deepseek", "openrouter", "vllm", "llamacpp", "ollama", "anthropic")
ERROR_KINDS = ("rate_limit", "overloaded", "server", "timeout", "connection", "bad_request", "auth",
               "not_found")
RETRYABLE_KINDS = frozenset({"rate_limit", "overloaded", "server", "timeout", "connection"})
LOCAL_KEY = "not-needed"  # what a local server (no key) is sent: the SDKs insist on some key
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GPT_VERSION = re.compile(r"^gpt-(\d+)(?:\.(\d+))?(?![\d])")


class RouteError(ValueError):
    """A route that cannot be used as given (bad field, unknown provider, missing key)."""


# -- the data file -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def model_table() -> dict:
    """``models.json`` beside this module: flavours, breakpoint models, reasoning rules."""
    text = resources.files(__package__).joinpath("models.json").read_text(encoding="utf-8")
    return json.loads(text)


def _bare(model: str) -> str:
    """The model name without a vendor prefix (``openai/gpt-5.6-sol`` → ``gpt-5.6-sol``), lower case."""
    return model.rsplit("/", 1)[-1].strip().lower()


def _matches(model: str, patterns: list[str] | str) -> bool:
    if isinstance(patterns, str):
        patterns = [patterns]
    name = _bare(model)
    return any(fnmatch.fnmatchcase(name, p.lower()) for p in patterns)


def _split_url(base_url: str | None) -> tuple[str, int | None]:
    if not base_url:
        return "", None
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").lower(), port


def is_local(base_url: str | None) -> bool:
    """A base URL on this machine (127.0.0.1, localhost, ::1): no key is needed."""
    host, _ = _split_url(base_url)
    if not host:
        return False
    return host in model_table()["local_hosts"] or host.endswith(".localhost") or host.startswith("127.")


def derive_flavour(provider: str, model: str, base_url: str | None) -> str:
    """Which OpenAI-compatible server this is, from the base URL (host, then port) and the model name."""
    if provider == "anthropic":
        return "anthropic"
    table = model_table()["flavours"]
    if not base_url:
        for name, spec in table.items():
            if spec["provider"] == "openai" and spec.get("models") and _matches(model, spec["models"]):
                return name
        return "openai"
    host, port = _split_url(base_url)
    for name, spec in table.items():
        if spec["provider"] != "openai":
            continue
        if any(host == h or host.endswith("." + h) for h in spec.get("hosts", [])):
            return name
    for name, spec in table.items():
        if spec["provider"] == "openai" and port is not None and port in spec.get("ports", []):
            return name
    if is_local(base_url):
        return model_table()["local_default_flavour"]
    return "openai"


def uses_openai_breakpoints(model: str) -> bool:
    """OpenAI models that cache only at explicit breakpoints: GPT-5.6 and later (models.json)."""
    match = _GPT_VERSION.match(_bare(model))
    if not match:
        return False
    version = (int(match.group(1)), int(match.group(2) or 0))
    return version >= tuple(model_table()["openai_breakpoints"]["since"])


def derive_style(provider: str, flavour: str, model: str) -> str:
    if provider == "anthropic":
        return "anthropic"
    if flavour == "openai" and uses_openai_breakpoints(model):
        return "openai-breakpoints"
    return "none"


# -- the route -----------------------------------------------------------------------------------


@dataclass
class Route:
    """Who writes: provider, model, endpoint, key variable, cache-mark style, reasoning effort.

    ``style`` and ``flavour`` are derived when not given (``None``):
    Anthropic → ``"anthropic"`` marks; OpenAI models gpt-5.6 and later →
    ``"openai-breakpoints"``; everything else ``"none"``.  The flavour comes
    from the base URL's host or port, else the model name.  ``reasoning``:
    ``"lowest"`` (the lowest the route accepts, per ``models.json``),
    ``"omit"`` (send nothing), or an explicit effort (``"off"``, ``"low"``,
    ``"high"`` …).  ``max_retries`` and ``timeout`` (seconds) go to the SDK.
    The key itself is never part of a route, only the name of the variable.
    """

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    style: str | None = None
    flavour: str | None = None
    reasoning: str = "lowest"
    max_retries: int = 1
    timeout: float = 300.0
    _derived: frozenset = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = _route_problems(self)
        if problems:
            raise RouteError(f"writer route {self.model!r}: " + "; ".join(problems))
        derived = set()
        if self.flavour is None:
            self.flavour = derive_flavour(self.provider, self.model, self.base_url)
            derived.add("flavour")
        if self.style is None:
            self.style = derive_style(self.provider, self.flavour, self.model)
            derived.add("style")
        self._derived = frozenset(derived)

    # -- (de)serialising --

    def to_json(self) -> dict:
        """A JSON-ready dict; derived ``style``/``flavour`` are left out (derived again on load). No key."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name.startswith("_") or f.name in self._derived:
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes) -> "Route":
        """A route from :meth:`to_json`'s dict (or its JSON text); :class:`RouteError` says what is wrong."""
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise RouteError(f"writer route: not valid JSON ({exc})") from None
        if not isinstance(data, Mapping):
            raise RouteError(f"writer route: expected a JSON object, got {type(data).__name__}")
        if "api_key" in data or "key" in data:
            raise RouteError("writer route: an API key does not belong in a route; put it in an environment "
                             "variable and name that variable in 'api_key_env'")
        known = {f.name for f in fields(cls) if not f.name.startswith("_")}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RouteError(f"writer route: unknown field(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(sorted(known))}")
        for required in ("provider", "model"):
            if required not in data:
                raise RouteError(f"writer route: missing field {required!r}")
        return cls(**dict(data))

    # -- what it means --

    @property
    def local(self) -> bool:
        return is_local(self.effective_base_url)

    @property
    def effective_base_url(self) -> str | None:
        """The base URL given, else the flavour's default (None: the SDK's own)."""
        if self.base_url:
            return self.base_url
        return model_table()["flavours"].get(self.flavour or "", {}).get("base_url")

    @property
    def key_env(self) -> str | None:
        """The environment variable the key is read from: ``api_key_env``, else the flavour's default."""
        if self.api_key_env:
            return self.api_key_env
        return model_table()["flavours"].get(self.flavour or "", {}).get("key_env")

    def describe(self) -> str:
        where = self.effective_base_url
        return f"{self.provider}/{self.flavour} {self.model}" + (f" at {where}" if where else "")


def _route_problems(route: Route) -> list[str]:
    problems = []
    if route.provider not in PROVIDERS:
        problems.append(f"unknown provider {route.provider!r} (expected one of {', '.join(PROVIDERS)})")
    if not isinstance(route.model, str) or not route.model.strip():
        problems.append("model must be a non-empty string")
    if route.base_url is not None and (not isinstance(route.base_url, str)
                                       or not route.base_url.startswith(("http://", "https://"))):
        problems.append(f"base_url must be an http:// or https:// URL, not {route.base_url!r}")
    if route.api_key_env is not None and (not isinstance(route.api_key_env, str)
                                          or not _ENV_NAME.match(route.api_key_env)):
        problems.append(f"api_key_env must be an environment variable name, not {route.api_key_env!r}")
    if route.style is not None and route.style not in MARK_STYLES:
        problems.append(f"unknown style {route.style!r} (expected one of {', '.join(MARK_STYLES)})")
    if route.flavour is not None:
        if route.flavour not in FLAVOURS:
            problems.append(f"unknown flavour {route.flavour!r} (expected one of {', '.join(FLAVOURS)})")
        elif (route.flavour == "anthropic") != (route.provider == "anthropic") and route.provider in PROVIDERS:
            problems.append(f"flavour {route.flavour!r} does not go with provider {route.provider!r}")
    if not isinstance(route.reasoning, str) or not route.reasoning.strip():
        problems.append("reasoning must be 'lowest', 'omit' or an effort name")
    if isinstance(route.max_retries, bool) or not isinstance(route.max_retries, int) or route.max_retries < 0:
        problems.append(f"max_retries must be a whole number ≥ 0, not {route.max_retries!r}")
    if isinstance(route.timeout, bool) or not isinstance(route.timeout, (int, float)) or not route.timeout > 0:
        problems.append(f"timeout must be a positive number of seconds, not {route.timeout!r}")
    return problems


# -- reasoning -----------------------------------------------------------------------------------


def _merge(into: dict, extra: Mapping[str, Any]) -> dict:
    for key, value in extra.items():
        if key == "extra_body":
            into.setdefault("extra_body", {}).update(copy.deepcopy(value))
        else:
            into[key] = copy.deepcopy(value)
    return into


def openai_reasoning_rule(model: str) -> dict | None:
    """The ``models.json`` rule of an OpenAI reasoning model (o-series, gpt-5*, gpt-6* …), else None."""
    for rule in model_table()["openai"]["reasoning_models"]:
        if _matches(model, rule["match"]):
            return rule
    return None


def reasoning_params(route: Route) -> dict:
    """Keyword arguments (``extra_body`` merged) that set the route's reasoning effort; {} sends nothing.

    ``lowest`` sends a parameter only where it is known to be accepted:
    DeepSeek → thinking disabled; OpenAI reasoning models → their lowest
    ``reasoning_effort``; Anthropic models with thinking on by default → their
    rule; everything else nothing (omitted = off, or the server's default).
    """
    effort = route.reasoning.strip().lower()
    if effort == "omit":
        return {}
    table = model_table()
    if route.flavour == "deepseek":
        spec = table["deepseek"]
        if effort == "lowest" or effort in spec["off_words"]:
            return _merge({}, spec["lowest"])
        return {"extra_body": {"thinking": {"type": "enabled"}}, "reasoning_effort": effort}
    if route.provider == "anthropic":
        spec = table["anthropic"]
        if effort == "lowest":
            for rule in spec["thinking_by_default"]:
                if _matches(route.model, rule["match"]):
                    return _merge({}, rule["lowest"])
            return {}
        if effort in spec["off_words"]:
            return {"thinking": {"type": "disabled"}}
        return {"output_config": {"effort": effort}}
    if effort == "lowest":
        if route.flavour != "openai":
            return {}  # OpenRouter, vLLM, llama.cpp, Ollama: acceptance unknown, send nothing
        rule = openai_reasoning_rule(route.model)
        return {"reasoning_effort": rule["lowest"]} if rule else {}
    return {"reasoning_effort": "none" if effort == "off" else effort}


# -- results and errors --------------------------------------------------------------------------


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


def _overloaded_class() -> type | None:
    anthropic = sys.modules.get("anthropic")
    if anthropic is None:
        return None
    # anthropic 0.87 has the class but does not export it at the top level (2.x does).
    found = getattr(anthropic, "OverloadedError", None)
    if found is None:
        exceptions = getattr(anthropic, "_exceptions", None)
        found = getattr(exceptions, "OverloadedError", None)
    return found


def provider_error(exc: BaseException, route: Route | None = None) -> ProviderError:
    """The :class:`ProviderError` for an exception the ``openai`` or ``anthropic`` SDK raised."""
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
            overloaded = _overloaded_class()
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


# -- keys ----------------------------------------------------------------------------------------


def resolve_api_key(route: Route, api_key: str | None = None,
                    environ: Mapping[str, str] | None = None) -> str:
    """``api_key``, else the route's variable, else the flavour's default; a dummy for local servers."""
    if api_key:
        return api_key
    environ = os.environ if environ is None else environ
    variable = route.key_env
    if variable and environ.get(variable):
        return environ[variable]
    if route.local:
        return LOCAL_KEY
    if variable:
        raise RouteError(f"no API key for the writer route {route.describe()}: set the environment variable "
                         f"{variable}" + ("" if route.api_key_env else " (or name another one in api_key_env)"))
    raise RouteError(f"no API key for the writer route {route.describe()}: name the environment variable "
                     f"that holds it in api_key_env")


# -- providers -----------------------------------------------------------------------------------


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


def _fit_kwargs(method: Callable[..., Any], kwargs: dict) -> dict:
    """Optional keywords the installed SDK's method does not name go into ``extra_body`` (older SDKs)."""
    names = _keyword_names(getattr(method, "__func__", method))
    if names is None:
        return kwargs
    for key in _OPTIONAL_KEYWORDS:
        if key in kwargs and key not in names:
            kwargs.setdefault("extra_body", {})[key] = kwargs.pop(key)
    return kwargs


_BULK = ("system", "messages", "tools")


def _bulk_in_extra_body(kwargs: dict) -> dict:
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


class Provider(abc.ABC):
    """One route's client: ``await complete(request)``; ``await aclose()`` when done."""

    def __init__(self, route: Route, client: Any, clock: Any = None) -> None:
        self.route = route
        self.client = client
        self._now = _clock_function(clock)

    @abc.abstractmethod
    def request_kwargs(self, request: Request) -> dict:
        """The keyword arguments the SDK call gets (reasoning and cache marks included)."""

    @abc.abstractmethod
    async def _call(self, kwargs: dict) -> Any: ...

    @abc.abstractmethod
    def _completion(self, response: Any, duration: float) -> Completion: ...

    @abc.abstractmethod
    def _sdk_errors(self) -> tuple[type, ...]: ...

    async def complete(self, request: Request) -> Completion:
        """Send ``request``; a :class:`Completion`, or :class:`ProviderError` after the SDK's retries."""
        kwargs = self.request_kwargs(request)
        started = self._now()
        try:
            response = await self._call(kwargs)
        except self._sdk_errors() as exc:
            raise provider_error(exc, self.route) from exc
        return self._completion(response, self._now() - started)

    async def aclose(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.route.describe()}>"


_OPENAI_STOPS = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
                 "content_filter": "content_filter"}
_ANTHROPIC_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                    "tool_use": "tool_calls", "refusal": "refusal", "pause_turn": "pause",
                    "model_context_window_exceeded": "length"}


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def openai_usage(usage: Any) -> Usage:
    """Usage from a chat completion: OpenAI ``prompt_tokens_details.cached_tokens`` (+
    ``cache_write_tokens``), DeepSeek ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``."""
    if usage is None:
        return Usage()
    prompt = _int(getattr(usage, "prompt_tokens", 0))
    details = getattr(usage, "prompt_tokens_details", None)
    cached = _int(getattr(details, "cached_tokens", 0)) if details is not None else 0
    write = _int(getattr(details, "cache_write_tokens", 0)) if details is not None else 0
    hit = getattr(usage, "prompt_cache_hit_tokens", None)
    miss = getattr(usage, "prompt_cache_miss_tokens", None)
    if hit is not None:
        cached = _int(hit)
    uncached = _int(miss) if miss is not None else max(0, prompt - cached - write)
    return Usage(cached=cached, uncached=uncached, cache_write=write,
                 output=_int(getattr(usage, "completion_tokens", 0)))


def anthropic_usage(usage: Any) -> Usage:
    """Usage from a message: ``cache_read_input_tokens``, ``cache_creation_input_tokens``, ``input_tokens``."""
    if usage is None:
        return Usage()
    creation = getattr(usage, "cache_creation", None)
    long = _int(getattr(creation, "ephemeral_1h_input_tokens", 0)) if creation is not None else 0
    return Usage(cached=_int(getattr(usage, "cache_read_input_tokens", 0)),
                 uncached=_int(getattr(usage, "input_tokens", 0)),
                 cache_write=_int(getattr(usage, "cache_creation_input_tokens", 0)),
                 output=_int(getattr(usage, "output_tokens", 0)), cache_write_long=long)


class OpenAIProvider(Provider):
    """Chat completions through ``openai.AsyncOpenAI`` (OpenAI, DeepSeek, OpenRouter, vLLM, llama.cpp, Ollama)."""

    def request_kwargs(self, request: Request) -> dict:
        route = self.route
        kwargs = to_openai(request, route.model, route.style or "none")
        if route.flavour == "openai" and openai_reasoning_rule(route.model) is not None \
                and "max_tokens" in kwargs:
            # Reasoning models refuse max_tokens ("use 'max_completion_tokens' instead").
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
        _merge(kwargs, reasoning_params(route))
        return _fit_kwargs(self.client.chat.completions.create, kwargs)

    async def _call(self, kwargs: dict) -> Any:
        return await self.client.chat.completions.create(**_bulk_in_extra_body(kwargs))

    def _sdk_errors(self) -> tuple[type, ...]:
        import openai

        return (openai.APIError,)

    def _completion(self, response: Any, duration: float) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ProviderError("server", "the answer carried no choices", route=self.route.describe())
        choice = choices[0]
        message = choice.message
        text = getattr(message, "content", None) or ""
        stop = _OPENAI_STOPS.get(choice.finish_reason or "", choice.finish_reason or "")
        refusal = getattr(message, "refusal", None)
        if refusal and not text:
            text, stop = refusal, "refusal"
        calls = tuple(ToolCallOut(c.id, c.function.name, c.function.arguments or "{}")
                      for c in (getattr(message, "tool_calls", None) or []) if getattr(c, "function", None))
        return Completion(text=text, usage=openai_usage(getattr(response, "usage", None)), duration=duration,
                          model=getattr(response, "model", None) or self.route.model, stop_reason=stop,
                          tool_calls=calls)


class AnthropicProvider(Provider):
    """Messages through ``anthropic.AsyncAnthropic``."""

    def request_kwargs(self, request: Request) -> dict:
        route = self.route
        kwargs = to_anthropic(request, route.model, route.style or "anthropic")
        _merge(kwargs, reasoning_params(route))
        return _fit_kwargs(self.client.messages.create, kwargs)

    async def _call(self, kwargs: dict) -> Any:
        return await self.client.messages.create(**_bulk_in_extra_body(kwargs))

    def _sdk_errors(self) -> tuple[type, ...]:
        import anthropic

        return (anthropic.APIError,)

    def _completion(self, response: Any, duration: float) -> Completion:
        text = "".join(getattr(block, "text", "") for block in (getattr(response, "content", None) or [])
                       if getattr(block, "type", None) == "text")
        raw_stop = getattr(response, "stop_reason", None) or ""
        calls = tuple(ToolCallOut(block.id, block.name, json.dumps(block.input or {}))
                      for block in (getattr(response, "content", None) or [])
                      if getattr(block, "type", None) == "tool_use")
        return Completion(text=text, usage=anthropic_usage(getattr(response, "usage", None)), duration=duration,
                          model=getattr(response, "model", None) or self.route.model,
                          stop_reason=_ANTHROPIC_STOPS.get(raw_stop, raw_stop), tool_calls=calls)


def make_provider(route: Route, *, api_key: str | None = None, http_client: Any = None,
                  clock: Any = None) -> Provider:
    """The :class:`Provider` for ``route``.

    ``api_key``: else the route's ``api_key_env``, else the flavour's default
    variable (``OPENAI_API_KEY``, ``DEEPSEEK_API_KEY``, ``OPENROUTER_API_KEY``,
    ``ANTHROPIC_API_KEY``); local servers get a dummy.  ``http_client``: an
    ``httpx``/``httpx2`` async client for the SDK (None: the SDK's default).
    ``clock``: what durations are measured on (a callable or an object with
    ``monotonic()``); default the running event loop's time.
    """
    if not isinstance(route, Route):
        raise RouteError(f"make_provider needs a Route, not {type(route).__name__}")
    problems = _route_problems(route)  # a route changed after it was made
    if problems:
        raise RouteError(f"writer route {route.model!r}: " + "; ".join(problems))
    key = resolve_api_key(route, api_key)
    options: dict[str, Any] = {"api_key": key, "max_retries": route.max_retries, "timeout": float(route.timeout)}
    base_url = route.effective_base_url
    if base_url:
        options["base_url"] = base_url
    if http_client is not None:
        options["http_client"] = http_client
    if route.provider == "openai":
        import openai

        return OpenAIProvider(route, openai.AsyncOpenAI(**options), clock)
    import anthropic

    return AnthropicProvider(route, anthropic.AsyncAnthropic(**options), clock)
