"""The tables of a PostgreSQL memory's full-text index, and its statements of more than one step.

:mod:`endless.core.search.pg_index` says how the index is kept; this module
holds what it sends: the tables, indexes and text search configuration made
in the memory's schema at its first open, the watermark's columns, and the
one statement a commit's rows are added with.
"""

from __future__ import annotations

from endless.core.search.pg_words import CONFIG

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
      SELECT u.id, u.at, u.kind, u.chat, to_tsvector('{CONFIG}', u.text)
      FROM m, unnest(%(id)b::bigint[], %(at)b::float8[], %(kind)b::int2[], %(chat)b::bigint[], %(text)b::text[])
           AS u(id, at, kind, chat, text) ON CONFLICT DO NOTHING)
UPDATE endless_index_mark SET turns = %(turns)s, log_end = %(log_end)s, messages = %(messages)s,
       tree_end = %(tree_end)s, first_tid = CASE WHEN m.first_tid = '' THEN %(tid)s ELSE m.first_tid END
FROM m RETURNING 1"""
MARK = ("SELECT turns, log_end, messages, tree_end, first_tid, chats_renamed, "
        "(SELECT array_agg(patches ORDER BY stream) FROM endless_streams) FROM endless_index_mark")
