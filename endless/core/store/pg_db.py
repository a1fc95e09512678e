"""The PostgreSQL store's connections, tables and errors (issue 31; :mod:`endless.core.store.postgres`).

Only the PostgreSQL backend imports this module, and only it imports
``psycopg``: a memory kept in files, and every read-only command on one, never
loads the driver.  The connection string is never logged or shown: every
message names the store as :func:`endless.core.settings.masked_store` gives it.

The tables, shared by every memory of one database (a memory's rows are keyed
by its id):

* ``endless_streams``: one row per memory and stream (``log``, ``tree``): where
  the stream ends, how many patches it has had, and a generation that names
  this stream (a memory removed and made again has another).
* ``endless_bytes``: the stream's stored bytes, one row per appended batch at
  its byte address ``at`` (whole records or lines, never a part of one).
* ``endless_patches``: each same-length write a forget made, in order, so a
  machine's local copy of the bytes applies it too.
* ``endless_leases``: the writer's lease, one row per memory, with its expiry
  on the database's clock.
* ``endless_marks``: small named records (an import's progress).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from typing import Any, Iterator, Sequence

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from endless.core.settings import STORE_CONNECT_SECONDS, masked_store
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
    inside another's transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = masked_store(url)
        self._conn: psycopg.Connection | None = None
        self.guard = threading.RLock()

    def connect(self) -> psycopg.Connection:
        """A new autocommit connection, or :class:`StoreUnavailable` saying what to do."""
        params: dict[str, Any] = {}
        if "connect_timeout" not in self.url:
            params["connect_timeout"] = STORE_CONNECT_SECONDS
        try:
            return psycopg.connect(self.url, autocommit=True, **params)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to the memory store {self.shown} (the ENDLESS_STORE setting): "
                f"{_reason(exc, self.url)}. Check that the server is running and the address, user and "
                "password are right, or unset ENDLESS_STORE to keep memories in files") from None

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def failed(self, exc: BaseException, doing: str) -> StoreUnavailable:
        """The error to raise for a driver error while ``doing`` something (the connection is dropped,
        so the next use opens a new one)."""
        if isinstance(exc, StoreUnavailable):
            return exc
        if isinstance(exc, psycopg.OperationalError) and self.lost():
            self.close()
        return StoreUnavailable(f"the memory store {self.shown} failed while {doing}: {_reason(exc, self.url)}. "
                                "Nothing that was acknowledged is lost; check the server and try again")

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

    def lost(self) -> bool:
        """Whether the connection is gone (closed, or broken by the server or the network)."""
        return self._conn is not None and (self._conn.closed or self._conn.broken)

    def ensure_schema(self) -> None:
        try:
            with self.guard, self.conn.transaction():
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self.conn.execute(SCHEMA)
        except psycopg.Error as exc:
            raise self.failed(exc, "making its tables") from None

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


def lock_timed_out(exc: BaseException) -> bool:
    return isinstance(exc, (pg_errors.LockNotAvailable, pg_errors.QueryCanceled))


def log(message: str) -> None:
    durable.log("store", message)
