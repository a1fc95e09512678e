"""A memory kept in a PostgreSQL database, shared by several machines (DESIGN §1's storage seam).

Chosen by the ``store`` setting (``ENDLESS_STORE=postgresql://…``); the file
store stays the default.  :class:`PostgresStore` keeps the contract of
:class:`endless.core.store.contract.Store` with the engine's own mechanisms:

* **The log and the tree** are streams of bytes in the database, appended in
  one transaction each that moves the stream's end only from where the
  appender read it (ids in order, no gap, no duplicate; a turn all or nothing).
  Every record keeps the byte address it has in the file store, so the floors
  above (search, forget, the checks) mean the same on both.  Each machine reads
  them from a local copy caught up from the database
  (:mod:`endless.core.store.pg_replica` says why).
* **Durability.**  An append commits under the memory's lock without waiting
  for the server's disk; :meth:`PostgresStore.durable`, called by ``Memory``
  once the lock is released and before the change is acknowledged, waits for
  it (one small synchronous transaction), so processes committing at once
  share one flush instead of taking turns at the disk under the lock.  What
  readers may see meanwhile is what a file's readers see between a write and
  its fsync.  A tail the server lost in a crash before its flush was never
  acknowledged: this machine's copy is cut back to match at the next open.
* **"Lines built"**: every append notifies the memory's channel (``NOTIFY``
  at commit); :meth:`PostgresStore.watch` starts a thread that ``LISTEN``s and
  wakes the memory's waiters, so a turn waiting on another machine's writer
  wakes without polling (:class:`endless.core.store.pg_db.Listener`).
* **The change lock** (:mod:`endless.core.store.pg_locks`) is a session-level advisory lock keyed by the memory,
  held by a connection of its own while the ``with`` block runs; the append's
  check of the stream's end keeps the log whole even if that connection is lost
  mid-change.
* **The writer's lease** is a row with an expiry on the database's clock (no
  two machines' clocks are compared); its holder also keeps an advisory lock
  of its own, so a holder whose process died is replaced at once, a frozen one
  after the expiry, and never two at once (the takeover is a compare-and-set).
* **Forget** is one transaction (:meth:`PostgresStore.forget_at_once`): the
  registry entry (``endless_forgets``, shared by every machine), the patches
  of the log and the tree, and the search index's rows; then ``VACUUM FULL``
  of the tables it changed (:meth:`PostgresStore.purge`), since PostgreSQL
  keeps an updated row's old version (its TOAST chunks, its index entries) in
  its files until the table is rewritten (measured: a plain ``VACUUM`` left
  the words in TOAST and in the GIN index).
* **Durable marks** are rows.  **The stamp** is the streams' ends, patch
  counts and the last forget, in one query.
* **Who may read it**: the memory's schema belongs to the role that made it
  (:mod:`endless.core.store.pg_db`); another role is refused at open, with the
  ``GRANT`` that lets it in.

What stays local to the machine, in the memory's folder, and why: the journal
of a turn in progress belongs to the process running the turn (only its commit
is shared: a turn lives on one machine, and one cut short is committed by that
machine's next open); the view files, because each machine's chats read the
provider's cache from their own prefix and the view must stay byte-stable turn
to turn there, whatever another machine's view does (each is derived from the
shared log and tree, and saved without fsync: the database holds what is
durable); the copies of the log and the tree and their turn index and slots,
so every reader works at local-disk speed.  The search index is the
database's (:mod:`endless.core.search.pg_index`), shared by every machine.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Callable

import psycopg

from endless.core.settings import STORE_PURGE_WAIT_SECONDS, Settings, store_url
from endless.core.store import checks, copying, durable, keyfile, pg_keys
from endless.core.store.contract import Batch, check_mark_name
from endless.core.store.journal import Journal
from endless.core.store.log import FORMAT as LOG_FORMAT, OrderLog
from endless.core.store.messages import Message
from endless.core.store.pg_db import Database, Listener, StoreUnavailable, advisory_key, lock_timed_out, log
from endless.core.store.pg_locks import AdvisoryLock, RowLease
from endless.core.store.pg_replica import Replica
from endless.core.store.registry import REGISTER, PgRegistry
from endless.core.store import tree_lines
from endless.core.store.tree import TreeStore

LOCAL = "pg"  # the memory folder's subfolder holding this machine's copy of the log and the tree


class _PulledFirst:
    """What the log and the tree read of their stored state, read after this machine's copy is brought
    up to date from the database (the copy is made whole from it: nothing is ever torn in it)."""

    replica: Replica

    def stored_end(self) -> int:
        self.replica.pull()
        return super().stored_end()  # type: ignore[misc]

    def tail_state(self) -> durable.Tail:
        self.replica.pull()
        return super().tail_state()  # type: ignore[misc]

    def repair_tail(self, quarantine: Path) -> str | None:
        self.replica.pull()
        return super().repair_tail(quarantine)  # type: ignore[misc]

    def close(self) -> None:
        self.replica.close()
        super().close()  # type: ignore[misc]

    def holds(self, end: int, *rest: str) -> bool:
        """(A mark past this machine's copy, another machine's, is checked against the copy caught up.)"""
        if end > self.replica.size():
            self.replica.pull()
        return super().holds(end, *rest)  # type: ignore[misc]


# What durable() commits synchronously (True: the function, False: the fallback): a record of its own in the
# WAL.  The fallback's lock (KEY SHARE) does not stand in an appender's way (its UPDATE keeps the key).
_FLUSH = {True: "SELECT pg_logical_emit_message(true, 'endless', '')",
          False: "SELECT 1 FROM endless_streams FOR KEY SHARE"}


class _Unconfirmed:
    """Appends committed without waiting for the server's disk, until :meth:`PostgresStore.durable`
    confirms them (each with the connection it was made on: one made on a connection lost since is
    looked for in the database before it counts)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.items: list[tuple[Replica, int, int, int]] = []  # (copy, address, end, connection epoch)
        self.emits = True  # False once the server refused pg_logical_emit_message (then _FLUSH[False])

    def add(self, replica: Replica, at: int, end: int) -> None:
        self.items.append((replica, at, end, self.db.epoch))


