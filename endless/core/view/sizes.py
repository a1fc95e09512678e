"""The rendered size of every part a view may hold, and each view's size, kept between commits.

The sawtooth counts bytes (DESIGN §2.4): a written line's rendered size, a
message without its line at its source's size capped at the line budget, an
unbuilt parent at the budget.  A written line's size never changes, so it is
kept once known, in an array per level; a message without its line keeps its
source's size and its capped size in two arrays beside them (a million
unwritten messages cost 8 MB, not two dicts).  A view's whole size is kept
summed by blocks (:class:`_SizeSums`).  The view keeper
(:mod:`endless.core.view.keeper`) owns one and tells it of every change.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections import deque
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, not_, rshift
from typing import Iterable, Sequence

from endless.core.settings import STORED_LOOKUPS_BEFORE_TAKING, SUMS_KEPT, VIEW_SUM_BLOCK, Settings
from endless.core.store import OrderLog, TreeStore, utf8_size
from endless.core.view import packed, tiling
from endless.core.view.render import head, line_size, part_line_sizes
from endless.core.view.tiling import Part, ViewState


@dataclass
class _SizeSums:
    """One view's size summed by blocks of ``block`` parts, so a commit sums a few thousand numbers.

    Why: after a long import a view holds a part per unwritten message (a
    million), and every commit asked the size of each: 300 ms a commit at 1M.
    A block's sum stays right while its parts and their sizes do: the parts
    list is only ever extended in place (a merge makes a new list, which gets
    new sums), and a size changes only through this module, which marks the
    block holding that part's first message for summing again.
    """

    parts: Sequence[Part]  # the list summed (by identity)
    sums: array = field(default_factory=lambda: array("q"))  # sums[k]: parts[k*block:(k+1)*block]
    firsts: array = field(default_factory=lambda: array("Q"))  # first message of each block's first part
    dirty: set[int] = field(default_factory=set)  # blocks to sum again


class ViewSizes:
    """The sizes of one open memory's parts and views (see the module doc)."""

    def __init__(self, settings: Settings, log: OrderLog, tree: TreeStore, agent_name: str) -> None:
        self.settings, self.log, self.tree, self.agent_name = settings, log, tree, agent_name
        # Rendered bytes of written lines, per level (0: not known yet).  A written line's size
        # never changes, and a plan after a long import asks for every one of them: an array
        # of 4 bytes a node, not a cache that a 100,000-line view would thrash.
        self.known: list[array] = []
        # Per message without its line (0: not known): its writer source's bytes, and its rendered
        # size in a view (as a stored view kept it, see take, or as counted here).
        self._src = array("I")
        self._unwritten = array("I")
        self._sums: list[_SizeSums] = []  # the views' sizes by blocks (see _SizeSums), newest last
        # Stored views trusted whole at an open (see take) and not yet taken into the arrays above:
        # size_of reads a size there, checked, until enough are asked to take them all at once.
        self._pending: list[packed.Packed] = []
        self._lookups = 0

    def unwritten_known(self) -> int:
        """How many messages without their line have a kept size (what a view file gave back)."""
        return len(self._unwritten) - self._unwritten.count(0)

    def source_size(self, message_id: int) -> int:
        """Bytes of a message's writer source (what its level-0 line is written from)."""
        if message_id < len(self._src) and self._src[message_id]:
            return self._src[message_id]
        stored = self.log.message(message_id)
        size = 0 if stored is None else len(stored.writer_source(self.settings, self.agent_name).encode("utf-8"))
        if size:
            _put(self._src, message_id, size)
        return size

    def note_source_size(self, message_id: int, size: int) -> None:
        _put(self._src, message_id, size)
        if message_id < len(self._unwritten) and self._unwritten[message_id]:
            self._unwritten[message_id] = 0
            self._changed(message_id)

    def built(self, part: Part, text: str | None = None) -> None:
        """A node was stored: its source size is no longer needed; its size is kept if its text is in hand."""
        if part[0] == 0:
            _clear(self._src, part[1])
            _clear(self._unwritten, part[1])
        if text is not None:
            self._keep_size(part, line_size(head(part), text))
        self._changed(tiling.first(part))

    def forget_source(self, message_id: int) -> None:
        """A forgotten message's source size is no longer known (its tombstone is measured anew)."""
        _clear(self._src, message_id)
        _clear(self._unwritten, message_id)
        self._changed(message_id)

    def forget_size(self, part: Part) -> None:
        """An erased line no longer counts its old size."""
        level, index = part
        if level < len(self.known) and index < len(self.known[level]):
            self.known[level][index] = 0
        self._changed(tiling.first(part))

    def built_all(self, parts: list[Part], texts: list[str], text_sizes: list[int] | None = None) -> None:
        """:meth:`built` for a commit's free lines (``text_sizes``: each text's utf-8 bytes, when known)."""
        if text_sizes is None:
            text_sizes = [utf8_size(text) for text in texts]
        self.built_sized(parts, part_line_sizes(parts, texts, text_sizes))

    def built_sized(self, parts: list[Part], line_sizes: Iterable[int]) -> None:
        """:meth:`built` for lines whose rendered sizes are known: room made once per level, each set in place."""
        highest: dict[int, int] = {}
        for level, index in parts:
            if index > highest.get(level, -1):
                highest[level] = index
        for level, index in highest.items():
            self._keep_size((level, index), 0)
        sizes = self.known
        for told in (self._src, self._unwritten):
            if told:
                for level, index in parts:
                    if level == 0 and index < len(told):
                        told[index] = 0
        for (level, index), size in zip(parts, line_sizes):
            sizes[level][index] = size
        if self._sums:
            for part in parts:
                self._changed(tiling.first(part))

    def _keep_size(self, part: Part, size: int) -> None:
        level, index = part
        while len(self.known) <= level:
            self.known.append(array("I"))
        _put(self.known[level], index, size)

    def size_of(self, part: Part) -> int:
        """Bytes of the part's rendered line; a written line's size never changes, so it is kept."""
        level, index = part
        if level < len(self.known):
            sizes = self.known[level]
            if index < len(sizes) and sizes[index]:
                return sizes[index]
        if self._pending:
            size = self._pending_size(level, index)
            if size:
                return size
        line_head = head(part)
        text = self.tree.cached_text(level, index) if self.tree.built(level, index) else None
        if text is not None:
            size = line_size(line_head, text)
            self._keep_size(part, size)
            return size
        if level == 0:
            if index < len(self._unwritten) and self._unwritten[index]:
                return self._unwritten[index]
            size = len(line_head) + min(self.source_size(index), self.settings.line_budget) + 1
            _put(self._unwritten, index, size)
            return size
        return len(line_head) + self.settings.line_budget + 1

    def size(self, parts: Sequence[Part]) -> int:
        """A view's bytes as rendered (an unwritten line counted at its cap): summed by blocks kept
        from one call to the next (see _SizeSums), so a commit does not walk a million parts."""
        block = VIEW_SUM_BLOCK
        sums = self._sums_of(parts)
        size_of = self.size_of
        for k in sums.dirty:
            if k < len(sums.sums):
                sums.sums[k] = sum(map(size_of, parts[k * block:(k + 1) * block]))
        sums.dirty.clear()
        full = len(parts) // block
        for k in range(len(sums.sums), full):
            sums.firsts.append(tiling.first(parts[k * block]))
            sums.sums.append(sum(map(size_of, parts[k * block:(k + 1) * block])))
        return sum(sums.sums) + sum(map(size_of, parts[full * block:]))

    def _sums_of(self, parts: Sequence[Part]) -> _SizeSums:
        """The block sums kept for this parts list, or new ones (a list cut short in place gets new ones)."""
        for k, sums in enumerate(self._sums):
            if sums.parts is parts:
                kept = len(sums.sums)
                if kept * VIEW_SUM_BLOCK <= len(parts) and (
                        not kept or tiling.first(parts[(kept - 1) * VIEW_SUM_BLOCK]) == sums.firsts[-1]):
                    return sums
                del self._sums[k]
                break
        sums = _SizeSums(parts)
        self._sums.append(sums)
        del self._sums[:-SUMS_KEPT]
        return sums

    def _changed(self, message_id: int) -> None:
        """The size of the part starting at this message may have changed: its block is summed again."""
        for sums in self._sums:
            k = bisect.bisect_right(sums.firsts, message_id) - 1
            if k >= 0:
                sums.dirty.add(k)

    def take(self, state: ViewState, trusted: bool = False, written_since: Iterable[Part] = ()) -> None:
        """Keep the sizes a stored view kept, where they still hold: a line written then and not erased
        since (its text never changes), and an unwritten message still without its line, counted with the
        same line budget and not forgotten since.  Then the state lets them go.

        Taken a level at a time with C-level passes over the file's arrays (an open after a long import
        takes half a million sizes).  When every stored size still holds, they are also the view's block
        sums (see _SizeSums): the first commit after an open does not ask a size per part.

        ``trusted``: the file was saved against the tree and forgets this process has read, with this
        line budget (the keeper compares what it was measured against), so every size holds as stored.
        Then nothing is checked or copied: the sums are made from the file's sizes, and the file's
        arrays are kept for size_of to read from (see _pending_size), so an open after a long import
        does not pass over each part in Python.  ``written_since``: nodes the tree got after the save
        (see _adjust).
        """
        stored, state.stored = state.stored, None
        if stored is None or stored.sizes is None or len(stored.sizes) != len(state.parts):
            return
        if trusted and stored.budget == self.settings.line_budget:
            self._pending.append(stored)
            self._adjust(self._seed_sums(state.parts, stored.firsts, stored.sizes), stored, written_since)
            return
        if self._scatter(stored):
            self._seed_sums(state.parts, stored.firsts, stored.sizes)

    def _adjust(self, sums: _SizeSums, stored: packed.Packed, written_since: Iterable[Part]) -> None:
        """Correct the block sums from a trusted file for the lines written since its save.

        Of those, only a message the view holds as a part of its own, unwritten at the save, changes
        a part's size (a merged part the view holds was built then, and a line the view does not hold
        is no part's size): its block's sum moves by the difference, each line read once, so an open
        during a catch-up does not sum again every block a line was written in.
        """
        kept = len(sums.sums) * VIEW_SUM_BLOCK
        for level, index in set(written_since):
            if level:
                continue
            at = bisect.bisect_right(stored.firsts, index) - 1
            if at < 0 or at >= kept or stored.firsts[at] != index or stored.levels[at]:
                continue  # (past the last whole block the parts are summed one by one)
            was = stored.sizes[at]
            if was & packed.UNWRITTEN:
                sums.sums[at // VIEW_SUM_BLOCK] += self.size_of((0, index)) - (was & (packed.UNWRITTEN - 1))

    def take_pending(self) -> None:
        """Copy the sizes of the trusted files into the arrays (each checked as take does): before a pass
        that asks every part's size, which reads the arrays far faster than a search of the file's."""
        pending, self._pending, self._lookups = self._pending, [], 0
        for stored in pending:
            self._scatter(stored)

    def _pending_size(self, level: int, index: int) -> int:
        """The size a trusted file kept for this part if it still holds (checked as take checks it, for a
        line written or a forget made since the open), kept in the arrays; 0 if none is known there."""
        self._lookups += 1
        if self._lookups > STORED_LOOKUPS_BEFORE_TAKING:
            self.take_pending()
            return self.known[level][index] if level < len(self.known) and index < len(self.known[level]) else 0
        first = index << level
        for stored in self._pending:
            at = bisect.bisect_right(stored.firsts, first) - 1
            if at < 0 or stored.firsts[at] != first or stored.levels[at] != level:
                continue
            size = stored.sizes[at]
            if _gone(level, index, self.tree.erased, self.log.forgotten):
                return 0
            if not size & packed.UNWRITTEN:
                if not size or not self.tree.built(level, index):
                    return 0
                self._keep_size((level, index), size)
                return size
            if level or self.tree.built(level, index):
                return 0  # (a merged part without its line counts the budget, as size_of does)
            size &= packed.UNWRITTEN - 1
            _put(self._unwritten, index, size)
            return size
        return 0

    def _scatter(self, stored: packed.Packed) -> bool:
        """Copy a stored view's sizes that still hold into the arrays; True if every one of them does."""
        slots, erased, forgotten = self.tree.slots, self.tree.erased, self.log.forgotten
        same_budget = stored.budget == self.settings.line_budget
        flag = packed.UNWRITTEN
        whole = True  # every stored size is the one size_of gives now
        for level in sorted(set(stored.levels)):
            indices = packed.of_level(stored.levels, stored.firsts, level)
            if level:
                indices = list(map(rshift, indices, repeat(level)))
            sizes = packed.of_level(stored.levels, stored.sizes, level)
            flags = list(map(and_, sizes, repeat(flag)))
            written = list(map(not_, flags))
            row = slots[level] if level < len(slots) else array("I")
            # Lines written at the save: kept where still written (a line's size never changes).
            ids, got = list(compress(indices, written)), list(compress(sizes, written))
            built = _slots_of(row, ids)
            if not all(built) or (got and not min(got)) or erased or forgotten:
                keep = [bool(b and size) and not _gone(level, index, erased, forgotten)
                        for index, size, b in zip(ids, got, built)]
                whole = whole and all(keep)
                ids, got = list(compress(ids, keep)), list(compress(got, keep))
            self._take_known(level, ids, got)
            # Parts without their line at the save: a message's capped size holds while it is still
            # unwritten, not forgotten, and capped at the same budget; a merged part's (erased by a
            # forget) is the budget's, as size_of counts it.
            ids = list(compress(indices, flags))
            got = list(map(and_, compress(sizes, flags), repeat(flag - 1)))
            built = _slots_of(row, ids)
            if not same_budget or any(built) or (level == 0 and (erased or forgotten)):
                keep = [same_budget and not b and not _gone(level, index, erased, forgotten)
                        for index, b in zip(ids, built)]
                whole = whole and all(keep)
                ids, got = list(compress(ids, keep)), list(compress(got, keep))
            if level == 0 and ids:
                _put(self._unwritten, ids[-1], 0)  # room made once (the ids grow)
                deque(map(self._unwritten.__setitem__, ids, got), maxlen=0)
        return whole

    def _take_known(self, level: int, indices: list[int], sizes: list[int]) -> None:
        if not indices:
            return
        while len(self.known) <= level:
            self.known.append(array("I"))
        row = self.known[level]
        fresh = not row or row.count(0) == len(row)
        _room(row, max(indices))
        if fresh:
            deque(map(row.__setitem__, indices, sizes), maxlen=0)
        else:
            for index, size in zip(indices, sizes):
                if not row[index]:
                    row[index] = size

    def _seed_sums(self, parts: Sequence[Part], firsts: array, stored: array) -> _SizeSums:
        """The view's block sums from the sizes its file kept (each known to hold now, see take): the
        unwritten flag cleared in the bytes, each block summed in C (at 1M messages, 9 ms, not 40)."""
        block = VIEW_SUM_BLOCK
        full = len(parts) // block
        view = memoryview(_without_flag(stored))
        sums = _SizeSums(parts, array("q", (sum(view[k * block:(k + 1) * block]) for k in range(full))),
                         array("Q", firsts[0:full * block:block]))
        self._sums = [kept for kept in self._sums if kept.parts is not parts] + [sums]
        del self._sums[:-SUMS_KEPT]
        return sums

    def share_sums(self, parts: Sequence[Part], copy: Sequence[Part]) -> None:
        """``copy`` (a copy of ``parts``, the other view read from the same bytes) gets their block sums."""
        for sums in self._sums:
            if sums.parts is parts:
                self._sums.append(_SizeSums(copy, array("q", sums.sums), array("Q", sums.firsts), set(sums.dirty)))
                del self._sums[:-SUMS_KEPT]
                return

    def retain_sums(self, *live: Sequence[Part]) -> None:
        """Keep the block sums of these parts lists alone: a list a merge replaced is let go with its
        sums (each holds its list, half a million parts after a long import, and the parts the merge
        took away)."""
        self._sums = [sums for sums in self._sums if any(sums.parts is parts for parts in live)]

    def clear_sums(self) -> None:
        """Forget every view's block sums and the trusted files (the views are read again from their files)."""
        self._sums.clear()
        self._pending, self._lookups = [], 0


_CLEAR_TOP_BIT = bytes(range(128)) * 2


def _without_flag(sizes: array) -> array:
    """The sizes (4-byte values, as a view file packs them) without the UNWRITTEN flag, their top bit:
    the byte holding it translated in one C pass, not each value masked as a Python int."""
    raw = sizes.tobytes()
    top = 3 if sys.byteorder == "little" else 0
    out = bytearray(raw)
    out[top::4] = raw[top::4].translate(_CLEAR_TOP_BIT)
    return array(sizes.typecode, out)


def _slots_of(row: array, ids: list[int]) -> list[int]:
    """Each id's slot in ``row`` (0: not built), the ids in increasing order, past the row's end 0."""
    cut = bisect.bisect_left(ids, len(row))
    return list(map(row.__getitem__, ids[:cut])) + [0] * (len(ids) - cut)


def _gone(level: int, index: int, erased: set, forgotten: set) -> bool:
    """A line erased by a forget since, or a forgotten message (its size is measured anew)."""
    return (level, index) in erased or (not level and index in forgotten)


def _room(row: array, index: int) -> None:
    """Grow ``row`` with zeros to hold ``index`` (by half again, so a growing history is not copied at
    every message)."""
    if index >= len(row):
        row.frombytes(bytes(row.itemsize * (max(index + 1, len(row) * 3 // 2) - len(row))))


def _put(row: array, index: int, value: int) -> None:
    """``row[index] = value``, the row grown to hold it."""
    _room(row, index)
    row[index] = value


def _clear(row: array, index: int) -> None:
    if index < len(row):
        row[index] = 0
