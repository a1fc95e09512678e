"""A memory kept in a PostgreSQL database, shared by several machines (issue 31, DESIGN §1's storage seam).

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
* **The change lock** is a session-level advisory lock keyed by the memory,
  held by a connection of its own while the ``with`` block runs; the append's
  check of the stream's end keeps the log whole even if that connection is lost
  mid-change.
* **The writer's lease** is a row with an expiry on the database's clock (no
  two machines' clocks are compared); its holder also keeps an advisory lock
  of its own, so a holder whose process died is replaced at once, a frozen one
  after the expiry, and never two at once (the takeover is a compare-and-set).
* **Durable marks** are rows.  **The stamp** is the streams' ends and patch
  counts, in one query.

What stays local to the machine, in the memory's folder, and why: the journal
of a turn in progress belongs to the process running the turn (only its commit
is shared; a turn cut short is committed by that machine's next open); the view
files are derived, rebuilt from the log and the tree; the full-text index is a
derived index each machine catches up from the shared log (a ``tsvector``
column in the database is a later slice); the per-machine turn index and tree
slots index the local copy.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

import orjson
import psycopg

from endless.core.settings import STORE_LOCK_SECONDS, Settings
from endless.core.store import checks, durable
from endless.core.store.contract import Batch, check_mark_name
from endless.core.store.journal import Journal
from endless.core.store.locks import WANT_REFRESH_SECONDS, LockBusy, WantedBy
from endless.core.store.log import FORMAT as LOG_FORMAT, OrderLog
from endless.core.store.messages import Message
from endless.core.store.pg_db import Database, StoreUnavailable, advisory_key, lock_timed_out, log
from endless.core.store.pg_replica import Replica
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


class PgOrderLog(_PulledFirst, OrderLog):
    """The order log, stored in the database and read from this machine's copy of it."""

    def __init__(self, folder: Path, granularity: str, db: Database, memory: str) -> None:
        super().__init__(folder, granularity)
        self.replica = Replica(db, memory, "log", self.path)
        self._where = f"the log of memory {memory} in {db.shown}"

    def catch_up(self, write_index: bool) -> list:
        self.replica.pull()
        return super().catch_up(write_index)

    def append_bytes(self, lines: list[bytes], sync: bool) -> int:
        return self.replica.append(lines, expect=self.end, sync=sync)

    def patch(self, writes: list, step: Callable[[str], None] = lambda name: None) -> None:
        self._sources = {}
        self.replica.patch(writes, step)

    @property
    def where(self) -> str:
        return self._where


class PgTreeStore(_PulledFirst, TreeStore):
    """The tree's lines, stored in the database and read from this machine's copy of them."""

    def __init__(self, folder: Path, granularity: str, db: Database, memory: str) -> None:
        super().__init__(folder, granularity)
        self.replica = Replica(db, memory, "tree", self.path)
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
        return self.replica.append(lines, expect=None, sync=sync)


    def patch(self, writes: list, step: Callable[[str], None] = lambda name: None) -> None:
        self.replica.patch(writes, step)

    @property
    def where(self) -> str:
        return self._where


class _Held:
    """One memory's advisory lock as this process holds it: one connection, re-entrant within a thread,
    excluding the process's other threads (as the file store's lock does for two handles of one folder)."""

    def __init__(self, url: str, key: int) -> None:
        self.db = Database(url)
        self.key = key
        self.threads = threading.RLock()
        self.depth = 0
        self.users = 0
        self.timed: object = None  # the connection whose lock_timeout is set


_HELD: dict[tuple[str, int], _Held] = {}
_HELD_GUARD = threading.Lock()


