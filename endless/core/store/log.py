"""The order log: one JSONL record per finished turn, with its messages (DESIGN §2.2, §2.5).

Turns are committed in finishing order across every chat of the memory.  A
record carries its turn number and first message id, so a damaged line in the
middle never shifts the ids after it.  A binary index (offset, length, first
id, count, turn id per turn) makes opening and ``message(id)`` a seek; it is
derived from the log and caught up from it whenever it lags.

Every record ends with a checksum, ``,"c":"<crc32 of the bytes before it>"}``
: a same-length edit or a flipped bit inside a record is
damage, reported, never served as another message.  Records written before
checksums have none; they are still read (shape-checked only, no unknown
field) and ``endless doctor`` counts them as unchecked.  A forget, which
blanks texts in place, writes the record's new checksum in the same redo
(:mod:`endless.core.privacy.forget`).
"""

from __future__ import annotations

import bisect
import mmap
import os
from array import array
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from endless.core.store import byte_ranges, durable
from endless.core.store.messages import Message, Stored
from endless.core.store.records import (SEAL_FROM_END, examine, parse_turn, placed, record_tail, reseal, sealed, shape,
                                         shown, stored_from)

FORMAT = 1
SOURCE_CACHE = 64  # turn records kept parsed for free leaves' words (see OrderLog.source_text)
_FIELDS = 5  # offset, length, first id, count, turn id (as an integer)
_ITEM = 8


@dataclass(slots=True, unsafe_hash=True)
class TurnInfo:
    """Where a turn landed in the log.  Never changed once made; not frozen for the cost (see ``Message``)."""

    turn: int
    first: int
    count: int
    session: str
    title: str
    status: str
    at: float
    tid: str


@dataclass(frozen=True)
class Damage:
    """A line of a file that could not be read, kept in place and reported."""

    file: str
    offset: int
    length: int
    reason: str


