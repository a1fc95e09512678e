"""What every full-text index answers with (:mod:`endless.core.search.word_index`'s seam), whichever
backend holds it: its rows, the filters it applies, its watermark, and the errors a search is told by.

Apart from the SQLite index (:mod:`endless.core.search.index`) so the PostgreSQL one
(:mod:`endless.core.search.pg_index`) shares them without the SQLite code.
"""

from __future__ import annotations

from dataclasses import dataclass


class IndexBusy(Exception):
    """Another process holds the index's write lock longer than we may wait."""


class Stopped(Exception):
    """The deadline passed inside a query (SQLite was interrupted)."""


@dataclass(frozen=True)
class Watermark:
    """How far the index has read: turns and bytes of the order log, bytes of the tree file."""

    turns: int
    log_end: int
    messages: int
    tree_end: int
    first_tid: str


@dataclass(frozen=True)
class Filters:
    """What a search may return; None means any."""

    kinds: tuple[str, ...] | None = None
    chat: str | None = None
    since: float | None = None
    before: float | None = None
    below: int | None = None  # message ids below this only (pins a search to what existed at its first page)

    def time_range(self, table: str, placeholder: str) -> tuple[list[str], list[float]]:
        """The SQL conditions (and their values) of the time range on ``table.at``, each value written
        as ``placeholder`` (``?`` for SQLite, ``%s`` for PostgreSQL)."""
        span, values = [], []
        if self.since is not None:
            span.append(f"{table}.at >= {placeholder}")
            values.append(self.since)
        if self.before is not None:
            span.append(f"{table}.at < {placeholder}")
            values.append(self.before)
        return span, values


@dataclass(frozen=True)
class Row:
    """A matching message or line, best or newest first; ``score`` is BM25's (lower is better)."""

    key: int
    score: float


@dataclass(frozen=True)
class Placed:
    """Where a message was said: its chat's session, its time (None: unknown), whether the filters keep it."""

    session: str
    at: float | None
    kept: bool


def line_key(level: int, index: int) -> int:
    """A summary line's rowid: its level in the top bits, so keys never collide."""
    return (level << 48) | index


def line_part(key: int) -> tuple[int, int]:
    return key >> 48, key & ((1 << 48) - 1)