class PgOrderLog(_PulledFirst, OrderLog):
    """The order log, stored in the database and read from this machine's copy of it."""

    def __init__(self, folder: Path, granularity: str, db: Database, memory: str, unconfirmed: _Unconfirmed) -> None:
        super().__init__(folder, granularity)
        self.replica = Replica(db, memory, "log", self.path)
        self.unconfirmed = unconfirmed
        self._where = f"the log of memory {memory} in {db.shown}"

    def catch_up(self, write_index: bool) -> list:
        self.replica.pull()
        return super().catch_up(write_index)

    def append_bytes(self, lines: list[bytes], sync: bool) -> int:
        at = self.replica.append(lines, expect=self.end)
        if sync:
            self.unconfirmed.add(self.replica, at, at + sum(len(line) for line in lines))
        return at

    def patch(self, writes: list, step: Callable[[str], None] = lambda name: None) -> None:
        self._sources = {}
        self.replica.patch(writes, step)

    @property
    def where(self) -> str:
        return self._where


class PgTreeStore(_PulledFirst, TreeStore):
    """The tree's lines, stored in the database and read from this machine's copy of them."""

    def __init__(self, folder: Path, granularity: str, db: Database, memory: str, unconfirmed: _Unconfirmed) -> None:
        super().__init__(folder, granularity)
        self.replica = Replica(db, memory, "tree", self.path)
        self.unconfirmed = unconfirmed
        self._where = f"the lines of memory {memory} in {db.shown}"

    def catch_up(self, write_index: bool) -> list[tuple[int, int]]:
        self.replica.pull()
        return super().catch_up(write_index)

    def migrate(self) -> str | None:
        """This machine's copy of an older format's name is removed: the stream in the database is read
        by this format unchanged (format 1 lines are written lines), and copied again under the new name."""
        for version in tree_lines.OLDER_FORMATS:
            old = self.path_of(version)
            stale = [old, old.with_name(old.name + ".pg.json"), old.with_name(old.name + ".pg.lock"),
                     tree_lines.pos_path(self.index_dir, version)]
            level = 0
            while self.slot_path(level, version).exists():
                stale.append(self.slot_path(level, version))
                level += 1
            gone = [path for path in stale if path.exists()]
            for path in gone:
                path.unlink(missing_ok=True)
            if old in gone:
                return f"this machine's copy {old.name} is copied again from the database as {self.path.name}"
        return None

    def line_at(self, offset: int) -> bytes:
        """The line at ``offset`` as stored now (a forget on another machine included)."""
        self.replica.pull()
        return super().line_at(offset)

    def append_bytes(self, lines: list[bytes], sync: bool) -> int:
        # (no expected end: a line is stored once and the first one wins, so one appended after
        # another machine's is still right; the tree then reads what it did not write)
        at = self.replica.append(lines, expect=None)
        if sync:  # (free lines are derived from the log: a crash that loses them loses their log too)
            self.unconfirmed.add(self.replica, at, at + sum(len(line) for line in lines))
        return at

    def patch(self, writes: list, step: Callable[[str], None] = lambda name: None) -> None:
        self.replica.patch(writes, step)

    @property
    def where(self) -> str:
        return self._where


