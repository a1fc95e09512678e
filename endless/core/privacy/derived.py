"""What a forget by words erases besides messages: the derived texts that hold the words.

Split from :mod:`endless.core.privacy.forget` (which says how a forget is made
crash-atomic).  A chat's title is recorded in every turn record of the chat,
the search index keeps it per chat, Hermes keeps its own, and a look-back
call's writer text names it; a summary line may hold words no message holds
any more.  A forget by match finds them here: the titles are patched in the
log as a message's text is (the same-length ``""`` and spaces, under the
same redo record), their index rows renamed to the untitled chat, and the
lines holding the words erased with their ancestors, to be written again.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Protocol

import orjson

from endless.core.store import node_part
from endless.core.search import CHATS_RENAMED

if TYPE_CHECKING:
    from endless.core.store import OrderLog, TreeStore


class Memory(Protocol):
    """What finding derived copies of words reads (``endless.core.memory.Memory`` is one)."""

    memory_id: str
    log: "OrderLog"
    tree: "TreeStore"

_log = logging.getLogger("endless.forget")


@dataclass(frozen=True)
class Matched:
    """What a forget by words reaches besides messages: derived texts holding the words.

    A chat's title is recorded in every turn record of the chat (and Hermes
    keeps its own copy); a summary line may hold words its messages no longer
    do (a title the writer read in a look-back call, words a writer made up).
    """

    titles: tuple[str, ...] = ()  # distinct titles holding the words, as recorded
    lines: tuple[tuple[int, int], ...] = ()  # built lines holding them

    def __bool__(self) -> bool:
        return bool(self.titles or self.lines)


def matching(memory: Memory, query: str | None) -> Matched:
    """The titles and built summary lines whose text holds ``query`` (case folded, literally)."""
    if not query or not query.strip():
        return Matched()
    needle = query.casefold()
    titles: dict[str, None] = {}
    for _, _, record in memory.log.records():
        title = record.get("t")
        if isinstance(title, str) and title and needle in title.casefold():
            titles.setdefault(title)
    tree, lines = memory.tree, []
    for offset, line in tree.lines():
        part = node_part(line)
        if part is None or not tree.built(*part) or tree.slots[part[0]][part[1]] != offset + 1:
            continue  # erased, or an older version of a line written again
        try:
            text = orjson.loads(line).get("text")
        except orjson.JSONDecodeError:
            continue
        if isinstance(text, str) and needle in text.casefold():
            lines.append(part)
    return Matched(tuple(titles), tuple(lines))


def sessions(memory: Memory) -> set[str]:
    """The session ids the memory holds turns of (a harness's copy is reached for these only)."""
    found: set[str] = set()
    for _, _, record in memory.log.records():
        if isinstance(record.get("s"), str):
            found.add(record["s"])
    return found


def title_spans(memory: Memory, titles: set[str]) -> Iterator[tuple[int, int, int]]:
    """``(turn, offset, length)`` of the JSON string of each recorded title among ``titles``."""
    if not titles:
        return
    for turn, _, record in memory.log.records():
        if record.get("t") not in titles or turn >= len(memory.log.offsets):
            continue
        base = memory.log.offsets[turn]
        line = memory.log.read_at(base, memory.log.lengths[turn])
        token = orjson.dumps(record["t"])
        at = line.find(b',"t":' + token)  # the record's own key: a string's quotes are escaped inside it
        if at < 0:
            _log.warning("%s: the title of turn %d is not where it was expected; it stays", memory.memory_id, turn)
            continue
        yield turn, base + at + 5, len(token)


def untitle_chats(db: sqlite3.Connection, titles: list[str]) -> None:
    """The index's chats named by a forgotten title become untitled (their messages move along)."""
    for title in titles:
        for chat, session in db.execute("SELECT id, session FROM chat WHERE title = ?", (title,)).fetchall():
            db.execute("INSERT OR IGNORE INTO chat(session, title) VALUES (?, '')", (session,))
            (kept,) = db.execute("SELECT id FROM chat WHERE session = ? AND title = ''", (session,)).fetchone()
            db.execute("UPDATE msg SET chat = ? WHERE chat = ?", (kept, chat))
            db.execute("DELETE FROM chat WHERE id = ?", (chat,))
    if titles:  # every process's chats known by name are stale now (SearchIndex._check_chats)
        db.execute("INSERT OR REPLACE INTO state(name, value) VALUES (?, ?)", (CHATS_RENAMED, os.urandom(8).hex()))
