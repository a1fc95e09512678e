"""Making the client for a route: the one place that picks an SDK and its client class.

Kept apart from the shared contract (``client``) so that imports inside the
layer run one way: the contract, then the two providers, then this.
"""

from __future__ import annotations

from typing import Any

from endless.llm.anthropic_api import AnthropicProvider
from endless.llm.client import Provider
from endless.llm.openai_api import OpenAIProvider
from endless.llm.routes import Route, RouteError, route_problems, resolve_api_key


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
    problems = route_problems(route)  # a route changed after it was made
    if problems:
        raise RouteError(f"writer route {route.model!r}: " + "; ".join(problems))
    key = resolve_api_key(route, api_key)
    options: dict[str, Any] = {"api_key": key, "max_retries": route.max_retries, "timeout": float(route.timeout)}
    base_url = route.effective_base_url
    if base_url:
        options["base_url"] = base_url
    if http_client is not None:
        options["http_client"] = http_client
    # The SDK only now: a route needs one of them, and importing an SDK takes a while.
    if route.provider == "openai":
        import openai

        return OpenAIProvider(route, openai.AsyncOpenAI(**options), clock)
    import anthropic

    return AnthropicProvider(route, anthropic.AsyncAnthropic(**options), clock)
