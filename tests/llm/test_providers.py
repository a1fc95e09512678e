"""endless/llm/'s model clients through the real SDK clients and the simulator's in-process transport.

Runs on the simulated clock (``endless.sim.clock.run``) in both venvs: the
current SDKs (``openai`` 3.x / ``anthropic`` 2.x on ``httpx2``) and the ones
Hermes 0.19.0 pins (``openai`` 2.24 / ``anthropic`` 0.87 on ``httpx``); the
simulator's ``transport_for`` picks the HTTP library that fits.
"""

from __future__ import annotations

import asyncio
import socket
import time

import anthropic
import openai
import pytest

from endless.llm.request import Msg, Request, view_message_blocks
from endless.sim import clock
from endless.sim.cache import make_cache
from endless.sim.model import SimReply, SimRequest
from endless.sim.simulator import Route as SimRoute
from endless.sim.simulator import Simulator
from endless.sim.transport import transport_for
from endless.sim.writer_model import ScriptedWriter
from endless.llm.client import Completion, Usage
from endless.llm.connect import make_provider
from endless.llm.errors import ProviderError, retry_after_from
from endless.llm.models import reasoning_params
from endless.llm.routes import Route, RouteError, resolve_api_key

SYSTEM = "You write the lines of a long-running memory, one short line per message. " * 40
VIEW = [f"{i}+1|you: step {i} touched src/module_{i}.py and port {5400 + i}" for i in range(100)]


def task(number: int) -> str:
    return (f"Compaction: compress message {number}. At most 512 bytes (about 80 words).\n" + "-" * 512
            + f"\n<input>\nyou: please check port 5433 on db-{number} and fix src/app_{number}.py\n</input>\n")


def writer_request(number: int = 101, lines: list[str] | None = None, cache_key: str | None = "mem-1") -> Request:
    blocks, whole = view_message_blocks(VIEW if lines is None else lines, [task(number)])
    return Request(system=SYSTEM, tools=[], messages=[Msg("user", blocks)], view_message=0, view_blocks=whole,
                   tool_choice="none", cache_key=cache_key, max_tokens=400)


class Recorder:
    """Wraps a responder and keeps every request's raw body."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.raw: list[dict] = []

    def reply(self, request: SimRequest, now: float) -> SimReply:
        self.raw.append(request.raw)
        return self.inner.reply(request, now)


def scripted() -> ScriptedWriter:
    return ScriptedWriter(seed=3, mix={"fit": 1.0}, retry_mix={"fit": 1.0}, invented_rate=0.0)


def simulator(writer: ScriptedWriter | None = None, cache: str | None = None, flavour: str = "openai"):
    writer = writer or scripted()
    recorder = Recorder(writer)
    cache_model = make_cache(cache) if cache else None
    sim = Simulator({"*": SimRoute(recorder, cache_model, flavour=flavour)})
    return sim, writer, recorder


def provider_for(sim: Simulator, route: Route, **options):
    """make_provider with an SDK http client on the simulator's transport (httpx or httpx2, as installed)."""
    sdk = openai if route.provider == "openai" else anthropic
    http_client = sdk.DefaultAsyncHttpxClient(transport=transport_for(sdk.DefaultAsyncHttpxClient, sim))
    return make_provider(route, api_key="sim-key", http_client=http_client, **options)


def complete(sim: Simulator, route: Route, *requests: Request) -> list[Completion]:
    async def main():
        provider = provider_for(sim, route)
        try:
            return [await provider.complete(r) for r in requests]
        finally:
            await provider.aclose()

    return clock.run(main())


def failure(sim: Simulator, route: Route, request: Request | None = None) -> tuple[ProviderError, float]:
    """The ProviderError a call ends in, and how much simulated time it took."""

    async def main():
        provider = provider_for(sim, route)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(request or writer_request())
            return caught.value, loop.time() - start
        finally:
            await provider.aclose()

    return clock.run(main())


def count_key(value, key: str) -> int:
    if isinstance(value, dict):
        return (key in value) + sum(count_key(v, key) for v in value.values())
    if isinstance(value, list):
        return sum(count_key(v, key) for v in value)
    return 0


# -- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("route", [Route("openai", "gpt-4.1"), Route("anthropic", "claude-haiku-4-5")],
                         ids=["openai", "anthropic"])
