"""Hermes's own copy of forgotten messages: their text replaced by the tombstone in its session store.

``endless forget … --hermes`` and ``/endless forget … confirm`` (the person asked for Hermes's copy too).
Hermes 0.19.0's ``SessionDB`` has no call that changes one stored message
(``replace_messages`` deletes and re-inserts a whole session, which would
renumber its rows and drop the rows in-place compaction archived), so this is
SQL on ``state.db`` matching its schema (``hermes_state.py:812-834``), in one
``BEGIN IMMEDIATE`` transaction as ``SessionDB._execute_write`` does
(``hermes_state.py:1270-1290``).  A row is matched by session id and exact
text (the log keeps each turn's session id) and keeps its place, role and
tool-call pairing: only ``content`` becomes the tombstone (and the text is cut
out of ``api_content``, the sidecar of what was sent).  A forget by match also
clears the ``sessions.title`` holding its words (Hermes titles a chat from its
first message), for the sessions the memory holds turns of.  Hermes's own triggers
(``messages_fts_update``, ``messages_fts_trigram_update``,
``hermes_state.py:944-951, 974-981``) re-index the row; the FTS tables are
then ``optimize``d (what ``SessionDB.optimize_fts`` runs,
``hermes_state.py:7526``) so old segments go, and with ``secure_delete`` on
the file is rewritten (``VACUUM``, as ``SessionDB.vacuum`` does) and its
write-ahead file checkpointed and truncated, so no freed page keeps the words.
The per-session JSON files Hermes may keep under ``<home>/sessions/``
(``{id}.json``, ``{id}.jsonl``, ``session_{id}.json``, ``request_dump_*``)
have every JSON-escaped occurrence replaced the same way.  Only ``sqlite3``:
it runs without Hermes installed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import yaml

from endless.core.store import durable
from endless.faces.kit.hermes_files import BUSY_TIMEOUT, PLUGIN_NAME, STATE_FILE

_log = logging.getLogger("endless.forget.hermes")
FTS_TABLES = ("messages_fts", "messages_fts_trigram")
FILE_GLOBS = ("*.json", "*.jsonl")


class HermesCopyError(RuntimeError):
    """Hermes's copy cannot be changed; the message says why and what to do."""


@dataclass(frozen=True)
class Changed:
    rows: int  # state.db rows whose text is (or would be) the tombstone
    files: int  # session files under <home>/sessions/ holding (or that held) the text
    titles: int = 0  # sessions whose title held the words of a forget by match (now untitled)


@dataclass(frozen=True)
class Titles:
    """A forget by match reaches Hermes's session titles: those of ``sessions`` holding ``words``."""

    sessions: frozenset[str]
    words: str


def installed(home: Path) -> bool:
    """Whether the Endless plugin is installed in the Hermes home ``home``."""
    if (home / STATE_FILE).is_file():
        return True
    try:
        config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    plugins = config.get("plugins") if isinstance(config, dict) else None
    enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    return enabled == PLUGIN_NAME or isinstance(enabled, list) and PLUGIN_NAME in enabled


def replace(home: Path, pairs: list[tuple[str | None, str, str]], dry_run: bool = False,
            titles: Titles | None = None) -> Changed:
    """Each (session id, text, tombstone): the text of that session's rows and of the session files;
    ``titles``: the session titles holding a forget's words are cleared (``NULL``, as an untitled
    session has: Hermes names a session only after its first exchange, so it stays untitled)."""
    pairs = [(s, t, stone) for s, t, stone in pairs if s and t]
    named = _titles(home / "state.db", titles, dry_run) if titles is not None else []
    rows = _database(home / "state.db", pairs, dry_run)
    files = _files(home / "sessions", pairs + [(s, t, "") for s, t in named], dry_run)
    _log.info("Hermes's copy in %s: %d row(s), %d title(s), %d file(s)%s", home, rows, len(named), files,
              " (dry run)" if dry_run else "")
    return Changed(rows, files, len(named))


def _titles(path: Path, titles: Titles, dry_run: bool) -> list[tuple[str, str]]:
    """(session id, title) of each session of ``titles`` whose title holds its words; cleared unless dry."""
    if not path.is_file() or not titles.sessions or not titles.words.strip():
        return []
    needle = titles.words.casefold()
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    try:
        names = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
        if not {"id", "title"} <= names:
            return []
        found = [(sid, title) for sid, title in db.execute("SELECT id, title FROM sessions WHERE title IS NOT NULL")
                 if sid in titles.sessions and isinstance(title, str) and needle in title.casefold()]
        if dry_run or not found:
            return found
        db.execute("PRAGMA secure_delete = ON")
        db.execute("BEGIN IMMEDIATE")
        try:
            for sid, title in found:
                db.execute("UPDATE sessions SET title = NULL WHERE id = ? AND title = ?", (sid, title))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        _purge(db)
        return found
    finally:
        db.close()


def _database(path: Path, pairs: list[tuple[str, str, str]], dry_run: bool) -> int:
    if not path.is_file() or not pairs:
        return 0
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    try:
        names = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
        if not {"session_id", "content"} <= names:
            return 0
        match = "SELECT count(*) FROM messages WHERE session_id = ? AND content = ?"
        if dry_run:
            return sum(db.execute(match, (s, t)).fetchone()[0] for s, t, _ in pairs)
        db.execute("PRAGMA secure_delete = ON")
        db.execute("BEGIN IMMEDIATE")
        try:
            changed = 0
            for session, text, stone in pairs:
                changed += db.execute("UPDATE messages SET content = ? WHERE session_id = ? AND content = ?",
                                      (stone, session, text)).rowcount
                if "api_content" in names:
                    db.execute("UPDATE messages SET api_content = replace(api_content, ?, ?) WHERE "
                               "session_id = ? AND instr(api_content, ?) > 0", (text, stone, session, text))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if changed:
            _purge(db)
        return changed
    finally:
        db.close()


def _purge(db: sqlite3.Connection) -> None:
    """Old FTS segments merged away, the file rewritten, its write-ahead file emptied."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in FTS_TABLES:
        if table in tables:
            db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    db.execute("VACUUM")  # pages Hermes freed before secure_delete was on may still hold the words
    busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    if busy:
        _log.warning("state.db's write-ahead file keeps old pages until Hermes's next checkpoint "
                     "(another Hermes was reading it)")


def _forms(text: str) -> list[str]:
    """How a JSON writer may have spelled ``text`` inside a string (Hermes writes with ensure_ascii)."""
    return list(dict.fromkeys([json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]]))


def _files(folder: Path, pairs: list[tuple[str, str, str]], dry_run: bool) -> int:
    if not folder.is_dir() or not pairs:
        return 0
    changed = 0
    for path in sorted(p for pattern in FILE_GLOBS for p in folder.glob(pattern)):
        try:
            data = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = data
        for _, text, stone in pairs:
            for form in _forms(text):
                new = new.replace(form, json.dumps(stone, ensure_ascii=False)[1:-1])
        if new != data:
            changed += 1
            if not dry_run:
                durable.replace_file(path, new.encode("utf-8"))
    return changed