def file_size(path: Path) -> int:
    """The file's size in bytes; 0 when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def tid_number(tid: str) -> int:
    return int(tid, 16) & 0xFFFF_FFFF_FFFF_FFFF


class OrderLog:
    def __init__(self, folder: Path, granularity: str) -> None:
        self.path = folder / f"turns.{granularity}.v{FORMAT}.jsonl"
        self.index_path = folder / "index" / f"turns.v{FORMAT}.bin"
        self.offsets = array("Q")
        self.lengths = array("Q")
        self.firsts = array("Q")
        self.counts = array("Q")
        self.tids = array("Q")
        self.end = 0
        self.total = 0
        self.damage: list[Damage] = []
        self.stale_rows: list[tuple[int, ...]] = []  # index rows set aside when the index disagreed (issue 17)
        self.indexed_total = 0  # the message count the index claimed when loaded (before any rebuild)
        self.on_problem: Callable[[str], None] = lambda what: durable.log("log", what)
        self._fd: int | None = None
        self.forgotten: dict[int, float] = {}  # id -> when it was forgotten (endless.core.privacy.forget)
        self.forgets = 0  # forgets read of (a forget of titles or lines alone forgets no id)
        self.recheck: Callable[[], None] | None = None  # reads forgets made since (endless.core.privacy.forget)
        self._sources: dict[int, tuple[int, list[str]]] = {}  # turn -> first id, its words (source_text)
        self._sources_at = 0  # the forgets read of when they were kept

    # -- loading and catching up -------------------------------------------------

    def load_index(self) -> None:
        """Read the binary index; a torn or inconsistent index is rebuilt from the log."""
        try:
            raw = durable.read_all(self.index_path)
        except FileNotFoundError:
            raw = b""
        except durable.LinkRefused:
            raise
        except OSError as exc:  # derived data: one that cannot be read is built again from the log
            durable.log("log", f"the turn index {self.index_path} cannot be read ({exc.strerror or exc}); "
                               "indexing the log again; `endless doctor` says what is wrong with the file")
            raw = b""
        usable = len(raw) - len(raw) % (_FIELDS * _ITEM)
        table = array("Q")
        table.frombytes(raw[:usable])
        self.offsets, self.lengths = table[0::_FIELDS], table[1::_FIELDS]
        self.firsts, self.counts, self.tids = table[2::_FIELDS], table[3::_FIELDS], table[4::_FIELDS]
        self._index_written = len(self.offsets)
        if self.offsets:
            self.end = self.offsets[-1] + self.lengths[-1] + 1
            self.total = self.indexed_total = self.firsts[-1] + self.counts[-1]
            if not self._index_agrees():
                durable.log("log", f"the turn index {self.index_path} disagrees with the log; rebuilding it")
                self.stale_rows = [tuple(table[k:k + _FIELDS]) for k in range(0, len(table), _FIELDS)]
                self.reset()

    def reset(self) -> None:
        self._sources = {}
        for name in ("offsets", "lengths", "firsts", "counts", "tids"):
            setattr(self, name, array("Q"))
        self._index_written = 0
        self.end = 0
        self.total = 0

    def _index_agrees(self) -> bool:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        if self.end > size:
            return False
        with durable.open_read(self.path) as handle:
            handle.seek(self.end - 1)
            return handle.read(1) == b"\n"

    def catch_up(self, write_index: bool) -> list[tuple[int, dict | None]]:
        """Index the lines other processes appended; returns (turn, record or None if damaged)."""
        data, tail = durable.read_complete(self.path, self.end)
        if not data and not tail.partial and self.end and file_size(self.path) < self.end:
            # The log got shorter under us: index it again from its start.
            self.on_problem(f"{self.path.name} is shorter than this process had read; indexing it again")
            self.stale_rows = self.rows()
            self.reset()
            self.close()
            data, tail = durable.read_complete(self.path, 0)
        found: list[tuple[int, dict | None]] = []
        for offset, line in durable.iter_lines(data, self.end):
            turn = len(self.offsets)
            record, why = examine(line, turn)
            after_damage = bool(self.counts) and self.tids[-1] == 0 and self.counts[-1] == 0
            if record is not None and (record["id"] < self.total
                                       or (record["id"] > self.total and not after_damage)):
                # Ids run on from turn to turn; a record that says otherwise (an edited id, lines
                # swapped) would show one message as another.  Only a damaged line explains a gap.
                why = (f"its messages start at id {record['id']}, but the turns before it end at "
                       f"{self.total}")
                record = None
            if record is None:
                self.damage.append(Damage(self.path.name, offset, len(line), f"not a readable turn record: {why}"))
                durable.log("log", f"damaged line at byte {offset} of {self.path.name} "
                                   f"(turn {turn}: {why}): kept in place and skipped; run `endless doctor`")
                first, n, tid = self.total, 0, 0
            else:
                first, n, tid = record["id"], len(record["m"]), tid_number(record["tid"])
                if first > self.total:  # a damaged line before this one held the missing ids
                    self.counts[-1] = first - self.firsts[-1]
            self.offsets.append(offset)
            self.lengths.append(len(line))
            self.firsts.append(first)
            self.counts.append(n)
            self.tids.append(tid)
            self.total = first + n
            found.append((turn, record))
        self.end = tail.complete_end
        if write_index:
            self.write_index()
        return found

    def rows(self) -> list[tuple[int, ...]]:
        return [(self.offsets[t], self.lengths[t], self.firsts[t], self.counts[t], self.tids[t])
                for t in range(len(self.offsets))]

    def write_index(self) -> None:
        """Persist index entries not yet on disk (derived data: no fsync needed).

        One that cannot be written (a full disk) is said and written at the
        next chance: the records are in the log already, so the commit stands
        (no derived index blocks a write); a reader rebuilds rows
        the file lacks from the log.
        """
        try:
            self._write_index()
        except durable.LinkRefused:
            raise
        except OSError as exc:
            durable.log("log", f"the turn index {self.index_path} was not saved ({exc.strerror or exc}); it is "
                               "caught up from the log at the next write; `endless doctor` checks it")

    def _write_index(self) -> None:
        start = self._index_written
        if start == 0 and self.index_path.exists():  # rebuilt: no row of the old index may stay behind
            os.truncate(self.index_path, 0)
        if start >= len(self.offsets):
            return
        rows = array("Q", bytes(_ITEM * _FIELDS * (len(self.offsets) - start)))
        for field, column in enumerate((self.offsets, self.lengths, self.firsts, self.counts, self.tids)):
            rows[field::_FIELDS] = column[start:]
        durable.make_dir(self.index_path.parent)
        fd = durable.open_fd(self.index_path, os.O_WRONLY | os.O_CREAT)
        try:
            os.pwrite(fd, rows.tobytes(), start * _FIELDS * _ITEM)
        finally:
            os.close(fd)
        self._index_written = len(self.offsets)

    def tail_state(self) -> durable.Tail:
        _, tail = durable.read_complete(self.path, self.end)
        return tail

    def repair_tail(self, quarantine: Path) -> str | None:
        """Under the lock: end the log with a newline, moving torn bytes aside; says what it did."""
        return durable.repair_tail(self.path, self.end, quarantine,
                                   lambda raw: parse_turn(raw, None, None) is not None)

    # -- writing -------------------------------------------------------------------

    def encode(self, *, tid: str, session: str, title: str, status: str, at: float,
               messages: list[Message], turn: int | None = None, first: int | None = None) -> bytes:
        return placed(len(self.offsets) if turn is None else turn, self.total if first is None else first,
                      record_tail(tid, session, title, status, at, [m.to_record() for m in messages]))

    def add(self, lines: list[bytes], infos: list[TurnInfo], sync: bool = True) -> None:
        """Append encoded turn records and index them from ``infos`` (under the lock, caught up).

        What was just written need not be parsed back; only if the file did
        not end where this process last read it is it read instead.
        """
        offset = self.append_bytes(lines, sync)
        if offset != self.end or (infos and infos[0].first != self.total):
            self.catch_up(True)
            return
        # (a column at a time: an import adds a million turns)
        sizes = list(map(len, lines))
        if sizes:
            self.offsets.extend(accumulate(sizes[:-1], initial=offset))
        self.lengths.extend(map((-1).__add__, sizes))  # without its newline, as iter_lines gives it
        self.firsts.extend(map(attrgetter("first"), infos))
        self.counts.extend(map(attrgetter("count"), infos))
        self.tids.extend(map(tid_number, map(attrgetter("tid"), infos)))
        self.total = infos[-1].first + infos[-1].count if infos else self.total
        self.end = offset + sum(sizes)
        self.write_index()

    def append_bytes(self, lines: list[bytes], sync: bool) -> int:
        """Store encoded records after the last one; returns the address of the first (a backend
        that keeps the log elsewhere stores them there first, see :mod:`endless.core.store.postgres`)."""
        return durable.append_lines(self.path, lines, sync)

    # -- reading -------------------------------------------------------------------

    def turn_of(self, message_id: int) -> int | None:
        if message_id < 0 or message_id >= self.total:
            return None
        turn = bisect.bisect_right(self.firsts, message_id) - 1
        while turn >= 0 and self.counts[turn] == 0:
            turn -= 1
        if turn < 0 or message_id >= self.firsts[turn] + self.counts[turn]:
            return None
        return turn

    def read_record(self, turn: int) -> dict | None:
        """The turn's record; a row that does not point at it rebuilds the index (loudly) first.

        The row's offset and length must frame one whole line (a newline on
        each side), right after the previous row's, whose id, message count
        and tid are the row's: checked at every read, so a damaged index never shows one turn as another or an
        intact turn as damaged.  A whole line that no longer parses is damage
        in the log itself: reported, and read as damaged.
        """
        verdict, record = self.check_row(turn)
        if verdict == "mismatch":
            self.on_problem(f"the turn index {self.index_path.name} does not match {self.path.name} at turn "
                            f"{turn}; rebuilt it from the log")
            self.rebuild()
            if turn >= len(self.offsets):
                return None
            verdict, record = self.check_row(turn)
        if verdict == "damaged" and not any(d.offset == self.offsets[turn] for d in self.damage):
            first, n = self.firsts[turn], self.counts[turn]
            self.damage.append(Damage(self.path.name, self.offsets[turn], self.lengths[turn],
                                      f"turn {turn} (messages {first}..{first + n - 1}) is not a readable record"))
            self.on_problem(f"damaged line at byte {self.offsets[turn]} of {self.path.name} (turn {turn}): "
                            "kept in place and skipped")
        return record

    def check_row(self, turn: int) -> tuple[str, dict | None]:
        """``ok`` (the record), ``damaged`` (a whole line that does not parse) or ``mismatch`` (the row is wrong)."""
        offset, length = self.offsets[turn], self.lengths[turn]
        if (self.offsets[turn - 1] + self.lengths[turn - 1] + 1 if turn else 0) != offset:
            return "mismatch", None  # every line has a row, in file order: each row starts where the last ended
        start = offset - 1 if offset else 0
        raw = os.pread(self.reader(), length + 1 + (offset - start), start)
        if (offset and raw[:1] != b"\n") or raw[-1:] != b"\n" or len(raw) != length + 1 + (offset - start):
            return "mismatch", None
        record = parse_turn(raw[offset - start:-1], turn, None)
        if record is None:  # a forget patching it in place at this instant reads whole a moment later
            record = parse_turn(os.pread(self.reader(), length, offset), turn, None)
        if record is None:
            return "damaged", None  # a whole line, unreadable: damage in the log, not in its index
        if self.tids[turn] == 0 and record["id"] != self.firsts[turn]:
            return "damaged", None  # whole, but out of order (its ids are not the ones its place holds)
        if (self.tids[turn] == 0 or record["id"] != self.firsts[turn] or len(record["m"]) != self.counts[turn]
                or tid_number(record["tid"]) != self.tids[turn]):
            return "mismatch", None
        return "ok", record

    def rebuild(self) -> None:
        """Index the log again from its start (in memory; a writer persists it at its next catch-up)."""
        self.reset()
        self.damage = []
        self.catch_up(False)

    def reader(self) -> int:
        if self._fd is None:
            self._fd = durable.open_fd(self.path, os.O_RDONLY)
        return self._fd

    # -- the log's address space (the storage seam: byte_ranges does the reading) ---------------------

    def read_at(self, offset: int, length: int) -> bytes:
        """``length`` stored bytes at ``offset`` (a record's line, or a piece of it)."""
        return os.pread(self.reader(), length, offset)

    @contextmanager
    def _handle(self) -> Iterator[int | None]:
        """A read-only descriptor of its own while the block runs; None when nothing is stored yet."""
        try:
            fd = durable.open_fd(self.path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def reading(self) -> Iterator[Callable[[int, int], bytes] | None]:
        """``read(offset, length)`` over a handle of its own while the block runs (a page of turns read
        outside the memory's lock); None when nothing is stored yet."""
        with self._handle() as fd:
            yield None if fd is None else (lambda offset, length: os.pread(fd, length, offset))

    def records(self, start: int = 0, stop: int | None = None, first_turn: int = 0
                ) -> Iterator[tuple[int, int, dict]]:
        """``(turn, byte end, record)`` of the whole records in ``[start, stop)`` (default: all this
        process has read); ``first_turn`` is the turn starting at ``start``."""
        return byte_ranges.records(self.path, start, self.end if stop is None else stop, first_turn, shape)

    def backward(self, end: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of whole records, from ``end`` back to the first (a pattern scan)."""
        return byte_ranges.backward(self.path, end)

    @contextmanager
    def mapped(self) -> Iterator["mmap.mmap | None"]:
        """The stored bytes as one read-only buffer while the block runs (None: this store has none;
        a scan then goes by :meth:`backward`)."""
        with self._handle() as fd:
            if fd is None or os.fstat(fd).st_size == 0:
                yield None
                return
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buffer:
                yield buffer

    def stored_end(self) -> int:
        """Where the last whole record ends as stored now (another process's appends included)."""
        return byte_ranges.complete_end(self.path)

    @property
    def where(self) -> str:
        """Where the log is stored, for a person reading a report (the file's name)."""
        return self.path.name

    def holds(self, end: int, first_tid: str) -> bool:
        """Whether a reader's mark (read up to ``end``, the first record's tid) still describes this log
        as stored (else what it derived is rebuilt): not past its end, at a record's end, the same log."""
        if end > byte_ranges.size(self.path):
            return False
        return not end or (byte_ranges.ends_line(self.path, end) and byte_ranges.first_tid(self.path) == first_tid)

    def first_tid(self) -> str:
        """The first record's tid as stored (it names the log: one replaced by another has another)."""
        return byte_ranges.first_tid(self.path)

    def patch(self, writes: list[byte_ranges.Write], step: Callable[[str], None] = lambda name: None) -> None:
        """A forget's same-length writes (:meth:`patch_writes`), durable before it returns."""
        self._sources = {}
        byte_ranges.patch(self.path, writes, step)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def info(self, turn: int) -> TurnInfo | None:
        record = self.read_record(turn)
        if record is None:
            return None
        return TurnInfo(turn, record["id"], len(record["m"]), record["s"], record["t"],
                        record["st"], record["at"], record["tid"])

    def message(self, message_id: int) -> Stored | None:
        turn = self.turn_of(message_id)
        if turn is None:
            if not 0 <= message_id < self.total:
                return None
            # No row holds an id below the total: a gap the log explains (damage), or rows out of order.
            near = max(0, bisect.bisect_right(self.firsts, message_id) - 1)
            if not any(self.check_row(t)[0] == "mismatch" for t in range(near, min(near + 2, len(self.offsets)))):
                return None
            self.read_record(near if self.check_row(near)[0] == "mismatch" else near + 1)  # rebuilds, loudly
            turn = self.turn_of(message_id)
            if turn is None:
                return None
        record = self.read_record(turn)
        if record is not None and not record["id"] <= message_id < record["id"] + len(record["m"]):
            turn = self.turn_of(message_id)  # the index was rebuilt while reading: look again
            record = None if turn is None else self.read_record(turn)
        if record is None or not record["id"] <= message_id < record["id"] + len(record["m"]):
            return None
        return self.shown(stored_from(record, message_id - record["id"], turn))

    def source_text(self, message_id: int) -> str | None:
        """The words a free leaf of message ``message_id`` is made of: its writer text as stored, else its
        text; None when it cannot be read or was forgotten (its words are gone, its leaf with them).

        A free parent reads its leaves one after another, and an import's leaves come a few to a
        record: the last records read are kept as their messages' words (dropped at any forget
        read of or patch made, and whenever the log is indexed again).
        """
        if message_id in self.forgotten:
            return None
        turn = self.turn_of(message_id)
        if turn is None:
            return None
        if self._sources_at != self.forgets:
            self._sources, self._sources_at = {}, self.forgets
        kept = self._sources.get(turn)
        if kept is None:
            record = self.read_record(turn)
            if record is None:
                return None
            kept = (record["id"], [m["w"] if "w" in m else m["x"] for m in record["m"]])
            if len(self._sources) >= SOURCE_CACHE:
                self._sources.clear()
            self._sources[turn] = kept
        first, texts = kept
        k = message_id - first
        return texts[k] if 0 <= k < len(texts) else None

    def shown(self, stored: Stored) -> Stored:
        """A forgotten message as its tombstone (what :mod:`endless.core.privacy.forget` registered)."""
        if stored.id not in self.forgotten and stored.text == "" and self.recheck is not None:
            self.recheck()  # blanked by a forget this process has not read of yet?
        if stored.id not in self.forgotten:
            return stored
        return shown(stored, self.forgotten)

    @property
    def turns(self) -> int:
        """Turns committed and read by this process."""
        return len(self.offsets)

    def has_tid(self, tid: str) -> bool:
        return tid_number(tid) in self.tids

    def held_tids(self, tids: Iterable[str]) -> set[str]:
        """Which of ``tids`` the log holds, in one pass over its ids (a batch checked at once)."""
        wanted = {tid_number(tid): tid for tid in tids}
        return {wanted[number] for number in wanted.keys() & set(self.tids)} if wanted else set()

    # -- a forget's patches (endless.core.privacy.forget) --------------------------------------------------

    def seal_after(self, turn: int, patches: list[tuple[int, int]]) -> tuple[int, str] | None:
        """Where the record's checksum lies and what it will be once ``patches`` (JSON strings at
        ``(offset, length)``) are blanked; None if it has none, or one that fails already.

        Computed before anything changes, from the whole record, so a replay
        after a crash writes the same bytes whatever it finds; a record whose
        checksum already fails keeps it (its damage stays visible, never sealed over).
        """
        base, length = self.offsets[turn], self.lengths[turn]
        line = bytearray(os.pread(self.reader(), length, base))
        if not patches or sealed(bytes(line)) is not True:
            return None
        for offset, n in patches:
            line[offset - base:offset - base + n] = b'""' + b" " * (n - 2)
        seal = reseal(bytes(line))
        return None if seal is None else (base + length - SEAL_FROM_END, seal.decode("ascii"))

    def patch_writes(self, patches: list[tuple[int, int]], seals: list[tuple[int, str]]
                     ) -> list[tuple[int, bytes | list[tuple[int, bytes]]]]:
        """The writes of a forget's patches: one per record that carries a checksum (its blanked texts
        and its new checksum together: a reader never meets the texts blanked and the checksum not yet,
        which is damage), as ``(start, [(offset, bytes), ...])``; the rest ``(offset, bytes)``."""
        blanked = [(o, b'""' + b" " * (n - 2)) for o, n in patches]
        sums = {o: seal.encode("ascii") for o, seal in seals}
        if not sums:
            return list(blanked)
        by_turn: dict[int, list[tuple[int, bytes]]] = {}
        for offset, data in blanked + list(sums.items()):
            by_turn.setdefault(bisect.bisect_right(self.offsets, offset) - 1, []).append((offset, data))
        writes: list[tuple[int, bytes | list[tuple[int, bytes]]]] = []
        for _, group in sorted(by_turn.items()):
            group.sort()
            if group[-1][0] in sums:
                writes.append((group[0][0], group))
            else:
                writes.extend(group)
        return writes
