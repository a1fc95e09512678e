"""Keeping the full-text index current: caught up from the files, or fed what a commit has in hand.

The index (:mod:`endless.core.search.index`) reads the order log and the
tree file from its watermark on; each batch is one transaction that moves
the watermark with its rows.  The process that commits a turn or stores a
line adds it at once if the index had read everything before it, and never
waits for the index or fails because of it: whatever it leaves, the next
search catches up.
"""

from __future__ import annotations

import hashlib
import re
import threading
import sqlite3
from array import array
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import orjson

from endless.core.store import durable
from endless.core.store import NODE_HEAD
from endless.core.search.index import IndexBusy, SearchIndex, Watermark, is_damage
from endless.core.settings import INDEX_BATCH_MESSAGES, RECORDS_READ_WINDOW

if TYPE_CHECKING:
    from endless.core.store import TurnInfo
    from endless.core.store import Message
    from endless.core.store import OrderLog, TreeStore


def batches(items: Iterable[tuple[int, int, dict]]) -> Iterator[list[tuple[int, int, dict]]]:
    """Turns in groups of about ``INDEX_BATCH_MESSAGES`` messages: one transaction each."""
    batch: list[tuple[int, int, dict]] = []
    size = 0
    for item in items:
        batch.append(item)
        size += len(item[2]["m"])
        if size >= INDEX_BATCH_MESSAGES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def agrees(mark: Watermark, log: "OrderLog", tree: "TreeStore") -> bool:
    """Whether the watermark still describes the stored log and tree (else the index is rebuilt).

    As stored now, not as this process last read them: another process may
    have indexed turns this one has not read yet.
    """
    return log.holds(mark.log_end, mark.first_tid) and (not mark.tree_end or tree.holds(mark.tree_end))


@dataclass(frozen=True)
class Sources:
    """What the index is caught up from: the order log and the tree up to their complete ends."""

    log: "OrderLog"
    log_end: int
    tree: "TreeStore"
    tree_end: int
    size_of: Callable[[int, int], int | None]  # a stored line's size in bytes (for telling free lines apart)
    # Where a stretch of the tree file that holds free lines alone ends, if one starts at this byte
    # (told by the process that wrote it: see index_follower); None: read the lines to tell.
    free_until: Callable[[int], int | None] = lambda offset: None


def catch_up(index: SearchIndex, sources: Sources, deadline: float) -> bool:
    """Index what the files hold beyond the watermark, a transaction a batch; False if time ran out.

    An index already caught up is seen from a read alone, so a search takes
    no write lock unless there is something to index.  A damaged index file
    is removed and built again from the start (once: a file damaged again
    at once says something else is wrong, and is raised).
    """
    try:
        return _catch_up(index, sources, deadline)
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        index.discard(exc)
        return _catch_up(index, sources, deadline)


def _catch_up(index: SearchIndex, sources: Sources, deadline: float) -> bool:
    ahead: _Ahead | None = None  # the next batch of turns, read while this one is written
    while True:
        with index.lock:
            mark = index.watermark()
        if _behind(mark, sources) is None:
            return True
        if index.clock() >= deadline:
            return False
        with index.write():
            mark = index.watermark()
            behind = _behind(mark, sources)
            if behind == "damaged":
                if mark.log_end or mark.tree_end:
                    durable.log("search", f"the search index {index.path} disagrees with the memory's "
                                          "files; rebuilding it")
                index.clear()
                mark = Watermark(0, 0, 0, 0, "")
                behind = "log" if sources.log_end else ("lines" if sources.tree_end else None)
            if behind == "log":
                ahead = _index_turns(index, sources, mark, ahead)
            elif behind == "lines":
                _index_lines(index, sources, mark)


def _behind(mark: Watermark, sources: Sources) -> str | None:
    """What the index lacks: ``damaged`` (rebuild), ``log``, ``lines``, or None (caught up)."""
    if not agrees(mark, sources.log, sources.tree):
        return "damaged"
    if mark.log_end < sources.log_end:
        return "log"
    if mark.tree_end < sources.tree_end:
        return "lines"
    return None


