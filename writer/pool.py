"""The writer pool: background calls that write and merge lines (DESIGN §3.1–§3.3).

Run by the one process that holds the memory's writer lease.  It takes ready
work in build order, packs up to 6 lines into a call, keeps at most 8 calls in
flight, lets the first call on an uncached prefix go alone (the cache gate),
judges every try, asks again in the same conversation, and falls back to the
offline writer when a line keeps failing.  Provider errors are retried every
10 s and never count against a line; rate limits back the whole pool off.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

import orjson

from endless.core.store import durable
from endless.core.privacy import forget
from endless.core.view import Part, tiling
from endless.core.errors import MemoryUseError
from endless.core.privacy import redact
from endless.llm.request import Msg, Request
from endless.core.settings import OFFLINE_STORE_LINES, RETENTION_CHECK_SECONDS, Settings
from endless.core.words import count
from endless.writer import checks, offline
from endless.llm.client import Completion
from endless.llm.errors import ProviderError
from endless.llm.routes import Route, RouteError
from endless.writer.expand import expander
from endless.writer.interface import WriterMemory
from endless.writer.queue import Job, work_queue
from endless.writer.recorded import recorded_routes
from endless.writer.stretches import offline_stretches
from endless.writer.spend import is_paused, write_pause
from endless.writer.task import JobText, build_request, describe, feedback, job_input, job_session, split_reply
from endless.writer.usage import UsageLog

ProviderFactory = Callable[[Route], object]
_EPSILON = 1e-3  # seconds: a retry due this close to now is due now (float clocks)


def log(message: str, level: int = logging.INFO) -> None:
    durable.log("writer", message, level)


@dataclass
class PoolStats:
    """What the pool did, for tests, benchmarks and ``endless doctor``."""

    calls: int = 0
    failed_calls: int = 0
    model_lines: int = 0
    offline_fallbacks: int = 0  # lines written offline after failed content rounds
    offline_lines: int = 0  # lines written offline because no route is configured
    trimmed: int = 0
    rejected: Counter = field(default_factory=Counter)  # tries rejected, by problem
    failed_rounds: int = 0
    tries: int = 0
    failing_since: float | None = None  # wall time of the first failed call since the last answered one
    last_error: str = ""  # the kind of the last failed call (rate_limit, timeout, auth …)
    paused: bool = False  # the spend cap pauses the pool

    @property
    def invented(self) -> int:
        return self.rejected["invented"]


@dataclass
class _LineState:
    rounds: int = 0
    retry_at: float = 0.0
    first_in_line: bool = False


@dataclass
class _Plan:
    """Where a job's call goes: its route and the chat prompt it reuses."""

    route: Route | None
    system: str | None
    tools: list[dict]

    @functools.cached_property
    def key(self) -> str:
        route = orjson.dumps(self.route.to_json() if self.route else None, option=orjson.OPT_SORT_KEYS)
        blob = route + b"\0" + (self.system or "").encode() + b"\0" + orjson.dumps(self.tools)
        return hashlib.sha256(blob).hexdigest()[:16]


