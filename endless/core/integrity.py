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
"""

from __future__ import annotations

import os
import random
import sqlite3
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson

from endless.core.store import durable
from endless.core.search import upkeep as index_upkeep
from endless.core.view import tiling
from endless.core.search import read_turns
from endless.core.store import KINDS
from endless.core.words import count
from endless.core.store import examine, sealed, tid_number
from endless.core.search import IndexBusy
from endless.core.store import parse_node, is_erased_line

if TYPE_CHECKING:
    from endless.core.search import SearchIndex
    from endless.core.store import ChangeLock, OrderLog, TreeStore


class Memory(Protocol):
    """What the checks read and repair: an open memory's log, tree, index and lock (``Memory`` is one)."""

    log: "OrderLog"
    tree: "TreeStore"
    search_index: "SearchIndex"
    lock: "ChangeLock"
    quarantine: Path

    @property
    def total(self) -> int: ...

SAMPLE_ROWS = 8  # index rows and tree slots read back at each open (and the last few)


# -- at open --------------------------------------------------------------------------------


def sample(memory: Memory, rng: random.Random | None = None) -> None:
    """Read back a few rows of the turn index and slots of the tree against the files (cheap, at open)."""
    rng = rng or random.Random()
    log, tree = memory.log, memory.tree
    turns = len(log.offsets)
    if turns:
        picks = {turns - 1, *(rng.randrange(turns) for _ in range(SAMPLE_ROWS))}
        for turn in sorted(picks):
            if turn < len(log.offsets) and log.check_row(turn)[0] == "mismatch":
                log.read_record(turn)  # rebuilds it, and says so
                break
    for level, slots in enumerate(tree.slots):
        if not slots:
            continue
        picks = {len(slots) - 1, *(rng.randrange(len(slots)) for _ in range(SAMPLE_ROWS // (level + 1) + 1))}
        for index in sorted(picks):
            if tree.built(level, index):
                tree.record(level, index)  # a mismatch rebuilds, a damaged line is written again
        if tree.slots is not slots:  # rebuilt: the rest was read again from the file
            break


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
    log, tree, total = memory.log, memory.tree, memory.total
    parts = past_end(memory)
    # Index rows past the end count only when the rows before them are the log's own (a shorter log);
    # an index that disagrees everywhere was just damaged, and is rebuilt as before.
    kept = log.stale_rows[:len(log.offsets)]
    prefix = all(tuple(row) == (log.offsets[t], log.lengths[t], log.firsts[t], log.counts[t], log.tids[t])
                 for t, row in enumerate(kept))
    stale = log.stale_rows[len(log.offsets):] if prefix else []
    claimed = max([log.indexed_total, tree.free_upto, total]
                  + [tiling.end(p) for p in parts] + [row[2] + row[3] for row in stale])
    log.stale_rows = []
    if claimed <= total:
        return None
    found = Shortened(total, claimed, len(parts), len(stale))
    tree.forget(parts)
    tree.free_upto = min(tree.free_upto, total)
    if writable:
        _set_aside(memory, parts, stale)
    return found


def _set_aside(memory: Memory, parts: list[tuple[int, int]], stale: list[tuple[int, ...]]) -> None:
    """Under the lock: the lines past the end leave the tree file (kept in the quarantine), the index follows."""
    tree, quarantine = memory.tree, memory.quarantine
    moved = []
    tmp = tree.path.with_name(f".{tree.path.name}.{os.getpid()}.tmp")
    offset = 0
    if not tree.path.exists():
        durable.make_dir(tree.path.parent)
        os.close(durable.open_fd(tree.path, os.O_WRONLY | os.O_CREAT))
    # Streamed: the tree of a long memory is hundreds of megabytes.
    with durable.open_read(tree.path) as source, os.fdopen(durable.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                                           "wb") as out:
        for line in source:
            if not line.endswith(b"\n"):
                break  # a torn tail (already cut by repair_tail under this lock)
            record = parse_node(line[:-1])
            part = None if record is None else (record["l"], record["i"])
            if part is not None and tiling.end(part) > memory.total:
                moved.append(durable.dumps_line({"file": tree.path.name, "offset": offset, "reason":
                                                 f"past the order log's end (message {memory.total})",
                                                 "bytes": line[:-1].decode("utf-8", "replace")}))
            else:
                out.write(line)
            offset += len(line)
        out.flush()
        os.fsync(out.fileno())
    lines_moved = len(moved)
    if stale:
        moved.append(durable.dumps_line({"file": memory.log.index_path.name, "reason":
                                         f"index rows past the order log's end (message {memory.total})",
                                         "rows": [list(row) for row in stale]}))
    if moved:
        durable.append_lines(quarantine, moved)  # kept durably before they leave the tree
    if lines_moved:
        os.replace(tmp, tree.path)
        durable.fsync_dir(tree.path.parent)
    else:
        os.unlink(tmp)
    tree.rebuild()
    tree.write_index(force=True)
    try:
        with memory.search_index.write():
            memory.search_index.clear()  # rebuilt from the log at the next search
    except (sqlite3.Error, IndexBusy, OSError) as exc:  # derived data: one that cannot be cleared is set aside
        durable.log("search", f"the search index could not be cleared ({exc}); setting it aside")
        memory.search_index.close()
        memory.search_index.set_aside()


# -- in doctor ------------------------------------------------------------------------------


@dataclass
class Scan:
    """Everything a full pass over the log and the tree found wrong."""

    damaged_turns: list[tuple[int, int, str]] = field(default_factory=list)  # (turn, byte offset, messages)
    damaged_lines: list[tuple[int, str]] = field(default_factory=list)  # (byte offset, which line if known)
    bad_rows: list[int] = field(default_factory=list)  # turn-index rows that do not match their record
    bad_slots: list[tuple[int, int]] = field(default_factory=list)  # tree slots that do not match their line
    past_end: list[tuple[int, int]] = field(default_factory=list)  # tree lines for messages the log lacks
    past_end_parts: set = field(default_factory=set)
    unchecked: list[int] = field(default_factory=list)  # turns written before records carried a checksum
    reasons: dict[int, str] = field(default_factory=dict)  # why each damaged turn is damage, in words


def scan(memory: Memory) -> Scan:
    """Read every line of the log and the tree, and check every index row and slot against them."""
    found = Scan()
    log, tree = memory.log, memory.tree
    data, _ = durable.read_complete(log.path, 0)
    stored = _table(log.index_path)  # the index as stored, whatever this process rebuilt in memory
    turn, at, after_damage = 0, 0, False
    for offset, line in durable.iter_lines(data, 0):
        if offset >= log.end:
            break
        record, why = examine(line, turn)
        if record is not None and (record["id"] < at or (record["id"] > at and not after_damage)):
            why = f"its messages start at id {record['id']}, but the turns before it end at {at}"
            record = None
        row = tuple(stored[turn * 5:turn * 5 + 5]) if turn * 5 + 5 <= len(stored) else None
        after_damage = record is None
        if record is None:
            first = row[2] if row else at
            count = row[3] if row else 0
            ids = f"messages {first}..{first + count - 1}" if count else f"messages from {first}"
            found.damaged_turns.append((turn, offset, ids))
            found.reasons[turn] = why
            if row is not None and row[:2] != (offset, len(line)):
                found.bad_rows.append(turn)
        else:
            if sealed(line) is None:
                found.unchecked.append(turn)
            at = record["id"] + len(record["m"])
            if row is None or row != (offset, len(line), record["id"], len(record["m"]), tid_number(record["tid"])):
                found.bad_rows.append(turn)
        turn += 1
    found.past_end = past_end(memory)
    found.past_end_parts = set(found.past_end)
    data, _ = durable.read_complete(tree.path, 0)
    lines: dict[int, tuple[int, int]] = {}
    for offset, line in durable.iter_lines(data, 0):
        record = parse_node(line)
        if record is None and is_erased_line(line):
            continue  # erased by a forget: an unwritten node, not damage
        if record is None:
            head = line[:40].decode("utf-8", "replace")
            found.damaged_lines.append((offset, _guess_part(line) or head))
            continue
        lines[offset] = (record["l"], record["i"])
    level = 0
    while tree.slot_path(level).exists():
        slots = _table(tree.slot_path(level))
        level += 1
        for index, slot in enumerate(slots):
            if slot and (level - 1, index) in found.past_end_parts:
                continue
            if slot and lines.get(slot - 1) != (level - 1, index):
                if not any(offset == slot - 1 for offset, _ in found.damaged_lines):
                    found.bad_slots.append((level - 1, index))
    return found


def index_problem(memory: "Memory") -> str | None:
    """What is wrong with the search index file (None: nothing found, or no index yet), read-only.

    SQLite's own check of every page, then each message row (id, time,
    kind) against the log's record: the rows searches filter on, so a row
    someone changed would let ``--kind`` or ``--before`` through a message
    they exclude (search checks each hit too, and rebuilds).  A row the
    index has not reached yet is not a problem: the next search adds it.
    """
    path = memory.search_index.path
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error as exc:
        return f"it cannot be opened ({exc})"
    try:
        verdict = db.execute("PRAGMA quick_check").fetchone()
        if verdict is None or verdict[0] != "ok":
            return f"SQLite finds it damaged ({verdict[0] if verdict else 'no answer'})"
        wrong, first_wrong = _rows_against_log(memory, db.execute("SELECT id, at, kind FROM msg ORDER BY id"))
    except sqlite3.Error as exc:
        return f"SQLite cannot read it ({exc})"
    finally:
        db.close()
    if wrong:
        return (f"{count(wrong, 'message row')} disagree with the order log (a kind or time changed, or an id "
                f"the log lacks; the first at message {first_wrong})")
    return None


def _rows_against_log(memory: "Memory", rows) -> tuple[int, int | None]:
    """How many index rows (in id order) the log's messages contradict, and the first one's id."""
    codes = {kind: code for code, kind in enumerate(KINDS)}
    wrong, first_wrong = 0, None
    row = next(rows, None)
    for _, _, record in read_turns(memory.log.path, 0, memory.log.end, 0):
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


def _table(path) -> array:
    table = array("Q")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return table
    table.frombytes(raw[:len(raw) - len(raw) % 8])
    return table


def _guess_part(line: bytes) -> str | None:
    try:
        head = orjson.loads(line[:line.index(b',"text"')] + b"}")
        return f"line {head['l']}/{head['i']}"
    except (ValueError, orjson.JSONDecodeError, KeyError, TypeError):
        return None


def repair(memory: Memory) -> list[str]:
    """``endless doctor --repair``: the full scan, then every index that disagrees rebuilt (under the lock)."""
    done: list[str] = []
    with memory.lock:
        found = scan(memory)
        if found.bad_rows:
            memory.log.rebuild()
            memory.log.write_index()
            done.append(f"rebuilt the turn index ({len(found.bad_rows)} rows did not match the log)")
        if found.bad_slots:
            memory.tree.rebuild()
            done.append(f"rebuilt the tree index ({len(found.bad_slots)} slots did not match the tree file)")
        damaged_slots = [(level, index) for level, slots in enumerate(memory.tree.slots)
                         for index, slot in enumerate(slots)
                         if slot and any(offset == slot - 1 for offset, _ in found.damaged_lines)]
        if damaged_slots:
            memory.tree.forget(damaged_slots)
            done.append(f"{len(damaged_slots)} damaged summary lines count as unwritten and are written again")
        memory.tree.write_index(force=True)
        problem = index_problem(memory)
        if problem is not None:
            rebuild_index(memory)
            done.append(f"rebuilt the search index from the order log ({problem})")
    return done
