"""Replay a scripted conversation through the real turn protocol, writer pool, SDKs and simulator.

Everything runs on the simulator's clock (:class:`endless.sim.clock.SimClock`):
a run of thousands of turns with half a minute between them takes simulated
hours and real minutes.  The simulator's ``observer`` sees every request with
its tokens, so one run measures several cache models side by side (each model
gets the same traffic; the route's own model answers it), and the replay
notes, per chat, how far each request repeats that chat's previous one.  The
benchmark, the demo and the CI run all drive conversations through here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from endless.turn.run import run_turn
from endless.core.store import workspace_key
from endless.core.memory import Memory
from endless.llm.request import ToolCallOut
from endless.core.settings import Settings
from endless.sim.agent_model import ScriptedAgent
from endless.sim.cache import make_cache, token_array
from endless.sim.clock import SimClock, run
from endless.sim.model import Responder
from endless.sim.responder import route_responder
from endless.sim.script import ScriptTurn, tool_result
from endless.sim.simulator import Route as SimRoute, Simulator
from endless.sim.transport import sdk_http_client
from endless.sim.writer_model import ScriptedWriter, is_writer_request
from endless.turn.head import system_prompt, turn_tools
from endless.turn.protocol import Turn
from endless.writer.pool import PoolStats, WriterPool
from endless.llm.client import Usage
from endless.llm.connect import make_provider
from endless.llm.routes import Route
from endless.writer.usage import cost
from endless.writer.queue import ready_work

HARNESS_SYSTEM = ("You are a careful assistant working with one person on their projects. Answer plainly, "
                  "use the tools when a task needs them, and keep what you promise. ") * 12
HARNESS_TOOLS = [{"name": "terminal", "description": "Run a shell command in the workspace and return its output.",
                  "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                                 "required": ["cmd"]}}]
CONTEXT = ["Workspace instructions (AGENTS.md): keep changes small, run the tests before saying done, "
           "and write dates as YYYY-MM-DD."]

# Each cache model with the provider whose prices bill it.
PRICED = {
    "deepseek": {"provider": "deepseek", "flavour": "deepseek", "model": "deepseek-v4-pro"},
    "openai-auto": {"provider": "openai", "flavour": "openai", "model": "gpt-5.2"},
    "openai-breakpoints": {"provider": "openai", "flavour": "openai", "model": "gpt-5.6-terra"},
    "anthropic": {"provider": "anthropic", "flavour": "anthropic", "model": "claude-sonnet-5"},
}
UNIT = 128  # the prompt-cache unit of the automatic models (tokens)
MARKED = ("openai-breakpoints", "anthropic")
# How long each provider keeps an entry (the lifetime Endless asks for where it may choose): a
# chat quiet for longer finds its entries gone, which no layout can avoid.
TTL = {"deepseek": 86_400.0, "openai-auto": 600.0, "openai-breakpoints": 1800.0, "anthropic": 3600.0}
QUIET_JUMP = 5.0  # gaps longer than this are jumped over once the writer is idle


@dataclass
class RequestRow:
    """One agent request: who sent it, how big, and what each cache model read."""

    turn: int
    chat: int
    step: int
    at: float
    tokens: int
    common: int  # tokens shared with the same chat's previous request
    read: dict[str, int] = field(default_factory=dict)
    avoidable: dict[str, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    output: int = 0
    batch: bool = False  # its view does not extend the chat's previous view (a merge batch came between)


@dataclass
class TurnRow:
    number: int
    chat: int
    kind: str
    wait: float
    batch: bool
    refused: bool
    steps: int
    first: RequestRow | None = None


@dataclass
class ReplayResult:
    turns: list[TurnRow]
    requests: list[RequestRow]
    writer_calls: int
    writer_tokens: dict[str, dict[str, int]]  # model -> {input, read, uncached, output}
    writer_cost: dict[str, float]
    stats: PoolStats
    memory_folder: Path
    memory_id: str
    simulated_seconds: float
    real_seconds: float
    transcript: list[dict]  # per turn: chat, person, steps [(call args, result)], reply, at
    view_sizes: list[int]


@dataclass
class ReplayConfig:
    api: str = "openai"  # openai | anthropic
    caches: tuple[str, ...] = ("deepseek", "openai-auto", "openai-breakpoints")
    window_tokens: int = 200_000
    settings: Settings = field(default_factory=lambda: Settings(settle_poll_seconds=1.0))
    seed: int = 7
    model_writer: bool = True  # False: no route is recorded, the offline writer writes every line
    settle_all: bool = False  # wait at the end until every line is written
    writer_route: dict | None = None  # a real endpoint for the writer: then the run goes in real time
    start_wall: float | None = None  # the simulated clock's wall time at the start (default: the clock's)


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length, in 4-byte tokens, of the common prefix of two token arrays (binary search, C compares)."""
    lo, hi = 0, min(len(a), len(b)) // 4
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid * 4] == b[:mid * 4]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def avoidable_miss(model: str, common: int, read: int, previous_marks: list[int], previous_len: int) -> int:
    """Tokens the provider could have read from the chat's previous request but did not.

    Automatic caches (DeepSeek, OpenAI) store whole 128-token units: up to one
    unit short of the shared prefix is their granularity.  Marked caches store
    at the previous request's marks: the last mark inside the shared prefix is
    what could be read.
    """
    if model in MARKED:
        reachable = max((m for m in previous_marks if m <= common), default=0)
    else:
        reachable = (min(common, previous_len) // UNIT) * UNIT - UNIT
        if model == "openai-auto" and reachable < 1024:
            reachable = 0
    return max(0, reachable - read)


class Replay:
    """One scripted run.  ``progress(done, total)`` is called after each turn."""

    def __init__(self, root: Path, script: list[ScriptTurn], config: ReplayConfig,
                 progress: Callable[[int, int], None] | None = None,
                 agent: Callable[[Callable[[], ScriptTurn | None]], Responder] | None = None) -> None:
        """``agent``: makes the responder that answers turn requests, given how to read the current
        turn (default: the scripted agent, steered by each turn's marker words)."""
        self.root = root
        self.script = script
        self.config = config
        self.progress = progress
        self.clock = SimClock() if config.start_wall is None else SimClock(config.start_wall)
        if config.writer_route:
            self.clock = _RealClock()
        api = config.api
        primary = "anthropic" if api == "anthropic" else config.caches[0]
        self.primary = primary
        self.extra = {name: make_cache(name) for name in config.caches if name != primary}
        writer = ScriptedWriter(seed=config.seed)
        self.agent = ScriptedAgent(seed=config.seed, tool_preference={"terminal": 1.0, "zoom": 0.0,
                                                                        "recall_search": 0.0, "date": 0.0})
        steered = (_Steered(self.agent, lambda: self._current.markers if self._current else "")
                   if agent is None else agent(lambda: self._current))
        flavour = "anthropic" if api == "anthropic" else ("deepseek" if primary == "deepseek" else "openai")
        self.sim = Simulator(SimRoute(route_responder(writer, steered), make_cache(primary),
                                      context_length=config.window_tokens, flavour=flavour),
                             log_prompts=False, observer=self._observe)
        if api == "anthropic":
            self.route = Route("anthropic", "claude-sonnet-5", api_key_env="SIM_KEY")
        elif "openai-breakpoints" in config.caches:
            self.route = Route("openai", "gpt-5.6-terra", api_key_env="SIM_KEY")
        else:
            self.route = Route("openai", "deepseek-v4-pro", base_url="https://api.deepseek.com",
                               api_key_env="SIM_KEY")
        self.models = ["anthropic"] if api == "anthropic" else list(config.caches)
        self.requests: list[RequestRow] = []
        self.writer_tokens = {m: {"input": 0, "read": 0, "uncached": 0, "output": 0} for m in self.models}
        self.writer_cost = {m: 0.0 for m in self.models}
        self.writer_calls = 0
        self._current: ScriptTurn | None = None
        self._step = 0
        self._previous: dict[int, tuple[bytes, list[int], int, float]] = {}
        self._views: dict[int, str] = {}
        self._idle = _Idle()

    # -- the observer: every request the simulator answers --------------------------------

    def _observe(self, request, prompt, record) -> None:
        usage = record.get("usage")
        if usage is None:
            return
        t0 = record["time"]
        failed = record["status"] != 200
        reads: dict[str, dict[str, int]] = {}
        for name, model in self.extra.items():
            got = model.request(prompt.tokens, prompt.block_ends, prompt.marks, request.cache_key, t0,
                                t0 + record["first_byte"], t0 + (record["latency"] or 0.0), failed=failed)
            reads[name] = {"input": got.input, "read": got.read, "write": got.write, "long": got.write_1h,
                           "uncached": got.uncached}
        reads[self.primary] = {"input": usage["input"], "read": usage["read"], "write": usage["write"],
                               "long": usage["write_1h"], "uncached": usage["uncached"]}
        costs = {name: cost(PRICED[name], Usage(cached=reads[name]["read"], uncached=reads[name]["uncached"],
                                                cache_write=reads[name]["write"], output=usage["output"],
                                                cache_write_long=reads[name]["long"]), record["wall"])
                 for name in self.models}
        if is_writer_request(request):
            self.writer_calls += 1
            for name in self.models:
                self.writer_tokens[name]["input"] += reads[name]["input"]
                self.writer_tokens[name]["read"] += reads[name]["read"]
                self.writer_tokens[name]["uncached"] += reads[name]["uncached"]
                self.writer_tokens[name]["output"] += usage["output"]
                self.writer_cost[name] += costs[name]
            return
        turn = self._current
        if turn is None:
            return
        tokens = token_array(prompt.tokens).tobytes()
        marks = sorted(prompt.marks)
        previous = self._previous.get(turn.chat)
        common = _common_prefix(previous[0], tokens) if previous else 0
        row = RequestRow(turn.number, turn.chat, self._step, t0, len(tokens) // 4, common,
                         {n: reads[n]["read"] for n in self.models}, cost=costs, output=usage["output"])
        if previous:
            for name in self.models:
                if t0 - previous[3] <= TTL[name]:
                    row.avoidable[name] = avoidable_miss(name, common, row.read[name], previous[1], previous[2])
                else:
                    row.avoidable[name] = 0  # the provider's entries expired: not the layout's doing
        self._previous[turn.chat] = (tokens, marks, len(tokens) // 4, t0)
        # Every request, not only a turn's first: a long turn's rebuilt head may carry a batched view.
        view = _view_text(prompt.text)
        before = self._views.get(turn.chat)
        row.batch = before is not None and not view.startswith(before)
        self._views[turn.chat] = view
        self._step += 1
        self.requests.append(row)

    # -- the run --------------------------------------------------------------------

    async def _quiet(self, memory: Memory, gap: float) -> None:
        """A gap between turns: let the writer work, and once it is idle jump the clock over the rest.

        Stepping through idle simulated time (a night, or the end of a 30 s
        gap) would only wake the pool's polls and lease renewals again and
        again; once the writer has nothing left to do, nothing would happen in
        them anyway.  The clock still moves by the whole gap, so cache entries
        expire exactly as they would.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        await memory.settle(self._idle, gap)
        rest = gap - (loop.time() - started)
        if rest > 0:
            self.clock.advance(rest)
        await asyncio.sleep(0)

    def run(self) -> ReplayResult:
        started = time.perf_counter()
        config = self.config
        memory = Memory.open(workspace_key(None, self.root / "workspace"), settings=config.settings,
                             root=self.root, clock=self.clock.wall, window_tokens=config.window_tokens)

        def providers(route: Route):
            return make_provider(route, api_key="sim", http_client=sdk_http_client(route.provider, self.sim))

        real_writer = Route.from_json(config.writer_route) if config.writer_route else None

        def writer_providers(route: Route):
            if real_writer is not None and route == real_writer:
                return make_provider(route, api_key=os.environ.get(route.api_key_env or "", "") or "none")
            return providers(route)

        agent = providers(self.route)
        system = system_prompt(HARNESS_SYSTEM)
        tools = turn_tools(HARNESS_TOOLS)
        rows: list[TurnRow] = []
        transcript: list[dict] = []
        view_sizes: list[int] = []
        pool = WriterPool(memory, writer_providers, route=real_writer)

        async def main() -> None:
            stop = asyncio.Event()
            writer = asyncio.ensure_future(pool.run(stop))
            for number, item in enumerate(self.script):
                gap = item.gap if item.at is None else max(0.0, item.at - self.clock.wall())
                if gap > QUIET_JUMP and isinstance(self.clock, SimClock):
                    await self._quiet(memory, gap)
                elif gap:
                    await asyncio.sleep(gap)
                steps: list[dict] = []

                async def run_tool(call: ToolCallOut, item: ScriptTurn = item, steps: list = steps) -> str:
                    result = tool_result(item, len(steps))
                    steps.append({"name": call.name, "arguments": call.arguments, "result": result})
                    return result

                self._current, self._step = item, 0
                began = asyncio.get_running_loop().time()
                before = len(self.requests)
                turn = Turn(memory, item.session, item.title, system, tools, CONTEXT)
                outcome = await run_turn(turn, item.person, agent, state=_state(self.clock.wall()),
                                         route=self.route.to_json() if config.model_writer else None,
                                         run_tool=run_tool)
                first = self.requests[before] if len(self.requests) > before else None
                # The wait: until the first request, or, for a refused turn, until the refusal.
                waited = (first.at if first else asyncio.get_running_loop().time()) - began
                rows.append(TurnRow(number, item.chat, item.kind, waited, bool(first and first.batch),
                                    outcome.refused,
                                    outcome.steps, first))
                transcript.append({"chat": item.chat, "person": item.person, "steps": steps,
                                   "reply": outcome.reply, "at": began, "tokens": first.tokens if first else 0})
                view_sizes.append(memory.views.size())
                if self.progress is not None:
                    self.progress(number + 1, len(self.script))
            self._current = None
            if config.settle_all:
                await memory.settle(self._idle, 7 * 86_400)
            stop.set()
            await writer

        if real_writer is not None:
            asyncio.run(main())  # a real endpoint answers in real time
        else:
            run(main(), self.clock)
        result = ReplayResult(rows, self.requests, self.writer_calls, self.writer_tokens, self.writer_cost,
                              pool.stats, memory.folder, memory.memory_id, self.clock.now,
                              time.perf_counter() - started, transcript, view_sizes)
        self.memory = memory
        return result


class _Steered:
    """Hands the scripted agent the current turn's marker words, appended to the person's message.

    Only the agent's copy of the request changes: the memory, the request
    Endless built and the simulator's tokens and cache see the person's text alone.
    """

    def __init__(self, agent: ScriptedAgent, markers: Callable[[], str]) -> None:
        self.agent = agent
        self.markers = markers

    def reply(self, request, now: float):
        words = self.markers()
        if words:
            messages = list(request.messages)
            for k in range(len(messages) - 1, -1, -1):
                if messages[k].role == "user" and messages[k].tool_call_id is None:
                    messages[k] = dataclasses.replace(messages[k], text=messages[k].text + " " + words)
                    break
            request = dataclasses.replace(request, messages=messages)
        return self.agent.reply(request, now)


class _RealClock:
    """The wall clock, for runs whose writer is a real endpoint."""

    now = property(lambda self: time.monotonic() - self._start)

    def __init__(self) -> None:
        self._start = time.monotonic()

    @staticmethod
    def wall() -> float:
        return time.time()


def _state(now: float) -> str:
    return "Now: " + time.strftime("%Y-%m-%d %H:%M", time.gmtime(now)) + " UTC"


class _Idle:
    """True once the writer has nothing left: no ready work, every message's line built.

    Lines are never unbuilt, so the scan resumes where the last one stopped:
    checking every second of a gap stays cheap however long the history.
    """

    def __init__(self) -> None:
        self.built_upto = 0

    def __call__(self, memory: Memory) -> bool:
        if ready_work(memory):
            return False
        while self.built_upto < memory.total and memory.is_built(0, self.built_upto):
            self.built_upto += 1
        return self.built_upto >= memory.total


def _view_text(prompt: str) -> str:
    """The view lines of a turn request: what lies between ``<chat>`` and ``</chat>``."""
    start = prompt.find("<chat>")
    end = prompt.find("</chat>", start)
    return prompt[start:end].rstrip() if start >= 0 and end >= 0 else ""


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


