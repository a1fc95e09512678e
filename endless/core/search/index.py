"""The full-text index of a memory: every message, and every written summary line (DESIGN §5).

It is derived data, like the turn index: an SQLite database (FTS5, Porter
stemming over Unicode-folded words) in the memory's ``index/`` folder, never
the source of truth.  Its watermark (how far into the order log and the tree
file it has read) moves in the same transaction as the rows it covers, so a
process killed mid-way leaves either the rows and their watermark or neither,
and two processes catching it up at once cannot add a message twice: SQLite's
write lock serialises them, and each reads the watermark again inside its own
transaction.  That is why any process may catch it up, a reader of the memory
too, without the memory's lock.  A watermark that disagrees with the files
(a log replaced, a file cut short) rebuilds the index from the start.

The FTS tables are contentless: the words' positions are kept, the texts are
not (the log has them), so the index stays smaller than the log.  Hits are
read back from the log for their snippets.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from endless.core.search.index_rows import (Filters, IndexBusy, Placed, Row, Stopped,  # noqa: F401 (re-exported)
                                            Watermark, line_key, line_part)
from endless.core.store import durable
from endless.core.store import KINDS, Message
from endless.core.settings import (INDEX_AUTOMERGE, INDEX_BUSY_SECONDS, INDEX_CACHE_KIB, INDEX_CRISISMERGE,
                                   INDEX_PENDING_BYTES, INDEX_PROGRESS_STEPS, SPAN_CHARS)

FORMAT = 1
TOKENIZER = "porter unicode61 remove_diacritics 2"
_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}

_DAMAGE_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (the primary code, extended codes share it)


def is_damage(exc: BaseException) -> bool:
    """Whether an SQLite error says the index file is damaged (not busy, locked, read-only or interrupted).

    Any part of a damaged file can be the one a statement meets first (``vtable
    constructor failed: words``, ``database disk image is malformed``), so it is
    told by SQLite's own result code, not by which statement raised it.
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGE_CODES
    text = str(exc)
    return "malformed" in text or "not a database" in text or "vtable constructor failed" in text


