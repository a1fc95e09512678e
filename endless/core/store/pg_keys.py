"""The PostgreSQL store's record of its memories' keys and aliases (:mod:`endless.core.store.directory`).

A memory kept in the database is used from several machines; each keeps a folder
of its own for it (its ``key.json``, its copy of the log).  What every machine
must agree on lives here, in two tables of their own beside the store's (made
by :data:`KEYS_SCHEMA`, a statement apart from ``pg_db.SCHEMA``):

* ``endless_keys``: each memory's key record (``key.json``'s fields), written
  when the memory is made or first opened by an Endless that keeps it, so
  another machine can open a memory by its id and list what the database holds;
* ``endless_aliases``: "the memory of (agent, project) is memory M", written
  once and never changed (directory's module doc says when and why).

A key and an alias of one id are made under one advisory lock on that id, in one
transaction, so a memory and an alias never both claim an id.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from endless.core.settings import Settings, store_url
from endless.core.store.copying import COPY_NOTE
from endless.core.store.directory import Alias
from endless.core.store.keys import MEMORY_ID, Key
from endless.core.store.pg_db import Database, advisory_key

KEYS_SCHEMA = """
CREATE TABLE IF NOT EXISTS endless_keys (
    memory text PRIMARY KEY, agent text NOT NULL, project text NOT NULL, record jsonb NOT NULL,
    owner name NOT NULL DEFAULT current_user);
CREATE TABLE IF NOT EXISTS endless_aliases (
    alias text PRIMARY KEY, agent text NOT NULL, project text NOT NULL, memory text NOT NULL,
    owner name NOT NULL DEFAULT current_user);
ALTER TABLE endless_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE endless_keys FORCE ROW LEVEL SECURITY;
ALTER TABLE endless_aliases ENABLE ROW LEVEL SECURITY;
ALTER TABLE endless_aliases FORCE ROW LEVEL SECURITY;
CREATE POLICY endless_own_keys ON endless_keys
    USING (pg_has_role(current_user, owner, 'MEMBER')) WITH CHECK (owner = current_user);
CREATE POLICY endless_own_aliases ON endless_aliases
    USING (pg_has_role(current_user, owner, 'MEMBER')) WITH CHECK (owner = current_user);
GRANT SELECT, INSERT ON endless_keys, endless_aliases TO PUBLIC;
ALTER TABLE endless_keys ALTER COLUMN project SET STATISTICS 0;
ALTER TABLE endless_aliases ALTER COLUMN project SET STATISTICS 0;
"""
_KEYS_LOCK = 0x656E_646C_6573_7302  # held while the two tables are made (as pg_db's _SCHEMA_LOCK)


def directory_db(url: str) -> Database:
    """A connection to the store's directory (a schema of its own, ``pg_db.directory_schema``), its tables made."""
    db = Database(url, directory=True)
    ensure_keys_schema(db)
    return db


def files_only(folder: Path) -> bool:
    """Whether a memory folder holds a history of the files store that was never copied into a database."""
    if (folder / COPY_NOTE).exists():
        return False
    return any(path.stat().st_size for path in folder.glob("turns.*.jsonl") if path.is_file())


def ensure_keys_schema(db: Database) -> None:
    """Make the directory's schema and tables once.  Every role that keeps memories here writes its own
    rows and reads only the rows of the roles it is a member of (row-level security): a key names a
    folder or a repository, which is the memory's business alone (as its schema is, pg_db)."""
    if db.rows("SELECT to_regclass('endless_aliases') IS NOT NULL", doing="opening")[0][0]:
        return
    try:
        with db.guard, db.conn.transaction():
            db.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_KEYS_LOCK,))
            db.conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(db.schema)))
            # (the connection's search path named the schema before it existed: named again, now it does)
            db.conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(db.schema)))
            mine = db.conn.execute("SELECT pg_has_role(nspowner, 'USAGE') FROM pg_namespace WHERE nspname = %s",
                                   (db.schema,)).fetchone()
            if mine and mine[0]:  # (a schema an admin made is theirs to open to others)
                db.conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(sql.Identifier(db.schema)))
            if not db.conn.execute("SELECT to_regclass('endless_aliases') IS NOT NULL").fetchone()[0]:
                db.conn.execute(KEYS_SCHEMA)
    except psycopg.Error as exc:
        raise db.failed(exc, "making the store's directory of memories") from None


def register(db: Database, record: dict) -> None:
    """Record a memory's key (its ``key.json``), unless the database has it; never over an alias of its id."""
    _claim(db, record, alias_wins=False)


