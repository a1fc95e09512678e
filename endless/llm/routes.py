"""Who answers a model call, said in a few fields a person can write and a file can keep.

A :class:`Route` names the provider (``"openai"`` for every OpenAI-compatible
endpoint: OpenAI, DeepSeek, OpenRouter, vLLM, llama.cpp, Ollama;
``"anthropic"`` for Claude), the model, where, which environment variable
holds the key, the cache-mark style (DESIGN §3.4) and the reasoning effort.
Settings, the command line and the Hermes plugin all write routes; this
module checks them once, derives what was left out (flavour, style) the same
way for every caller, and finds the key, so that a bad route is refused with
one clear message before any client is built.  The key itself never belongs
to a route, only the name of the variable that holds it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Mapping
from urllib.parse import urlsplit

from endless.llm.models import model_matches, model_table, uses_openai_breakpoints
from endless.llm.request import MARK_STYLES

PROVIDERS = ("openai", "anthropic")
FLAVOURS = ("openai", "deepseek", "openrouter", "vllm", "llamacpp", "ollama", "anthropic")
LOCAL_KEY = "not-needed"  # what a local server (no key) is sent: the SDKs insist on some key
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RouteError(ValueError):
    """A route that cannot be used as given (bad field, unknown provider, missing key)."""


# -- what a route's fields mean ------------------------------------------------------------------


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
            if spec["provider"] == "openai" and spec.get("models") and model_matches(model, spec["models"]):
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


def derive_style(provider: str, flavour: str, model: str) -> str:
    if provider == "anthropic":
        return "anthropic"
    if flavour == "openai" and uses_openai_breakpoints(model):
        return "openai-breakpoints"
    return "none"


# -- the route -----------------------------------------------------------------------------------


@dataclass
class Route:
    """Who answers: provider, model, endpoint, key variable, cache-mark style, reasoning effort.

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
        problems = route_problems(self)
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


def route_problems(route: Route) -> list[str]:
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
