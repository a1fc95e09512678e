"""Turns through the real SDK and the simulator's scripted agent, with the writer pool running."""

from __future__ import annotations

import asyncio

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.sim.agent_model import ScriptedAgent
from endless.sim.cache import make_cache
from endless.sim.clock import SimClock, run
from endless.sim.responder import route_responder
from endless.sim.simulator import Route as SimRoute, Simulator
from endless.sim.transport import sdk_http_client
from endless.sim.writer_model import ScriptedWriter
from endless.turn.run import run_turn
from endless.turn.head import system_prompt, turn_tools
from endless.turn.protocol import Turn
from endless.writer.pool import WriterPool
from endless.llm.connect import make_provider
from endless.llm.routes import Route
from endless.writer.queue import ready_work

ROUTE = Route("openai", "deepseek-v4-pro", base_url="https://api.deepseek.com", api_key_env="SIM_KEY")


def test_twelve_turns_with_tools_zoom_and_the_writer(tmp_path):
    clock = SimClock()
    sim = Simulator(SimRoute(route_responder(ScriptedWriter(seed=3, invented_rate=0.0), ScriptedAgent(seed=3)),
                             make_cache("deepseek"), context_length=1_000_000, flavour="deepseek"))
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=Settings(), root=tmp_path, clock=clock.wall)

    def providers(route: Route):
        return make_provider(route, api_key="sim", http_client=sdk_http_client(route.provider, sim))

    agent = providers(ROUTE)
    system = system_prompt("You are a helpful assistant. " * 100)
    tools = turn_tools([])
    messages = ["The deploy code is K7-ALPHA-42; remember it. [[reply:600]]",
                *[f"Question {k} about the cache. [[tools:{k % 3}]] [[reply:500]]" for k in range(1, 10)],
                "Quote message 0 exactly. [[zoom:0:1]]", "Thanks, that is all. [[reply:300]]"]

    async def main():
        stop = asyncio.Event()
        pool = asyncio.ensure_future(WriterPool(memory, providers).run(stop))
        outcomes = []
        for text in messages:
            turn = Turn(memory, "chat-1", "Deploy", system, tools)
            outcomes.append(await run_turn(turn, text, agent, route=ROUTE.to_json()))
            await asyncio.sleep(30)
        await memory.settle(lambda m: not ready_work(m), 3600)
        stop.set()
        await pool
        return outcomes

    outcomes = run(main(), clock)
    assert len(outcomes) == 12 and not any(o.refused for o in outcomes)
    assert memory.turns == 12
    kinds = [[m.kind for m in memory.turn_messages(t)] for t in range(12)]
    assert all(k[0] == "user" and k[-1] == "reply" for k in kinds)
    assert any("trace" in k for k in kinds), "tool turns log their trace"
    assert "K7-ALPHA-42" in outcomes[10].reply, "the zoom result is quoted in the reply"
    cached = [o.usages[0].cached for o in outcomes[1:]]
    assert sum(1 for c in cached if c > 0) >= 9, f"later turns read the cached prefix: {cached}"
    assert all(memory.is_built(0, i) for i in range(memory.total))


def test_after_a_long_turn_rebuilds_its_head_the_agent_goes_on_with_its_plan(tmp_path):
    """A zoom then four tool calls of ~3 KB in a 32k window: the head is rebuilt after the fourth
    call.  The scripted agent reads the rebuilt head as the same turn (the note counts the saved
    calls, the block shows the person's message) and makes only the one call left, then quotes the
    zoom result it saved before the rebuild."""
    clock = SimClock()
    scripted = ScriptedAgent(seed=4, tool_preference={"terminal": 1.0, "zoom": 0.0, "recall_search": 0.0,
                                                      "date": 0.0})
    sim = Simulator(SimRoute(route_responder(ScriptedWriter(seed=4), scripted),
                             make_cache("deepseek"), context_length=1_000_000, flavour="deepseek"))
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=Settings(), root=tmp_path,
                         clock=clock.wall, window_tokens=32_768)
    memory.commit_turn("chat-1", "Deploy", [Message("user", "The deploy code is K7-ALPHA-42.", 1.0),
                                            Message("reply", "Noted.", 1.0)])
    agent = make_provider(ROUTE, api_key="sim", http_client=sdk_http_client("openai", sim))
    terminal = {"name": "terminal", "description": "Run a shell command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]}}
    turn = Turn(memory, "chat-1", "Deploy", system_prompt("You are a helpful assistant."), turn_tools([terminal]))
    ran: list[str] = []

    async def run_tool(call) -> str:
        ran.append(call.arguments)
        return f"build log {len(ran)} " + " ".join(f"step{len(ran)}-{i}" for i in range(300))

    outcome = run(run_turn(turn, "Build and check it. [[zoom:0:1]] [[tools:4]] [[reply:300]]", agent,
                           run_tool=run_tool), clock)
    assert turn.rebuilds == 1
    assert len(ran) == 4, f"the agent went on with its plan instead of starting again: {len(ran)} calls"
    assert outcome.steps == 6, "a zoom, four tool calls and the final reply"
    assert "K7-ALPHA-42" in outcome.reply, "the zoom result saved before the rebuild is quoted"
    statuses = [memory.turn(n).status for n in range(1, memory.turns)]
    assert statuses == ["continued", "completed"]
