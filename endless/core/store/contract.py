"""The storage seam: what the floors above ask of the store, written down as Protocols (DESIGN §1).

The files under a memory folder are the one implementation today
(:class:`endless.core.store.files.FileStore`); a second engine (PostgreSQL, for
memories shared by several machines) is added as one more module that
satisfies :class:`Store`.  ``tests/core/test_store_contract.py`` runs the same
contract against every implementation listed there.

What is named here is what every backend must give with the same guarantees:
the order log (turns appended all or nothing, ids in order, read by range),
the tree's lines (stored once, first one wins), the journal of a turn in
progress, the change lock and the writer's lease, the watermark of each
derived index, a durable mark, and one bulk commit for importers.

**Addresses.**  The log and the tree are sequences of stored lines, each at a
byte address: the offset of its stored form in the sequence's address space
(``offsets``/``lengths`` per turn, ``slots`` per line, ``end`` past the last one
read).  For files the space is the file; another engine keeps each line's
address beside it (a column), so that reading a range (``records``,
``lines``, ``backward``, ``read_at``), a forget's same-length ``patch`` of a
span, a reader's watermark (``holds``) and a derived index built from either
mean the same on every backend.  What a backend checks of its own structures
(``sample`` at open, ``scan`` and ``repair`` in doctor, ``set_aside`` for a
log found shorter) it does with its own means; the floors above only decide
when.

Nothing above the store floor opens a store file: ``tests/test_layers.py``
keeps it so.

:class:`MemoryHost` is the other direction: the few things a store-floor
routine (a turn in progress, the closing of orphaned journals, the identity of
turns) needs of the memory it serves.  ``Memory`` satisfies it; the floor never
imports ``Memory``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterable, Iterator, Protocol, Sequence, \
    runtime_checkable

if TYPE_CHECKING:
    import random

    from endless.core.store.checks import Scan
    from endless.core.settings import Settings
    from endless.core.store.journal import Journal
    from endless.core.store.locks import WantedBy
    from endless.core.store.log import TurnInfo
    from endless.core.store.messages import Message, Stored


@runtime_checkable
class LogStore(Protocol):
    """The order log: turns in finishing order, each one record, never edited but by a forget."""

    @property
    def total(self) -> int:
        """T: messages committed and read by this process."""

    @property
    def turns(self) -> int:
        """Turns committed and read by this process."""

    def add(self, lines: list[bytes], infos: list["TurnInfo"], sync: bool) -> None:
        """Append whole turn records (under the change lock, caught up), read by every process at once;
        ``sync``: durable once the store's :meth:`Store.durable` returns (files: before this returns)."""

    def info(self, turn: int) -> "TurnInfo":
        """Where turn ``turn`` landed: its first id, count, session, title, status, time, tid."""

    def read_record(self, turn: int) -> dict | None:
        """The turn's stored record; None when it cannot be read back whole (reported as damage)."""

    def message(self, message_id: int) -> "Stored | None":
        """One message as every reader shows it (a forgotten one as its tombstone)."""

    def turn_of(self, message_id: int) -> int | None:
        """The turn holding message ``message_id``."""

    def has_tid(self, tid: str) -> bool:
        """Whether a turn with this id is committed (a journal replayed after its commit adds nothing)."""

    def held_tids(self, tids: Iterable[str]) -> set[str]:
        """Which of ``tids`` are logged (a batch of imported turns checked in one pass)."""

    def catch_up(self, locked: bool) -> None:
        """Read what other processes appended; ``locked``: the caller holds the lock and may repair."""

    # -- the address space --
    end: int  # just past the last record this process has read
    offsets: "Sequence[int]"  # each turn's record address
    lengths: "Sequence[int]"  # each turn's record length (without its newline)

    def read_at(self, offset: int, length: int) -> bytes:
        """Stored bytes at an address (a record, or a span inside one)."""

    def reading(self) -> "ContextManager[Callable[[int, int], bytes] | None]":
        """``read(offset, length)`` on a handle of its own while the block runs (a page read outside the lock)."""

    def records(self, start: int = 0, stop: int | None = None, first_turn: int = 0
                ) -> "Iterator[tuple[int, int, dict]]":
        """``(turn, address after it, record)`` of the whole records in ``[start, stop)``, damage skipped."""

    def backward(self, end: int) -> "Iterator[tuple[int, bytes]]":
        """``(address, bytes)`` of runs of whole records, from ``end`` back to the first (a pattern scan)."""

    def mapped(self) -> "ContextManager[object | None]":
        """Every stored byte as one read-only buffer while the block runs, or None (scans then go backward)."""

    def stored_end(self) -> int:
        """Just past the last whole record as stored now (other processes' appends included)."""

    def holds(self, end: int, first_tid: str) -> bool:
        """Whether a reader's watermark (``end``, the first record's tid) still describes this log."""

    def first_tid(self) -> str: ...

    @property
    def where(self) -> str:
        """Where the log is stored, in a person's words (a report names it)."""

    def seal_after(self, turn: int, patches: list[tuple[int, int]]) -> tuple[int, str] | None:
        """A record's new checksum once ``patches`` (JSON strings at ``(address, length)``) are blanked."""

    def patch_writes(self, patches: list[tuple[int, int]], seals: list[tuple[int, str]]) -> list: ...

    def patch(self, writes: list, step: "Callable[[str], None]" = ...) -> None:
        """A forget's same-length writes in place (:meth:`patch_writes`), durable before it returns."""

    def close(self) -> None: ...


