"""The file store's own checks of its derived indexes: the turn index and the tree's slot files.

Offsets, slot files and a tree file rewritten to set lines aside are how
*this* backend keeps a memory; another engine checks its own structures with
its own means.  ``endless.core.integrity`` decides when to check and what to
do with what is found, and reaches these through the store
(``FileStore.scan`` and ``FileStore.set_aside``).
"""

from __future__ import annotations

import os
import random
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store import durable
from endless.core.store.log import OrderLog, tid_number
from endless.core.store.records import examine, sealed
from endless.core.store.tree import TreeStore, is_erased_line, parse_node

_ROW = 5  # fields of a turn-index row: offset, length, first id, count, turn id


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


def scan(log: OrderLog, tree: TreeStore, past_end: list[tuple[int, int]]) -> Scan:
    """Read every line of the log and the tree, and check every stored index row and slot against them."""
    found = Scan(past_end=past_end, past_end_parts=set(past_end))
    stored = _table(log.index_path)  # the index as stored, whatever this process rebuilt in memory
    turn, at, after_damage = 0, 0, False
    for offset, line in byte_lines(log.path):
        if offset >= log.end:
            break
        record, why = examine(line, turn)
        if record is not None and (record["id"] < at or (record["id"] > at and not after_damage)):
            why = f"its messages start at id {record['id']}, but the turns before it end at {at}"
            record = None
        row = tuple(stored[turn * _ROW:turn * _ROW + _ROW]) if turn * _ROW + _ROW <= len(stored) else None
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
    lines: dict[int, tuple[int, int]] = {}
    data, tail = durable.read_complete(tree.path, 0)
    _note_nodes(data, 0, lines, found)
    tables = []
    while tree.slot_path(len(tables)).exists():
        tables.append(_table(tree.slot_path(len(tables))))
    # A writer at work (a catch-up) may have stored lines, then their slots, since the tree was read: a
    # slot is written once its line is durable, so the lines after are read now, not taken for damage.
    more, _ = durable.read_complete(tree.path, tail.complete_end)
    _note_nodes(more, tail.complete_end, lines, found)
    damaged_at = {offset for offset, _ in found.damaged_lines}
    for level, slots in enumerate(tables, start=1):
        for index, slot in enumerate(slots):
            if slot and (level - 1, index) in found.past_end_parts:
                continue
            if slot and lines.get(slot - 1) != (level - 1, index) and slot - 1 not in damaged_at:
                found.bad_slots.append((level - 1, index))
    return found


def _note_nodes(data: bytes, start: int, lines: dict[int, tuple[int, int]], found: Scan) -> None:
    """Each node line of ``data`` (read from ``start`` in the tree file) by its offset; damage noted."""
    for offset, line in durable.iter_lines(data, start):
        record = parse_node(line)
        if record is None and is_erased_line(line):
            continue  # erased by a forget: an unwritten node, not damage
        if record is None:
            head = line[:40].decode("utf-8", "replace")
            found.damaged_lines.append((offset, _guess_part(line) or head))
            continue
        lines[offset] = (record["l"], record["i"])


def repair(log: OrderLog, tree: TreeStore, found: Scan) -> list[str]:
    """Under the lock: every index the scan found wrong rebuilt; returns what was done, in words."""
    done: list[str] = []
    if found.bad_rows:
        log.rebuild()
        log.write_index()
        done.append(f"rebuilt the turn index ({len(found.bad_rows)} rows did not match the log)")
    if found.bad_slots:
        tree.rebuild()
        done.append(f"rebuilt the tree index ({len(found.bad_slots)} slots did not match the tree file)")
    damaged_at = {offset for offset, _ in found.damaged_lines}
    damaged_slots = [(level, index) for level, slots in enumerate(tree.slots)
                     for index, slot in enumerate(slots) if slot and slot - 1 in damaged_at]
    if damaged_slots:
        tree.forget(damaged_slots)
        done.append(f"{len(damaged_slots)} damaged summary lines count as unwritten and are written again")
    tree.write_index(force=True)
    return done


def byte_lines(path: Path):
    """``(offset, line)`` of every complete line of a file, read whole (a full check reads it all anyway)."""
    data, _ = durable.read_complete(path, 0)
    return durable.iter_lines(data, 0)


