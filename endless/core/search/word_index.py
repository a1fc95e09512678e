"""The full-text index's seam: what the finder, its upkeep, forget and doctor use of an index.

A memory's index is derived from its log and tree and rebuilt from them
whenever it is lost or found wrong; where it lives is its store's choice:
:class:`endless.core.search.index.SearchIndex` (SQLite FTS5, a file in the
memory's folder: the file store's) or
:class:`endless.core.search.pg_index.PgSearchIndex` (``tsvector`` rows in a
PostgreSQL memory's schema, shared by every machine).  The finder's logic
(tiers, filters, the checks of each hit against the log) is written once
against :class:`WordIndex`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Iterator, Protocol, Sequence

from endless.core.settings import is_postgres_url

if TYPE_CHECKING:
    from endless.core.search.index_rows import Filters, Placed, Row, Watermark
    from endless.core.store import Message


class WordIndex(Protocol):
    """The full-text index as the finder, its upkeep, forget and doctor use it (the search floor's seam).

    A match expression is FTS5's syntax restricted to what
    :func:`endless.core.search.finder.match_expressions` writes: quoted strings
    (:func:`endless.core.search.query.fts_string`) joined by ``AND`` and ``OR``,
    with parentheses; each backend reads it its own way.  Scores are
    lower-is-better; a deadline passed inside a query is ``index.Stopped``;
    another writer holding the index is ``index.IndexBusy``; the index being out
    of reach is an ``OSError`` (or SQLite's own error), which the finder answers
    as it answers an unusable file.
    """

    path: object  # where the index is, in a person's words (a file, or the database)
    local: bool  # a file of the memory's folder (an import's helper process may keep it from the files)
    lock: threading.RLock
    clock: Callable[[], float]

    def exists(self) -> bool: ...

    def close(self) -> None: ...

    def discard(self, why: BaseException | str) -> None:
        """Rows found wrong: everything goes, rebuilt from the log at the next catch-up."""

    def set_aside(self) -> None: ...

    def watermark(self) -> "Watermark": ...

    def set_mark(self, **values: object) -> None: ...

    def clear(self) -> None: ...

    def forget_chats(self) -> None: ...

    def write(self, wait: bool = True) -> "ContextManager[WordIndex]": ...

    def prepare_turns(self, records: Iterable[tuple[int, int, dict]]) -> Any: ...

    def add_turns(self, records: Any, mark: "Watermark") -> None: ...

    def add_messages(self, turns: Iterable[tuple[int, str, str, Sequence["Message"]]], mark: "Watermark") -> None: ...

    def add_lines(self, lines: Iterable[tuple[int, int, str]], tree_end: int | None) -> None: ...

    def count(self) -> int: ...

    def chat_title(self, session: str) -> str: ...

    def chats(self, filters: "Filters", titled: Callable[[str], bool] | None = None
              ) -> list[tuple[str, str, int, float]]: ...

    def term_docs(self, words: list[str]) -> dict[str, int]: ...

    def token_spans(self, text: str, terms: list[str]) -> list[tuple[int, int]]: ...

    def stems(self, words: list[str]) -> list[str]: ...

    def about(self, ids: Sequence[int], filters: "Filters") -> "dict[int, Placed]": ...

    def ranked(self, table: str, match: str, filters: "Filters", skip: int, limit: int,
               deadline: float) -> list["Row"]: ...

    def newest(self, table: str, match: str, filters: "Filters", after: int | None, limit: int,
               deadline: float) -> list["Row"]: ...

    def line_keys(self) -> set[int]: ...

    def line_in_time(self, part: tuple[int, int], filters: "Filters") -> bool: ...

    def problem(self, judge: Callable[[Iterator[tuple[int, float, int]]], str | None]) -> str | None:
        """What is wrong with the index (None: nothing); ``judge`` compares its message rows with the log."""


def open_index(folder: Path, store: str = "", copies: object = None) -> WordIndex:
    """The memory's index as its store says: a file in ``folder`` (the file store), or rows in the
    memory's PostgreSQL schema (``store`` a ``postgresql://`` URL; ``copies``: that store, whose
    copies of the log a write checks first)."""
    if is_postgres_url(store):
        from endless.core.search.pg_index import PgSearchIndex

        return PgSearchIndex(folder, store, folder.name, copies)  # type: ignore[arg-type]
    from endless.core.search.index import SearchIndex

    return SearchIndex(folder)
