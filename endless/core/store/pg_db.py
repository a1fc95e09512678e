"""The PostgreSQL store's connections, tables and errors (:mod:`endless.core.store.postgres`).

Only the PostgreSQL backend imports this module, and only it imports
``psycopg``: a memory kept in files, and every read-only command on one, never
loads the driver.  The connection string is never logged or shown: every
message names the store as :func:`endless.core.settings.masked_store` gives it.

**A schema per memory.**  Each memory's tables live in a schema of their own,
``endless_<memory id>`` (or ``<schema>_<memory id>`` when the URL's
``search_path`` names a schema, so one database can hold several separate
stores).  Why: the schema belongs to the role that made the memory, and no
other role may even look into it, so a memory's rows are readable only through
its own role (what a team admin sets up is in the README's PostgreSQL part);
a forget rewrites this memory's tables alone (``VACUUM FULL``: the only way
the engine lets go of a dead row's bytes, see :mod:`endless.core.privacy.forget`);
and a memory is removed with its schema.  Every connection of a memory's store
sets its ``search_path`` to that schema, so the statements name bare tables.

The store's tables (the search floor adds its own, :mod:`endless.core.search.pg_index`):

* ``endless_streams``: one row per stream (``log``, ``tree``): where it ends,
  how many patches it has had, and a generation that names this stream (a
  memory removed and made again has another).
* ``endless_bytes``: the stream's stored bytes, one row per appended batch at
  its byte address ``at`` (whole records or lines, never a part of one).
* ``endless_patches``: each same-length write a forget made, in order, so a
  machine's local copy of the bytes applies it too.
* ``endless_forgets``: the forget registry (what was forgotten when: ids,
  byte addresses and line names, never a text), shared by every machine.
* ``endless_leases``: the writer's lease, with its expiry on the database's clock.
* ``endless_marks``: small named records (an import's progress).

No statistics are gathered on a column holding texts (``SET STATISTICS 0``):
the planner's samples in ``pg_statistic`` would be one more copy of words a
forget must reach.  The stored bytes are compressed with LZ4 (an import's
rows of 4 MB: PostgreSQL's own compression took longer than the rest of the
append).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from typing import Any, Callable, Iterator, Sequence

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from endless.core.settings import (STORE_CONNECT_SECONDS, STORE_LISTEN_CHECK_SECONDS, STORE_TCP_PARAMS,
                                   masked_store)
from endless.core.store import durable

SCHEMA = """
CREATE TABLE IF NOT EXISTS endless_streams (
    memory text NOT NULL, stream text NOT NULL, end_offset bigint NOT NULL DEFAULT 0,
    patches bigint NOT NULL DEFAULT 0, generation text NOT NULL,
    PRIMARY KEY (memory, stream));
CREATE TABLE IF NOT EXISTS endless_bytes (
    memory text NOT NULL, stream text NOT NULL, at bigint NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (memory, stream, at));
CREATE TABLE IF NOT EXISTS endless_patches (
    memory text NOT NULL, stream text NOT NULL, seq bigint NOT NULL, at bigint NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (memory, stream, seq));