class _Ahead:
    """The next batch of turns, read from the log and prepared for the index (``prepare_turns``) in a
    thread of its own while the batch before is written: the index's engine then works (SQLite, or the
    PostgreSQL server) while Python reads (a long catch-up, an import's follower, spends about half its
    time in each).

    Taken only if the watermark is where it was read from and the log's bytes are still the ones read,
    checked inside the index's write transaction: a forget patches the log inside its own, so a batch
    read before a forget is read again, never indexed with the words it took out (module forget)."""

    def __init__(self, index: SearchIndex, sources: Sources, start: int, turn: int) -> None:
        self.start, self.turn, self.sources = start, turn, sources
        self._got: tuple[list, object] | None = None
        self._seen: tuple[int, bytes] = (0, b"")  # the batch's length in the log, and its bytes' digest
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(index,), daemon=True, name="endless-index-ahead")
        self._thread.start()

    def _read(self, index: SearchIndex) -> None:
        try:
            batch = _read_batch(self.sources, self.start, self.turn)
            if batch:
                length = batch[-1][1] - self.start
                self._seen = (length, _digest(self.sources.log, self.start, length))
            self._got = (batch, index.prepare_turns(batch) if batch else batch)
        except BaseException as exc:  # (raised where it is taken, as a read there would raise it)
            self._failed = exc

    def take(self, mark: Watermark) -> tuple[list, object] | None:
        """The batch and its prepared rows (None: read it again here)."""
        if (mark.log_end, mark.turns) != (self.start, self.turn):
            return None  # another process indexed meanwhile, or the index was rebuilt
        self._thread.join()
        if self._failed is not None or self._got is None:
            return None  # (read again here: what failed there fails here, where it is handled)
        if self._got[0] and _digest(self.sources.log, self.start, self._seen[0]) != self._seen[1]:
            return None  # patched since (a forget)
        return self._got


def _digest(log: "OrderLog", start: int, length: int) -> bytes:
    """A digest of the log's bytes ``[start, start + length)``, read a window at a time: a batch's bytes
    (9 MB for 20,000 realistic messages) are not held while the batch before is indexed."""
    digest = hashlib.blake2b(digest_size=32)
    pos, stop = start, start + length
    while pos < stop:
        piece = log.read_at(pos, min(RECORDS_READ_WINDOW, stop - pos))
        if not piece:
            break
        digest.update(piece)
        pos += len(piece)
    return b"%d:" % (pos - start) + digest.digest()


def _read_batch(sources: Sources, start: int, turn: int) -> list[tuple[int, int, dict]]:
    turns = sources.log.records(start, sources.log_end, turn)
    try:
        return next(batches(turns), [])
    finally:
        turns.close()


def _index_turns(index: SearchIndex, sources: Sources, mark: Watermark, ahead: "_Ahead | None" = None
                 ) -> "_Ahead | None":
    """Index the next batch of turns; returns the read of the one after, started (None: none left)."""
    got = ahead.take(mark) if ahead is not None else None
    if got is None:
        batch = _read_batch(sources, mark.log_end, mark.turns)
        got = (batch, batch)
    batch, prepared = got
    if not batch:  # only damaged lines were left: step over them
        index.set_mark(log_end=sources.log_end)
        return None
    last_turn, end, record = batch[-1]
    first_tid = mark.first_tid or (batch[0][2].get("tid", "") if batch[0][0] == 0 else sources.log.first_tid())
    following = _Ahead(index, sources, end, last_turn + 1) if end < sources.log_end else None
    index.add_turns(prepared, Watermark(last_turn + 1, end, record["id"] + len(record["m"]), mark.tree_end,
                                        str(first_tid)))
    return following


_NODE_TAIL = re.compile(rb',"size":(\d+)(?:,"src":(\d+))?\}\s*$')
_FREE_KEYS = (b'"ref":', b'"join"')  # what follows a free line's head (TreeStore.encode_ref, encode_join)


def _index_lines(index: SearchIndex, sources: Sources, mark: Watermark) -> None:
    """Index the written lines among the tree's next nodes (free lines repeat messages: left out).

    Most nodes are free: a line of format 2 says so in its first bytes; one of
    format 1 is told apart by its sizes alone, read from the record's ends
    without parsing its text (see :func:`is_free`); only written lines are
    parsed.  A stretch its writer said is free is not read.
    """
    sizes: list[array] = []  # per level, the size of each node this pass read (0: not read)
    written: list[tuple[int, int, str]] = []
    pos = mark.tree_end
    while pos < sources.tree_end and len(written) < INDEX_BATCH_MESSAGES:
        skip_to = sources.free_until(pos)
        if skip_to is not None and pos < skip_to <= sources.tree_end:
            pos = skip_to
            continue
        for offset, line in sources.tree.lines(pos, sources.tree_end):
            pos = offset + len(line) + 1
            head = NODE_HEAD.match(line)
            tail = None
            if head is not None and line[head.end():head.end() + 6] not in _FREE_KEYS:  # (a free line of
                tail = _NODE_TAIL.search(line, max(0, len(line) - 64))  # format 2 holds no words of its own)
            if tail is not None:  # else free, or not a node as the tree writes them (damage)
                level, ix, size = int(head[1]), int(head[2]), int(tail[1])
                src = None if tail[2] is None else int(tail[2])
                _remember(sizes, level, ix, size)
                if not is_free(level, ix, size, src, lambda part: _size_of(sizes, part, sources)):
                    try:
                        text = orjson.loads(line)["text"]
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        text = None
                    if isinstance(text, str):
                        written.append((level, ix, text))
            elif head is not None:  # a free line: its size, for telling whether a written parent above is free
                free_tail = _NODE_TAIL.search(line, max(0, len(line) - 64))
                if free_tail is not None:
                    _remember(sizes, int(head[1]), int(head[2]), int(free_tail[1]))
            if len(written) >= INDEX_BATCH_MESSAGES or sources.free_until(pos) is not None:
                break  # a batch is full, or a free stretch starts here: stepped over unread
        else:
            break  # the lines ran out (a torn last line is not read)
    index.add_lines(written, pos)


