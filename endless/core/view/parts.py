"""A view's parts held packed: a level byte and an index per part, read back as ``(level, index)`` pairs.

Why: after an import of a million messages whose lines are not written yet, a
view holds half a million parts.  As a list of tuples each part took about 92
bytes (the tuple, its index object and the list's pointer): 43 MB for the chat
view at 1M, more while a merge made the next list, and every open built them
all again from the file's arrays.  Here a part takes 9 bytes, a view file's
arrays become the parts with two C-level passes, and a merge works on the
arrays.  Reading a part, or iterating, still gives the pair every caller knows.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import islice
from operator import eq, itemgetter, lshift
from typing import Iterable, Iterator, overload

Part = tuple[int, int]


class Parts(Sequence):
    """Parts ``(level, index)`` in view order, stored as ``levels`` (bytes) and ``indices`` (int64)."""

    __slots__ = ("levels", "indices")
    __hash__ = None  # (a list's manners: it changes in place)

    def __init__(self, pairs: Iterable[Part] = ()) -> None:
        if isinstance(pairs, Parts):
            self.levels, self.indices = bytearray(pairs.levels), array("q", pairs.indices)
            return
        if not isinstance(pairs, (list, tuple)):
            pairs = list(pairs)
        self.levels = bytearray(map(itemgetter(0), pairs))  # (a level past 255 or below 0 is a ValueError)
        self.indices = array("q", map(itemgetter(1), pairs))

    @classmethod
    def of(cls, levels: bytearray, indices: array) -> "Parts":
        """Parts made of these two arrays, taken as they are (not copied)."""
        parts = cls.__new__(cls)
        parts.levels, parts.indices = levels, indices
        return parts

    @classmethod
    def leaves(cls, start: int, stop: int) -> "Parts":
        """Messages ``[start, stop)``, each its own part."""
        return cls.of(bytearray(max(0, stop - start)), array("q", range(start, stop)))

    def __len__(self) -> int:
        return len(self.levels)

    def __iter__(self) -> Iterator[Part]:
        return zip(self.levels, self.indices)

    def __reversed__(self) -> Iterator[Part]:
        return zip(reversed(self.levels), reversed(self.indices))

    @overload
    def __getitem__(self, at: int) -> Part: ...

    @overload
    def __getitem__(self, at: slice) -> "Parts": ...

    def __getitem__(self, at):
        if isinstance(at, slice):
            return Parts.of(self.levels[at], self.indices[at])
        return self.levels[at], self.indices[at]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Parts):
            return self.levels == other.levels and self.indices == other.indices
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(map(eq, self, other))
        return NotImplemented

    def __add__(self, other: Iterable[Part]) -> list[Part]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Part]) -> list[Part]:
        return [*other, *self]

    def __repr__(self) -> str:
        shown = list(islice(self, 8))
        more = f", … {len(self) - 8} more" if len(self) > 8 else ""
        return f"Parts({shown!r}{more})"

    def __reduce__(self) -> tuple:
        return Parts.of, (self.levels, self.indices)

    def append(self, part: Part) -> None:
        self.levels.append(part[0])
        self.indices.append(part[1])

    def extend(self, pairs: Iterable[Part]) -> None:
        if isinstance(pairs, Parts):
            self.levels += pairs.levels
            self.indices += pairs.indices
            return
        for part in pairs:
            self.append(part)

    def extend_leaves(self, start: int, stop: int) -> None:
        """Append messages ``[start, stop)``, each its own part (a commit's new messages)."""
        if stop > start:
            self.levels += bytes(stop - start)
            self.indices.extend(range(start, stop))

    def copy(self) -> "Parts":
        return Parts(self)

    def firsts(self) -> array:
        """Each part's first message (``index << level``)."""
        return array("q", map(lshift, self.indices, self.levels))


def as_parts(parts: Iterable[Part]) -> Parts:
    """``parts`` as Parts (itself when it is already)."""
    return parts if isinstance(parts, Parts) else Parts(parts)
