"""Stretches of a history the person chose to have written by the offline writer (``endless import --writer offline``).

An import can bring a million messages nobody has summarised.  Written by the
model they cost money and hours; written offline they cost nothing and are
done in minutes.  The choice is the person's, per import, so it is kept with
the memory (``offline.jsonl``, one line per import) where whichever process
holds the writer lease reads it: a line whose messages all lie in such a
stretch is written offline whatever route is configured.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import orjson

from endless.core.store import durable
from endless.core.view import tiling
from endless.core.errors import MemoryUseError
from endless.core.view import Part
from endless.writer.interface import PerMemory, WriterMemory

STRETCHES_FILE = "offline.jsonl"


@dataclass(frozen=True)
class Stretch:
    first: int  # the first message id of the stretch
    end: int  # one past its last


class OfflineStretches:
    """The stretches of one memory, read incrementally from its file."""

    def __init__(self, memory: WriterMemory) -> None:
        self.memory = memory
        self._end = 0
        self._firsts: list[int] = []
        self._stretches: list[Stretch] = []

    def add(self, first: int, end: int) -> None:
        """Have messages ``[first, end)`` written offline (durable before it returns)."""
        if self.memory.readonly:
            raise MemoryUseError("this memory was opened read-only")
        if not 0 <= first < end:
            return
        with self.memory.lock:
            durable.append_lines(self.memory.folder / STRETCHES_FILE, [durable.dumps_line(
                {"first": first, "end": end, "at": self.memory.clock()})])
        self.refresh()

    def covers(self, part: Part) -> bool:
        """Whether every message under ``part`` lies in one offline stretch."""
        self.refresh()
        return self.holds(part)

    def holds(self, part: Part) -> bool:
        """:meth:`covers` by the stretches read last (:meth:`refresh`): a catch-up after a long import asks
        it of hundreds of lines at each launch, and reading the file for each took half its time."""
        k = bisect_right(self._firsts, tiling.first(part)) - 1
        return k >= 0 and tiling.end(part) <= self._stretches[k].end

    def all(self) -> list[Stretch]:
        self.refresh()
        return list(self._stretches)

    def refresh(self) -> None:
        """Read the stretches added to the file since the last read."""
        data, tail = durable.read_complete(self.memory.folder / STRETCHES_FILE, self._end)
        if tail.complete_end == self._end:
            return
        for _, line in durable.iter_lines(data, self._end):
            try:
                raw = orjson.loads(line)
                stretch = Stretch(int(raw["first"]), int(raw["end"]))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                self.memory.report(f"skipped a damaged line of {STRETCHES_FILE}")
                continue
            self._stretches.append(stretch)
        self._stretches.sort(key=lambda s: s.first)
        merged: list[Stretch] = []
        for stretch in self._stretches:  # imports are appended in order: touching stretches join
            if merged and stretch.first <= merged[-1].end:
                merged[-1] = Stretch(merged[-1].first, max(merged[-1].end, stretch.end))
            else:
                merged.append(stretch)
        self._stretches = merged
        self._firsts = [s.first for s in merged]
        self._end = tail.complete_end


offline_stretches = PerMemory(OfflineStretches)  # offline_stretches(memory): the stretches of an open memory