def set_aside(log: OrderLog, tree: TreeStore, beyond: Callable[[tuple[int, int]], bool], total: int,
              stale: list[tuple[int, ...]], quarantine: Path) -> int:
    """Under the lock: tree lines ``beyond`` the log's end (``total`` messages) leave the tree file, kept
    in the quarantine with the turn-index rows past it; returns the lines moved.  The tree's slots are
    rebuilt and written whole after."""
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
            if part is not None and beyond(part):
                moved.append(durable.dumps_line({"file": tree.path.name, "offset": offset, "reason":
                                                 f"past the order log's end (message {total})",
                                                 "bytes": line[:-1].decode("utf-8", "replace")}))
            else:
                out.write(line)
            offset += len(line)
        out.flush()
        os.fsync(out.fileno())
    lines_moved = len(moved)
    if stale:
        moved.append(durable.dumps_line({"file": log.index_path.name, "reason":
                                         f"index rows past the order log's end (message {total})",
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
    return lines_moved


def sample(log: OrderLog, tree: TreeStore, rng: random.Random, rows: int) -> None:
    """Read back a few turn-index rows and tree slots against the files; a mismatch rebuilds, loudly."""
    turns = len(log.offsets)
    if turns:
        picks = {turns - 1, *(rng.randrange(turns) for _ in range(rows))}
        for turn in sorted(picks):
            if turn < len(log.offsets) and log.check_row(turn)[0] == "mismatch":
                log.read_record(turn)  # rebuilds it, and says so
                break
    for level, slots in enumerate(tree.slots):
        if not slots:
            continue
        picks = {len(slots) - 1, *(rng.randrange(len(slots)) for _ in range(rows // (level + 1) + 1))}
        for index in sorted(picks):
            if tree.built(level, index):
                tree.record(level, index)  # a mismatch rebuilds, a damaged line is written again
        if tree.slots is not slots:  # rebuilt: the rest was read again from the file
            break


def rows_past_end(log: OrderLog) -> list[tuple[int, ...]]:
    """Turn-index rows set aside at load that describe turns past the log's end (taken once).

    They count only when the rows before them are the log's own (a shorter
    log); an index that disagrees everywhere was just damaged, and is rebuilt.
    """
    kept = log.stale_rows[:len(log.offsets)]
    prefix = all(tuple(row) == (log.offsets[t], log.lengths[t], log.firsts[t], log.counts[t], log.tids[t])
                 for t, row in enumerate(kept))
    stale = log.stale_rows[len(log.offsets):] if prefix else []
    log.stale_rows = []
    return stale


def _table(path: Path) -> array:
    table = array("Q")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return table
    table.frombytes(raw[:len(raw) - len(raw) % 8])
    return table


def _guess_part(line: bytes) -> str | None:
    """``line L/I`` of a damaged node line whose head still reads (``{"l":L,"i":I,`` and anything)."""
    try:
        head = orjson.loads(line[:line.index(b",", line.index(b'"i":'))] + b"}")
        return f"line {head['l']}/{head['i']}"
    except (ValueError, orjson.JSONDecodeError, KeyError, TypeError):
        return None


class LogAndTreeChecks:
    """The checks of a store whose log and tree are read from files of this machine (the file store's
    own, or the PostgreSQL store's copies): ``self.log`` and ``self.tree``, checked as files are."""

    log: OrderLog
    tree: TreeStore

    def sample(self, rng: random.Random, rows: int) -> None:
        """At open: a few rows of the turn index and slots of the tree read back against the files."""
        sample(self.log, self.tree, rng, rows)

    def rows_past_end(self) -> list[tuple[int, ...]]:
        """Turn-index rows (offset, length, first id, count, tid) describing turns past the log's end."""
        return rows_past_end(self.log)

    def claimed_total(self) -> int:
        """The most messages the store's own indexes said the log held when they were loaded."""
        return max(self.log.indexed_total, self.tree.free_upto)

    def repair(self, found: Scan) -> list[str]:
        """``endless doctor --repair``, under the lock: rebuild what ``found`` says disagrees."""
        return repair(self.log, self.tree, found)