def node_size(tree: "TreeStore") -> Callable[[int, int], int | None]:
    """A stored line's size in bytes, read from its record (for nodes before the watermark)."""
    def size_of(level: int, index: int) -> int | None:
        record = tree.record(level, index, resolve=False)
        size = None if record is None else record.get("size")
        return size if isinstance(size, int) else None

    return size_of


def _remember(sizes: list[array], level: int, ix: int, size: int) -> None:
    while len(sizes) <= level:
        sizes.append(array("I"))
    row = sizes[level]
    if len(row) <= ix:
        row.extend([0] * (ix + 1 - len(row)))
    row[ix] = size + 1


def _size_of(sizes: list[array], part: tuple[int, int], sources: Sources) -> int | None:
    level, ix = part
    if level < len(sizes) and ix < len(sizes[level]) and sizes[level][ix]:
        return sizes[level][ix] - 1
    return sources.size_of(level, ix)


def is_free(level: int, ix: int, size: int, src: int | None,
            size_of: Callable[[tuple[int, int]], int | None]) -> bool:
    """A free line is a message as it is (level 0) or its two halves joined (DESIGN §2.3).

    A written leaf exists only for a message too long to be its own line, so
    its source is larger than its text; a free leaf's source is its text.  A
    free parent is its halves and a newline, so exactly that long; a written
    parent exists only where that join is longer than a line may be, and the
    writer's line is shorter (a writer's line of exactly the join's length,
    possible only past the line budget, would be taken for free and missed
    by the summary-line scope; its messages are still found).
    """
    if level == 0:
        return src is not None and src == size
    left, right = size_of((level - 1, ix * 2)), size_of((level - 1, ix * 2 + 1))
    return left is not None and right is not None and size == left + 1 + right


# -- kept current by the process that writes (in hand, under the memory's lock) ------------------

def after_commit(index: SearchIndex, before: tuple[int, int], infos: list["TurnInfo"],
                 in_hand: dict[int, "Message"], mark: Watermark) -> None:
    """Index turns just committed, if the index had read everything before them.

    ``before`` is the (log, tree) end before the commit; the commit only
    appended the turns and their free lines, none of which is a written
    line, so the tree watermark moves with it.  An index that lags, or is
    busy in another process, is left for the next search to catch up: a
    commit never waits for it and never fails because of it.  A new memory
    (nothing before the commit) creates its index here.
    """
    if before != (0, 0) and not index.exists():
        return
    turns = [(i.first, i.session, i.title, [in_hand[i.first + k] for k in range(i.count)]) for i in infos]
    try:
        if not index.local:  # a database's index checks and adds in one statement (PgSearchIndex.add_after)
            index.add_after(before, turns, replace(mark, first_tid=infos[0].tid if infos else ""))  # type: ignore
            return
        with index.write(wait=False):
            old = index.watermark()
            if (old.log_end, old.tree_end) != before:
                return
            first_tid = old.first_tid or (infos[0].tid if infos else "")
            index.add_messages(turns, Watermark(mark.turns, mark.log_end, mark.messages, mark.tree_end, first_tid))
            index.set_mark(tree_end=mark.tree_end)
    except (IndexBusy, sqlite3.Error, OSError) as exc:
        _not_updated(index, exc, "at this commit")


def after_store(index: SearchIndex, before_tree_end: int, lines: list[tuple[int, int, str]],
                tree_end: int) -> None:
    """Index written lines just stored, if the index had read the tree up to them."""
    if not index.exists():
        return
    try:
        with index.write(wait=False):
            if index.watermark().tree_end != before_tree_end:
                return
            index.add_lines(lines, tree_end)
    except (IndexBusy, sqlite3.Error, OSError) as exc:
        _not_updated(index, exc, "with new lines")


def _not_updated(index: SearchIndex, exc: Exception, when: str) -> None:
    """A commit's index update that failed: a damaged index goes (rebuilt from the log), anything else
    waits for the next search's catch-up; the commit itself never fails for it."""
    if is_damage(exc):
        index.discard(exc)
        return
    durable.log("search", f"the search index was not updated {when} ({exc}); the next search catches it up")