def _claim(db: Database, record: dict, alias_wins: bool) -> str:
    mid = record["memoryId"]
    try:
        with db.guard, db.conn.transaction():
            db.conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("key", mid),))
            if alias_wins:
                row = db.conn.execute("SELECT memory FROM endless_aliases WHERE alias = %s", (mid,)).fetchone()
                if row is not None:
                    return row[0]
            db.conn.execute("INSERT INTO endless_keys (memory, agent, project, record) VALUES (%s, %s, %s, %s) "
                            "ON CONFLICT (memory) DO NOTHING",
                            (mid, record["agent"], record["project"], Jsonb(record)))
    except psycopg.Error as exc:
        raise db.failed(exc, "recording a memory's key") from None
    return mid


class PgDirectory:
    """The memories of a database: those this machine has a folder for, then the database's records."""

    def __init__(self, root: Path | None, settings: Settings) -> None:
        self.root = Path(root) if root is not None else None
        self._db: Database | None = None
        self._url = store_url(settings)
        self._own = True

    @classmethod
    def on(cls, db: Database) -> "PgDirectory":
        """The directory of ``db`` alone (no machine's folders), on a connection the caller keeps."""
        directory = cls(None, Settings())
        directory._db, directory._own = db, False
        ensure_keys_schema(db)
        return directory

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = directory_db(self._url)
        return self._db

    def _local(self, memory_ids: list[str]) -> set[str]:
        """The memories this machine has a folder of the database's for (a memory kept in files here,
        never copied into a database, is not the database's: its key is not recorded there)."""
        if self.root is None:
            return set()
        return {mid for mid in memory_ids if (self.root / "memories" / mid / "key.json").exists()
                and not files_only(self.root / "memories" / mid)}

    def holds(self, memory_ids: list[str]) -> set[str]:
        here = self._local(memory_ids)
        rest = [mid for mid in memory_ids if mid not in here]
        if not rest:
            return here
        rows = self.db.rows("SELECT memory FROM endless_keys WHERE memory = ANY(%s)", (rest,))
        return here | {row[0] for row in rows}

    def aliases_of(self, memory_ids: list[str]) -> dict[str, str]:
        if not memory_ids:
            return {}
        rows = self.db.rows("SELECT alias, memory FROM endless_aliases WHERE alias = ANY(%s)", (memory_ids,))
        return {alias: target for alias, target in rows}

    def add_alias(self, alias: Alias, target_record: dict | None = None) -> str:
        mid = alias.alias_id
        try:
            with self.db.guard, self.db.conn.transaction():
                conn = self.db.conn
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("key", mid),))
                if target_record is not None:  # (the target recorded first: an alias never names an unknown memory)
                    conn.execute("INSERT INTO endless_keys (memory, agent, project, record) VALUES (%s, %s, %s, %s) "
                                 "ON CONFLICT (memory) DO NOTHING",
                                 (alias.target, target_record["agent"], target_record["project"],
                                  Jsonb(target_record)))
                if conn.execute("SELECT 1 FROM endless_keys WHERE memory = %s", (mid,)).fetchone():
                    return mid
                conn.execute("INSERT INTO endless_aliases (alias, agent, project, memory) VALUES (%s, %s, %s, %s) "
                             "ON CONFLICT (alias) DO NOTHING", (mid, alias.agent, alias.project, alias.target))
                row = conn.execute("SELECT memory FROM endless_aliases WHERE alias = %s", (mid,)).fetchone()
        except psycopg.Error as exc:
            raise self.db.failed(exc, "recording an alias of a memory") from None
        return row[0] if row else alias.target

    def claim(self, key: Key, record: dict) -> str:
        if self.root is not None and files_only(self.root / "memories" / key.memory_id):
            return key.memory_id  # kept in files here: the store refuses it at open, and says how to copy it
        return _claim(self.db, record, alias_wins=True)

    def key_record(self, memory_id: str) -> dict | None:
        rows = self.db.rows("SELECT record FROM endless_keys WHERE memory = %s", (memory_id,))
        if not rows:
            return None
        record = rows[0][0]
        if isinstance(record, (bytes, str)):
            record = orjson.loads(record)
        return record if isinstance(record, dict) else None

    def memory_ids(self) -> list[str]:
        """Every memory the database has a key for."""
        return sorted(row[0] for row in self.db.rows("SELECT memory FROM endless_keys")
                      if MEMORY_ID.fullmatch(row[0]))

    def aliases(self) -> list[Alias]:
        return [Alias(agent, project, target) for agent, project, target in
                self.db.rows("SELECT agent, project, memory FROM endless_aliases ORDER BY alias")]

    def close(self) -> None:
        if self._db is not None and self._own:
            self._db.close()
            self._db = None
