"""Writing the lines a memory still lacks, until none is left, and saying truthfully who is writing them.

``endless catch-up`` and ``endless import`` run :func:`catch_up`; an import too
long to wait for starts a detached ``endless catch-up`` instead.  Whichever
process runs it takes the memory's writer lease first (one writer per memory:
a second catch-up, or a chat's pool, finds it held and leaves the work to the
holder) and keeps a small record of its run in the memory's store (the
``catch-up`` mark: its pid, since when, lines at the start and written so
far, and how it ended).  ``endless doctor`` and Hermes's ``/endless status``
read the lease and that record through :func:`writer_state`, so they say
which process writes the lines and how far it got, that the last catch-up was
stopped before it finished, or that nothing is writing them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Any

import orjson

from endless.core.words import count

PROGRESS_SECONDS = 0.5  # how often the bar is redrawn
MARK_SECONDS = 2.0  # how often the run's record is brought up to date
MARK = "catch-up"  # the store's mark holding the last catch-up's record


def _no_provider(route: Any) -> Any:
    raise RuntimeError("the offline writer calls no model")


@dataclass(frozen=True)
class Run:
    """A catch-up's record of itself, as the mark keeps it."""

    pid: int
    started: float  # wall time
    writer: str  # offline or model
    lines_at_start: int
    written: int
    updated: float  # wall time of the last update
    state: str  # running, done, paused (the spend cap), handed (to a chat's pool), stopped, failed
    background: bool = False  # started by an import, detached
    error: str = ""

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, raw: bytes | None) -> "Run | None":
        if not raw:
            return None
        try:
            data = orjson.loads(raw)
            return cls(int(data["pid"]), float(data["started"]), str(data["writer"]), int(data["lines_at_start"]),
                       int(data["written"]), float(data["updated"]), str(data["state"]),
                       bool(data.get("background", False)), str(data.get("error", "")))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None

    @property
    def name(self) -> str:
        """What ran, after an article ("a", "the last")."""
        return "detached `endless catch-up` (started by `endless import`)" if self.background else "`endless catch-up`"


def _step_aside(memory: Any, pool: Any, run: Run, ended: dict[str, str]) -> bool:
    """Whether a catch-up started in the background should stop now, and why (in ``ended``): a chat's
    writer pool waits for the lease (it writes every chat's lines, with each chat's own route), or the
    writer's calls have failed for ``CATCH_UP_GIVE_UP_SECONDS`` (it would hold the lease and retry
    forever; what it says is kept in the run's record for doctor)."""
    from endless.core.settings import CATCH_UP_GIVE_UP_SECONDS

    wanted = memory.lease.wanted()
    if wanted is not None and wanted.pid != os.getpid() and wanted.at >= run.started:
        ended.update(state="handed", error=f"pid {wanted.pid} took over")
        return True
    failing = pool.stats.failing_since
    if failing is not None and time.time() - failing >= CATCH_UP_GIVE_UP_SECONDS:
        ended.update(state="failed", error=f"no writer call answered for {CATCH_UP_GIVE_UP_SECONDS:.0f} s "
                                           f"(last: {pool.stats.last_error or 'an error'})")
        return True
    return False


def last_run(memory: Any) -> Run | None:
    return Run.from_json(memory.store.read_mark(MARK))


def _record(memory: Any, run: Run) -> None:
    try:
        memory.store.durable_mark(MARK, run.to_json())
    except OSError:  # (a record that cannot be kept never stops the writing; doctor then says less)
        pass


def catch_up(memory: Any, writer: str, show_progress: bool, background: bool = False,
             model_asked: bool = False) -> dict:
    """Run the writer pool on ``memory`` until nothing is left; returns what it wrote.

    The lease is taken first: when another process holds it (a chat's pool, another catch-up),
    nothing is written here and the answer says so (``elsewhere``, with its pid when known).
    ``model_asked``: the person asked for the model by name, so it also writes what an import had
    left to the offline writer.
    """
    from endless.writer.pace import lines_left
    from endless.writer.pool import WriterPool

    total = lines_left(memory.built_slots(), memory.total)
    started = time.monotonic()
    if not memory.take_lease():
        holder = lease_holder(memory)
        return {"memoryId": memory.memory_id, "writer": writer, "written": 0, "left": total, "seconds": 0.0,
                "calls": 0, "offlineLines": 0, "modelLines": 0, "elsewhere": True, "paused": False,
                "holder": None if holder is None else holder.pid}
    if writer == "model":
        from endless.llm.connect import make_provider

        providers: Any = make_provider
        pool = WriterPool(memory, providers, model_chosen=model_asked)
    else:
        offline = dataclasses.replace(memory.settings, writer_route="")
        pool = WriterPool(memory, _no_provider, settings=offline, offline_chosen=True)
    wall = time.time()
    run = Run(os.getpid(), wall, writer, total, 0, wall, "running", background)
    _record(memory, run)
    ended: dict[str, str] = {}  # why a background run stepped aside before the end (see _step_aside)

    def written() -> int:
        return total - lines_left(memory.built_slots(), memory.total)

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(pool.run(stop, until_idle=True))
        progress = task_bar = None
        if show_progress and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn("writing lines"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            progress.start()
            task_bar = progress.add_task("lines", total=total)
        marked = time.monotonic()
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=PROGRESS_SECONDS)
                if progress is not None:
                    progress.update(task_bar, completed=written())
                if time.monotonic() - marked >= MARK_SECONDS:
                    _record(memory, dataclasses.replace(run, written=written(), updated=time.time()))
                    marked = time.monotonic()
                    if background and _step_aside(memory, pool, run, ended):
                        stop.set()
            task.result()
        finally:
            if progress is not None:
                progress.stop()
            if not task.done():
                stop.set()
                task.cancel()

    try:
        asyncio.run(go())
    except BaseException as exc:
        stopped = isinstance(exc, (KeyboardInterrupt, SystemExit)) or type(exc).__name__ == "Terminated"
        _record(memory, dataclasses.replace(run, written=written(), updated=time.time(),
                                            state="stopped" if stopped else "failed",
                                            error="" if stopped else f"{type(exc).__name__}: {exc}"[:300]))
        raise
    left = lines_left(memory.built_slots(), memory.total)
    stats = pool.stats
    state = ended.get("state") or ("paused" if left and stats.paused else "done")
    _record(memory, dataclasses.replace(run, written=total - left, updated=time.time(), state=state,
                                        error=ended.get("error", "")))
    return {"memoryId": memory.memory_id, "writer": writer, "written": total - left, "left": left,
            "seconds": round(time.monotonic() - started, 2), "calls": stats.calls,
            "offlineLines": stats.offline_lines + stats.offline_fallbacks, "modelLines": stats.model_lines,
            "elsewhere": False, "paused": bool(left and stats.paused), "ended": state}