@runtime_checkable
class LineStore(Protocol):
    """The tree's lines: each ``(level, index)`` stored once, the first one wins."""

    @property
    def count(self) -> int:
        """Lines stored (moves whenever any process stores one)."""

    def built(self, level: int, index: int) -> bool: ...

    def cached_text(self, level: int, index: int) -> str | None:
        """The line's text, or None while it is unwritten."""

    def encode(self, level: int, index: int, text: str, src: int | None) -> bytes:
        """One line's stored form (``src``: a leaf's source size, to tell a changed source)."""

    def add(self, lines: list[bytes], parts: list[tuple[int, int]], texts: list[str] | None,
            sync: bool) -> list[tuple[int, int]]:
        """Store encoded lines (under the lock); returns the parts that landed, in order."""

    def catch_up(self, locked: bool) -> list[tuple[int, int]]:
        """Read lines other processes stored; returns their parts."""

    # -- the address space --
    end: int  # just past the last line this process has read
    slots: "list[Sequence[int]]"  # per level, per index: the line's address + 1 (0: not stored)

    def lines(self, start: int = 0, stop: int | None = None) -> "Iterator[tuple[int, bytes]]":
        """``(address, line)`` of each stored line in ``[start, stop)``, superseded and erased ones too."""

    def backward(self, end: int) -> "Iterator[tuple[int, bytes]]": ...

    def line_at(self, offset: int) -> bytes: ...

    def stored_end(self) -> int: ...

    def holds(self, end: int) -> bool: ...

    @property
    def where(self) -> str: ...

    def stored_identity(self) -> object:
        """Which tree is stored now (another once lines were set aside)."""

    def patch(self, writes: list, step: "Callable[[str], None]" = ...) -> None:
        """A forget's same-length erasures in place, durable before it returns."""

    def clear_stored_slot(self, level: int, index: int, offset: int) -> None:
        """The stored slot of an erased line zeroed if it still points at ``offset``."""

    def close(self) -> None: ...


@runtime_checkable
class ChangeLockStore(Protocol):
    """The short lock every change takes; re-entrant within a process."""

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class LeaseStore(Protocol):
    """The writer's lease: one holder at a time, taken over once it was not renewed for its expiry."""

    token: str | None

    def try_acquire(self) -> bool: ...

    def renew(self) -> bool: ...

    def release(self) -> None: ...

    def want(self) -> None:
        """Say that this process waits for the lease (a holder standing in for a chat steps aside)."""

    def wanted(self) -> "WantedBy | None":
        """The last process that said it waits, and when."""


@runtime_checkable
class IndexMarks(Protocol):
    """A derived index's watermark: how far into the log and the tree it has read (it is rebuilt
    from the store whenever it is lost or damaged, so it never blocks a write)."""

    def watermark(self) -> object: ...

    def set_mark(self, **values: object) -> None: ...


@runtime_checkable
class ForgetRegistry(Protocol):
    """What was forgotten when, one entry per forget (ids, byte addresses, line names: never a text),
    read by every process that opens the memory (:mod:`endless.core.privacy.forget`)."""

    def read(self, after: int) -> tuple[list[bytes], int]:
        """The entries past position ``after`` and the position after them (0: from the start)."""

    def add(self, op: str, entry: bytes) -> None:
        """Register forget ``op`` (a JSON entry), durable before it returns."""

    def holds(self, op: str) -> bool: ...


