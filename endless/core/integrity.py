"""Is what the derived files say still true of the order log?

The order log is the truth; the turn index, the tree's slot files, the tree
itself (as far as it covers messages) and the full-text index are derived
from it.  Three checks keep them honest:

* at open, cheaply: a few index rows and tree slots, sampled, are read back
  against the records they point to (every read checks its own row or slot
  too, see ``OrderLog.read_record`` and ``TreeStore.record``); a mismatch
  rebuilds that index, loudly;
* at open, under the lock: a log that got shorter than the tree and the
  indexes describe (a torn or zeroed tail cut away, a file restored from an
  older copy).  Tree lines and index rows past its end are set aside in the
  quarantine file (``damaged.jsonl``), never shown again; the full-text index
  is rebuilt and the view recomputed (a read-only open only hides them);
* in ``endless doctor``, fully: every line of the log and the tree is read,
  and every row and slot checked (:func:`scan`).

What the checks read and rewrite of the store's own structures (offsets,
slot files, a tree rewritten without the lines set aside) the store does:
``Store.scan`` and ``Store.set_aside`` (for files, :mod:`endless.core.store.checks`).
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from endless.core.store import durable
from endless.core.search import upkeep as index_upkeep
from endless.core.view import tiling
from endless.core.store import KINDS
from endless.core.words import count
from endless.core.search import IndexBusy
from endless.core.store import Scan

if TYPE_CHECKING:
    from endless.core.search import WordIndex
    from endless.core.store import ChangeLock, OrderLog, Store, TreeStore


class Memory(Protocol):
    """What the checks read and repair: an open memory's log, tree, index and lock (``Memory`` is one)."""

    log: "OrderLog"
    tree: "TreeStore"
    store: "Store"
    search_index: "WordIndex"
    lock: "ChangeLock"
    quarantine: Path

    @property
    def total(self) -> int: ...

SAMPLE_ROWS = 8  # index rows and tree slots read back at each open (and the last few)


# -- at open --------------------------------------------------------------------------------


def sample(memory: Memory, rng: random.Random | None = None) -> None:
    """Read back a few of the store's own index entries against what they point to (cheap, at open)."""
    memory.store.sample(rng or random.Random(), SAMPLE_ROWS)


@dataclass
class Shortened:
    """The log holds fewer messages than the memory's other files describe."""

    total: int  # messages the log holds
    claimed: int  # messages the tree or the indexes named
    lines: int = 0  # tree lines past the log's end, set aside
    rows: int = 0  # turn-index rows past it, set aside

    def sentence(self, done: bool = True) -> str:
        """What was found, and (``done``) what was done about it or (not) what a reader does meanwhile."""
        lines = f"{self.lines} summary line{'' if self.lines == 1 else 's'}"
        rows = f"{self.rows} index row{'' if self.rows == 1 else 's'}"
        found = (f"the order log holds {self.total} messages but the tree and the indexes named {self.claimed}: "
                 f"it got shorter (a cut or zeroed tail, an older copy restored); {lines} and {rows} past its end ")
        if done:
            return found + ("were set aside in damaged.jsonl and are never shown; the search index is rebuilt "
                            "and the view recomputed")
        return found + "are hidden from this reader until the memory is next opened for writing"


def past_end(memory: Memory) -> list[tuple[int, int]]:
    """Built tree nodes covering a message the log does not hold (only the slots past the end are read)."""
    total = memory.total
    found = []
    for level, slots in enumerate(memory.tree.slots):
        for index in range(total >> level, len(slots)):
            if slots[index] and ((index + 1) << level) > total:
                found.append((level, index))
    return found


def check_length(memory: Memory, writable: bool) -> Shortened | None:
    """After the log is caught up at open: set aside what describes messages past its end."""
    tree, total = memory.tree, memory.total
    parts = past_end(memory)
    stale = memory.store.rows_past_end()
    claimed = max([memory.store.claimed_total(), total]
                  + [tiling.end(p) for p in parts] + [row[2] + row[3] for row in stale])
    if claimed <= total:
        return None
    found = Shortened(total, claimed, len(parts), len(stale))
    tree.forget(parts)
    tree.free_upto = min(tree.free_upto, total)
    if writable:
        _set_aside(memory, parts, stale)
    return found


def _set_aside(memory: Memory, parts: list[tuple[int, int]], stale: list[tuple[int, ...]]) -> None:
    """Under the lock: the lines past the end leave the store (kept in the quarantine), the index follows."""
    total = memory.total
    memory.store.set_aside(lambda part: tiling.end(part) > total, total, stale, memory.quarantine)
    try:
        with memory.search_index.write():
            memory.search_index.clear()  # rebuilt from the log at the next search
    except (sqlite3.Error, IndexBusy, OSError) as exc:  # derived data: one that cannot be cleared is set aside
        durable.log("search", f"the search index could not be cleared ({exc}); setting it aside")
        memory.search_index.close()
        memory.search_index.set_aside()


# -- in doctor ------------------------------------------------------------------------------


def scan(memory: Memory) -> Scan:
    """Read every line of the log and the tree, and check every index row and slot against them."""
    return memory.store.scan(past_end(memory))


def index_problem(memory: "Memory") -> str | None:
    """What is wrong with the search index (None: nothing found, or no index yet), read-only.

    The index's own check (SQLite's of every page of its file), then each
    message row (id, time, kind) against the log's record: the rows searches filter on, so a row
    someone changed would let ``--kind`` or ``--before`` through a message
    they exclude (search checks each hit too, and rebuilds).  A row the
    index has not reached yet is not a problem: the next search adds it.
    """
    def judge(rows) -> str | None:
        wrong, first_wrong = _rows_against_log(memory, rows)
        if wrong:
            return (f"{count(wrong, 'message row')} disagree with the order log (a kind or time changed, or an "
                    f"id the log lacks; the first at message {first_wrong})")
        return None

    return memory.search_index.problem(judge)


def _rows_against_log(memory: "Memory", rows) -> tuple[int, int | None]:
    """How many index rows (in id order) the log's messages contradict, and the first one's id."""
    codes = {kind: code for code, kind in enumerate(KINDS)}
    wrong, first_wrong = 0, None
    row = next(rows, None)
    for _, _, record in memory.log.records():
        for k, m in enumerate(record["m"]):
            mid = record["id"] + k
            while row is not None and row[0] < mid:  # a row for an id the log does not hold
                wrong, first_wrong = wrong + 1, row[0] if first_wrong is None else first_wrong
                row = next(rows, None)
            if row is not None and row[0] == mid:
                if row[2] != codes[m["k"]] or row[1] != m["at"]:
                    wrong, first_wrong = wrong + 1, mid if first_wrong is None else first_wrong
                row = next(rows, None)
    while row is not None:
        wrong, first_wrong = wrong + 1, row[0] if first_wrong is None else first_wrong
        row = next(rows, None)
    return wrong, first_wrong


def rebuild_index(memory: "Memory") -> None:
    """Remove the search index and build it again from the log and the tree, now (``doctor --repair``)."""
    with memory.search_index.lock:
        memory.search_index.close()
        memory.search_index.set_aside()
    index_upkeep.catch_up(memory.search_index, memory.index_sources(), float("inf"))


def repair(memory: Memory) -> list[str]:
    """``endless doctor --repair``: the full scan, then every index that disagrees rebuilt (under the lock)."""
    done: list[str] = []
    with memory.lock:
        done.extend(memory.store.repair(scan(memory)))
        problem = index_problem(memory)
        if problem is not None:
            rebuild_index(memory)
            done.append(f"rebuilt the search index from the order log ({problem})")
    return done
