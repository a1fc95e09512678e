"""A view as its file stores it (format 2): each part's level and first message, packed in two arrays.

Why: after an import of a million messages whose lines are not written yet, a
view holds hundreds of thousands of parts.  Stored as JSON pairs, every open
parsed and checked each one in Python (at 1M messages: 1.4 s and 175 MB for a
search, which asks only which line covers each hit).  Packed, a file is read
with two decodes; it is checked with passes of C-level ``map`` over the
arrays; a reader that only asks which part covers a message (:func:`covering`)
bisects the first messages without making a part of them.  The arrays carry
a checksum, so a file changed by anything but a save is never taken for a view.

A part ``(level, index)`` is stored as its level (a byte) and its first
message ``index << level`` (4 bytes while the history is under 2**32
messages, else 8).  Format 1 files (a JSON list of pairs) are still read;
the next save writes format 2.

Each part's rendered size in bytes goes with it (``sizes``, 4 bytes, the top
bit set for a message whose line was not written at the save: its source's
size capped at the line budget).  Why: a process that opens a memory for
writing plans its views at once, and a plan sums every part's size; after a
long import a fresh process had to read each of half a million lines (and,
for a free line, its messages) to learn them: 20 to 30 s at 1M.  A written
line's size never changes, so the keeper takes these back
(``ViewSizes.take``) for the lines still written as they were.

A saved file also says what it was measured against (``measured``: the tree
file, its end and line count, the forgets read).  When an open reads the
same tree file, perhaps with lines appended since, and the same forgets,
nothing was erased or forgotten since: its tiling and merged parts are not
checked again, its sizes are read where they lie, and only the parts of the
lines appended since are measured again (``ViewKeeper._written_since``).
"""

from __future__ import annotations

import base64
import bisect
import zlib
from array import array
from dataclasses import dataclass
from itertools import accumulate, chain, compress, repeat, takewhile
from operator import and_, itemgetter, lshift, rshift
from typing import Callable, Iterable, Sequence

from endless.core.settings import VIEW_RARE_LEVEL_SHARE
from endless.core.view.parts import Part, Parts

FORMAT = 2


class PackError(ValueError):
    """A stored view that is not a whole, checked packed view (the caller words it as a view error)."""


UNWRITTEN = 1 << 31  # a stored size's flag: the part was a message without its line (its size is capped)


@dataclass(frozen=True)
class Packed:
    """A stored view's parts as two arrays, its total and its shrinking flag (and sizes, when stored)."""

    levels: bytes
    firsts: array
    total: int
    shrinking: bool
    sizes: array | None = None  # each part's rendered bytes, UNWRITTEN set for an unwritten message
    budget: int | None = None  # the line budget the capped sizes were counted with

    def parts(self) -> Parts:
        return Parts.of(bytearray(self.levels), array("q", map(rshift, self.firsts, self.levels)))


def _typecode(total: int) -> str:
    return "I" if total < 1 << 32 else "Q"


def pack(parts: Sequence[Part], total: int, shrinking: bool, sizes: array | None = None,
         budget: int | None = None) -> dict:
    """The JSON fields of a stored view (without ``format``): its arrays in base64, with their checksum."""
    if isinstance(parts, Parts):
        levels = bytes(parts.levels)
        firsts = array(_typecode(total), map(lshift, parts.indices, levels))
    else:
        levels = bytes(map(itemgetter(0), parts))
        firsts = array(_typecode(total), map(lshift, map(itemgetter(1), parts), levels))
    raw_firsts = firsts.tobytes()
    crc = zlib.crc32(raw_firsts, zlib.crc32(levels))
    out = {"total": total, "shrinking": shrinking, "width": firsts.itemsize,
           "levels": base64.b64encode(levels).decode("ascii"),
           "firsts": base64.b64encode(raw_firsts).decode("ascii")}
    if sizes is not None and len(sizes) == len(parts):
        raw_sizes = sizes.tobytes()
        crc = zlib.crc32(raw_sizes, crc)
        out["sizes"] = base64.b64encode(raw_sizes).decode("ascii")
        out["budget"] = budget
    out["crc"] = f"{crc:08x}"
    return out


def is_packed(data: object) -> bool:
    return isinstance(data, dict) and "firsts" in data


def unpack(data: dict) -> Packed:
    """The arrays of a stored view, their checksum checked; raises :class:`PackError`."""
    try:
        levels = base64.b64decode(data["levels"], validate=True)
        raw = base64.b64decode(data["firsts"], validate=True)
        total, shrinking, width, crc = int(data["total"]), bool(data["shrinking"]), int(data["width"]), data["crc"]
        raw_sizes = base64.b64decode(data["sizes"], validate=True) if "sizes" in data else None
        budget = int(data["budget"]) if raw_sizes is not None else None
    except (KeyError, TypeError, ValueError) as exc:
        raise PackError(f"the stored view is malformed: {exc}") from None
    found = zlib.crc32(raw, zlib.crc32(levels))
    if raw_sizes is not None:
        found = zlib.crc32(raw_sizes, found)
    if f"{found:08x}" != crc:
        raise PackError("the stored view's checksum does not match its parts (changed after it was saved)")
    if width not in (4, 8) or len(raw) != width * len(levels) or total < 0:
        raise PackError("the stored view's arrays do not agree in length")
    if raw_sizes is not None and len(raw_sizes) != 4 * len(levels):
        raise PackError("the stored view's sizes do not agree with its parts")
    firsts = array("I" if width == 4 else "Q")
    firsts.frombytes(raw)
    sizes = None
    if raw_sizes is not None:
        sizes = array("I")
        sizes.frombytes(raw_sizes)
    return Packed(levels, firsts, total, shrinking, sizes, budget)


