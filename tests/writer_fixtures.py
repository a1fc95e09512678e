"""Shared set-up for writer tests: a memory, the simulator, providers through the real SDKs."""

from __future__ import annotations

from pathlib import Path

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.sim.cache import make_cache
from endless.sim.simulator import Route as SimRoute, Simulator
from endless.sim.transport import sdk_http_client
from endless.sim.writer_model import ScriptedWriter
from endless.llm.connect import make_provider
from endless.llm.routes import Route
from endless.writer.recorded import recorded_routes

DEEPSEEK = Route("openai", "deepseek-v4-pro", base_url="https://api.deepseek.com", api_key_env="SIM_KEY")
CLAUDE = Route("anthropic", "claude-sonnet-5", api_key_env="SIM_KEY")


def simulator(writer: ScriptedWriter, cache: str = "deepseek", flavour: str = "deepseek") -> Simulator:
    return Simulator(SimRoute(writer, make_cache(cache), context_length=1_000_000, flavour=flavour))


def providers(sim: Simulator):
    def factory(route: Route):
        return make_provider(route, api_key="sim-key", http_client=sdk_http_client(route.provider, sim))
    return factory


def open_memory(root: Path, clock, **settings) -> Memory:
    s = Settings(**settings)
    return Memory.open(workspace_key(None, root / "ws"), settings=s, root=root, clock=clock)


def long_text(k: int, words: int = 120) -> str:
    """A message too long to be its own line, with real facts in it."""
    body = " ".join(f"word{k}_{i}" if i % 17 == 0 else "context" for i in range(words))
    return f"Please set the port to {5400 + k} in config/app{k}.toml and keep it. {body}"


def fill(memory: Memory, turns: int, route: Route | None = DEEPSEEK, system: str = "SYSTEM PROMPT",
         session: str = "chat-1") -> None:
    if route is not None:
        recorded_routes(memory).record(session, route.to_json(), system, [])
    for t in range(turns):
        memory.commit_turn(session, "Ports", [Message("user", long_text(2 * t), memory.clock()),
                                              Message("reply", long_text(2 * t + 1), memory.clock())])
