"""The writer's work queue: which lines may be written now, in build order (DESIGN §3.1).

A message's line may start once fewer than ``unwritten_ahead`` lines before
it are unwritten; a merge once both halves exist; merges the views wait for
come first, in the order their batch would apply them.  Ready merges are kept
as a set updated from every line the memory stores or learns of, so nothing
scans the tree after the first look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from endless.core.view import tiling
from endless.core.view import Part
from endless.core.settings import STALE_ORDER_ENTRIES
from endless.writer.interface import PerMemory, WriterMemory


@dataclass(frozen=True)
class Job:
    """A line the writer may write now: a message's line (level 0) or a merge."""

    level: int
    index: int
    needed: bool = False  # a view waits for it
    # (level, index), made once: a catch-up after a long import reads it of a hundred thousand ready
    # jobs several times at each launch
    part: Part = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "part", (self.level, self.index))

    @property
    def name(self) -> str:
        return tiling.name(self.part)


class WorkQueue:
    """Ready work of one open memory; get it with :func:`work_queue`."""

    def __init__(self, memory: WriterMemory) -> None:
        self.memory = memory
        self._ready_merges: set[Part] | None = None
        # The lines the tree should hold by what this queue heard: fewer means a forget erased some
        # (a ready merge may have lost a half), and the ready merges are looked for again.
        self._heard = 0
        self._next_leaf = 0
        # The ready merges the views wait for, by their place in the plan, as last given, and the plan's
        # places they were ordered by (see _needed_in_order); merges made ready since, not yet placed.
        self._order: list[tuple[int, Part]] = []
        self._order_rank: dict[Part, int] | None = None
        self._made_ready: list[Part] = []
        memory.on_built(self._built)

    def ready(self) -> list[Job]:
        """Lines the writer may write now, in build order."""
        return list(self.ready_in_order())

    def ready_in_order(self) -> Iterator[Job]:
        """:meth:`ready`, one job at a time: a launch takes the first few hundred of a hundred thousand
        ready merges after a long import (making every job took half a second a launch)."""
        memory = self.memory
        if self._ready_merges is None or memory.lines_built < self._heard:
            self._heard = memory.lines_built
            self._ready_merges = self._scan_ready_merges()
            self._order_rank = None
            self._next_leaf = 0  # (an erased message line is written again)
        self._advance_leaf()
        ready = self._ready_merges
        needed, rank = memory.views.needed, memory.views.needed_rank
        if len(ready) < len(rank):  # walk the shorter side, in the plan's order
            order = self._needed_in_order(ready, rank)
            passed = 0  # merges stored since they were placed, further in than the front
            for _, part in order:
                if part in ready:
                    yield Job(part[0], part[1], True)
                else:
                    passed += 1
            if passed > STALE_ORDER_ENTRIES and order is self._order:
                self._order_rank = None  # placed again at the next look
        else:
            for part in needed:
                if part in ready:
                    yield Job(part[0], part[1], True)
        unwritten = 0
        message_id = self._next_leaf
        while unwritten < memory.settings.unwritten_ahead and message_id < memory.total:
            if not memory.is_built(0, message_id):
                yield Job(0, message_id)
                unwritten += 1
            message_id += 1
        for part in sorted(p for p in ready if p not in rank):
            yield Job(part[0], part[1])

    def _needed_in_order(self, ready: set[Part], rank: dict[Part, int]) -> list[tuple[int, Part]]:
        """The ready merges the views wait for, by their place in the plan (some may be stored since).

        After a long import a hundred thousand merges are ready and a launch takes the first few
        hundred: sorting them all at every launch was a quarter of a catch-up's time.  While the plan
        stays, the order is kept: the stored merges at its front are dropped, and the few made ready
        since are placed (a sort of a sorted run and a short one).  A merge is made ready once (a
        stored one becomes ready again only after a forget, which rescans), so none is placed twice.
        Each look gets a list of its own, so one still being read never changes under its reader.
        """
        made, self._made_ready = self._made_ready, []
        if self._order_rank is not rank:
            order = [(rank[p], p) for p in ready if p in rank]
            order.sort()
        else:
            order = self._order
            front = 0
            while front < len(order) and order[front][1] not in ready:
                front += 1
            added = [(rank[p], p) for p in made if p in ready and p in rank]
            if added:
                order = order[front:] + added
                order.sort()
            elif front:
                order = order[front:]
        self._order, self._order_rank = order, rank
        return order

    def _scan_ready_merges(self) -> set[Part]:
        ready: set[Part] = set()
        levels = self.memory.built_slots()
        total = self.memory.total
        for level, slots in enumerate(levels):
            parents = levels[level + 1] if level + 1 < len(levels) else ()
            for j in range(len(slots) // 2):
                if slots[2 * j] and slots[2 * j + 1] and not (j < len(parents) and parents[j]):
                    if ((j + 1) << (level + 1)) <= total:
                        ready.add((level + 1, j))
        return ready

    def _advance_leaf(self) -> None:
        """Move to the first unbuilt leaf; the search runs in C over the level-0 slots."""
        levels = self.memory.built_slots()
        if not levels:
            return
        slots = levels[0]
        start = min(self._next_leaf, len(slots))
        try:
            found = slots.index(0, start)
        except ValueError:
            found = len(slots)
        self._next_leaf = min(max(found, self._next_leaf), self.memory.total)

    def _built(self, part: Part) -> None:
        if self._ready_merges is None:
            return
        memory = self.memory
        self._heard += 1
        self._ready_merges.discard(part)
        top = tiling.parent(part)
        if (top not in self._ready_merges and memory.is_built(part[0], part[1] ^ 1)
                and not memory.is_built(*top) and tiling.end(top) <= memory.total):
            self._ready_merges.add(top)
            if len(self._made_ready) < STALE_ORDER_ENTRIES:
                self._made_ready.append(top)
            else:  # (no writer asked for a long while) ordered anew at the next look
                self._order_rank = None


work_queue = PerMemory(WorkQueue)  # work_queue(memory): the one work queue of an open memory


def ready_work(memory: WriterMemory) -> list[Job]:
    """Shorthand: the memory's ready work, in build order."""
    return work_queue(memory).ready()
