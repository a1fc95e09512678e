"""The full-text index of a memory kept in PostgreSQL: a ``tsvector`` per message and per written line.

The file store's index (:mod:`endless.core.search.index`) is a local SQLite
FTS5 file; a memory in PostgreSQL keeps its index in the database, in the
memory's own schema, shared by every machine: a machine that opens a memory
of a million messages searches it at once instead of first indexing its copy
of the log.  It keeps the same contract (:class:`endless.core.search.word_index.WordIndex`),
so the finder's tiers, filters and checks against the log run unchanged:

* **Tables.**  ``endless_words`` (a message's id, time, kind, chat and
  ``tsvector``, GIN-indexed), ``endless_line_words`` (a written summary line's
  key, the messages it covers and its ``tsvector``), ``endless_chats`` (a
  chat's session and title; its id a hash of both, so a row needs no lookup to
  name its chat) and ``endless_index_mark`` (the watermark, one row).  No text
  is stored: hits are read back from the log, as from the contentless FTS5
  tables.  No statistics are gathered on the ``tsvector`` or the titles, so no
  word is copied into ``pg_statistic`` (the planner's guess for ``@@`` is its
  default, which picks the GIN index).
* **Words.**  A text is folded in Python first (diacritics removed, lower
  case, every run of characters that is not a letter or digit made one space:
  the FTS5 tokenizer's ``unicode61 remove_diacritics 2``), so PostgreSQL's
  parser sees plain words whatever its locale, and a path, a URL or
  ``snake_case`` splits into the words FTS5 would find.  They are stemmed by
  the Snowball English stemmer with no stop words (``endless_text``; the query
  language drops stop words itself, and a query of stop words alone still
  finds them).  Query words go through the same fold, so both sides agree.
* **Ranking.**  ``ts_rank_cd`` per query word (cover density, divided by one
  plus the log of the message's length), each weighted by the word's rarity
  (the inverse document frequency BM25 uses: ``ts_rank_cd`` alone has none,
  and would rank a message holding only the commonest word of a query beside
  one holding only its rarest).  The finder's match expressions (quoted
  strings joined by AND and OR, FTS5's syntax) are compiled to ``tsquery``
  values: a quoted string is a ``phraseto_tsquery``.  Ranking a row costs a
  visit to it, so the OR tier of a common word is ranked a stretch of the
  newest messages at a time (:meth:`PgSearchIndex.ranked`), found through a
  lexeme every message's ``tsvector`` carries for its stretch; words are
  counted among the newest stretches (:meth:`PgSearchIndex.term_docs`).
* **Writes.**  Each batch is one transaction that locks the watermark row
  (so two machines catching up never add a row twice, and a forget, which
  takes the same row, never interleaves), commits without waiting for the WAL
  (derived data: what a crash loses is read again from the log), and first
  checks that this machine's copy of the log holds every forget the database
  knows (else its bytes could still hold forgotten words: it is brought up to
  date and the batch is left for the next search).
* **Time.**  A search's deadline becomes each statement's ``statement_timeout``;
  a cancelled statement is :class:`endless.core.search.index.Stopped`.

Patterns and scripts written without spaces still scan this machine's copy of
the log (:mod:`endless.core.search.scan`): the query language's regular
expressions are Python's ``regex`` with a deadline inside each match, which no
index of the database reproduces; a trigram index (``pg_trgm``) would narrow
the candidates only by storing every text a second time.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, Sequence

import psycopg
from psycopg import errors as pg_errors

from endless.core.search.index import Filters, IndexBusy, Placed, Row, Stopped, Watermark
from endless.core.search.pg_tables import ADD_AFTER, DDL, MARK, MARK_NAMES, TABLES, Write
from endless.core.search.pg_words import (CONFIG, MESSAGE_TSV, STRETCH, WORD, Rows, chat_id, compile_match, fold,
                                          stretches)
from endless.core.settings import (INDEX_BUSY_SECONDS, SEARCH_POSTINGS_MAX, SPAN_CHARS, STORE_SEARCH_SAMPLE_STRETCHES,
                                   STORE_SEARCH_WINDOW_ROWS)
from endless.core.store import KINDS, Message, durable, pg_db

_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_LOW_BITS = (1 << 48) - 1

_STEM_CACHE = 50_000  # words whose stems a process keeps (for the snippets' marks)
# GIN keeps new rows in a "pending list" that every search reads through, unsorted, until it is merged
# into the index (measured: searches at 20,000 messages 3 times slower behind a full 4 MB list).  A
# connection merges once the list passes 64 kB (a commit's few rows pay little, and a search never
# reads a long list); a batch of at least BULK_ROWS (an import's catch-up) fills a list of 4 MB and
# merges it once, sorted, at its end (measured: 37,000 rows/s against 22,000).
BULK_ROWS = 1_000


class Copies(Protocol):
    """This machine's copies of the log and the tree (the PostgreSQL store is one)."""

    def patches_applied(self) -> list[int]:
        """How many of each stream's patches the copies hold, by stream name (``log``, ``tree``)."""

    def pull(self) -> None:
        """Bring the copies up to what the database holds."""