class AdvisoryLock:
    """The memory's change lock: ``pg_advisory_lock`` on a connection of its own while the block runs."""

    def __init__(self, url: str, key: int, shown: str, timeout: float = STORE_LOCK_SECONDS) -> None:
        self.shown, self.timeout = shown, timeout
        with _HELD_GUARD:
            self._held = _HELD.setdefault((url, key), _Held(url, key))
            self._held.users += 1
        self._closed = False

    def __enter__(self) -> "AdvisoryLock":
        held = self._held
        if not held.threads.acquire(timeout=self.timeout):
            raise LockBusy(f"the lock of this memory in {self.shown} is held by another thread of this process "
                           f"for more than {self.timeout:.0f} s; if it hangs, stop this process")
        if held.depth == 0:
            try:
                self._lock_session(held)
            except psycopg.Error as exc:
                held.threads.release()
                if lock_timed_out(exc):
                    raise LockBusy(f"the lock of this memory in {self.shown} is held by another process or machine "
                                   f"for more than {self.timeout:.0f} s; if one hangs, stop it") from None
                raise held.db.failed(exc, "taking the memory's lock") from None
            except BaseException:
                held.threads.release()
                raise
        held.depth += 1
        return self

    def _lock_session(self, held: _Held) -> None:
        """``pg_advisory_lock`` on the lock's connection; one found lost is opened again once (the lock
        lived with it, so nothing is held twice)."""
        for attempt in (1, 2):
            conn = held.db.conn
            try:
                if held.timed is not conn:  # (once per connection: a change pays one round trip to lock)
                    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{int(self.timeout * 1000)}ms",))
                    held.timed = conn
                conn.execute("SELECT pg_advisory_lock(%s)", (held.key,))
                return
            except psycopg.OperationalError:
                if attempt == 2 or not held.db.lost():
                    raise
                held.db.close()

    def __exit__(self, *exc: object) -> None:
        held = self._held
        held.depth -= 1
        try:
            if held.depth == 0:
                held.db.conn.execute("SELECT pg_advisory_unlock(%s)", (held.key,))
        except (psycopg.Error, StoreUnavailable) as error:  # the connection went: the lock went with it
            log(f"the lock of a memory in {self.shown} was lost with its connection ({error}); "
                "changes made under it were checked by the store")
            held.db.close()
        finally:
            held.threads.release()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _HELD_GUARD:
            self._held.users -= 1
            if self._held.users == 0 and self._held.depth == 0:
                _HELD.pop((self._held.db.url, self._held.key), None)
                self._held.db.close()


_NOW = "now() + make_interval(secs => %(shift)s)"


