"""The tables of a PostgreSQL memory's full-text index, its statements of more than one step, its writes.

:mod:`endless.core.search.pg_index` says how the index is kept; this module
holds what it sends: the tables, indexes and text search configuration made
in the memory's schema at its first open, the watermark's columns, the one
statement a commit's rows are added with, and the transaction every other
write runs in (:class:`Write`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from endless.core.search.index import IndexBusy
from endless.core.search.pg_words import CONFIG, MESSAGE_TSV
from endless.core.settings import INDEX_BUSY_SECONDS

DDL = f"""
CREATE TEXT SEARCH DICTIONARY endless_stem (TEMPLATE = pg_catalog.snowball, language = english);
CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING REPLACE english_stem WITH endless_stem;
CREATE TABLE endless_index_mark (
    one boolean PRIMARY KEY DEFAULT true CHECK (one), turns bigint NOT NULL DEFAULT 0,
    log_end bigint NOT NULL DEFAULT 0, messages bigint NOT NULL DEFAULT 0, tree_end bigint NOT NULL DEFAULT 0,
    first_tid text NOT NULL DEFAULT '', chats_renamed bigint NOT NULL DEFAULT 0);
INSERT INTO endless_index_mark DEFAULT VALUES;
CREATE TABLE endless_words (
    id bigint PRIMARY KEY, at double precision, kind smallint NOT NULL, chat bigint NOT NULL,
    tsv tsvector NOT NULL);
CREATE INDEX endless_words_tsv ON endless_words USING gin (tsv);
CREATE INDEX endless_words_chat ON endless_words (chat, id);
CREATE TABLE endless_chats (id bigint PRIMARY KEY, session text NOT NULL, title text NOT NULL);
CREATE INDEX endless_chats_session ON endless_chats (session);
CREATE TABLE endless_line_words (
    key bigint PRIMARY KEY, first bigint NOT NULL, count bigint NOT NULL, tsv tsvector NOT NULL);
CREATE INDEX endless_line_words_tsv ON endless_line_words USING gin (tsv);
ALTER TABLE endless_words ALTER COLUMN tsv SET STATISTICS 0;
ALTER TABLE endless_line_words ALTER COLUMN tsv SET STATISTICS 0;
ALTER TABLE endless_chats ALTER COLUMN title SET STATISTICS 0;
ALTER TABLE endless_chats ALTER COLUMN session SET STATISTICS 0;
"""
TABLES = ("endless_words", "endless_line_words", "endless_chats")  # what a forget rewrites (module forget)

MARK_NAMES = ("turns", "log_end", "messages", "tree_end", "first_tid")
# A commit's rows in one statement (PgSearchIndex.add_after): the watermark row, locked only if it stands
# where the commit began and the copies hold every forget; the chats, the words and the new watermark.
ADD_AFTER = f"""
WITH m AS (
    SELECT first_tid FROM endless_index_mark, (SELECT set_config('synchronous_commit', 'off', true)) AS cfg
    WHERE log_end = %(b0)s AND tree_end = %(b1)s AND (%(applied)s::bigint[] IS NULL OR
          (SELECT array_agg(patches ORDER BY stream) FROM endless_streams) = %(applied)s::bigint[])
    FOR UPDATE OF endless_index_mark NOWAIT),
c AS (INSERT INTO endless_chats (id, session, title)
      SELECT u.* FROM m, unnest(%(cid)b::bigint[], %(cs)b::text[], %(ct)b::text[]) AS u ON CONFLICT DO NOTHING),
w AS (INSERT INTO endless_words (id, at, kind, chat, tsv)
      SELECT u.id, u.at, u.kind, u.chat, {MESSAGE_TSV}
      FROM m, unnest(%(id)b::bigint[], %(at)b::float8[], %(kind)b::int2[], %(chat)b::bigint[], %(text)b::text[])
           AS u(id, at, kind, chat, text) ON CONFLICT DO NOTHING)
UPDATE endless_index_mark SET turns = %(turns)s, log_end = %(log_end)s, messages = %(messages)s,
       tree_end = %(tree_end)s, first_tid = CASE WHEN m.first_tid = '' THEN %(tid)s ELSE m.first_tid END
FROM m RETURNING 1"""
MARK = ("SELECT turns, log_end, messages, tree_end, first_tid, chats_renamed, "
        "(SELECT array_agg(patches ORDER BY stream) FROM endless_streams) FROM endless_index_mark")


class Write:
    """``with index.write():`` one transaction holding the watermark row, committed without waiting
    for the WAL (derived data); rolled back on error.

    It runs in psycopg's pipeline mode: the statements inside are sent without waiting for their
    answers, so a write costs two round trips (the lock with the watermark it reads, then the rows
    and the commit), whatever it holds: on a busy machine each round trip waits for the server's
    turn on a core, and a commit's index update took six."""

    def __init__(self, index: Any, wait: bool) -> None:
        self.index, self.wait = index, wait
        self._pipe: object = None
        self._tx: object = None

    def __enter__(self) -> Any:
        index = self.index
        index.lock.acquire()
        for attempt in (1, 2):
            index.db.guard.acquire()
            try:
                if self._begin():
                    return index
            except BaseException:
                self._end(rollback=True)
                index.lock.release()
                raise
            self._end(rollback=True)
            if attempt == 1 and index.copies is not None:
                try:
                    index.copies.pull()  # (outside the transaction: it reads on the store's own connection)
                except OSError:
                    break
        index.lock.release()
        raise IndexBusy("a forget made on another machine is not in this machine's copy of the log yet")

    def _begin(self) -> bool:
        """Open the transaction and lock the watermark; False when the local copies lack a forget."""
        index = self.index
        conn = index.connection()
        timeout = "100ms" if not self.wait else f"{int(INDEX_BUSY_SECONDS * 1000)}ms"
        try:
            self._pipe = conn.pipeline()
            self._pipe.__enter__()  # type: ignore[attr-defined]
            self._tx = conn.transaction()
            self._tx.__enter__()  # type: ignore[attr-defined]
            conn.execute("SELECT set_config('synchronous_commit', 'off', true), set_config('lock_timeout', %s, true)",
                         (timeout,))
            row = conn.execute(MARK + " FOR UPDATE OF endless_index_mark").fetchone()
        except pg_errors.LockNotAvailable:
            raise IndexBusy("another machine is writing the search index") from None
        except psycopg.Error as exc:
            raise index.db.failed(exc, "writing the search index") from None
        index.held = row
        applied = index.copies.patches_applied() if index.copies is not None else None
        return applied is None or [int(n) for n in (row[6] or [])] == applied

    def _end(self, rollback: bool) -> None:
        """Close the transaction and the pipeline (the queued statements run now: an error of one is
        raised here, and rolls back)."""
        index = self.index
        index.held = None
        failure: BaseException | None = None
        try:
            for part in (self._tx, self._pipe):
                if part is None:
                    continue
                try:
                    part.__exit__(*((RuntimeError, RuntimeError("rolled back"), None) if rollback or failure  # type: ignore
                                    else (None, None, None)))
                except psycopg.Error as exc:
                    failure = failure or exc
        finally:
            self._tx = self._pipe = None
            index.db.guard.release()
        if failure is not None and not rollback:
            if isinstance(failure, pg_errors.LockNotAvailable):
                raise IndexBusy("another machine is writing the search index") from None
            raise index.db.failed(failure, "writing the search index") from None

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            self._end(rollback=kind is not None)
        finally:
            self.index.lock.release()
