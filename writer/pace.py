"""How far the writer is behind, and how fast it catches up: for the import's estimate, doctor and status.

After an import the tree lacks thousands of lines; a person deciding whether
to let the model write them, or watching it do so, needs three numbers: the
lines left, the pace the writer keeps on this memory's route (read from its
own ``usage.jsonl``: calls actually made, not a guess), and the time to done
at that pace.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import orjson

from endless.core.store import durable
from endless.core.settings import Settings
from endless.core.words import agree, count
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


def measured_pace(folder: Path, now: float) -> Pace | None:
    """The pace of the memory's last writer calls, or None when it made none."""
    path = Path(folder) / USAGE_FILE
    try:
        with durable.open_read(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return None
    calls = []
    for raw in data.split(b"\n")[1 if size > TAIL_BYTES else 0:]:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(line, dict) and line.get("outcome") == "ok" and line.get("jobs"):
            calls.append(line)
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

    def sentence(self) -> str:
        if self.lines_left == 0:
            return "every line is written"
        return (f"{count(self.lines_left, 'line')} left to write ({count(self.messages_without_line, 'message')} "
                f"without a line of {agree(self.messages_without_line, 'its', 'their')} own), "
                f"{self.calls_per_minute:.1f} writer calls a minute, done in {say_duration(self.seconds_left)}")


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
    pace = measured_pace(memory.folder, now)
    seconds = time_to_done(left, pace.lines_per_minute(memory.settings)) if pace is not None else None
    return Progress(left, leaves_left(slots, total), pace.calls_per_minute if pace else 0.0, seconds)