CREATE TABLE IF NOT EXISTS endless_leases (
    memory text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS endless_marks (
    memory text NOT NULL, name text NOT NULL, value bytea NOT NULL, PRIMARY KEY (memory, name));
CREATE TABLE IF NOT EXISTS endless_forgets (
    seq bigint PRIMARY KEY, op text NOT NULL UNIQUE, entry bytea NOT NULL);
ALTER TABLE endless_bytes ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE endless_bytes ALTER COLUMN data SET COMPRESSION lz4;
ALTER TABLE endless_patches ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE endless_marks ALTER COLUMN value SET STATISTICS 0;
"""
# Taken while the tables are made: two machines opening their first memory at once would otherwise
# race on the catalog (CREATE TABLE IF NOT EXISTS is not safe against a concurrent one).
_SCHEMA_LOCK = 0x656E_646C_6573_7301


class StoreUnavailable(OSError):
    """The PostgreSQL store cannot be reached or refused what was asked; the message says what to do."""


class StoreConflict(StoreUnavailable):
    """The shared log moved while this process held the memory's lock (the lock's connection was lost):
    nothing was stored; the change is tried again after catching up."""


def advisory_key(*parts: str) -> int:
    """A 64-bit advisory lock key for ``parts`` (a memory id, a lease token), the same on every machine."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _reason(exc: BaseException, url: str) -> str:
    """What the driver said, without anything of the connection string but its masked form."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    try:
        given = conninfo_to_dict(url) if url else {}
    except psycopg.Error:
        given = {}
    for name in ("password", "sslpassword"):  # (a key file's passphrase is a secret too)
        if given.get(name):
            text = text.replace(str(given[name]), "***")
    return text


class Database:
    """One handle's connection to the store's database (opened on first use, autocommit).

    Each :class:`endless.core.store.postgres.PostgresStore` has its own two
    connections: this one for reads and writes, another held by its change lock
    while a change runs (a session-level advisory lock lives as long as the
    connection that took it).  ``guard`` is held around each statement and each transaction: the
    threads of one process sharing a handle (a chat's turn, the writer pool) never run a statement
    inside another's transaction.

    ``memory``: the memory whose schema every statement reads (its ``search_path``); None for a
    connection that needs no table (the change lock's)."""

    def __init__(self, url: str, memory: str | None = None, *, directory: bool = False) -> None:
        self.url = url
        self.shown = masked_store(url)
        self.memory = memory
        self.directory = directory  # the store's directory of keys and aliases (pg_keys), not a memory
        self.schema: str | None = None  # the memory's schema, named at the first connection
        self._conn: psycopg.Connection | None = None
        self.guard = threading.RLock()
        self.epoch = 0  # connections opened so far (what was committed on an earlier one is checked again)

    def connect(self) -> psycopg.Connection:
        """A new autocommit connection (in the memory's schema), or :class:`StoreUnavailable` saying what to do."""
        params: dict[str, Any] = {}
        try:
            given = conninfo_to_dict(self.url)
        except psycopg.Error:
            given = {}  # (psycopg.connect says what is wrong with it, below)
        if "connect_timeout" not in given:
            params["connect_timeout"] = STORE_CONNECT_SECONDS
        # A server that vanishes mid-statement is noticed in seconds, not hours (STORE_TCP_PARAMS).
        for name, value in STORE_TCP_PARAMS.items():
            if name not in given:
                params[name] = value
        try:
            conn = psycopg.connect(self.url, autocommit=True, **params)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to the memory store {self.shown} (the ENDLESS_STORE setting): "
                f"{_reason(exc, self.url)}. Check that the server is running and the address, user and "
                "password are right, or unset ENDLESS_STORE to keep memories in files") from None
        if self.memory is not None or self.directory:
            try:
                if self.schema is None:
                    self.schema = (memory_schema(conn, self.memory) if self.memory is not None
                                   else directory_schema(conn))
                conn.execute(sql.SQL("SET search_path TO {}; SET gin_pending_list_limit = '64kB'").format(
                    sql.Identifier(self.schema)))
            except psycopg.Error as exc:
                conn.close()
                raise self.failed(exc, "opening the memory") from None
        return conn

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
            self.epoch += 1
        return self._conn

    def failed(self, exc: BaseException, doing: str) -> StoreUnavailable:
        """The error to raise for a driver error while ``doing`` something (the connection is dropped,
        so the next use opens a new one)."""
        if isinstance(exc, StoreUnavailable):
            return exc
        if isinstance(exc, psycopg.OperationalError) and self.lost():
            self.close()
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return StoreUnavailable(self._refused(exc, doing))
        return StoreUnavailable(f"the memory store {self.shown} failed while {doing}: {_reason(exc, self.url)}. "
                                "Nothing that was acknowledged is lost; check the server and try again")

    def _refused(self, exc: BaseException | str, doing: str, owner: str = "<owner role>") -> str:
        """What to do when the database refuses this role the memory's schema (module doc: a schema
        per memory, owned by the role that made it)."""
        user = conninfo_to_dict(self.url).get("user") or "this role"
        schema = self.schema or "the memory's schema"
        why = exc if isinstance(exc, str) else _reason(exc, self.url)
        return (f"the memory store {self.shown} refused {user} while {doing}: {why}. "
                f"The memory {self.memory} is kept in the schema {schema}, which belongs to the role that "
                f"made it; its admin gives another role the use of it with `GRANT {owner} TO {user}` "
                f"(or lets roles make memories with `GRANT CREATE ON DATABASE <database> TO {user}`)")

    def check_schema(self) -> bool:
        """Whether the memory's schema holds its tables; a schema of another role's raises, saying who."""
        with self.guard:
            self.conn  # (connected: the schema is named)
        rows = self.rows("SELECT n.nspowner::regrole::text, has_schema_privilege(n.oid, 'USAGE'), "
                         "to_regclass('endless_forgets') IS NOT NULL FROM pg_namespace n WHERE n.nspname = %s",
                         (self.schema,), doing="opening the memory")
        if rows and not rows[0][1]:
            raise StoreUnavailable(self._refused(f"the schema {self.schema} belongs to the role {rows[0][0]}",
                                                 "opening the memory", rows[0][0]))
        return bool(rows and rows[0][2])

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = (), doing: str = "reading",
             again: bool = True) -> list[tuple]:
        """The statement's rows.  ``again``: it may run twice (a read, a compare-and-set), so a
        connection found lost (the server restarted, a network cut) is opened anew and it runs once
        more; a write that may have landed before the connection went is never sent twice."""
        for attempt in (1, 2):
            try:
                with self.guard:
                    cursor = self.conn.execute(sql, params)
                    return cursor.fetchall() if cursor.description is not None else []
            except psycopg.OperationalError as exc:
                if attempt == 1 and again and self.lost():
                    log(f"the connection to {self.shown} was lost ({_reason(exc, self.url)}); opening it again")
                    self.close()
                    continue
                raise self.failed(exc, doing) from None
            except psycopg.Error as exc:
                raise self.failed(exc, doing) from None
        raise AssertionError("unreachable")

    @property
    def connected(self) -> bool:
        """Whether a connection is open and unbroken (after an error: the server answered it)."""
        return self._conn is not None and not (self._conn.closed or self._conn.broken)

    def lost(self) -> bool:
        """Whether the connection is gone (closed, or broken by the server or the network)."""
        return self._conn is not None and (self._conn.closed or self._conn.broken)

    def ensure_schema(self, ddl: str = "", made: str = "endless_forgets") -> None:
        """Make the memory's schema and the store's tables (or ``ddl``, another floor's, which makes table
        ``made``), once: two machines opening a new memory at once make them one after the other."""
        try:
            with self.guard, self.conn.transaction():
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self.conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
                if not self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", (made,)).fetchone()[0]:
                    self.conn.execute(SCHEMA if not ddl else ddl)
        except psycopg.Error as exc:
            raise self.failed(exc, "making its tables") from None

    def has_table(self, name: str) -> bool:
        """Whether the memory's schema holds table ``name`` (one read: made once, looked for at open)."""
        return bool(self.rows("SELECT to_regclass(%s) IS NOT NULL", (name,), doing="opening the memory")[0][0])

    def ensure_stream(self, memory: str, stream: str) -> None:
        self.rows("INSERT INTO endless_streams (memory, stream, generation) VALUES (%s, %s, %s) "
                  "ON CONFLICT DO NOTHING", (memory, stream, secrets.token_hex(8)), "making the memory")

    def snapshot(self) -> Iterator[psycopg.Connection]:
        """A repeatable-read transaction: what several queries read inside it is one moment's state."""
        return _snapshot(self)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None