def test_round_trip(route):
    sim, writer, recorder = simulator()
    [done] = complete(sim, route, writer_request())
    record = sim.records[-1]
    assert isinstance(done, Completion)
    assert done.text and done.text == writer.last_outcome.text
    assert done.stop_reason == "stop"
    assert done.model == route.model
    assert done.duration == pytest.approx(record["latency"])  # measured on the simulated clock
    assert done.usage.input == record["tokens"] and done.usage.output == record["usage"]["output"] > 0
    assert record["api"] == route.provider
    assert recorder.raw[-1]["model"] == route.model


# -- prompt caching ------------------------------------------------------------------------------


def test_deepseek_reads_the_prefix_once_the_first_call_finished():
    sim, _, recorder = simulator(cache="deepseek", flavour="deepseek")
    route = Route("openai", "deepseek-flash", base_url="https://api.deepseek.com")
    assert (route.flavour, route.style) == ("deepseek", "none")
    first, second = complete(sim, route, writer_request(101), writer_request(102))
    tokens = sim.records[-1]["tokens"]
    assert first.usage == Usage(cached=0, uncached=sim.records[0]["tokens"], output=first.usage.output)
    assert second.usage.cached > 0 and second.usage.cached % 128 == 0
    assert second.usage.cached + second.usage.uncached == tokens and second.usage.cache_write == 0
    # No marks and no cache key for DeepSeek.
    assert sim.records[-1]["marks"] == [] and "prompt_cache_key" not in recorder.raw[-1]
    assert count_key(recorder.raw[-1], "prompt_cache_breakpoint") == 0

    # Sent together, before either finished: neither reads the other's prefix.
    sim2, _, _ = simulator(cache="deepseek", flavour="deepseek")

    async def both():
        provider = provider_for(sim2, route)
        return await asyncio.gather(provider.complete(writer_request(101)), provider.complete(writer_request(102)))

    assert [c.usage.cached for c in clock.run(both())] == [0, 0]