class PgSearchIndex:
    """One memory's full-text index in its PostgreSQL schema (the module says how it is kept)."""

    TABLES = TABLES  # what a forget rewrites (its VACUUM FULL): the rows' old versions hold the words
    local = False  # (in the database: the commits feed it, never a helper reading local files)

    def __init__(self, folder: Path, url: str, memory: str, copies: Copies | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.db = pg_db.Database(url, memory)
        self.memory = memory
        self.copies = copies
        self.clock = clock
        self.path = f"the search index of memory {memory} in {self.db.shown}"
        self.lock = threading.RLock()
        self._made = False
        self._docs: dict[str, int] = {}  # the last term_docs answer: each word's rarity in the ranking
        self._stems: dict[str, tuple[str, ...]] = {}
        self.held: tuple | None = None  # the watermark row a write locked (pg_tables.Write)
        _remove_local(folder)

    # -- the connection ---------------------------------------------------------------------

    def exists(self) -> bool:
        return True  # (its tables are made at first use)

    def connection(self) -> psycopg.Connection:
        """The index's connection, its tables made at the first use."""
        if not self._made:
            if not self.db.has_table("endless_index_mark"):
                self.db.ensure_schema(DDL, "endless_index_mark")
            self._made = True
        return self.db.conn

    def close(self) -> None:
        self.db.close()

    def forget_chats(self) -> None:
        """(Chats are named by a hash of their session and title: nothing is cached.)"""

    def discard(self, why: BaseException | str) -> None:
        """Rows the log contradicts: every row goes, and the next catch-up rebuilds them from the log."""
        durable.log("search", f"{self.path} disagrees with the log ({why}); it is built again from the log")
        try:
            with self.write():
                self.clear()
        except (IndexBusy, OSError) as exc:
            durable.log("search", f"{self.path} could not be cleared ({exc}); the next search tries again")

    def set_aside(self) -> None:
        with self.write():
            self.clear()

    # -- the watermark ------------------------------------------------------------------------

    def watermark(self) -> Watermark:
        """The watermark; inside :meth:`write`, the one its lock read (and what the write set since)."""
        row = self.held if self.held is not None else self._read(MARK)[0]
        return Watermark(int(row[0]), int(row[1]), int(row[2]), int(row[3]), str(row[4]))

    def set_mark(self, **values: object) -> None:
        names = [name for name in values if name in MARK_NAMES]
        if names:
            self._exec("UPDATE endless_index_mark SET " + ", ".join(f"{n} = %({n})s" for n in names),
                       {n: values[n] for n in names})
            if self.held is not None:
                row = list(self.held)
                for n in names:
                    row[MARK_NAMES.index(n)] = values[n]
                self.held = tuple(row)

    def clear(self) -> None:
        self._exec("TRUNCATE endless_words, endless_line_words, endless_chats")
        self._exec("UPDATE endless_index_mark SET turns = 0, log_end = 0, messages = 0, tree_end = 0, "
                   "first_tid = '', chats_renamed = chats_renamed + 1")
        if self.held is not None:
            self.held = (0, 0, 0, 0, "", *self.held[5:])

    # -- writing --------------------------------------------------------------------------------

    def write(self, wait: bool = True) -> "Write":
        """One transaction holding the watermark row; ``wait=False`` gives up at once if another holds it."""
        return Write(self, wait)

    def add_turns(self, records: "Iterable[tuple[int, int, dict]] | Rows", mark: Watermark) -> None:
        """Index ``(turn, byte end, record)`` turns (or their :meth:`prepare_turns`) and move the log
        watermark (inside ``write``)."""
        self._add_rows(records if isinstance(records, Rows) else self.prepare_turns(records), mark)

    def prepare_turns(self, records: Iterable[tuple[int, int, dict]]) -> Rows:
        """The rows of turns, built without the database: a catch-up builds the next batch's while the
        server indexes the one before (half of a long catch-up's time is each)."""
        rows = Rows()
        for _, _, record in records:
            session, title = str(record.get("s", "")), str(record.get("t", ""))
            chat = rows.chat(session, title)
            mid = record["id"]
            for message in record["m"]:
                try:
                    text, at = message["x"], message.get("at")
                    kind = _KIND_CODE.get(message["k"], -1)
                except (KeyError, TypeError, AttributeError):
                    text = None  # not a message record (a damaged line the log also skips)
                if type(text) is str:
                    rows.add(mid, at if type(at) in (int, float) else None, kind, chat, text)
                mid += 1
        return rows

    def add_messages(self, turns: Iterable[tuple[int, str, str, Sequence[Message]]], mark: Watermark) -> None:
        """``add_turns`` from messages in hand: ``(first id, session, title, messages)`` per turn."""
        self._add_rows(_message_rows(turns), mark)

    def _add_rows(self, rows: "Rows", mark: Watermark) -> None:
        if len(rows.ids) >= BULK_ROWS:
            self._exec("SELECT set_config('gin_pending_list_limit', '4MB', true)")
        if rows.ids:
            self._exec(
                "WITH c AS (INSERT INTO endless_chats (id, session, title) "
                "SELECT * FROM unnest(%(cid)b::bigint[], %(cs)b::text[], %(ct)b::text[]) ON CONFLICT DO NOTHING) "
                "INSERT INTO endless_words (id, at, kind, chat, tsv) "
                f"SELECT u.id, u.at, u.kind, u.chat, {MESSAGE_TSV} "
                "FROM unnest(%(id)b::bigint[], %(at)b::float8[], %(kind)b::int2[], %(chat)b::bigint[], "
                "%(text)b::text[]) AS u(id, at, kind, chat, text) ON CONFLICT DO NOTHING",
                {"cid": list(rows.chats), "cs": [c[0] for c in rows.chats.values()],
                 "ct": [c[1] for c in rows.chats.values()], "id": rows.ids, "at": rows.ats, "kind": rows.kinds,
                 "chat": rows.chat_ids, "text": rows.texts})
        if len(rows.ids) >= BULK_ROWS:
            self._exec("SELECT gin_clean_pending_list('endless_words_tsv')")
        self.set_mark(turns=mark.turns, log_end=mark.log_end, messages=mark.messages, first_tid=mark.first_tid)

    def add_after(self, before: tuple[int, int], turns: Iterable[tuple[int, str, str, Sequence[Message]]],
                  mark: Watermark) -> bool:
        """A commit's messages in hand, added only if the index had read the log and the tree exactly up to
        ``before`` (the ends before the commit) and this machine's copies hold every forget: the check, the
        rows and the watermark in one statement, one round trip (a commit pays it under the memory's lock).
        False when it did not apply (the next search catches up); :class:`IndexBusy` if another writer holds
        the index."""
        rows = _message_rows(turns)
        applied = self.copies.patches_applied() if self.copies is not None else None
        params = {"b0": before[0], "b1": before[1], "applied": applied, "cid": list(rows.chats),
                  "cs": [c[0] for c in rows.chats.values()], "ct": [c[1] for c in rows.chats.values()],
                  "id": rows.ids, "at": rows.ats, "kind": rows.kinds, "chat": rows.chat_ids, "text": rows.texts,
                  "turns": mark.turns, "log_end": mark.log_end, "messages": mark.messages,
                  "tree_end": mark.tree_end, "tid": mark.first_tid}
        with self.lock, self.db.guard:
            conn = self.connection()
            try:
                found = conn.execute(ADD_AFTER, params).fetchall()
            except pg_errors.LockNotAvailable:
                raise IndexBusy("another machine is writing the search index") from None
            except psycopg.Error as exc:
                raise self.db.failed(exc, "writing the search index") from None
        return bool(found)

    def add_lines(self, lines: Iterable[tuple[int, int, str]], tree_end: int | None) -> None:
        """Index written ``(level, index, text)`` lines; move the tree watermark if given."""
        keys, firsts, counts, texts = [], [], [], []
        for level, index, text in lines:
            keys.append((level << 48) | index)
            firsts.append(index << level)
            counts.append(1 << level)
            texts.append(fold(text))
        if keys:
            self._exec("INSERT INTO endless_line_words (key, first, count, tsv) "
                       f"SELECT u.key, u.first, u.count, to_tsvector('{CONFIG}', u.text) "
                       "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[]) AS u(key, first, count, text) "
                       "ON CONFLICT DO NOTHING", (keys, firsts, counts, texts))
        if tree_end is not None:
            self.set_mark(tree_end=tree_end)

    # -- a forget (inside the store's transaction: module endless.core.privacy.forget) --------------

    @staticmethod
    def forget_rows(conn: psycopg.Connection, ids: list[int], keys: list[int], titles: list[str]) -> None:
        """Delete the rows of forgotten messages and erased lines, and untitle the chats a forgotten title
        named, on ``conn`` inside its transaction (the store's: one transaction with the patches)."""
        conn.execute("SELECT 1 FROM endless_index_mark FOR UPDATE")  # (a catch-up in flight finishes first)
        if ids:
            conn.execute("DELETE FROM endless_words WHERE id = ANY(%s)", (ids,))
        if keys:
            conn.execute("DELETE FROM endless_line_words WHERE key = ANY(%s)", (keys,))
        for title in titles:
            for chat, session in conn.execute("SELECT id, session FROM endless_chats WHERE title = %s",
                                              (title,)).fetchall():
                kept = chat_id(session, "")
                conn.execute("INSERT INTO endless_chats (id, session, title) VALUES (%s, %s, '') "
                             "ON CONFLICT DO NOTHING", (kept, session))
                conn.execute("UPDATE endless_words SET chat = %s WHERE chat = %s", (kept, chat))
                conn.execute("DELETE FROM endless_chats WHERE id = %s", (chat,))
        if titles:
            conn.execute("UPDATE endless_index_mark SET chats_renamed = chats_renamed + 1")

    # -- reading -----------------------------------------------------------------------------------

    def count(self) -> int:
        with self.lock:
            return self.watermark().messages

    def chat_title(self, session: str) -> str:
        """The title of ``session``'s chat with the newest message, or "" (none yet, or no usable index)."""
        try:
            rows = self._read("SELECT c.title FROM endless_chats c WHERE c.session = %s AND c.title <> '' "
                              "ORDER BY (SELECT max(w.id) FROM endless_words w WHERE w.chat = c.id) DESC NULLS LAST "
                              "LIMIT 1", (session,))
        except (OSError, Stopped):
            return ""
        return str(rows[0][0]) if rows else ""

    def chats(self, filters: Filters, titled: Callable[[str], bool] | None = None
              ) -> list[tuple[str, str, int, float]]:
        """As :meth:`endless.core.search.index.SearchIndex.chats`: each titled chat with a message the
        filters keep, and that message (the chat's first)."""
        ids = [int(c) for c, title in self._read("SELECT id, title FROM endless_chats WHERE title <> ''")
               if titled is None or titled(str(title))]
        if not ids:
            return []
        parts, params = ["w.chat = c.id"], []
        if filters.below is not None:
            parts.append("w.id < %s")
            params.append(filters.below)
        span, values = filters.time_range("w", "%s")
        outer, more = ["c.id = ANY(%s)"], [ids]
        if filters.chat is not None:
            outer.append("(c.session = %s OR strpos(lower(c.title), lower(%s)) > 0)")
            more += [filters.chat, filters.chat]
        rows = self._read("SELECT c.session, c.title, f.id, f.at FROM endless_chats c CROSS JOIN LATERAL "
                          f"(SELECT w.id, w.at FROM endless_words w WHERE {' AND '.join(parts + span)} "
                          f"ORDER BY w.id LIMIT 1) f WHERE {' AND '.join(outer)}", params + values + more)
        return [(str(a), str(b), int(c), float(d) if d is not None else float("nan")) for a, b, c, d in rows]

    def term_docs(self, words: list[str]) -> dict[str, int]:
        """How many messages hold each word once stemmed: 0 for a word held nowhere (looked for in all of
        them), else the count among the newest ``STORE_SEARCH_SAMPLE_STRETCHES`` stretches, scaled to
        the whole (the rarity that orders the words and caps the OR tier: counting every row holding a
        common word costs a visit to each, 61 ms for four words at a million messages)."""
        if not words:
            return {}
        total = max(1, self.count())
        last = (total - 1) // STRETCH
        first = max(0, last - STORE_SEARCH_SAMPLE_STRETCHES + 1)
        span = total - first * STRETCH
        # (one statement: per word, a count in the newest stretches, and whether any message holds it)
        parts = [f"SELECT {k}, (SELECT count(*) FROM (SELECT 1 FROM endless_words WHERE tsv @@ "
                 f"(phraseto_tsquery('{CONFIG}', %s) && %s::tsquery) LIMIT {SEARCH_POSTINGS_MAX + 1}) s), "
                 f"EXISTS (SELECT 1 FROM endless_words WHERE tsv @@ phraseto_tsquery('{CONFIG}', %s))"
                 for k in range(len(words))]
        params = [x for w in words for x in (fold(w), stretches(first, last), fold(w))]
        found = {int(n): (int(c), bool(e)) for n, c, e in self._read(" UNION ALL ".join(parts), params)}
        docs = {}
        for k, word in enumerate(words):
            near, anywhere = found.get(k, (0, False))
            docs[word] = 0 if not anywhere else max(1, round(near * total / span))
        self._docs = {fold(w): n for w, n in docs.items()}
        return docs

    def token_spans(self, text: str, terms: list[str]) -> list[tuple[int, int]]:
        """Where ``text`` holds the terms as the index sees them (stems: ``deploying`` marks for ``deploy``)."""
        if not terms:
            return []
        tokens = [(m.start(), m.end(), fold(m.group())) for m in WORD.finditer(text[:SPAN_CHARS])]
        wanted = [self._stemmed(fold(term).split()) for term in terms]
        stems = self._stem_all([t for _, _, t in tokens])
        seq = [stems.get(t, ()) for _, _, t in tokens]
        spans: set[tuple[int, int]] = set()
        for term in wanted:
            if not term:
                continue
            for k in range(len(tokens) - len(term) + 1):
                if all(term[j] in seq[k + j] or (not seq[k + j] and term[j] == tokens[k + j][2])
                       for j in range(len(term))):
                    spans.add((tokens[k][0], tokens[k + len(term) - 1][1]))
        return sorted(spans)

    def stems(self, words: list[str]) -> list[str]:
        """Each word as the index stores it (its first lexeme; a word the parser keeps nothing of, itself)."""
        return self._stemmed([fold(w) for w in words])

    def about(self, ids: Sequence[int], filters: Filters) -> dict[int, Placed]:
        """Where each of ``ids`` the index holds was said (its chat's session, its time) and whether the
        filters let it through (the ranking of a question scores a message by the ones around it)."""
        if not ids:
            return {}
        _, _, conditions, params = self._scope("words", filters)
        rows = self._read(f"SELECT w.id, c.session, w.at, (TRUE{conditions}) FROM endless_words w "
                          "LEFT JOIN endless_chats c ON c.id = w.chat WHERE w.id = ANY(%s::bigint[])",
                          [*params, [int(i) for i in ids]])
        return {int(mid): Placed(str(session or ""), float(at) if at is not None else None, bool(kept))
                for mid, session, at, kept in rows}

    def _stemmed(self, words: list[str]) -> list[str]:
        stems = self._stem_all(words)
        return [(stems.get(w) or (w,))[0] for w in words]

    def _stem_all(self, words: list[str]) -> dict[str, tuple[str, ...]]:
        """Each word's lexemes as the index stores them (asked once per word, then kept)."""
        missing = sorted({w for w in words if w and w not in self._stems})
        if missing:
            if len(self._stems) + len(missing) > _STEM_CACHE:
                self._stems.clear()
            for word, lexemes in self._read(
                    f"SELECT u.w, tsvector_to_array(to_tsvector('{CONFIG}', u.w)) FROM unnest(%s::text[]) u(w)",
                    (missing,)):
                self._stems[str(word)] = tuple(lexemes or ())
        return {w: self._stems.get(w, ()) for w in words}

    def ranked(self, table: str, match: str, filters: Filters, skip: int, limit: int,
               deadline: float) -> list[Row]:
        """Rows matching the expression ``match``, best first (score: lower is better, as BM25's).

        Ranking a row costs a visit to it (GIN keeps no positions for ``ts_rank_cd``: about 12 µs a
        row at a million messages, 194 ms for a word 15,896 of them hold).  So messages holding any
        of some words (the finder's OR tier: no AND in ``match``) more than ``STORE_SEARCH_WINDOW_ROWS``
        hold, by the words' counts, are ranked a stretch of the newest messages at a time, each
        sized to hold about that many: newer stretches first (their scores lead), older ones while
        the page asks for more.  A common word costs a bounded look, and a longer page only adds
        older stretches (pages stay stable).  The rest (the all-words tier) is ranked whole."""
        query = compile_match(match)
        if query is None:
            return []
        alias, key, where, params = self._scope(table, filters)
        ranks, rank_params = [], []
        total = max(1, self.count())
        for atom in query.atoms:
            ranks.append(f"%s * ts_rank_cd({alias}.tsv, phraseto_tsquery('{CONFIG}', %s), 1)")
            rank_params += [self._idf(atom, total), atom]
        expected = sum(self._docs.get(atom, 0) for atom in query.atoms)
        below = total if filters.below is None else min(filters.below, total)
        if table != "words" or query.joined or expected <= STORE_SEARCH_WINDOW_ROWS or below <= STRETCH:
            sql = (f"SELECT {key}, -({' + '.join(ranks)}) AS score FROM {_TABLE[table]} {alias} "
                   f"WHERE {alias}.tsv @@ ({query.sql}){where} ORDER BY score, {key} DESC LIMIT %s OFFSET %s")
            return self._rows(sql, [*rank_params, *query.params, *params, limit, skip], deadline)
        sql = (f"SELECT {key}, %s - ({' + '.join(ranks)}) AS score FROM {_TABLE[table]} {alias} "
               f"WHERE {alias}.tsv @@ (({query.sql}) && %s::tsquery){where} ORDER BY score, {key} DESC LIMIT %s")
        width = max(1, int(STORE_SEARCH_WINDOW_ROWS * total / (expected * STRETCH)))  # stretches a look takes
        found: list[Row] = []
        last = (below - 1) // STRETCH
        while last >= 0 and len(found) < skip + limit:
            first = max(0, last - width + 1)
            lead = float(((below - 1) // STRETCH - last) // width) * 1e6  # (a newer look's rows score first)
            found += self._rows(sql, [lead, *rank_params, *query.params, stretches(first, last), *params,
                                      skip + limit - len(found)], deadline)
            last = first - 1
        return found[skip:skip + limit]

    def newest(self, table: str, match: str, filters: Filters, after: int | None, limit: int,
               deadline: float) -> list[Row]:
        """Rows matching ``match``, newest first, below key ``after`` if given (a phrase's candidates)."""
        query = compile_match(match)
        if query is None:
            return []
        alias, key, where, params = self._scope(table, filters)
        if after is not None:
            where += f" AND {key} < %s"
            params.append(after)
        sql = (f"SELECT {key}, 0.0 FROM {_TABLE[table]} {alias} WHERE {alias}.tsv @@ ({query.sql}){where} "
               f"ORDER BY {key} DESC LIMIT %s")
        return self._rows(sql, [*query.params, *params, limit], deadline)

    def _idf(self, atom: str, total: int) -> float:
        """A word's weight: BM25's inverse document frequency (a phrase: its rarest word's)."""
        docs = [self._docs[w] for w in atom.split() if w in self._docs]
        n = min(docs) if docs else 1
        return math.log(1.0 + (total - n + 0.5) / (n + 0.5))

    def _scope(self, table: str, filters: Filters) -> tuple[str, str, str, list]:
        """The alias, key column and filter conditions of one table."""
        parts: list[str] = []
        params: list = []
        if table == "words":
            if filters.below is not None:  # (``+ 0``: a filter on the rows the words find, never a scan of the
                parts.append("w.id + 0 < %s")  # key's index, which nearly always keeps every row)
                params.append(filters.below)
            if filters.kinds is not None:
                parts.append("w.kind = ANY(%s::int2[])")
                params.append([_KIND_CODE[k] for k in filters.kinds if k in _KIND_CODE] or [-2])
            if filters.chat is not None:
                parts.append("w.chat IN (SELECT id FROM endless_chats WHERE session = %s "
                             "OR strpos(lower(title), lower(%s)) > 0)")
                params += [filters.chat, filters.chat]
            span, values = filters.time_range("w", "%s")
            return "w", "w.id", "".join(f" AND {p}" for p in parts + span), params + values
        span, values = filters.time_range("m", "%s")
        if span:  # a line is in a time range when a message it covers is
            parts.append("EXISTS (SELECT 1 FROM endless_words m WHERE m.id >= l.first AND "
                         f"m.id < l.first + l.count AND {' AND '.join(span)})")
            params += values
        if filters.below is not None:
            parts.append(f"(l.key & {_LOW_BITS}) < %s")
            params.append(filters.below)
        return "l", "l.key", "".join(f" AND {p}" for p in parts), params

    def line_keys(self) -> set[int]:
        return {int(key) for (key,) in self._read("SELECT key FROM endless_line_words")}

    def line_in_time(self, part: tuple[int, int], filters: Filters) -> bool:
        if filters.since is None and filters.before is None:
            return True
        first, count = part[1] << part[0], 1 << part[0]
        span, values = filters.time_range("endless_words", "%s")
        return bool(self._read(f"SELECT 1 FROM endless_words WHERE id >= %s AND id < %s AND {' AND '.join(span)} "
                               "LIMIT 1", [first, first + count, *values]))

    def problem(self, judge: Callable[[Iterator[tuple[int, float, int]]], str | None]) -> str | None:
        """What is wrong with the index (``judge`` compares its rows, in id order, with the log)."""
        with self.lock, self.db.guard:
            conn = self.connection()
            try:
                with conn.transaction(), conn.cursor(name="endless_index_rows") as cursor:
                    cursor.itersize = 10_000
                    cursor.execute("SELECT id, at, kind FROM endless_words ORDER BY id")
                    return judge(iter(cursor))
            except psycopg.Error as exc:
                raise self.db.failed(exc, "reading the search index") from None

    # -- statements --------------------------------------------------------------------------------

    def _read(self, sql: str, params: Sequence | dict = ()) -> list[tuple]:
        with self.lock:
            self.connection()
            return self.db.rows(sql, params, doing="reading the search index")

    def _exec(self, sql: str, params: Sequence | dict = ()) -> None:
        """A statement inside :meth:`write`'s transaction."""
        try:
            self.db.conn.execute(sql, params)
        except psycopg.Error as exc:
            raise self.db.failed(exc, "writing the search index") from None

    def _rows(self, sql: str, params: list, deadline: float) -> list[Row]:
        """A ranked read, cancelled by the server at the search's deadline."""
        left = deadline - self.clock()
        if left <= 0:
            raise Stopped
        with self.lock, self.db.guard:
            conn = self.connection()
            try:
                with conn.transaction():
                    conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{max(1, int(left * 1000))}ms",))
                    found = conn.execute(sql, params).fetchall()
            except pg_errors.QueryCanceled:
                raise Stopped from None
            except psycopg.Error as exc:
                raise self.db.failed(exc, "searching") from None
        return [Row(int(key), float(score)) for key, score in found]


_TABLE = {"words": "endless_words", "line_words": "endless_line_words"}


def _message_rows(turns: Iterable[tuple[int, str, str, Sequence[Message]]]) -> Rows:
    """The rows of messages in hand, ``(first id, session, title, messages)`` per turn."""
    rows = Rows()
    for mid, session, title, messages in turns:
        chat = rows.chat(session, title)
        for m in messages:
            rows.add(mid, m.at if type(m.at) in (int, float) else None, _KIND_CODE.get(m.kind, -1), chat, m.text)
            mid += 1
    return rows


def _remove_local(folder: Path) -> None:
    """A local index left from when the memory was searched on this machine alone: its words would
    outlive a forget made in the database."""
    index = folder / "index"
    for path in index.glob("search.v*.sqlite*") if index.is_dir() else ():
        try:
            path.unlink()
        except OSError as exc:
            durable.log("search", f"an old local search index {path} could not be removed ({exc}); remove it")