def check_tiling(packed: Packed) -> None:
    """Raise :class:`PackError` unless the parts tile ``[0, total)`` in order, each aligned to its size."""
    levels, firsts = packed.levels, packed.firsts
    if not levels:
        if packed.total:
            raise PackError(f"the view says it covers {packed.total} messages but holds no part")
        return
    top = max(levels)
    if top > 62:
        raise PackError("a part of the stored view has a level past 62")
    # They tile in order when each first message is the sum of the counts before it: the sums made
    # once and compared as arrays (each count a byte while no part is above level 7).
    counts = levels.translate(_COUNTS) if top <= 7 else map((1).__lshift__, levels)
    try:
        starts = array(firsts.typecode, accumulate(counts, initial=0))
    except OverflowError:  # (the width is the total's)
        raise PackError(f"the stored view's parts cover more than the {packed.total} messages it says") from None
    if starts[:-1] != firsts:
        raise PackError("the stored view's parts do not tile a prefix of the history in order")
    for level in sorted(set(levels) - {0}):
        if any(map(and_, of_level(levels, firsts, level), repeat((1 << level) - 1))):
            raise PackError("a part of the stored view does not start at a multiple of its size")
    if starts[-1] != packed.total:
        raise PackError(f"the view says it covers {packed.total} messages but its parts cover {starts[-1]}")


_COUNTS = bytes(1 << level for level in range(8)) + bytes(248)  # a level (up to 7) -> its part's count

_LEVEL_TABLES: dict[int, bytes] = {}  # level -> the translation table of level_mask (made when first asked)


def level_mask(levels: bytes, level: int) -> bytes:
    """A byte per part, 1 where the part is of ``level``: one ``translate`` (a mask for ``compress``),
    not a comparison called per part (a view after a long import holds half a million)."""
    table = _LEVEL_TABLES.get(level)
    if table is None:
        table = _LEVEL_TABLES[level] = bytes(level) + b"\1" + bytes(255 - level)
    return levels.translate(table)


def of_level(levels: bytes, values: Sequence[int], level: int) -> list[int]:
    """The values of the parts of ``level``, in view order.

    Picked with a mask where the level is common; by position where it is rare (a
    ``compress`` reads every value, each made an int: at 463,575 parts, 10 ms for a
    level that holds 39).
    """
    count = levels.count(level)
    if count * VIEW_RARE_LEVEL_SHARE >= len(levels):
        return list(compress(values, level_mask(levels, level)))
    out: list[int] = []
    at = levels.find(level)
    while at >= 0:
        out.append(values[at])
        at = levels.find(level, at + 1)
    return out


def first_unbuilt(packed: Packed, slots: Sequence[Sequence[int]], erased: Callable[[Part], bool]) -> Part | None:
    """A merged part of the view that is neither built (a nonzero slot) nor erased by a forget, or None."""
    for level in sorted(set(packed.levels) - {0}):
        indices = list(map(rshift, of_level(packed.levels, packed.firsts, level), repeat(level)))
        row = slots[level] if level < len(slots) else ()
        cut = bisect.bisect_left(indices, len(row))  # (a level's indices increase with their first messages)
        stored, beyond = indices[:cut], indices[cut:]
        for index in chain(compress(stored, map((0).__eq__, map(row.__getitem__, stored))), beyond):
            if not erased((level, index)):
                return level, index
    return None


def covering(packed: Packed, message_id: int) -> Part | None:
    """The stored part holding ``message_id`` (None past the stored total)."""
    at = bisect.bisect_right(packed.firsts, message_id) - 1
    if at < 0 or message_id >= packed.total:
        return None
    level = packed.levels[at]
    return level, packed.firsts[at] >> level


def covers(coarse: Sequence[Part], fine: Sequence[Part]) -> bool:
    """``tiling.covers`` for two views that tile from 0: every part of ``fine`` inside one of ``coarse``.

    That is: each boundary of ``coarse`` within ``fine``'s span is one of ``fine``'s, and ``coarse``
    reaches as far; found with sets of first messages (C-level passes) rather than a walk in Python.
    """
    if coarse == fine:  # (a writer view read from the chat view's bytes, as after an import: one C-level pass)
        return True
    fine_total = _end(fine)
    if _end(coarse) < fine_total:
        return False
    coarse_firsts = _firsts(coarse)
    fine_firsts = set(_firsts(fine))
    return all(map(fine_firsts.__contains__, takewhile(fine_total.__gt__, coarse_firsts)))


def _firsts(parts: Sequence[Part]) -> Iterable[int]:
    if isinstance(parts, Parts):
        return map(lshift, parts.indices, parts.levels)
    return map(lshift, map(itemgetter(1), parts), map(itemgetter(0), parts))


def _end(parts: Sequence[Part]) -> int:
    if not parts:
        return 0
    level, index = parts[-1]
    return (index + 1) << level