PURGE_MARK = "forget-purge"  # a durable mark: a forget's VACUUM FULL is still to run (module forget)


class PostgresStore(checks.LogAndTreeChecks):
    """A memory kept in a PostgreSQL database: the log, the tree, the lock and the lease (module doc)."""

    # A forget is one transaction of the database (its registry entry, the patches and the search
    # index's rows), not the file store's redo file and steps: :meth:`forget_at_once`.
    forgets_at_once = True
    # The view files stay on this machine, derived from the database; one lost to a power cut before
    # the system wrote it back is the one before, and the missing steps are taken again at the next
    # change (the provider's cache read from another prefix once).  Not fsynced: a commit's durability
    # is the database's, and an fsync of two local files would cost a commit as much again.
    views_synced = False

    def __init__(self, folder: Path, granularity: str, settings: Settings, clock: Callable[[], float]) -> None:
        self.folder = folder
        self.granularity = granularity
        self.memory = folder.name  # the memory's id (its folder under memories/ is named by it)
        self.db = Database(store_url(settings), self.memory)  # (TLS settings in its query)
        if not self.db.check_schema():
            self.db.ensure_schema()
        for stream in ("log", "tree"):
            self.db.ensure_stream(self.memory, stream)
        # Keys are per database and the memory's schema (two stores in one database have their own).
        database = self.db.rows("SELECT current_database()")[0][0]
        base = f"{database}.{self.db.schema}:{self.memory}"
        local = folder / LOCAL
        self._unconfirmed = _Unconfirmed(self.db)
        self.log = PgOrderLog(local, granularity, self.db, self.memory, self._unconfirmed)
        self.tree = PgTreeStore(local, granularity, self.db, self.memory, self._unconfirmed)
        self._listener: Listener | None = None
        self._wakes: list[Callable[[], None]] = []
        self.forgets = PgRegistry(self.db, self.memory, {"log": self.log.replica, "tree": self.tree.replica})
        self.tree.message_source, self.tree.messages_read = self.log.source_text, lambda: self.log.total
        self.lock = AdvisoryLock(self.db.url, advisory_key(base, "change"), self.db.shown)
        self.lease = RowLease(self.db, self.memory, base, expiry=settings.lease_expiry_seconds, clock=clock)

    def load(self) -> None:
        """Check the local copy belongs to this memory's streams, then read its indexes (not the history)."""
        files_log = self.folder / f"turns.{self.granularity}.v{LOG_FORMAT}.jsonl"
        if files_log.exists() and files_log.stat().st_size:
            # A copy's files side is the way back, as long as it has not grown since (store.copying).
            generations = dict(self.db.rows("SELECT stream, generation FROM endless_streams WHERE memory = %s",
                                            (self.memory,)))
            if not copying.note_allows(self.folder, generations, files_log.stat().st_size):
                raise StoreUnavailable(
                    f"the memory {self.memory} keeps its history in files under {self.folder}, but the store "
                    f"setting (ENDLESS_STORE) points at {self.db.shown}, which does not hold all of it. Unset "
                    "ENDLESS_STORE to use it from its files, or copy it there first: `endless store copy --from "
                    f"files --to \"$ENDLESS_STORE\" --memory {self.memory}`")
        # The key recorded in the database, so other machines can open and list it (a memory made
        # before the database kept keys is recorded at its first open here).
        if (self.folder / "key.json").exists():  # (a store opened without its Memory, as a test does, has none)
            directory = pg_keys.directory_db(self.db.url)
            try:
                pg_keys.register(directory, keyfile.read(self.folder / "key.json", self.memory))
            finally:
                directory.close()
        migrated = self.tree.migrate()
        if migrated:
            log(f"memory {self.memory}: {migrated}")
        emptied = [self.log.replica.check_origin(), self.tree.replica.check_origin()]
        if any(emptied):  # the derived indexes described the old copy: made again from the new one
            shutil.rmtree(self.log.index_path.parent, ignore_errors=True)
        self.log.load_index()
        self.tree.load_index()

    def journal(self, session: str, title: str, keep: Callable[[Message], Message] | None = None) -> Journal:
        return Journal(self.folder, session, title, keep)

    def durable_mark(self, name: str, value: bytes) -> None:
        check_mark_name(name)
        self.db.rows("INSERT INTO endless_marks (memory, name, value) VALUES (%s, %s, %s) "
                     "ON CONFLICT (memory, name) DO UPDATE SET value = EXCLUDED.value",
                     (self.memory, name, value), "storing a mark")

    def read_mark(self, name: str) -> bytes | None:
        check_mark_name(name)
        rows = self.db.rows("SELECT value FROM endless_marks WHERE memory = %s AND name = %s", (self.memory, name))
        return bytes(rows[0][0]) if rows else None

    def patches_applied(self) -> list[int]:
        """How many patches (a forget's) this machine's copies of the log and the tree hold."""
        return [int(self.log.replica.meta().get("patches", 0)), int(self.tree.replica.meta().get("patches", 0))]

    def pull(self) -> None:
        """This machine's copies brought up to what the database holds."""
        self.log.replica.pull()
        self.tree.replica.pull()

    def bulk_commit(self, batch: Batch, sync: bool = True) -> None:
        self.log.add(batch.lines, batch.infos, sync)
        if sync:
            self.durable()

    def durable(self) -> None:
        """Wait until every append this handle made is on the server's disk (called after the memory's
        lock is released: commits from several processes then share one flush).

        A transaction that writes one record of its own to the WAL (an empty logical message: no
        table, nothing left behind) and commits synchronously flushes the WAL up to its commit record,
        which follows every append made before it (a transaction that writes nothing flushes nothing).
        An append made on a connection lost since (the server may have restarted and lost it) is
        looked for in the database first; one that is not there raises, and was never acknowledged."""
        pending, self._unconfirmed.items = self._unconfirmed.items, []
        if not pending:
            return
        try:
            self.db.rows(_FLUSH[self._unconfirmed.emits], doing="confirming what was just stored", again=False)
        except StoreUnavailable:
            if not self.db.connected or not self._unconfirmed.emits:
                raise
            # (a server that refuses the function: a lock on a row, which the WAL records too, from now on)
            self._unconfirmed.emits = False
            self.db.rows(_FLUSH[False], doing="confirming what was just stored", again=False)
        for replica, at, end, epoch in pending:
            if epoch != self.db.epoch and not self.db.rows(
                    "SELECT 1 FROM endless_bytes WHERE stream = %s AND at = %s", (replica.stream, at)):
                raise StoreUnavailable(
                    f"the memory store {self.db.shown} restarted before the last change to the {replica.stream} "
                    f"of memory {self.memory} reached its disk, and lost it; nothing that was acknowledged is "
                    "lost: open the memory again (a turn it held is committed again from its journal)")
        for replica, _, end, _ in pending:
            replica.confirm(end)

    def watch(self, wake: Callable[[], None]) -> bool:
        """Call ``wake`` whenever a process on any machine stores to this memory (``LISTEN``); True
        while this process is told so, False while it is not (it then polls)."""
        if wake not in self._wakes:
            self._wakes.append(wake)
        if self._listener is None:
            self._listener = Listener(self.db.url, self.memory, self._wake_all)
        return self._listener.live

    def _wake_all(self) -> None:
        for wake in list(self._wakes):
            wake()

    def stamp(self) -> tuple:
        """The streams' ends and patch counts and the forgets registered: any process's store or forget
        changes it (one query)."""
        return tuple(self.db.rows("SELECT stream, end_offset, patches, (SELECT max(seq) FROM endless_forgets) "
                                  "FROM endless_streams WHERE memory = %s ORDER BY stream", (self.memory,)))

    @property
    def before_patch(self) -> Callable[[list[tuple[bytes, bytes]]], None]:
        return self.log.replica.before_patch

    @before_patch.setter
    def before_patch(self, told: Callable[[list[tuple[bytes, bytes]]], None]) -> None:
        """Told of the bytes a forget made on another machine is about to overwrite in this machine's
        copies, ``(old, new)`` per span, before it does (the privacy floor scrubs its side copies)."""
        self.log.replica.before_patch = self.tree.replica.before_patch = told

    def forget_at_once(self, op: str, entry: bytes, log_writes: list, tree_writes: list,
                       also: Callable[[object], None], step: Callable[[str], None]) -> None:
        """A forget in one transaction: ``also(connection)`` first (the search index's rows, on this
        transaction's connection), the registry entry, the log's and the tree's patches, a mark that
        its ``VACUUM FULL`` is due; then this machine's copies take the patches.  Every other machine
        takes them at its next catch-up, which every answer begins with."""
        try:
            with self.db.guard, self.db.conn.transaction():
                conn = self.db.conn
                also(conn)
                conn.execute(REGISTER, (op, entry))
                self.log.replica.patch_in(conn, log_writes, step)
                self.tree.replica.patch_in(conn, tree_writes, step)
                conn.execute("INSERT INTO endless_marks (memory, name, value) VALUES (%s, %s, %s) ON CONFLICT "
                             "(memory, name) DO UPDATE SET value = EXCLUDED.value",
                             (self.memory, PURGE_MARK, secrets.token_bytes(8)))
                step("in-transaction")
        except psycopg.Error as exc:
            raise self.db.failed(exc, "forgetting") from None
        self.pull()

    def purge(self, tables: tuple[str, ...] = (), wait: bool = True) -> bool:
        """Rewrite the tables a forget changed (``VACUUM FULL``: the log's and the tree's bytes with their
        TOAST, and ``tables``, the search index's, with their indexes), so the old row versions holding
        the forgotten words leave the database's files; False if another session held a table longer
        than ``wait`` allows (the mark stays: the next open, forget or ``doctor --repair`` runs it)."""
        limit = f"{int(STORE_PURGE_WAIT_SECONDS * 1000) if wait else 100}ms"
        db = Database(self.db.url, self.memory)  # (a connection of its own: a face runs this on a thread)
        try:
            due = db.rows("SELECT value FROM endless_marks WHERE memory = %s AND name = %s", (self.memory, PURGE_MARK))
            if not due:
                return True
            conn = db.conn
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (limit,))
            for table in ("endless_bytes", *tables):
                conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
            # (a forget committed meanwhile made the mark anew: it stays for that forget's own rewrite)
            db.rows("DELETE FROM endless_marks WHERE memory = %s AND name = %s AND value = %s",
                    (self.memory, PURGE_MARK, due[0][0]), "rewriting its tables after a forget")
        except psycopg.Error as exc:
            if not lock_timed_out(exc):
                log(f"memory {self.memory}: the rewrite of its tables after a forget failed "
                    f"({db.failed(exc, 'rewriting').args[0]}); the next open tries again")
            return False
        except StoreUnavailable as exc:
            log(f"memory {self.memory}: {exc}; the rewrite of its tables after a forget waits for the next open")
            return False
        finally:
            db.close()
        return True

    def scan(self, past_end: list[tuple[int, int]]) -> checks.Scan:
        self.log.replica.pull()
        self.tree.replica.pull()
        return checks.scan(self.log, self.tree, past_end)

    def set_aside(self, beyond: Callable[[tuple[int, int]], bool], total: int, stale: list[tuple[int, ...]],
                  quarantine: Path) -> int:
        """Lines past the log's end stay: the database commits the log before its lines, so the shared
        log is never shorter than the tree; what looks so is this machine's copy, caught up next."""
        log(f"memory {self.memory}: lines past the log's end were found in {self.db.shown}; they are kept")
        return 0

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self.log.close()
        self.tree.close()
        self.lock.close()
        self.db.close()