class _snapshot:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._tx: Any = None

    def __enter__(self) -> psycopg.Connection:
        self.db.guard.acquire()
        try:
            conn = self.db.conn
            self._tx = conn.transaction()
            self._tx.__enter__()
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return conn
        except psycopg.Error as exc:
            self.db.guard.release()
            raise self.db.failed(exc, "reading") from None
        except BaseException:
            self.db.guard.release()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            self._tx.__exit__(*exc)
        except psycopg.Error as error:
            raise self.db.failed(error, "reading") from None
        finally:
            self.db.guard.release()


class Listener:
    """A thread that ``LISTEN``s on a memory's channel and calls ``wake`` at each notification.

    Every append to the log or the tree (any machine's) notifies the channel named after the memory's
    schema as it commits, so a process waiting for a line or a turn (``Memory.settle``) wakes then
    instead of polling.  ``live`` says whether it is listening now; while it is not (the connection
    lost, the server restarting) the waiters poll, and ``wake`` is called when the connection goes
    and again when it is back (what landed meanwhile was not told).  It has a connection of its own
    and runs until :meth:`stop` (a daemon thread: it never keeps a process alive)."""

    def __init__(self, url: str, memory: str, wake: Callable[[], None]) -> None:
        self.db = Database(url, memory)
        self.wake = wake
        self.live = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"endless-listen-{memory}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pause = 0.5
        while not self._stop.is_set():
            conn = None
            try:
                conn = self.db.connect()
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.db.schema)))
                self.live, pause = True, 0.5
                self.wake()
                while not self._stop.is_set():
                    for _ in conn.notifies(timeout=STORE_LISTEN_CHECK_SECONDS):
                        self.wake()
            except (psycopg.Error, StoreUnavailable) as exc:
                if self.live:
                    log(f"stopped listening to {self.db.shown} ({_reason(exc, self.db.url)}); polling until "
                        "the connection is back")
                self.live = False
                self.wake()
            finally:
                self.live = False
                if conn is not None:
                    try:
                        conn.close()
                    except psycopg.Error:
                        pass
            self._stop.wait(pause)
            pause = min(pause * 2, 10.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * STORE_LISTEN_CHECK_SECONDS + 1)


def schema_prefix(conn: psycopg.Connection) -> str:
    """What the store's schemas are named after: ``endless``, or the schema the URL's ``search_path``
    names first (the same on every machine given the same URL)."""
    path = str(conn.execute("SELECT current_setting('search_path')").fetchone()[0])
    first = path.split(",")[0].strip().strip('"')
    return "endless" if first in ("", "$user", "public") else first


def directory_schema(conn: psycopg.Connection) -> str:
    """The schema of the store's directory (``pg_keys``: every memory's key and aliases),
    ``endless_directory``: made by the first role that keeps a memory here, open to every role (its rows
    are each role's own), never a schema an admin made for other things."""
    prefix = schema_prefix(conn)
    return f"{prefix[:53]}_directory"


def memory_schema(conn: psycopg.Connection, memory: str) -> str:
    """The schema a memory's tables live in: ``endless_<id>``, or ``<schema>_<id>`` when the URL's
    ``search_path`` names a schema first."""
    prefix = schema_prefix(conn)
    return f"{prefix[:62 - len(memory)]}_{memory}"


def lock_timed_out(exc: BaseException) -> bool:
    return isinstance(exc, (pg_errors.LockNotAvailable, pg_errors.QueryCanceled))


def log(message: str) -> None:
    durable.log("store", message)
