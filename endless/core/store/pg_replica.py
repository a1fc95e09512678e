"""A machine's copy of one stream of a PostgreSQL memory (the log or the tree), at the same byte addresses.

The database holds the stream: rows of ``endless_bytes``, each a batch of
whole records at its address, appended in a transaction that moves the
stream's end (``endless_streams.end_offset``) only from where the appender
last read it, so two machines never interleave and ids stay gap-free.

Each machine keeps a copy of those bytes in a local file, byte for byte at the
same addresses, caught up from the database before every read of what others
stored (:meth:`Replica.pull`).  Why a copy rather than reading rows on every
access: every reader of the log and the tree (the index catching up, a page of
turns, a pattern scan going backward or over one mapped buffer, ``endless
doctor``'s checks) then works as it does on the embedded store, at local-disk
speed, and the derived indexes of the machine (turn index, tree slots, the
full-text index) are built from it unchanged.  The copy is derived: it is
written only with bytes the database committed, never fsynced (the database
is what is durable), repaired from the database when it is found cut short, and
made again when it belongs to another stream (its generation differs).

A forget's same-length patches are made in the database (the row and a
numbered ``endless_patches`` entry in one transaction); every copy applies the
entries it has not applied yet when it catches up, a whole span per entry, so
a reader never meets a record's blanked texts without its new checksum.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path
from typing import Callable

import orjson
import psycopg

from endless.core.settings import STORE_FETCH_ROWS, STORE_ROW_BYTES
from endless.core.store import durable
from endless.core.store.pg_db import Database, StoreConflict, StoreUnavailable, log

# One statement, so one transaction and one round trip: the stream's row is locked and moved on only
# from the end the appender read, and the rows land at the addresses that follow.  It commits without
# waiting for the WAL's flush (``synchronous_commit`` off for this transaction only; it is still all or
# nothing): the store waits for the flush after the memory's lock is released
# (:meth:`endless.core.store.postgres.PostgresStore.durable`), so that processes committing at once share
# one flush of the server's disk instead of taking turns at it under the lock.  Every process listening
# on the memory's channel is told at the commit (``pg_notify`` is delivered then, not before).
_APPEND = """
WITH durability AS (
    SELECT set_config('synchronous_commit', 'off', true), pg_notify(%(ch)s, %(s)s)),
s AS (
    UPDATE endless_streams SET end_offset = end_offset + %(n)s
    WHERE memory = %(m)s AND stream = %(s)s AND (%(e)s::bigint IS NULL OR end_offset = %(e)s::bigint)
    RETURNING end_offset - %(n)s AS base)
INSERT INTO endless_bytes (memory, stream, at, data)
SELECT %(m)s, %(s)s, s.base + u.rel, u.data
FROM durability, s, unnest(%(rels)b::bigint[], %(datas)b::bytea[]) AS u(rel, data)
RETURNING at"""

_STATE = "SELECT end_offset, patches, generation FROM endless_streams WHERE memory = %s AND stream = %s"
STASH_SECONDS = 0.1  # how long a state read with others stands for the next look (one catch-up's span)

_ROWS_FROM = """
SELECT at, data FROM endless_bytes
WHERE memory = %(m)s AND stream = %(s)s AND at < %(end)s AND at >= coalesce(
    (SELECT max(at) FROM endless_bytes WHERE memory = %(m)s AND stream = %(s)s AND at <= %(size)s), 0)
  AND at + length(data) > %(size)s