class WriterPool:
    """The pool for one memory.  ``providers`` turns a route into a provider (tests pass the simulator's)."""

    def __init__(self, memory: WriterMemory, providers: ProviderFactory, *, settings: Settings | None = None,
                 route: Route | None = None, usage: UsageLog | None = None,
                 wall: Callable[[], float] | None = None, offline_chosen: bool = False,
                 model_chosen: bool = False) -> None:
        self.memory = memory
        self.queue = work_queue(memory)
        self.routes = recorded_routes(memory)
        self.stretches = offline_stretches(memory)
        # The person asked for the model now (``endless catch-up --writer model``): stretches an import left
        # to the offline writer are written by the model in this run.
        self.model_chosen = model_chosen
        self.settings = settings or memory.settings
        self.providers = providers
        self.override = route if route is not None else configured_route(self.settings)
        self.usage = usage or UsageLog(memory.folder)
        self.wall = wall or memory.clock
        self.stats = PoolStats()
        self._states: dict[tuple[int, int], _LineState] = {}
        self._in_flight: set[tuple[int, int]] = set()
        self._tasks: set[asyncio.Task] = set()
        self._gate_open: dict[str, float] = {}  # prefix key -> when it was last answered
        self._gate_busy: set[str] = set()  # prefixes whose first call is not answered yet
        self._backoff_until = 0.0
        self._backoff = 0.0
        self._provider_cache: dict[str, object] = {}
        self._offline_noted = offline_chosen  # (the person chose it, and was told: not said again)
        self._wrote_offline = False
        self._paused_noted = False
        self._retention_due = 0.0  # loop time of the next look for messages past forget_after_days
        if self.override is not None:  # a writer model is set: it also finds other words for a search
            memory.expand_query = expander(memory, providers, self.override, self.usage, self.settings, self.wall)

    # -- running ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None, *, until_idle: bool = False) -> PoolStats:
        """Write lines until ``stop`` is set (or, with ``until_idle``, until nothing is left to do)."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        lease_stop = asyncio.Event()
        keeper: asyncio.Task | None = None
        try:
            while not stop.is_set():
                if not self.memory.holds_lease or keeper is None or keeper.done():
                    # (a pool that waits says so: a catch-up standing in for a chat steps aside)
                    if not self.memory.take_lease(want=not until_idle):
                        if until_idle:
                            return self.stats
                        await self._wait(stop, self.settings.writer_poll_seconds)
                        continue
                    keeper = asyncio.create_task(self.memory.keep_lease(lease_stop))
                self.memory.catch_up()
                now = loop.time()
                self._retention(now)
                launched = self._launch(now)
                if until_idle and not self._tasks and not launched and not self._waiting_work(now):
                    break
                if self._wrote_offline:  # more may be ready at once: look again, after letting others run
                    self._wrote_offline = False
                    await asyncio.sleep(0)
                    continue
                await self._wait(stop, self._next_wake(now))
                self._reap()
        finally:
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()
            self._in_flight.clear()
            lease_stop.set()
            if keeper is not None:
                await asyncio.gather(keeper, return_exceptions=True)
        return self.stats

    def _retention(self, now: float) -> None:
        """Forget messages past ``forget_after_days`` (the lease holder's job), once an hour."""
        if self.settings.forget_after_days is None or now < self._retention_due:
            return
        self._retention_due = now + RETENTION_CHECK_SECONDS
        try:
            forget.retention(self.memory)  # type: ignore[arg-type]  # the core's own Memory
        except (OSError, MemoryUseError) as exc:
            log(f"retention (forget_after_days) did not run: {exc}; it tries again in an hour", logging.WARNING)

    async def _wait(self, stop: asyncio.Event, timeout: float) -> None:
        snapshot = (self.memory.total, self.memory.lines_built)
        changed = asyncio.ensure_future(self.memory.settle(
            lambda m: (m.total, m.lines_built) != snapshot, max(0.0, timeout)))
        stopper = asyncio.ensure_future(stop.wait())
        waiters = {changed, stopper, *self._tasks}
        try:
            await asyncio.wait(waiters, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for helper in (changed, stopper):
                if not helper.done():
                    helper.cancel()
            await asyncio.gather(changed, stopper, return_exceptions=True)

    def _reap(self) -> None:
        for task in [t for t in self._tasks if t.done()]:
            self._tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log(f"a writer call failed inside Endless: {task.exception()!r}")

    def _next_wake(self, now: float) -> float:
        wake = self.settings.writer_poll_seconds
        pending = [s.retry_at - now for s in self._states.values() if s.retry_at > now + _EPSILON]
        if self._backoff_until > now + _EPSILON:
            pending.append(self._backoff_until - now)
        return max(_EPSILON, min([wake, *pending]))

    def _waiting_work(self, now: float) -> bool:
        """Ready work that only waits for a retry time, a backoff or the cache gate."""
        return any(job.part not in self._in_flight for job in self.queue.ready()) and not self.paused()

    # -- choosing work ---------------------------------------------------------------

    def _plan(self, job: Job, offline_chosen: bool) -> _Plan:
        if offline_chosen:
            return _Plan(None, None, [])  # the person chose the offline writer for this stretch
        recorded = self.routes.get(job_session(self.memory, job))
        if self.override is not None:
            return _Plan(self.override, recorded.system if recorded else None,
                         recorded.tools if recorded else [])
        if recorded is None or not recorded.route:
            return _Plan(None, None, [])
        try:
            route = Route.from_json(recorded.route)
        except (ValueError, TypeError, KeyError) as exc:
            log(f"the recorded route of this chat is unusable ({exc}); writing its lines offline")
            return _Plan(None, None, [])
        return _Plan(route, recorded.system, recorded.tools or [])

    def paused(self) -> bool:
        cap = self.settings.spend_cap_per_day
        if cap is None:
            return False
        spent = self.usage.spent_today(self.wall())
        if not is_paused(self.memory, spent, cap, self.wall()):
            self._paused_noted = self.stats.paused = False
            return False
        self.stats.paused = True
        if not self._paused_noted:
            log(f"paused: {spent:.4f} USD spent today reaches the cap of {cap:.4f}; "
                "`endless writer resume` lifts the pause for today")
            write_pause(self.memory, self.wall(), spent, cap)
            self._paused_noted = True
        return True

    def _launch(self, now: float) -> bool:
        """Start calls for ready work while slots are free; True if anything started."""
        if self.paused() or now + _EPSILON < self._backoff_until:
            return False
        # Planned in build order until a store's worth of offline lines is found (one routes read per
        # job): after a long import every ready line is offline, a hundred thousand of them, and a
        # launch stores the first few hundred.
        offline_chosen = not self.model_chosen
        if offline_chosen:
            self.stretches.refresh()
        plans: dict[Part, _Plan] = {}
        ready: list[Job] = []
        offline_jobs: list[Job] = []
        for job in self._eligible(now):
            ready.append(job)
            plan = plans[job.part] = self._plan(job, offline_chosen and self.stretches.holds(job.part))
            if plan.route is None:
                offline_jobs.append(job)
                if len(offline_jobs) >= OFFLINE_STORE_LINES:
                    break
        if offline_jobs:
            # A few hundred at a time: each store holds the memory's lock (a chat waits for it) and
            # the loop, where the lease is renewed, runs again only after it.
            self._write_offline(offline_jobs, default=True)
            self._wrote_offline = True
            return True
        started = False
        blocked: set[str] = set()
        while ready and len(self._tasks) < self.settings.writer_calls:
            head = ready.pop(0)
            plan = plans[head.part]
            key = plan.key
            if key in blocked:
                continue
            batch = [head]
            for job in list(ready):
                if len(batch) >= self.settings.lines_per_call:
                    break
                if plans[job.part].key == key:
                    batch.append(job)
                    ready.remove(job)
            gate = self._gate_key(key)
            warm = now - self._gate_open.get(gate, -1e18) < self.settings.cache_warm_seconds
            if not warm:
                if gate in self._gate_busy:
                    blocked.add(key)
                    continue
                self._gate_busy.add(gate)
                blocked.add(key)  # the rest wait until this first call is answered
            for job in batch:
                self._in_flight.add(job.part)
            task = asyncio.ensure_future(self._call(batch, plan, gate))
            self._tasks.add(task)
            started = True
        return started

    def _gate_key(self, plan_key: str) -> str:
        """The cached prefix a call reads: the chat prompt plus the writer view's merged lines."""
        merged = []
        for part in self.memory.views.wview.parts:
            if part[0] == 0:
                break
            merged.append(part)
        blob = plan_key.encode() + orjson.dumps(merged)
        return hashlib.sha256(blob).hexdigest()[:16]

    def _eligible(self, now: float) -> Iterator[Job]:
        """Ready jobs not in flight nor waiting to be tried again, in build order, those first in line
        (a call that failed for them) before the rest."""
        states = self._states
        jobs = (job for job in self.queue.ready_in_order() if job.part not in self._in_flight
                and (job.part not in states or states[job.part].retry_at <= now + _EPSILON))
        if not any(state.first_in_line for state in states.values()):
            return jobs
        return iter(sorted(jobs, key=lambda job: not self._state(job).first_in_line))

    def _state(self, job: Job) -> _LineState:
        state = self._states.get(job.part)
        if state is None:
            state = self._states[job.part] = _LineState()
        return state

    # -- one call --------------------------------------------------------------------

    async def _call(self, jobs: list[Job], plan: _Plan, gate: str) -> None:
        loop = asyncio.get_running_loop()
        items = describe(self.memory, jobs)
        budget = self.settings.line_budget
        request = build_request(self.memory, items, system=plan.system, tools=plan.tools, budget=budget)
        provider = self._provider(plan.route)
        unresolved = {item.key: item for item in items}
        candidates: dict[str, list[str]] = {item.key: [] for item in items}
        attempts = Counter()
        try:
            reply = await self._complete(provider, plan.route, request, [i.job for i in items])
            self._gate_busy.discard(gate)
            self._gate_open[gate] = loop.time()
            request.messages.append(Msg("assistant", [reply.text]))
            pieces = split_reply(reply.text, list(unresolved))
            verdicts = {}
            for key, item in list(unresolved.items()):
                attempts[key] += 1
                verdicts[key] = self._judge(item, pieces.get(key, ""), candidates[key])
                if verdicts[key].ok:
                    self._store(item, verdicts[key].text)
                    del unresolved[key]
            single = len(items) == 1
            for key, item in list(unresolved.items()):
                verdict = verdicts[key]
                while not verdict.ok and attempts[key] < self.settings.tries_per_line:
                    request.messages.append(Msg("user", [self._feedback(verdict, None if single else key)]))
                    reply = await self._complete(provider, plan.route, request, [item.job])
                    request.messages.append(Msg("assistant", [reply.text]))
                    attempts[key] += 1
                    verdict = self._judge(item, split_reply(reply.text, [key])[key], candidates[key])
                if verdict.ok:
                    self._store(item, verdict.text)
                else:
                    self._no_try_passed(item, candidates[key], loop.time())
                del unresolved[key]
            self._backoff = 0.0
        except ProviderError as error:
            self._gate_busy.discard(gate)
            self._provider_failed(error, [item.job for item in unresolved.values()], loop.time())
        except (asyncio.TimeoutError, TimeoutError):
            self._gate_busy.discard(gate)
            self._provider_failed(ProviderError("timeout", "the writer call timed out"),
                                  [item.job for item in unresolved.values()], loop.time())
        finally:
            self._gate_busy.discard(gate)
            for job in jobs:
                self._in_flight.discard(job.part)

    async def _complete(self, provider, route: Route | None, request: Request, jobs: list[Job]) -> Completion:
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.stats.calls += 1
        names = [tiling.name(j.part) for j in jobs]
        try:
            completion = await asyncio.wait_for(provider.complete(request), self.settings.call_timeout_seconds)
        except ProviderError as error:
            self.stats.failed_calls += 1
            self.usage.record(self.wall(), route, names, None, loop.time() - started, error.kind,
                              error=redact.redact(str(error)).text)  # the cause, for status and doctor
            raise
        except (asyncio.TimeoutError, TimeoutError):
            self.stats.failed_calls += 1
            self.usage.record(self.wall(), route, names, None, loop.time() - started, "timeout")
            raise
        self.usage.record(self.wall(), route, names, completion.usage, loop.time() - started, "ok")
        self.stats.failing_since = None
        return completion

    def _provider(self, route: Route | None):
        assert route is not None
        key = orjson.dumps(route.to_json(), option=orjson.OPT_SORT_KEYS).decode()
        provider = self._provider_cache.get(key)
        if provider is None:
            provider = self.providers(route)
            self._provider_cache[key] = provider
        return provider

    def _judge(self, item: JobText, reply: str, candidates: list[str]) -> checks.Verdict:
        self.stats.tries += 1
        budget = self.settings.line_budget
        verdict = checks.judge(reply, item.sources, budget, self.settings.line_accept_ratio)
        if not verdict.ok:
            self.stats.rejected[verdict.problem] += 1
            if verdict.problem == "too_long":
                # Kept for trimming only if nothing else is wrong with it.
                relaxed = checks.judge(reply, item.sources, 10 ** 9, 1.0)
                if relaxed.ok:
                    candidates.append(relaxed.text)
        return verdict

    def _feedback(self, verdict: checks.Verdict, key: str | None) -> str:
        budget = self.settings.line_budget
        target = int(budget * self.settings.line_retry_ratio)
        return feedback(verdict, budget=budget, target=target, cut=checks.cut_mark(verdict.text, target), key=key)

    def _store(self, item: JobText, text: str) -> None:
        if self.memory.store_line(item.job.level, item.job.index, text):
            self.stats.model_lines += 1
        self._states.pop(item.job.part, None)

    def _no_try_passed(self, item: JobText, candidates: list[str], now: float) -> None:
        """No try passed: trim the shortest clean too-long try, or count a failed round."""
        budget = self.settings.line_budget
        if candidates:
            shortest = min(candidates, key=lambda t: len(t.encode("utf-8")))
            if self.memory.store_line(item.job.level, item.job.index, checks.trim(shortest, budget)):
                self.stats.trimmed += 1
                log(f"line {item.job.name}: no try fit in {budget} bytes; kept the shortest, trimmed")
            self._states.pop(item.job.part, None)
            return
        state = self._state(item.job)
        state.rounds += 1
        self.stats.failed_rounds += 1
        if state.rounds >= self.settings.content_rounds:
            self._write_offline([item.job], default=False)
            return
        state.retry_at = now + self.settings.retry_seconds
        state.first_in_line = True

    def _provider_failed(self, error: ProviderError, jobs: list[Job], now: float) -> None:
        if self.stats.failing_since is None:
            self.stats.failing_since = self.wall()
        self.stats.last_error = error.kind
        wait = max(self.settings.retry_seconds, error.retry_after or 0.0)
        for job in jobs:
            state = self._state(job)
            state.retry_at = now + wait
            state.first_in_line = True
        if error.kind in ("rate_limit", "overloaded"):
            self._backoff = min(self.settings.rate_limit_backoff_max,
                                max(self.settings.retry_seconds, self._backoff * 2 or self.settings.retry_seconds))
            self._backoff_until = max(self._backoff_until, now + max(self._backoff, error.retry_after or 0.0))
        log(f"writer call failed ({error.kind}: {error}); retrying {count(len(jobs), 'line')} in {wait:.0f} s",
            logging.WARNING)

    def _write_offline(self, jobs: list[Job], *, default: bool) -> None:
        """Write lines offline, all in one store (one fsync: after an import they come by the thousand)."""
        if not jobs:
            return
        budget = self.settings.line_budget
        lines = []
        for job in jobs:
            if job.level == 0:
                text = offline.offline_leaf(job_input(self.memory, job), budget)
            else:
                left, right = tiling.children(job.part)
                text = offline.offline_merge(self.memory.node_text(*left) or "",
                                             self.memory.node_text(*right) or "", budget)
            lines.append((job.level, job.index, text))
            self._states.pop(job.part, None)
        stored = sum(self.memory.store_lines(lines))
        if not stored:
            return
        if default:
            self.stats.offline_lines += stored
            if not self._offline_noted:
                log("lines are written by the offline writer (no model): no writer route is configured, "
                    "or the person chose it for an imported stretch")
                self._offline_noted = True
        else:
            self.stats.offline_fallbacks += stored
            log(f"line {jobs[0].name} failed {count(self.settings.content_rounds, 'round')} of checks; "
                "the offline writer wrote it")


def configured_route(settings: Settings) -> Route | None:
    """The ``writer_route`` setting (a JSON route), or None: then each chat's own route writes."""
    text = settings.writer_route.strip()
    if not text:
        return None
    try:
        return Route.from_json(text)
    except (RouteError, ValueError) as exc:
        log(f"the writer_route setting is unusable ({exc}); each chat's own route writes instead. "
            "Check it with `endless config`.")
        return None