def catch_up_if_behind(memory: Any, final: bool) -> dict | None:
    """Write a captured memory's lines where nothing else would (a coding agent's memory has no chat, so no
    writer runs for it): once ``unwritten_ahead`` lines wait, or any when the session ended (``final``).
    None when nothing was due; the answer of :func:`catch_up` otherwise (``elsewhere`` when a chat's or
    another catch-up's writer holds the lease: it writes them)."""
    from endless.faces.kit.writing_cost import choose_writer
    from endless.writer.pace import lines_left

    left = lines_left(memory.built_slots(), memory.total)
    if not left or (left < memory.settings.unwritten_ahead and not final):
        return None
    return catch_up(memory, choose_writer(None, memory.settings), False, background=True)


@dataclass(frozen=True)
class Holder:
    """The process holding a memory's writer lease, as its lease file says."""

    pid: int
    renewed_ago: float
    alive: bool  # its process lives (its beacon is held)
    fresh: bool  # and renewed within the lease's expiry


def lease_holder(memory: Any, now: float | None = None) -> Holder | None:
    """Who holds the writer lease (None: nobody, or a store whose lease names no process)."""
    read = getattr(memory.lease, "read", None)
    info = read() if read is not None else None
    if info is None:
        return None
    now = time.time() if now is None else now
    alive = memory.lease.holder_alive(info)
    age = now - info.renewed
    return Holder(info.pid, age, alive, alive and age < memory.settings.lease_expiry_seconds)


@dataclass(frozen=True)
class WriterState:
    """What doctor and status say of a memory's writer: a sentence, whether one runs, what to do."""

    sentence: str
    writing: bool
    fix: str | None
    lines_left: int
    cut_short: bool = False  # nothing writes them and the last catch-up ended before it finished


def writer_state(memory: Any, now: float) -> WriterState:
    """Who writes the memory's lines now and how far they got, in a person's words (module doc)."""
    from endless.writer.pace import progress, say_duration

    catching = progress(memory, now)
    left = catching.lines_left
    if left == 0:
        return WriterState("every line is written", False, None, 0)
    holder = lease_holder(memory, now)
    run = last_run(memory)
    if holder is not None and holder.fresh:
        if run is not None and run.pid == holder.pid and run.state == "running":
            # (what the tree holds now, not the record's last count: it is brought up to date every few s)
            written = max(run.written, run.lines_at_start - left)
            took = now - run.started
            pace = written * 60.0 / took if took > 0 and written else 0.0
            done = f"{count(written, 'line')} of {run.lines_at_start:,} written"
            when = time.strftime("%H:%M", time.localtime(run.started))
            if run.writer == "offline" and pace > 0:
                rate = f"{pace:,.0f} lines a minute, done in {say_duration(left / pace * 60.0)}"
            elif run.writer == "offline":
                rate = "just started"
            elif catching.failing is not None:
                rate = catching.failing.sentence(now)
            else:
                rate = (f"{catching.calls_per_minute:.1f} writer calls a minute, done in "
                        f"{say_duration(catching.seconds_left)}")
            return WriterState(f"{catching.left_sentence()}; a {run.name} (pid {holder.pid}, since {when}, "
                               f"{run.writer} writer) is writing them: {done}, {rate}", True, None, left)
        who = "this process" if memory.holds_lease else f"pid {holder.pid}"
        return WriterState(f"{catching.sentence()}; the writer pool in {who} is writing them", True, None, left)
    said = f"{catching.left_sentence()}; nothing is writing them now"
    cut_short = run is not None and run.state in ("running", "stopped", "failed", "paused")
    fix = "run `endless catch-up` to write them now (it goes on where the last one stopped), or the next chat here does"
    if cut_short:
        ended = {"running": "ended before it finished (stopped or killed)", "stopped": "was stopped",
                 "failed": f"failed ({run.error})", "paused": "stopped at the spend cap"}[run.state]
        said += (f" (the last {run.name}, pid {run.pid}, {ended} after writing "
                 f"{count(run.written, 'line')} of {run.lines_at_start:,})")
        if run.state == "paused":
            fix = ("`endless writer resume` lets the writer spend past the cap for today, then run `endless "
                   "catch-up`; or raise spend_cap_per_day")
    return WriterState(said, False, fix, left, cut_short)