ORDER BY at"""


def chunks(lines: list[bytes]) -> tuple[list[int], list[bytes]]:
    """Lines grouped into rows of at most about ``STORE_ROW_BYTES`` (whole lines each), with each row's
    address relative to the first."""
    rels, datas, group, size, at = [], [], [], 0, 0
    for line in lines:
        if group and size + len(line) > STORE_ROW_BYTES:
            rels.append(at)
            datas.append(b"".join(group))
            at += size
            group, size = [], 0
        group.append(line)
        size += len(line)
    if group:
        rels.append(at)
        datas.append(b"".join(group))
    return rels, datas


class Replica:
    """One stream of one memory: stored in the database, copied to ``path`` on this machine."""

    def __init__(self, db: Database, memory: str, stream: str, path: Path) -> None:
        self.db, self.memory, self.stream, self.path = db, memory, stream, path
        self.meta_path = path.with_name(path.name + ".pg.json")
        self.lock_path = path.with_name(path.name + ".pg.lock")
        self.confirmed_path = path.with_name(path.name + ".pg.confirmed")
        self._confirmed = 0
        self._confirmed_fd: int | None = None
        self._meta: dict | None = None
        self._made = False  # the copy's folder exists (made once, not looked for at every append)
        self._stashed: tuple[tuple[int, int, str], float] | None = None
        # Told of the bytes a forget made elsewhere is about to overwrite in this copy: (old, new) spans.
        self.before_patch: Callable[[list[tuple[bytes, bytes]]], None] = lambda spans: None

    # -- the local copy's bookkeeping ------------------------------------------------------------

    def meta(self) -> dict:
        """The generation the copy belongs to and the patches it has applied (read once, then kept)."""
        if self._meta is None:
            try:
                self._meta = dict(orjson.loads(durable.read_all(self.meta_path)))
            except (FileNotFoundError, orjson.JSONDecodeError, TypeError, ValueError):
                self._meta = {}
        return self._meta

    def _save_meta(self, generation: str, patches: int) -> None:
        self._meta = {"generation": generation, "patches": patches}
        durable.replace_file(self.meta_path, orjson.dumps(self._meta), sync=False)  # derived: a lost one is
        # the copy made again

    def confirm(self, end: int) -> None:
        """The copy's bytes up to ``end`` are on the server's disk (an append was confirmed durable): a
        copy found longer than the database later is cut back only past what was confirmed.  Eight
        bytes written in place (no rename, no fsync: a commit pays a few microseconds for it)."""
        if end <= self._confirmed:
            return
        if self._confirmed_fd is None:
            if not self._made:
                durable.make_dir(self.path.parent)
                self._made = True
            self._confirmed_fd = durable.open_fd(self.confirmed_path, os.O_RDWR | os.O_CREAT)
        os.pwrite(self._confirmed_fd, struct.pack("<Q", end), 0)
        self._confirmed = end

    def confirmed(self) -> int:
        """How far the copy was confirmed on the server's disk (0: nothing known)."""
        try:
            data = durable.read_all(self.confirmed_path)
        except FileNotFoundError:
            return 0
        return struct.unpack("<Q", data[:8])[0] if len(data) >= 8 else 0

    def close(self) -> None:
        if self._confirmed_fd is not None:
            os.close(self._confirmed_fd)
            self._confirmed_fd = None

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def _locked(self) -> "_Flock":
        """The copy's local lock: processes of this machine sharing one memory folder write it one at a time."""
        if not self._made:
            durable.make_dir(self.path.parent)
            self._made = True
        return _Flock(self.lock_path)

    # -- opening ---------------------------------------------------------------------------------

    def check_origin(self) -> bool:
        """At open: whether the local copy had to be emptied because it belongs to another stream (the
        memory was removed and made again in the database, or the folder came from elsewhere)."""
        with self._locked():  # (the state read under the lock: another process here appends under it too)
            end, patches, generation = self._state()
            self._meta = None
            meta, size = self.meta(), self.size()
            if meta.get("generation") == generation:
                if size > end and end >= self.confirmed():
                    # The server lost what was stored last, before it reached its disk (a crash in the
                    # moment between a commit and its flush): never confirmed, so never acknowledged.
                    log(f"the memory store {self.db.shown} lost the last {size - end} bytes of the "
                        f"{self.stream} of memory {self.memory} before they reached its disk (a crash); this "
                        "machine's copy is cut back to match (a turn they held is committed again from its "
                        "journal)")
                    os.truncate(self.path, end)
                    self._save_meta(generation, int(meta.get("patches", 0)))
                    return True
                if size > end:
                    raise StoreUnavailable(
                        f"the local copy {self.path} holds {size - end} bytes more than the memory store "
                        f"{self.db.shown} (was the database restored from an older backup?). Nothing was "
                        "changed; move the memory folder aside to keep them and open the memory again")
                return False
            self.confirmed_path.unlink(missing_ok=True)
            self._confirmed = 0
            if size:
                log(f"the local copy {self.path} is not of the {self.stream} stored in {self.db.shown}; "
                    "copying it again from the database")
                os.truncate(self.path, 0)
            self._save_meta(generation, 0)
            return bool(size)

    # -- reading what the database holds ---------------------------------------------------------

    def stash(self, state: tuple[int, int, str]) -> None:
        """The stream's state, read by a query that read more (a catch-up reads the registry and both
        streams in one): the next look at the state, if it comes at once, takes it instead of asking."""
        self._stashed = (state, time.monotonic())

    def _state(self) -> tuple[int, int, str]:
        stashed, self._stashed = self._stashed, None
        if stashed is not None and time.monotonic() - stashed[1] < STASH_SECONDS:
            return stashed[0]
        rows = self.db.rows(_STATE, (self.memory, self.stream))
        if not rows:
            raise StoreUnavailable(f"the memory {self.memory} has no {self.stream} in the store {self.db.shown} "
                                   "(removed while this process had it open?); open the memory again")
        end, patches, generation = rows[0]
        return int(end), int(patches), str(generation)

    def pull(self) -> None:
        """Bring the local copy up to what the database holds: new rows, then patches not yet applied."""
        end, patches, generation = self._state()
        meta = self.meta()
        if end == self.size() and patches == meta.get("patches") and generation == meta.get("generation"):
            return
        with self._locked():
            self._meta = None
            meta = self.meta()
            if meta.get("generation") != generation:
                raise StoreUnavailable(f"the {self.stream} of memory {self.memory} was replaced in the store "
                                       f"{self.db.shown} while this process had it open; open the memory again")
            if self.size() > end:  # (read again: another process here may have appended since)
                end, patches, generation = self._state()
            if self.size() > end:
                raise StoreUnavailable(
                    f"the memory store {self.db.shown} no longer holds the last {self.size() - end} bytes of the "
                    f"{self.stream} of memory {self.memory} (the server crashed before they reached its disk); "
                    "open the memory again: this machine's copy is cut back and a turn they held is committed "
                    "again from its journal")
            applied = int(meta.get("patches", 0))
            if patches == applied and end - self.size() <= STORE_ROW_BYTES:
                self._pull_rows(end)
            else:
                self._pull_locked(applied, generation)

    def _pull_rows(self, end: int) -> None:
        """The common catch-up (another machine's turn or lines, no patch since): the rows before ``end``
        in one query.  They were committed with the end that was read, so no snapshot is needed; a patch
        made since is in them already, and applied again (the same bytes) at the next catch-up."""
        size = self.size()
        rows = self.db.rows(_ROWS_FROM, {"m": self.memory, "s": self.stream, "end": end, "size": size},
                            f"reading the {self.stream}")
        fd = durable.open_fd(self.path, os.O_WRONLY | os.O_CREAT)
        try:
            for at, data in rows:
                _write_all(fd, bytes(data), at)
        finally:
            os.close(fd)

    def _pull_locked(self, applied: int, generation: str) -> None:
        fd = durable.open_fd(self.path, os.O_RDWR | os.O_CREAT)  # (read: what a patch overwrites)
        try:
            with self.db.snapshot() as conn:
                end, patches, _ = conn.execute(_STATE, (self.memory, self.stream)).fetchone()
                size = os.fstat(fd).st_size
                if size < end:
                    with conn.cursor(name=f"endless_pull_{self.stream}") as cursor:
                        cursor.itersize = STORE_FETCH_ROWS
                        cursor.execute(_ROWS_FROM, {"m": self.memory, "s": self.stream, "end": end, "size": size})
                        for at, data in cursor:
                            _write_all(fd, bytes(data), at)  # (a row the copy holds part of is written whole)
                if patches > applied:
                    found = [(int(at), bytes(data)) for at, data in conn.execute(
                        "SELECT at, data FROM endless_patches WHERE memory = %s AND stream = %s AND seq > %s "
                        "ORDER BY seq", (self.memory, self.stream, applied)) if at + len(data) <= end]
                    # What the copy held there, before it is overwritten: a forget made on another
                    # machine reaches this machine's other copies of the words first (before_patch).
                    olds = [(os.pread(fd, len(data), at), data) for at, data in found]
                    self.before_patch([(old, new) for old, new in olds if old != new and len(old) == len(new)])
                    for at, data in found:
                        _write_all(fd, data, at)
        except psycopg.Error as exc:
            raise self.db.failed(exc, f"reading the {self.stream}") from None
        finally:
            os.close(fd)
        self._save_meta(generation, int(patches))

    # -- writing ---------------------------------------------------------------------------------

    def append(self, lines: list[bytes], expect: int | None) -> int:
        """Store ``lines`` after the stream's end in one transaction, then in the local copy; returns
        the address of the first (durable once the store's ``durable()`` returns).  ``expect``: the end
        the caller read under the lock (the log's ids follow on from it); if the stream ends elsewhere
        nothing is stored (:class:`StoreConflict`)."""
        if not lines:
            self.pull()
            return self.size()
        rels, datas = chunks(lines)
        n = rels[-1] + len(datas[-1])
        rows = self.db.rows(_APPEND, {"n": n, "m": self.memory, "s": self.stream, "e": expect,
                                      "ch": self.db.schema, "rels": rels, "datas": datas},
                            f"storing to the {self.stream}", again=False)
        if not rows:
            raise StoreConflict(f"the {self.stream} of memory {self.memory} in the store {self.db.shown} grew "
                                "while this process held its lock (the lock's connection was lost); nothing was "
                                "stored: try again")
        at = min(row[0] for row in rows)
        with self._locked():
            if self.size() == at:
                fd = durable.open_fd(self.path, os.O_WRONLY | os.O_CREAT)
                try:
                    _write_all(fd, b"".join(datas), at)
                finally:
                    os.close(fd)
                return at
        self.pull()
        return at

    def patch(self, writes: list, step: Callable[[str], None]) -> None:
        """A forget's same-length writes in one transaction (each row and its numbered patch entry), then
        in the local copy.  A write is ``(offset, bytes)`` or ``(start, [(offset, bytes), ...])``."""
        if not writes:
            return
        try:
            with self.db.guard, self.db.conn.transaction():
                self.patch_in(self.db.conn, writes, step)
        except psycopg.Error as exc:
            raise self.db.failed(exc, f"patching the {self.stream}") from None
        self.pull()

    def patch_in(self, conn: psycopg.Connection, writes: list, step: Callable[[str], None]) -> None:
        """:meth:`patch`'s statements on ``conn``, inside the caller's transaction (a forget's, which
        also holds its registry entry and the search index's rows: all or nothing)."""
        key = {"m": self.memory, "s": self.stream}
        seq = conn.execute("SELECT patches FROM endless_streams WHERE memory = %(m)s AND stream = %(s)s "
                           "FOR UPDATE", key).fetchone()[0]
        for start, data in writes:
            pieces = data if isinstance(data, list) else [(start, data)]
            stop = max(at + len(piece) for at, piece in pieces)
            row = conn.execute("SELECT at FROM endless_bytes WHERE memory = %(m)s AND stream = %(s)s "
                               "AND at <= %(at)s ORDER BY at DESC LIMIT 1", {**key, "at": start}).fetchone()
            if row is None:
                raise StoreUnavailable(f"a forget's patch at byte {start} of the {self.stream} of memory "
                                       f"{self.memory} is outside what the store {self.db.shown} holds")
            for at, piece in pieces:
                conn.execute("UPDATE endless_bytes SET data = overlay(data placing %(b)s from %(p)s for %(n)s) "
                             "WHERE memory = %(m)s AND stream = %(s)s AND at = %(row)s",
                             {**key, "b": piece, "p": at - row[0] + 1, "n": len(piece), "row": row[0]})
            seq += 1
            conn.execute("INSERT INTO endless_patches (memory, stream, seq, at, data) "
                         "SELECT %(m)s, %(s)s, %(seq)s, %(at)s, substring(data from %(p)s for %(n)s) "
                         "FROM endless_bytes WHERE memory = %(m)s AND stream = %(s)s AND at = %(row)s",
                         {**key, "seq": seq, "at": start, "p": start - row[0] + 1, "n": stop - start,
                          "row": row[0]})
            step("patch")
        conn.execute("UPDATE endless_streams SET patches = %(seq)s WHERE memory = %(m)s AND stream = %(s)s",
                     {**key, "seq": seq})
        conn.execute("SELECT pg_notify(%s, 'patch')", (self.db.schema,))


def _write_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        view, at = view[written:], at + written


class _Flock:
    """An exclusive ``flock`` on a file of its own while the block runs (this machine's processes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> "_Flock":
        self.fd = durable.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        self.fd = -1