ZEROED = "zeroed"  # a state row: freed pages were zeroed since the index was created
CHATS_RENAMED = "chats-renamed"  # a state row: changed by each forget that renames chats (a forgotten title)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS state(name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(text, content='', tokenize='{TOKENIZER}');
CREATE VIRTUAL TABLE IF NOT EXISTS words_terms USING fts5vocab(words, 'row');
CREATE TABLE IF NOT EXISTS msg(id INTEGER PRIMARY KEY, at REAL, kind INTEGER, chat INTEGER);
CREATE TABLE IF NOT EXISTS chat(id INTEGER PRIMARY KEY, session TEXT, title TEXT, UNIQUE(session, title));
CREATE VIRTUAL TABLE IF NOT EXISTS line_words USING fts5(text, content='', tokenize='{TOKENIZER}');
CREATE TABLE IF NOT EXISTS line(key INTEGER PRIMARY KEY, first INTEGER, count INTEGER);
"""


class SearchIndex:
    """One connection to a memory's index; open lazily, close with the memory."""

    local = True  # (a file of the memory's folder: a helper process may keep it from the files)

    def __init__(self, folder: Path, clock: Callable[[], float] = time.monotonic,
                 cache_kib: int = INDEX_CACHE_KIB) -> None:
        self.path = folder / "index" / f"search.v{FORMAT}.sqlite"
        self.clock = clock
        self.cache_kib = cache_kib
        self._db: sqlite3.Connection | None = None
        self._chats: dict[tuple[str, str], int] = {}
        self._chats_renamed: object = None  # the CHATS_RENAMED state when _chats was last checked
        # One connection per open memory, used by its chat thread and its writer pool's: one at a time.
        self.lock = threading.RLock()

    # -- the connection --------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.exists()

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._connect()
            except sqlite3.DatabaseError as exc:
                # Not a database any more (damaged, or another program wrote it): derived data, so
                # it is set aside and built again from the log.
                durable.log("search", f"the search index {self.path} cannot be read ({exc}); rebuilding it")
                self.set_aside()
                self._db = self._connect()
        return self._db

    def _connect(self) -> sqlite3.Connection:
        durable.make_dir(self.path.parent)
        for path in (self.path, f"{self.path}-wal", f"{self.path}-shm"):  # SQLite would follow each
            durable.refuse_link(path)
        fresh = not self.path.exists()
        if fresh:
            # Created 0600 before SQLite opens it; its -wal and -shm files take the same mode.
            os.close(durable.open_fd(self.path, os.O_WRONLY | os.O_CREAT))
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                             timeout=INDEX_BUSY_SECONDS)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # Derived data: a transaction lost to a power cut is read again from the log.
            db.execute("PRAGMA synchronous=NORMAL")
            # Ranking reads each matching row's length from the index: a page cache this size
            # keeps a million messages' lengths in memory (measured: a ranked query 15-30% faster).
            db.execute(f"PRAGMA cache_size={-self.cache_kib}")
            db.executescript(_SCHEMA)
            db.execute("SELECT count(*) FROM state").fetchone()
            # Freed pages are zeroed, so a forgotten message's words never linger in free space
            # (endless.core.privacy.forget); ``zeroed`` says every page was freed so since the file began.
            db.execute("PRAGMA secure_delete=ON")
            if fresh:
                db.execute(f"INSERT OR IGNORE INTO state(name, value) VALUES ('{ZEROED}', 1)")
                for table in ("words", "line_words"):  # (kept in the index's own config)
                    db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', {INDEX_AUTOMERGE})")
                    db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', {INDEX_CRISISMERGE})")
                    try:  # (an FTS5 too old to know it keeps its own: only speed depends on it)
                        db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {INDEX_PENDING_BYTES})")
                    except sqlite3.OperationalError:
                        pass
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def set_aside(self) -> None:
        """Remove the index's files: derived data, built again from the log.

        Not kept as ``.damaged`` copies: they may hold words a later forget
        removes everywhere else, and on a full disk they are the space
        Endless needs back.
        """
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(self.path.with_name(self.path.name + suffix))
            except FileNotFoundError:
                pass

    def discard(self, why: BaseException | str) -> None:
        """A damaged index: closed and removed, so the next catch-up builds it again from the log.

        Whoever meets the damage calls this and goes on: a derived index
        never blocks a commit, a forget or a repair.
        """
        durable.log("search", f"the search index {self.path} is damaged ({why}); it is removed and built "
                              "again from the log at the next search")
        with self.lock:
            try:
                self.close()
            except sqlite3.Error:
                self._db, self._chats = None, {}
            try:
                self.set_aside()
            except OSError as exc:
                durable.log("search", f"the damaged search index {self.path} could not be removed "
                                      f"({exc.strerror or exc}); remove it by hand, or run `endless doctor --repair`")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
            self._chats = {}

    # -- the watermark ------------------------------------------------------------------

    def watermark(self) -> Watermark:
        values = dict(self.db().execute("SELECT name, value FROM state").fetchall())
        return Watermark(int(values.get("turns", 0)), int(values.get("log_end", 0)),
                         int(values.get("messages", 0)), int(values.get("tree_end", 0)),
                         str(values.get("first_tid", "")))

    def forget_chats(self) -> None:  # chat ids cached from rows that are gone (a transaction rolled back)
        self._chats = {}

    def set_mark(self, **values: object) -> None:
        self.db().executemany("INSERT OR REPLACE INTO state(name, value) VALUES (?, ?)", values.items())

    def clear(self) -> None:
        db = self.db()
        for table in ("words", "line_words"):
            db.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        for table in ("msg", "chat", "line", "state"):
            db.execute(f"DELETE FROM {table}")
        self._chats = {}

    # -- writing -------------------------------------------------------------------------

    def write(self, wait: bool = True) -> "_Write":
        """A write transaction (``BEGIN IMMEDIATE``); ``wait=False`` gives up at once if busy."""
        return _Write(self, wait)

    def prepare_turns(self, records: Iterable[tuple[int, int, dict]]) -> list[tuple[int, int, dict]]:
        """The turns as :meth:`add_turns` takes them, read ahead (a chat's row needs the file: no more here)."""
        return list(records)

    def add_turns(self, records: Iterable[tuple[int, int, dict]], mark: Watermark) -> None:
        """Index ``(turn, byte end, record)`` turns and move the log watermark (inside ``write``)."""
        rows: list[tuple[int, str]] = []
        infos: list[tuple[int, float | None, int, int]] = []
        codes = _KIND_CODE
        named, chat = None, 0
        self._check_chats()
        for _, _, record in records:
            names = (record.get("s", ""), record.get("t", ""))
            if names != named:  # a turn's chat is most often the one before it
                named, chat = names, self._chat(str(names[0]), str(names[1]))
            mid = record["id"]
            for message in record["m"]:
                try:
                    text, at = message["x"], message.get("at")
                    kind = codes.get(message["k"], -1)
                except (KeyError, TypeError, AttributeError):
                    text = None  # not a message record (a damaged line the log also skips)
                if type(text) is str:
                    rows.append((mid, text))
                    infos.append((mid, at if type(at) in (int, float) else None, kind, chat))
                mid += 1
        self._add_rows(rows, infos, mark)

    def add_messages(self, turns: Iterable[tuple[int, str, str, Sequence[Message]]], mark: Watermark) -> None:
        """``add_turns`` from messages in hand: ``(first id, session, title, messages)`` per turn."""
        rows: list[tuple[int, str]] = []
        infos: list[tuple[int, float | None, int, int]] = []
        codes = _KIND_CODE
        self._check_chats()
        for mid, session, title, messages in turns:
            chat = self._chat(session, title)
            for m in messages:
                rows.append((mid, m.text))
                infos.append((mid, m.at if type(m.at) in (int, float) else None, codes.get(m.kind, -1), chat))
                mid += 1
        self._add_rows(rows, infos, mark)

    def _add_rows(self, rows: list[tuple[int, str]], infos: list[tuple[int, float | None, int, int]],
                  mark: Watermark) -> None:
        db = self.db()
        db.executemany("INSERT INTO words(rowid, text) VALUES (?, ?)", rows)
        db.executemany("INSERT INTO msg(id, at, kind, chat) VALUES (?, ?, ?, ?)", infos)
        self.set_mark(turns=mark.turns, log_end=mark.log_end, messages=mark.messages,
                       first_tid=mark.first_tid)

    def add_lines(self, lines: Iterable[tuple[int, int, str]], tree_end: int | None) -> None:
        """Index written ``(level, index, text)`` lines; move the tree watermark if given."""
        db = self.db()
        fresh = []
        for level, index, text in lines:
            key = line_key(level, index)
            cursor = db.execute("INSERT OR IGNORE INTO line(key, first, count) VALUES (?, ?, ?)",
                                (key, index << level, 1 << level))
            if cursor.rowcount:
                fresh.append((key, text))
        db.executemany("INSERT INTO line_words(rowid, text) VALUES (?, ?)", fresh)
        if tree_end is not None:
            self.set_mark(tree_end=tree_end)

    def _check_chats(self) -> None:
        """Forget the chats known by name if a forget renamed some since (another process, maybe):
        a chat whose title was forgotten is gone from the table (:mod:`endless.core.privacy.derived`)."""
        row = self.db().execute("SELECT value FROM state WHERE name = ?", (CHATS_RENAMED,)).fetchone()
        if (row[0] if row else None) != self._chats_renamed:
            self._chats, self._chats_renamed = {}, row[0] if row else None

    def _chat(self, session: str, title: str) -> int:
        key = (session, title)
        found = self._chats.get(key)
        if found is None:
            db = self.db()
            db.execute("INSERT OR IGNORE INTO chat(session, title) VALUES (?, ?)", key)
            found = db.execute("SELECT id FROM chat WHERE session = ? AND title = ?", key).fetchone()[0]
            self._chats[key] = found
        return found

    # -- reading ----------------------------------------------------------------------------

    def chat_title(self, session: str) -> str:
        """The newest title the index knows for ``session``, or "" (none yet, or no usable index).

        Hermes names a chat only after its first exchange, so that turn is
        logged with an empty title; its hits show the title the chat got later.
        """
        try:
            with self.lock:
                found = self.db().execute("SELECT title FROM chat WHERE session = ? AND title <> '' "
                                          "ORDER BY id DESC LIMIT 1", (session,)).fetchone()
        except (sqlite3.Error, OSError):
            return ""
        return found[0] if found and isinstance(found[0], str) else ""

    def count(self) -> int:
        with self.lock:
            return self.watermark().messages

    def chats(self, filters: "Filters", titled: Callable[[str], bool] | None = None
              ) -> list[tuple[str, str, int, float]]:
        """``(session, title, first message id, its time)`` of each titled chat with a message the filters
        keep (kind aside: a title is no message's kind), for a search of the titles themselves.

        ``titled`` picks the titles wanted first, from the small chat table: the messages (a full
        look at them, 85 ms at 200,000) are read only for the chats it keeps, and not at all when
        it keeps none, which is most searches.
        """
        with self.lock:
            chats = self.db().execute("SELECT id, title FROM chat WHERE title != ''").fetchall()
        ids = [int(c) for c, title in chats if titled is None or titled(str(title))]
        if not ids:
            return []
        parts, params = ["chat.title != ''"], []
        if titled is not None and len(ids) <= 500:  # (more: every chat, kept by ``titled`` below)
            parts.append(f"chat.id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if filters.below is not None:
            parts.append("msg.id < ?")
            params.append(filters.below)
        if filters.chat is not None:
            parts.append("(chat.session = ? OR instr(lower(chat.title), lower(?)) > 0)")
            params.extend([filters.chat, filters.chat])
        span, values = filters.time_range("msg", "?")
        sql = ("SELECT chat.session, chat.title, min(msg.id), msg.at FROM chat JOIN msg ON msg.chat = chat.id "
               f"WHERE {' AND '.join(parts + span)} GROUP BY chat.id")
        with self.lock:
            rows = self.db().execute(sql, params + values).fetchall()
        return [(str(a), str(b), int(c), float(d)) for a, b, c, d in rows
                if titled is None or len(ids) <= 500 or titled(str(b))]

    def term_docs(self, words: list[str]) -> dict[str, int]:
        """How many messages hold each (unstemmed) word once stemmed; 0 for a word nowhere."""
        with self.lock:
            db, out = self.db(), {}
            for word, term in zip(words, self._stems(words)):
                found = db.execute("SELECT doc FROM words_terms WHERE term = ?", (term,)).fetchone()
                out[word] = int(found[0]) if found else 0
            return out

    def stems(self, words: list[str]) -> list[str]:
        """Each word as the index holds it (stemmed, folded: "using" is "us")."""
        with self.lock:
            return self._stems(words)

    def _stems(self, words: list[str]) -> list[str]:
        """Each word as the tokenizer indexes it (stemmed, folded), through a scratch table."""
        db = self.db()
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe USING fts5(text, tokenize='{TOKENIZER}')")
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe_terms USING fts5vocab(temp, probe, 'instance')")
        stems = []
        for word in words:
            db.execute("INSERT INTO temp.probe(rowid, text) VALUES (1, ?)", (word,))
            found = db.execute("SELECT term FROM temp.probe_terms ORDER BY offset LIMIT 1").fetchone()
            db.execute("DELETE FROM temp.probe")
            stems.append(found[0] if found else word)
        return stems

    def token_spans(self, text: str, terms: list[str]) -> list[tuple[int, int]]:
        """Where ``text`` holds the terms as the tokenizer sees them (so ``deploying`` marks for ``deploy``)."""
        if not terms:
            return []
        with self.lock:
            return self._token_spans(text, terms)

    def _token_spans(self, text: str, terms: list[str]) -> list[tuple[int, int]]:
        db = self.db()
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.shown USING fts5(text, tokenize='{TOKENIZER}')")
        # The markers are control characters; any already in the text become spaces (offsets keep).
        clean = text[:SPAN_CHARS].replace("\x02", " ").replace("\x03", " ")
        expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        db.execute("INSERT INTO temp.shown(rowid, text) VALUES (1, ?)", (clean,))
        try:
            row = db.execute("SELECT highlight(shown, 0, char(2), char(3)) FROM temp.shown WHERE shown MATCH ?",
                             (expression,)).fetchone()
        except sqlite3.OperationalError:
            row = None
        finally:
            db.execute("DELETE FROM temp.shown")
        if row is None:
            return []
        spans, shift, start = [], 0, 0
        for at, char in enumerate(row[0]):
            if char == "\x02":
                start = at - shift
                shift += 1
            elif char == "\x03":
                spans.append((start, at - shift))
                shift += 1
        return spans

    def ranked(self, table: str, match: str, filters: Filters, skip: int, limit: int,
               deadline: float) -> list[Row]:
        """Rows of ``table`` matching the FTS5 expression ``match``, best first."""
        where, params = self._where(table, filters)
        sql = (f"SELECT {table}.rowid, {table}.rank FROM {table}{self._join(table, filters)} "
               f"WHERE {table} MATCH ?{where} ORDER BY {table}.rank, {table}.rowid DESC LIMIT ? OFFSET ?")
        return self._rows(sql, [match, *params, limit, skip], deadline)

    def newest(self, table: str, match: str, filters: Filters, after: int | None, limit: int,
               deadline: float) -> list[Row]:
        """Rows matching ``match``, newest first, below key ``after`` if given (for phrase candidates)."""
        where, params = self._where(table, filters)
        if after is not None:
            where += f" AND {table}.rowid < ?"
            params.append(after)
        sql = (f"SELECT {table}.rowid, 0.0 FROM {table}{self._join(table, filters)} "
               f"WHERE {table} MATCH ?{where} ORDER BY {table}.rowid DESC LIMIT ?")
        return self._rows(sql, [match, *params, limit], deadline)

    def _join(self, table: str, filters: Filters) -> str:
        if table == "words" and (filters.kinds is not None or filters.chat is not None
                                 or filters.since is not None or filters.before is not None):
            return " JOIN msg ON msg.id = words.rowid"
        if table == "line_words" and (filters.since is not None or filters.before is not None):
            return " JOIN line ON line.key = line_words.rowid"
        return ""

    def _where(self, table: str, filters: Filters) -> tuple[str, list]:
        if table == "words":
            parts, params = self._message_conditions(filters, "words.rowid")
        else:
            parts, params = [], []
            span, values = filters.time_range("m", "?")
            if span:
                # A line is in a time range when a message it covers is.
                parts.append("EXISTS (SELECT 1 FROM msg m WHERE m.id >= line.first AND "
                             f"m.id < line.first + line.count AND {' AND '.join(span)})")
                params += values
            if filters.below is not None:
                parts.append("(line_words.rowid & 281474976710655) < ?")
                params.append(filters.below)
        return "".join(f" AND {p}" for p in parts), params

    def about(self, ids: Sequence[int], filters: Filters) -> dict[int, "Placed"]:
        """Where each of ``ids`` the index holds was said (its chat's session, its time) and whether the
        filters let it through: what a ranking needs to score a message by the ones around it."""
        parts, params = self._message_conditions(filters)
        sql = (f"SELECT msg.id, chat.session, msg.at, {' AND '.join(parts) or '1'} FROM msg LEFT JOIN chat ON "
               "chat.id = msg.chat WHERE msg.id IN (SELECT value FROM json_each(?))")
        with self.lock:
            rows = self.db().execute(sql, [*params, "[" + ",".join(str(int(i)) for i in ids) + "]"]).fetchall()
        return {int(mid): Placed(str(session or ""), at if type(at) in (int, float) else None, bool(ok))
                for mid, session, at, ok in rows}

    def _message_conditions(self, filters: Filters, mid: str = "msg.id") -> tuple[list[str], list]:
        """The filters as conditions on the ``msg`` table (and ``mid``, the message id), with their values."""
        parts, params = ([f"{mid} < ?"], [filters.below]) if filters.below is not None else ([], [])
        if filters.kinds is not None:
            codes = [_KIND_CODE[k] for k in filters.kinds if k in _KIND_CODE] or [-2]
            parts.append(f"msg.kind IN ({','.join('?' * len(codes))})")
            params.extend(codes)
        if filters.chat is not None:
            parts.append("msg.chat IN (SELECT id FROM chat WHERE session = ? OR instr(lower(title), lower(?)) > 0)")
            params.extend([filters.chat, filters.chat])
        span, values = filters.time_range("msg", "?")
        return parts + span, params + values
    def problem(self, judge: Callable[[Iterator[tuple[int, float, int]]], str | None]) -> str | None:
        """What is wrong with the file (None: nothing, or no file yet): SQLite's check of every page, then
        ``judge``'s of its message rows ``(id, at, kind)`` in id order."""
        if not self.path.exists():
            return None
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1.0)
        except sqlite3.Error as exc:
            return f"it cannot be opened ({exc})"
        try:
            verdict = db.execute("PRAGMA quick_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                return f"SQLite finds it damaged ({verdict[0] if verdict else 'no answer'})"
            return judge(iter(db.execute("SELECT id, at, kind FROM msg ORDER BY id")))
        except sqlite3.Error as exc:
            return f"SQLite cannot read it ({exc})"
        finally:
            db.close()

    def line_keys(self) -> set[int]:
        """The keys of every written summary line the index holds."""
        with self.lock:
            return {key for (key,) in self.db().execute("SELECT key FROM line")}

    def line_in_time(self, part: tuple[int, int], filters: Filters) -> bool:
        """Whether a message the line covers is inside the filters' time range (no range: True)."""
        if filters.since is None and filters.before is None:
            return True
        first, count = part[1] << part[0], 1 << part[0]
        span, values = filters.time_range("msg", "?")
        sql = f"SELECT 1 FROM msg WHERE id >= ? AND id < ? AND {' AND '.join(span)} LIMIT 1"
        with self.lock:
            return self.db().execute(sql, [first, first + count, *values]).fetchone() is not None

    def _rows(self, sql: str, params: list, deadline: float) -> list[Row]:
        with self.lock:
            return self._rows_locked(sql, params, deadline)

    def _rows_locked(self, sql: str, params: list, deadline: float) -> list[Row]:
        db = self.db()
        stopped = False

        def check() -> int:
            nonlocal stopped
            if self.clock() >= deadline:
                stopped = True
                return 1
            return 0

        db.set_progress_handler(check, INDEX_PROGRESS_STEPS)
        try:
            return [Row(int(key), float(score)) for key, score in db.execute(sql, params).fetchall()]
        except sqlite3.OperationalError:
            if stopped:
                raise Stopped from None
            raise
        finally:
            db.set_progress_handler(None, 0)


class _Write:
    """``with index.write():`` one IMMEDIATE transaction, committed on success, rolled back on error."""

    def __init__(self, index: SearchIndex, wait: bool) -> None:
        self.index, self.wait = index, wait

    def __enter__(self) -> SearchIndex:
        self.index.lock.acquire()
        try:
            return self._begin()
        except BaseException:
            self.index.lock.release()
            raise

    def _begin(self) -> SearchIndex:
        db = self.index.db()
        if not self.wait:
            db.execute("PRAGMA busy_timeout = 0")
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise IndexBusy(str(exc)) from None
            raise
        finally:
            if not self.wait:
                db.execute(f"PRAGMA busy_timeout = {int(INDEX_BUSY_SECONDS * 1000)}")
        return self.index

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            db = self.index.db()
            if kind is None:
                db.execute("COMMIT")
            else:
                db.execute("ROLLBACK")
                self.index.forget_chats()  # rows of this transaction are gone: the chat ids with them
        finally:
            self.index.lock.release()
