"""The PostgreSQL store's change lock and writer's lease (:mod:`endless.core.store.postgres`).

* **The change lock** is a session-level advisory lock keyed by the memory, held by a connection of its
  own while the ``with`` block runs (a session's advisory lock lives as long as its connection).
* **The writer's lease** is a row with an expiry on the database's clock (no two machines' clocks are
  compared); its holder also keeps an advisory lock of its own (a "beacon"), so a holder whose process
  died is replaced at once, a frozen one after the expiry, and never two at once (a compare-and-set).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import Callable

import orjson
import psycopg

from endless.core.settings import STORE_LOCK_SECONDS
from endless.core.store.locks import WANT_REFRESH_SECONDS, LockBusy, WantedBy
from endless.core.store.pg_db import Database, StoreUnavailable, advisory_key, lock_timed_out, log

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