def test_openai_breakpoints_and_cache_key():
    sim, _, recorder = simulator(cache="openai-breakpoints")
    route = Route("openai", "gpt-6.2-sol")
    assert route.style == "openai-breakpoints"
    longer = VIEW + ["100+1|you: one more line in the partial block"]
    first, second = complete(sim, route, writer_request(101), writer_request(102, lines=longer))
    raw = recorder.raw[0]
    assert raw["prompt_cache_key"] == "mem-1"
    system = raw["messages"][0]["content"]
    assert system[-1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    view_parts = raw["messages"][1]["content"]
    marked = [k for k, part in enumerate(view_parts) if "prompt_cache_breakpoint" in part]
    assert marked == list(range(len(VIEW) // 4))  # every whole 4-line block, nothing else
    assert count_key(raw, "prompt_cache_breakpoint") == 1 + len(VIEW) // 4
    # First call writes (billed), the second reads up to the view's last whole block.
    assert first.usage.cached == 0 and first.usage.cache_write > 0
    view_mark = sim.records[1]["marks"][-1]["token"]
    assert second.usage.cached == view_mark and second.usage.cache_write == 0
    assert second.usage.input == sim.records[1]["tokens"]


def test_anthropic_marks_and_cache_read():
    sim, _, recorder = simulator(cache="anthropic", flavour="anthropic")
    route = Route("anthropic", "claude-haiku-4-5")
    first, second = complete(sim, route, writer_request(101), writer_request(102))
    raw = recorder.raw[0]
    assert count_key(raw, "cache_control") == 4
    assert "cache_control" in raw["system"][-1]
    content = raw["messages"][0]["content"]
    whole = len(VIEW) // 4
    marked = [k for k, block in enumerate(content) if "cache_control" in block]
    # 20 blocks before the last whole view block, the last whole view block, the end of the request.
    assert marked == [whole - 1 - 20, whole - 1, len(content) - 1]
    for request_raw in recorder.raw:
        assert count_key(request_raw, "cache_control") <= 4
    assert first.usage.cached == 0 and first.usage.cache_write > 0
    assert second.usage.cached > 0
    assert second.usage.cached + second.usage.cache_write + second.usage.uncached == sim.records[1]["tokens"]


# -- reasoning -----------------------------------------------------------------------------------

ABSENT = object()


@pytest.mark.parametrize("route, expected", [
    (Route("openai", "deepseek-flash", base_url="https://api.deepseek.com"),
     {"thinking": {"type": "disabled"}, "reasoning_effort": ABSENT, "max_tokens": 400}),
    (Route("openai", "deepseek-v4-pro", base_url="https://api.deepseek.com", reasoning="high"),
     {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
    (Route("openai", "gpt-5"), {"reasoning_effort": "minimal", "max_completion_tokens": 400, "max_tokens": ABSENT}),
    (Route("openai", "gpt-5.1"), {"reasoning_effort": "none", "max_completion_tokens": 400}),
    (Route("openai", "gpt-5.6-terra"), {"reasoning_effort": "none"}),
    (Route("openai", "gpt-6-sol"), {"reasoning_effort": "none"}),
    (Route("openai", "gpt-6.1-sol"), {"reasoning_effort": "low"}),
    (Route("openai", "gpt-6.2-sol"), {"reasoning_effort": "low"}),
    (Route("openai", "o3-mini"), {"reasoning_effort": "low"}),
    (Route("openai", "gpt-4.1"), {"reasoning_effort": ABSENT, "max_tokens": 400, "thinking": ABSENT}),
    (Route("openai", "gpt-5.1", reasoning="omit"), {"reasoning_effort": ABSENT}),
    (Route("openai", "gpt-4.1", reasoning="medium"), {"reasoning_effort": "medium"}),
    (Route("openai", "qwen3", base_url="http://127.0.0.1:11434/v1"),
     {"reasoning_effort": ABSENT, "thinking": ABSENT}),
    (Route("anthropic", "claude-haiku-4-5"), {"thinking": ABSENT, "output_config": ABSENT}),
    (Route("anthropic", "claude-opus-5"), {"thinking": ABSENT, "output_config": {"effort": "low"}}),
    (Route("anthropic", "claude-haiku-4-5", reasoning="off"), {"thinking": {"type": "disabled"}}),
], ids=lambda value: value.model + "/" + value.reasoning if isinstance(value, Route) else "")
def test_reasoning_parameters_per_route(route, expected):
    sim, _, recorder = simulator()
    complete(sim, route, writer_request())
    raw = recorder.raw[-1]
    for key, value in expected.items():
        if value is ABSENT:
            assert key not in raw, f"{route.model}: {key} sent"
        else:
            assert raw.get(key) == value, f"{route.model}: {key}"


def test_reasoning_table_is_data():
    assert reasoning_params(Route("openai", "gpt-6.2-sol-2026-10-01")) == {"reasoning_effort": "low"}
    assert reasoning_params(Route("openai", "openai/gpt-5.1", base_url="https://openrouter.ai/api/v1")) == {}


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider, model", [("openai", "gpt-4.1"), ("anthropic", "claude-haiku-4-5")])
def test_rate_limit_with_retry_after_after_the_sdk_retry(provider, model):
    writer = scripted()
    writer.force(SimReply(status=429, error="Rate limit reached", retry_after=7, first_byte=0.1),
                 SimReply(status=429, error="Rate limit reached", retry_after=7, first_byte=0.1))
    sim, _, _ = simulator(writer)
    error, took = failure(sim, Route(provider, model, max_retries=1))
    assert (error.kind, error.status, error.retry_after) == ("rate_limit", 429, 7.0)
    assert error.retryable
    assert len(sim.records) == 2  # the SDK's own retry, after its retry-after wait
    assert 7.0 <= took < 8.0


@pytest.mark.parametrize("provider, model", [("openai", "gpt-4.1"), ("anthropic", "claude-haiku-4-5")])
def test_server_error(provider, model):
    writer = scripted()
    writer.force(SimReply(status=500, error="boom"), SimReply(status=500, error="boom"))
    sim, _, _ = simulator(writer)
    error, _ = failure(sim, Route(provider, model, max_retries=1))
    assert (error.kind, error.status, error.retry_after) == ("server", 500, None)
    assert len(sim.records) == 2


def test_anthropic_overloaded():
    writer = scripted()
    writer.force(SimReply(status=529, error="Overloaded"))
    sim, _, _ = simulator(writer)
    error, _ = failure(sim, Route("anthropic", "claude-haiku-4-5", max_retries=0))
    assert (error.kind, error.status) == ("overloaded", 529)
    assert error.retryable
    # and after the SDK retries, a reply
    writer.force(SimReply(status=529, error="Overloaded"))
    [done] = complete(sim, Route("anthropic", "claude-haiku-4-5", max_retries=1), writer_request())
    assert done.text


def test_auth_and_unknown_model_are_not_retryable():
    writer = scripted()
    writer.force(SimReply(status=401, error="invalid key"))
    sim, _, _ = simulator(writer)
    error, _ = failure(sim, Route("openai", "gpt-4.1"))
    assert (error.kind, error.retryable) == ("auth", False)
    only = Simulator({"some-model": SimRoute(scripted())})
    error, _ = failure(only, Route("anthropic", "claude-missing"))
    assert (error.kind, error.status) == ("not_found", 404)


@pytest.mark.parametrize("provider, model", [("openai", "gpt-4.1"), ("anthropic", "claude-haiku-4-5")])
def test_timeout_on_the_simulated_clock(provider, model):
    sim, _, _ = simulator()
    complete(sim, Route(provider, model), writer_request())  # warm the SDK's lazy imports
    writer = scripted()
    writer.force(SimReply(stall=True), SimReply(stall=True))
    sim, _, _ = simulator(writer)
    started = time.perf_counter()
    error, took = failure(sim, Route(provider, model, timeout=20.0, max_retries=1))
    real = time.perf_counter() - started
    assert error.kind == "timeout" and error.retryable and error.status is None
    assert 40.0 <= took < 45.0  # two stalled tries of 20 s and the SDK's short backoff
    assert len(sim.records) == 2
    assert real < 0.9, f"{took:.0f} simulated seconds took {real:.2f} s"


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_refused_connection(provider, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    port = _closed_port()
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")
    route = Route(provider, "gpt-4.1" if provider == "openai" else "claude-haiku-4-5", base_url=base,
                  max_retries=0, timeout=5.0)

    async def main():
        provider_ = make_provider(route)  # local: no key needed
        try:
            with pytest.raises(ProviderError) as caught:
                await provider_.complete(writer_request())
            return caught.value
        finally:
            await provider_.aclose()

    error = asyncio.run(main())  # real sockets: real time
    assert error.kind == "connection" and error.retryable and error.status is None


def test_retry_after_headers():
    assert retry_after_from({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_from({"retry-after": "3"}) == 3.0
    assert retry_after_from({"retry-after": "Wed, 01 Jan 2027 00:00:30 GMT"},
                            now=lambda: 1_798_761_600.0) == 30.0
    assert retry_after_from({"retry-after": "soon"}) is None
    assert retry_after_from({}) is None and retry_after_from(None) is None


# -- routes and keys -----------------------------------------------------------------------------


def test_route_json_round_trip_and_validation():
    route = Route("openai", "deepseek-flash", base_url="https://api.deepseek.com", api_key_env="MY_DS_KEY",
                  max_retries=2, timeout=60)
    data = route.to_json()
    assert data["api_key_env"] == "MY_DS_KEY" and "api_key" not in data
    assert "style" not in data and "flavour" not in data  # derived again on load
    assert Route.from_json(data) == route
    import json
    assert Route.from_json(json.dumps(data)) == route
    explicit = Route("openai", "gpt-6.2-sol", style="none", flavour="openai")
    assert Route.from_json(explicit.to_json()).style == "none"
    assert Route("anthropic", "claude-haiku-4-5").style == "anthropic"
    assert Route("openai", "gpt-5.5").style == "none" and Route("openai", "gpt-5.6-luna").style == "openai-breakpoints"
    assert Route("openai", "gpt-7").style == "openai-breakpoints"
    assert Route("openai", "m", base_url="http://localhost:8080/v1").flavour == "llamacpp"
    assert Route("openai", "m", base_url="http://127.0.0.1:8000/v1").flavour == "vllm"
    assert Route("openai", "m", base_url="https://openrouter.ai/api/v1").flavour == "openrouter"
    for bad, words in [({"provider": "gemini", "model": "x"}, "unknown provider 'gemini'"),
                       ({"provider": "openai"}, "missing field 'model'"),
                       ({"provider": "openai", "model": "m", "api_key": "sk-123"}, "api_key_env"),
                       ({"provider": "openai", "model": "m", "colour": 1}, "unknown field(s) 'colour'"),
                       ({"provider": "openai", "model": "m", "style": "fancy"}, "unknown style"),
                       ({"provider": "openai", "model": "m", "flavour": "anthropic"}, "does not go with"),
                       ({"provider": "openai", "model": "m", "timeout": 0}, "timeout"),
                       ({"provider": "openai", "model": "m", "max_retries": -1}, "max_retries"),
                       ({"provider": "openai", "model": "m", "base_url": "api.x.com"}, "base_url"),
                       ({"provider": "openai", "model": "m", "api_key_env": "NOT A NAME"}, "api_key_env"),
                       ("[1, 2]", "JSON object"), ("{nope", "not valid JSON")]:
        with pytest.raises(RouteError, match=None) as caught:
            Route.from_json(bad)
        assert words in str(caught.value), (bad, str(caught.value))


def test_unknown_provider_and_keys(monkeypatch):
    route = Route("openai", "gpt-4.1")
    route.provider = "gemini"
    with pytest.raises(RouteError, match="unknown provider 'gemini'"):
        make_provider(route)
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "MY_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RouteError, match="DEEPSEEK_API_KEY"):
        make_provider(Route("openai", "deepseek-flash"))
    with pytest.raises(RouteError, match="ANTHROPIC_API_KEY"):
        make_provider(Route("anthropic", "claude-haiku-4-5"))
    with pytest.raises(RouteError, match="MY_KEY"):
        make_provider(Route("openai", "gpt-4.1", api_key_env="MY_KEY"))
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    assert resolve_api_key(Route("openai", "gpt-4.1", api_key_env="MY_KEY")) == "sk-from-env"
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-ds")
    provider = make_provider(Route("openai", "deepseek-flash"))
    assert provider.client.api_key == "sk-ds"
    assert str(provider.client.base_url).startswith("https://api.deepseek.com")
    assert resolve_api_key(Route("openai", "gpt-4.1"), api_key="given") == "given"
    assert resolve_api_key(Route("openai", "llama", base_url="http://localhost:8080/v1")) == "not-needed"
    assert "sk-" not in repr(Route("openai", "gpt-4.1", api_key_env="MY_KEY"))


def test_keywords_an_older_sdk_lacks_go_in_extra_body():
    from endless.llm.client import fit_kwargs

    def create(*, model, messages, max_tokens=None, extra_body=None):  # an SDK without the newer keywords
        return None

    kwargs = {"model": "m", "messages": [], "max_tokens": 5, "prompt_cache_key": "k",
              "reasoning_effort": "none", "extra_body": {"thinking": {"type": "disabled"}}}
    fitted = fit_kwargs(create, dict(kwargs))
    assert fitted["model"] == "m" and fitted["max_tokens"] == 5
    assert fitted["extra_body"] == {"thinking": {"type": "disabled"}, "prompt_cache_key": "k",
                                    "reasoning_effort": "none"}
    assert "prompt_cache_key" not in fitted and "reasoning_effort" not in fitted


@pytest.mark.parametrize("provider, model, flavour", [("openai", "deepseek-v4-pro", "openai"),
                                                      ("openai", "gpt-6.2-sol", "openai"),
                                                      ("anthropic", "claude-haiku-4-5", "anthropic")])
def test_the_provider_receives_exactly_the_request_kwargs(provider, model, flavour):
    """Messages, system and tools skip the SDK's typed walk (extra_body) yet arrive unchanged and complete."""
    sim, _, recorder = simulator(flavour=flavour)
    route = Route(provider, model, base_url="https://api.deepseek.com" if model.startswith("deepseek") else None)
    tools = [{"name": "zoom", "description": "open a line", "parameters": {
        "type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}},
        "required": ["id"]}}]
    request = writer_request(101)
    request.tools = tools
    prov = provider_for(sim, route)
    expected = prov.request_kwargs(request)
    (completion,) = complete(sim, route, request)
    raw = recorder.raw[0]
    for key in ("messages", "tools", "system", "model", "max_tokens", "tool_choice", "prompt_cache_key"):
        if key in expected:
            assert raw[key] == expected[key], key
    assert "extra_body" not in raw
    assert len(raw["messages"]) == len(expected["messages"]) >= 1
    assert completion.text
