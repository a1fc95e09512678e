"""A PostgreSQL database as a copy's source or target (:mod:`endless.core.store.copying`).

It reads and writes the store's own tables (``pg_db``'s streams, bytes and marks,
``pg_keys``'s keys and aliases) directly, not through a machine's local copy: a
copy moves whole memories, and the database is what is shared.  Every append is
one transaction that moves the stream's end only from where the copy read it,
so a copy killed mid-way leaves whole lines and goes on from there.
"""

from __future__ import annotations

from typing import Iterator

from endless.core.settings import STORE_FETCH_ROWS
from endless.core.store import pg_keys
from endless.core.store.copying import STREAMS, CopyRefused
from endless.core.store.directory import Alias
from endless.core.store.keys import MEMORY_ID
from endless.core.store.pg_db import Database, memory_schema

_APPEND_ONE = """
WITH s AS (
    UPDATE endless_streams SET end_offset = end_offset + %(n)s
    WHERE memory = %(m)s AND stream = %(s)s AND end_offset = %(at)s
    RETURNING end_offset)
INSERT INTO endless_bytes (memory, stream, at, data) SELECT %(m)s, %(s)s, %(at)s, %(data)s FROM s
RETURNING at"""

_PIECES = """
SELECT at, data FROM endless_bytes
WHERE memory = %(m)s AND stream = %(s)s AND at < %(stop)s AND at >= coalesce(
    (SELECT max(at) FROM endless_bytes WHERE memory = %(m)s AND stream = %(s)s AND at <= %(from)s), 0)
ORDER BY at LIMIT %(rows)s"""


class PgSide:
    """One database (a schema of it) as a copy sees it: its directory of keys and aliases, and each
    memory's own schema (``pg_db``: a schema per memory)."""

    kind = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self.db = pg_keys.directory_db(url)
        self.where = self.db.shown
        self.directory = pg_keys.PgDirectory.on(self.db)
        self._memories: dict[str, Database] = {}

    def _memory(self, memory_id: str, make: bool = False) -> Database | None:
        """The connection to a memory's schema (None: the database has no tables of it, unless ``make``)."""
        db = self._memories.get(memory_id)
        if db is None:
            db = Database(self.url, memory_id)
            if not db.check_schema():
                if not make:
                    db.close()
                    return None
                db.ensure_schema()
            self._memories[memory_id] = db
        return db

    def identity(self) -> tuple:
        """What names this database and schema, whatever the URL's spelling (a copy onto itself is refused)."""
        return tuple(self.db.rows("SELECT current_database(), %s::text, inet_server_addr()::text, "
                                  "inet_server_port(), current_setting('data_directory', true)", (self.db.schema,))[0])

    def memory_ids(self) -> list[str]:
        """The memories with a key here, and those whose schema this role may read (their tables made)."""
        prefix = memory_schema(self.db.conn, "0" * 16)[:-16]  # (what every memory's schema name starts with)
        rows = self.db.rows("SELECT memory FROM endless_keys UNION SELECT substr(nspname, %s) FROM pg_namespace "
                            "WHERE starts_with(nspname, %s) AND has_schema_privilege(oid, 'USAGE')",
                            (len(prefix) + 1, prefix))
        return sorted(row[0] for row in rows if MEMORY_ID.fullmatch(row[0]))

    def key_record(self, memory_id: str) -> dict | None:
        return self.directory.key_record(memory_id)

    def end(self, memory_id: str, stream: str) -> int:
        db = self._memory(memory_id)
        if db is None:
            return 0
        rows = db.rows("SELECT end_offset FROM endless_streams WHERE memory = %s AND stream = %s",
                            (memory_id, stream))
        return int(rows[0][0]) if rows else 0

    def resume_at(self, memory_id: str, stream: str) -> int:
        return self.end(memory_id, stream)  # (rows are whole lines: nothing is ever torn here)

    def read(self, memory_id: str, stream: str, start: int, stop: int) -> Iterator[bytes]:
        at = start
        db = self._memory(memory_id, make=True)
        while at < stop:
            rows = db.rows(_PIECES, {"m": memory_id, "s": stream, "stop": stop, "from": at,
                                          "rows": STORE_FETCH_ROWS})
            moved = False
            for row_at, data in rows:
                data = bytes(data)
                end = row_at + len(data)
                if end <= at:
                    continue
                piece = data[max(0, at - row_at):min(len(data), stop - row_at)]
                if piece:
                    yield piece
                    at += len(piece)
                    moved = True
                if at >= stop:
                    return
            if not moved:
                raise CopyRefused(f"memory {memory_id} in {self.where}: its {stream} has no bytes at {at} though "
                                  f"it ends at {stop}; `endless doctor` on a machine using it says more")

    def make(self, memory_id: str, record: dict) -> None:
        pg_keys.register(self.db, record)
        db = self._memory(memory_id, make=True)
        for stream in STREAMS:
            db.ensure_stream(memory_id, stream)

    def append(self, memory_id: str, stream: str, at: int, data: bytes) -> None:
        rows = self._memory(memory_id, make=True).rows(_APPEND_ONE, {"m": memory_id, "s": stream, "n": len(data), "at": at, "data": data},
                            "copying a memory", again=False)
        if not rows:
            raise CopyRefused(f"memory {memory_id} in {self.where} changed while it was copied into (its {stream} "
                              f"no longer ends at byte {at}): another machine writes to it; stop it and copy again")

    def marks(self, memory_id: str) -> dict[str, bytes]:
        db = self._memory(memory_id)
        return {} if db is None else {name: bytes(value) for name, value in
                                      db.rows("SELECT name, value FROM endless_marks WHERE memory = %s", (memory_id,))}

    def set_mark(self, memory_id: str, name: str, value: bytes) -> None:
        self._memory(memory_id, make=True).rows("INSERT INTO endless_marks (memory, name, value) VALUES (%s, %s, %s) "
                     "ON CONFLICT (memory, name) DO NOTHING", (memory_id, name, value), "storing a mark")

    def aliases(self) -> list[Alias]:
        return self.directory.aliases()

    def add_alias(self, alias: Alias, record: dict | None) -> str:
        return self.directory.add_alias(alias, record)

    def generations(self, memory_id: str) -> dict[str, str]:
        db = self._memory(memory_id)
        return {} if db is None else {stream: generation for stream, generation in
                                      db.rows("SELECT stream, generation FROM endless_streams WHERE memory = %s",
                                              (memory_id,))}

    def note_copy(self, memory_id: str, generations: dict[str, str], log_end: int) -> None:
        pass  # (the note is the files side's)

    def close(self) -> None:
        for db in self._memories.values():
            db.close()
        self._memories.clear()
        self.db.close()