class RowLease:
    """The writer's lease: a row naming its holder until ``expires_at`` (the database's clock).

    ``clock`` is the memory's clock; its distance from this machine's real clock shifts the
    database's ``now()`` (zero for the real clock: a test's clock moves it), so a test can let
    a lease expire without waiting and two machines' clocks are never compared."""

    def __init__(self, db: Database, memory: str, key_base: str, *, expiry: float,
                 clock: Callable[[], float]) -> None:
        self.db, self.memory, self.key_base = db, memory, key_base
        self.expiry, self.clock = expiry, clock
        self.token: str | None = None
        self._wanted_at = float("-inf")  # when this process last said it waits for the lease

    def _params(self, **more: object) -> dict:
        shift = 0.0 if self.clock is time.time else self.clock() - time.time()
        return {"m": self.memory, "shift": shift, "expiry": self.expiry, **more}

    def _beacon(self, token: str) -> int:
        return advisory_key(self.key_base, "lease", token)

    def _alive(self, token: str) -> bool:
        """Whether the holder's connection still holds its beacon (a dead process's is gone at once)."""
        key = self._beacon(token)
        if not self.db.rows("SELECT pg_try_advisory_lock(%s)", (key,))[0][0]:
            return True
        self.db.rows("SELECT pg_advisory_unlock(%s)", (key,))
        return False

    def try_acquire(self) -> bool:
        """Take the lease if it is free, its holder dead, or not renewed for its expiry."""
        rows = self.db.rows(f"SELECT holder, expires_at < {_NOW} FROM endless_leases WHERE memory = %(m)s",
                            self._params())
        seen = rows[0][0] if rows else None
        if seen is not None and seen == self.token:
            return self.renew()
        if seen is not None and not rows[0][1] and self._alive(seen):
            return False
        token = secrets.token_hex(8)
        self.db.rows("SELECT pg_advisory_lock(%s)", (self._beacon(token),))
        # Compare-and-set: replaced only if the holder is still the one judged gone (never two holders).
        taken = self.db.rows(
            f"INSERT INTO endless_leases (memory, holder, expires_at) "
            f"VALUES (%(m)s, %(t)s, {_NOW} + make_interval(secs => %(expiry)s)) "
            "ON CONFLICT (memory) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at "
            "WHERE endless_leases.holder = %(seen)s RETURNING holder",
            self._params(t=token, seen=seen), "taking the writer's lease")
        if not taken:
            self.db.rows("SELECT pg_advisory_unlock(%s)", (self._beacon(token),))
            return False
        self.release_local()
        self.token = token
        return True

    def renew(self) -> bool:
        """Move the expiry on; False (and the lease dropped here) when another process took it."""
        if self.token is None:
            return False
        rows = self.db.rows(f"UPDATE endless_leases SET expires_at = {_NOW} + make_interval(secs => %(expiry)s) "
                            "WHERE memory = %(m)s AND holder = %(t)s RETURNING holder",
                            self._params(t=self.token), "renewing the writer's lease")
        if not rows:
            self.release_local()
            return False
        return True

    def release(self) -> None:
        if self.token is not None:
            self.db.rows("DELETE FROM endless_leases WHERE memory = %(m)s AND holder = %(t)s",
                         self._params(t=self.token), "releasing the writer's lease")
        self.release_local()

    def want(self) -> None:
        """Say that this process waits for the lease (a mark in the database; see ``Lease.want``)."""
        now = self.clock()
        if now - self._wanted_at < WANT_REFRESH_SECONDS:
            return
        self._wanted_at = now
        value = orjson.dumps({"pid": os.getpid(), "at": now})
        self.db.rows("INSERT INTO endless_marks (memory, name, value) VALUES (%s, 'lease-wanted', %s) "
                     "ON CONFLICT (memory, name) DO UPDATE SET value = EXCLUDED.value", (self.memory, value),
                     "saying this process waits for the writer's lease")

    def wanted(self) -> WantedBy | None:
        rows = self.db.rows("SELECT value FROM endless_marks WHERE memory = %s AND name = 'lease-wanted'",
                            (self.memory,))
        try:
            data = orjson.loads(bytes(rows[0][0])) if rows else None
            return None if data is None else WantedBy(int(data["pid"]), float(data["at"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None

    def release_local(self) -> None:
        if self.token is not None:
            try:
                self.db.rows("SELECT pg_advisory_unlock(%s)", (self._beacon(self.token),))
            except StoreUnavailable:
                pass  # the connection went, and the beacon with it
        self.token = None


class PostgresStore(checks.LogAndTreeChecks):
    """A memory kept in a PostgreSQL database: the log, the tree, the lock and the lease (module doc)."""

    # A forget patches the shared bytes, but the other machines' search indexes, views and forget
    # registries are their own: until a forget reaches them, forgetting is refused (a later slice).
    forgets_everywhere = False

    def __init__(self, folder: Path, granularity: str, settings: Settings, clock: Callable[[], float]) -> None:
        self.folder = folder
        self.granularity = granularity
        self.memory = folder.name  # the memory's id (its folder under memories/ is named by it)
        self.db = Database(settings.store)
        if not self.db.rows("SELECT to_regclass('endless_marks') IS NOT NULL", doing="opening")[0][0]:
            self.db.ensure_schema()
        for stream in ("log", "tree"):
            self.db.ensure_stream(self.memory, stream)
        # Keys are per schema and memory: two schemas of one database hold memories of their own.
        database, schema = self.db.rows("SELECT current_database(), current_schema()")[0]
        base = f"{database}.{schema}:{self.memory}"
        local = folder / LOCAL
        self.log = PgOrderLog(local, granularity, self.db, self.memory)
        self.tree = PgTreeStore(local, granularity, self.db, self.memory)
        self.tree.message_source, self.tree.messages_read = self.log.source_text, lambda: self.log.total
        self.lock = AdvisoryLock(settings.store, advisory_key(base, "change"), self.db.shown)
        self.lease = RowLease(self.db, self.memory, base, expiry=settings.lease_expiry_seconds, clock=clock)

    def load(self) -> None:
        """Check the local copy belongs to this memory's streams, then read its indexes (not the history)."""
        files_log = self.folder / f"turns.{self.granularity}.v{LOG_FORMAT}.jsonl"
        if files_log.exists() and files_log.stat().st_size:
            raise StoreUnavailable(
                f"the memory {self.memory} keeps its history in files under {self.folder}, but the store setting "
                f"(ENDLESS_STORE) points at {self.db.shown}, which does not hold it. Unset ENDLESS_STORE to use "
                "it from its files; copying a memory into the database comes with `endless store copy`")
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

    def bulk_commit(self, batch: Batch, sync: bool = True) -> None:
        self.log.add(batch.lines, batch.infos, sync)

    def stamp(self) -> tuple:
        """The streams' ends and patch counts: any process's store or forget changes it (one query)."""
        return tuple(self.db.rows("SELECT stream, end_offset, patches FROM endless_streams WHERE memory = %s "
                                  "ORDER BY stream", (self.memory,)))

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
        self.log.close()
        self.tree.close()
        self.lock.close()
        self.db.close()