@runtime_checkable
class Store(Protocol):
    """Everything the floors above use to keep a memory (DESIGN §1's storage seam)."""

    folder: Path
    log: LogStore
    tree: LineStore
    lock: ChangeLockStore
    lease: LeaseStore
    forgets: ForgetRegistry
    # A forget is one transaction of the store (``forget_at_once``, ``purge``: a database), else the redo
    # file's crash-atomic steps over the files (module forget).
    forgets_at_once: bool
    # Told, before this machine's copies take a forget made elsewhere, of the (old, new) bytes it overwrites.
    before_patch: Callable[[list[tuple[bytes, bytes]]], None]

    def load(self) -> None:
        """Make the store ready to read: what it knows of the log and the tree, without reading them."""

    def journal(self, session: str, title: str,
                keep: "Callable[[Message], Message] | None" = None) -> "Journal":
        """A new journal for a turn in progress, fsynced message by message (local to the process
        that runs the turn: a turn lives on one machine, only its commit is shared)."""

    def durable_mark(self, name: str, value: bytes) -> None:
        """Replace a small named record so that after any crash it is whole or absent."""

    def read_mark(self, name: str) -> bytes | None:
        """A record :meth:`durable_mark` wrote, or None."""

    def bulk_commit(self, batch: "Batch", sync: bool = True) -> None:
        """Append a batch of prepared turn records in one durable write (an import's commit;
        the caller holds the change lock and has caught up, so ids follow on without a gap)."""

    def stamp(self) -> object:
        """A cheap value that changes whenever any process stored to the log or the tree."""

    def durable(self) -> None:
        """Wait until every ``sync`` append of this handle is durable.  Called once the change lock is
        released, before the change is acknowledged: a database commits under the lock without waiting
        for its disk, so that processes committing at once share one flush (the files fsync each append
        under the lock, and this does nothing)."""

    def watch(self, wake: Callable[[], None]) -> bool:
        """Have ``wake`` called whenever any process (any machine) stores to the log or the tree; True
        while the store tells so, False while a waiter must poll (the files tell nobody)."""

    views_synced: bool  # whether this machine's view files are fsynced at each change (module doc of each)

    # -- the store's checks of its own structures (when: ``endless.core.integrity``) --
    def sample(self, rng: "random.Random", rows: int) -> None:
        """At open: a few of its own index entries read back; a mismatch rebuilds, loudly."""

    def rows_past_end(self) -> list[tuple[int, ...]]:
        """Entries of its own turn index describing turns past the log's end (a log found shorter)."""

    def claimed_total(self) -> int:
        """The most messages its own indexes said the log held when loaded."""

    def scan(self, past_end: list[tuple[int, int]]) -> "Scan":
        """Every record and line read, every own index entry checked (``endless doctor``)."""

    def repair(self, found: "Scan") -> list[str]:
        """Under the lock: rebuild what ``found`` says disagrees; what was done, in words."""

    def set_aside(self, beyond: "Callable[[tuple[int, int]], bool]", total: int, stale: list[tuple[int, ...]],
                  quarantine: Path) -> int:
        """Under the lock: the lines ``beyond`` the log's end leave the tree, kept in ``quarantine``."""

    def close(self) -> None: ...


def check_mark_name(name: str) -> None:
    """A durable mark's name is one plain file name on every backend (so a memory moves between them)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a mark's name is one plain file name, not {name!r}")


class Batch(Protocol):
    """Prepared turn records ready to append: their encoded lines and where each lands."""

    lines: "list[bytes]"
    infos: "list[TurnInfo]"


class MemoryHost(Protocol):
    """What the store floor's turn routines need of the memory they serve (``Memory`` is one)."""

    folder: Path
    settings: "Settings"
    granularity: str
    clock: Callable[[], float]
    log: LogStore

    @property
    def turns(self) -> int: ...

    @property
    def total(self) -> int: ...

    def catch_up(self, locked: bool = False) -> bool: ...

    def note_session(self, session: str) -> None: ...

    def report(self, what: str) -> None: ...

    def commit_turn(self, session: str, title: str, messages: Iterable["Message"], status: str = ...,
                    status_text: str | None = None, tid: str | None = None, sync: bool = True,
                    since: int | None = None) -> "TurnInfo | None": ...
