"""How far the writer is behind, and how fast it catches up: for the import's estimate, doctor and status.

After an import the tree lacks thousands of lines; a person deciding whether
to let the model write them, or watching it do so, needs three numbers: the
lines left, the pace the writer keeps on this memory's route (read from its
own ``usage.jsonl``: calls actually made, not a guess), and the time to done
at that pace.  The same log tells whether the writer is failing: calls made
since the last answered one, each with the provider error's kind (and its
message), so ``/endless status`` and ``endless doctor`` say since when and
why, whichever process made the calls.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import orjson

from endless.core.store import durable
from endless.core.settings import Settings
from endless.core.words import agree, count
from endless.llm.errors import ERROR_KINDS
from endless.writer.interface import WriterMemory

USAGE_FILE = "usage.jsonl"
TAIL_BYTES = 256 << 10  # the usage log's last calls are enough to know the pace
RECENT_SECONDS = 600.0  # calls in this window count as the current pace


@dataclass(frozen=True)
class Pace:
    """The writer's pace on a memory's route, as measured from its calls."""

    calls_per_minute: float  # over the last ten minutes (0 when none were made)
    lines_per_call: float
    seconds_per_call: float  # median duration of a successful call
    measured_calls: int  # how many calls the numbers rest on

    def lines_per_minute(self, settings: Settings) -> float:
        """The pace now, or, when the writer is idle, what its parallel calls would reach."""
        if self.calls_per_minute > 0:
            return self.calls_per_minute * self.lines_per_call
        if self.seconds_per_call > 0:
            return settings.writer_calls * 60.0 / self.seconds_per_call * self.lines_per_call
        return 0.0


def lines_left(slots: list, total: int) -> int:
    """Lines the full tree over ``total`` messages still lacks (``slots``: the tree's slot arrays)."""
    left = 0
    for level in range(max(total, 1).bit_length()):
        can_exist = total >> level
        if not can_exist:
            break
        built = 0
        if level < len(slots):
            row = slots[level]
            upto = min(len(row), can_exist)
            built = upto - row[:upto].count(0)
        left += can_exist - built
    return left


@dataclass(frozen=True)
class Failure:
    """The writer's calls failing since the last answered one, as its usage log tells."""

    since: float  # wall time of the first failed call after the last answered one
    calls: int  # failed calls since then (within the log's tail)
    cause: str  # the last one's error kind, and its message when the log has it

    def sentence(self, now: float) -> str:
        when = _dt.datetime.fromtimestamp(self.since, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return (f"the writer is failing: no call answered since {when} ({say_duration(max(0.0, now - self.since))} "
                f"ago, {count(self.calls, 'failed call')}; last: {self.cause})")


def _tail(folder: Path) -> list[dict]:
    """The usage log's last calls, oldest first (a torn or foreign line is skipped)."""
    path = Path(folder) / USAGE_FILE
    try:
        with durable.open_read(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = []
    for raw in data.split(b"\n")[1 if size > TAIL_BYTES else 0:]:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines


def _failed(line: dict) -> bool:
    """A call the provider did not answer (a content check's outcome is an answered call)."""
    return line.get("outcome") in ERROR_KINDS


def failure(folder: Path, lines: list[dict] | None = None) -> Failure | None:
    """Whether the memory's writer is failing: calls failed since its last answered one, or None."""
    failed = []
    for line in reversed(_tail(folder) if lines is None else lines):
        if not _failed(line):
            break
        failed.append(line)
    if not failed:
        return None
    last = failed[0]
    try:
        since = float(failed[-1].get("time", 0))
    except (TypeError, ValueError):
        return None
    cause = str(last.get("outcome", "")).replace("_", " ")
    if isinstance(last.get("error"), str) and last["error"].strip():
        cause += f" ({' '.join(last['error'].split())[:200]})"
    return Failure(since, len(failed), cause)


def measured_pace(folder: Path, now: float, lines: list[dict] | None = None) -> Pace | None:
    """The pace of the memory's last writer calls, or None when it made none."""
    calls = [line for line in (_tail(folder) if lines is None else lines)
             if line.get("outcome") == "ok" and line.get("jobs")]
    if not calls:
        return None
    recent = [c for c in calls if now - float(c.get("time", 0)) <= RECENT_SECONDS]
    lines = statistics.fmean(len(c["jobs"]) for c in calls)
    seconds = statistics.median(float(c.get("duration", 0)) for c in calls)
    return Pace(len(recent) / (RECENT_SECONDS / 60.0), lines, seconds, len(calls))


def time_to_done(lines: int, per_minute: float) -> float | None:
    """Seconds to write ``lines`` at ``per_minute`` lines a minute; None when the pace is unknown."""
    if lines <= 0:
        return 0.0
    if per_minute <= 0:
        return None
    return math.ceil(lines / per_minute * 60.0)


def say_duration(seconds: float | None) -> str:
    """``about 3 min``: how a person reads a wait."""
    if seconds is None:
        return "unknown (no writer call measured yet)"
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Progress:
    """Where a memory's catch-up stands: for ``endless doctor`` and ``/endless status``."""

    lines_left: int
    messages_without_line: int
    calls_per_minute: float
    seconds_left: float | None
    failing: Failure | None = None  # the writer's calls fail (since when, why)
    now: float = 0.0  # when this was measured (for the failure's age)

    def left_sentence(self) -> str:
        """What is left, without a pace (said when nothing is writing)."""
        return (f"{count(self.lines_left, 'line')} left to write ({count(self.messages_without_line, 'message')} "
                f"without a line of {agree(self.messages_without_line, 'its', 'their')} own)")

    def sentence(self) -> str:
        if self.lines_left == 0:
            return "every line is written"
        pace = (f"{self.calls_per_minute:.1f} writer calls a minute, done in {say_duration(self.seconds_left)}"
                if self.failing is None else self.failing.sentence(self.now))
        return (f"{count(self.lines_left, 'line')} left to write ({count(self.messages_without_line, 'message')} "
                f"without a line of {agree(self.messages_without_line, 'its', 'their')} own), {pace}")


def leaves_left(slots: list, total: int) -> int:
    """Messages of ``[0, total)`` without a line of their own yet."""
    row = slots[0] if slots else None
    upto = min(len(row), total) if row is not None else 0
    return total - (upto - row[:upto].count(0) if row is not None else 0)


def offline_only(memory: WriterMemory) -> bool:
    """Whether no model writes what is left: no route anywhere, or the person chose the offline
    writer for the whole history (``endless import --writer offline``)."""
    from endless.writer.recorded import recorded_routes
    from endless.writer.stretches import offline_stretches

    if not memory.settings.writer_route.strip() and not recorded_routes(memory).any():
        return True
    stretches = offline_stretches(memory).all()
    return bool(stretches) and stretches[0].first == 0 and stretches[-1].end >= memory.total


def progress(memory: WriterMemory, now: float) -> Progress:
    """Where the memory's catch-up stands, at the pace its writer keeps."""
    from endless.core.settings import OFFLINE_LINE_SECONDS

    slots, total = memory.built_slots(), memory.total
    left = lines_left(slots, total)
    if offline_only(memory):
        return Progress(left, leaves_left(slots, total), 0.0, left * OFFLINE_LINE_SECONDS)
    calls = _tail(memory.folder)
    pace = measured_pace(memory.folder, now, calls)
    seconds = time_to_done(left, pace.lines_per_minute(memory.settings)) if pace is not None else None
    return Progress(left, leaves_left(slots, total), pace.calls_per_minute if pace else 0.0, seconds,
                    failure(memory.folder, calls), now)
