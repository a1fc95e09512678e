"""Hermes's own transcripts that Endless compacted, and putting them back whole at uninstall.

While Endless runs, Hermes's copy of a long chat is cut at a turn's start to
a note, an acknowledgement and the current message (``engine.py``): the model
never reads that copy (the middleware sends the memory's view), and a copy
that grew forever would slow every turn.  Hermes's in-place compaction
(``compression.in_place``, ``hermes_state.SessionDB.archive_and_compact``)
loses nothing: the rows it replaces stay in ``state.db`` as ``active = 0,
compacted = 1``, word for word with their tool calls and reasoning.

So ``endless hermes uninstall`` puts each such session back as Hermes had it
(:func:`restore`): the rows Endless's compactions archived are made live
again, its note and acknowledgement rows are hidden the way Hermes hides an
undone message (``active = 0, compacted = 0``), and the session's counts are
the live rows'.  ``hermes --resume`` then loads, and sends, the whole chat.
Rows Hermes's own summaries archived before Endless ever compacted the
session are left as Hermes left them.  This module reads ``state.db`` with
``sqlite3`` only, so it runs without Hermes installed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from endless.faces.kit.hermes_files import BUSY_TIMEOUT

# the note the engine leaves at the start of Hermes's compacted transcript (never a message of the person)
TRANSCRIPT_NOTE = ("(Earlier messages of this chat are kept word for word in Endless's memory. "
                   "Every request shows them through the memory's view instead of this transcript.)")
TRANSCRIPT_ACK = "Understood."
# how Hermes's own summary rows begin (agent/context_compressor.py SUMMARY_PREFIX, LEGACY_SUMMARY_PREFIX)
HERMES_SUMMARY_STARTS = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")


@dataclass(frozen=True)
class Restored:
    session: str
    messages: int  # live messages of the session now
    put_back: int  # rows made live again


def restore(home: Path) -> list[Restored]:
    """Put back every session of ``home/state.db`` that Endless compacted; one entry per session."""
    path = home / "state.db"
    if not path.is_file():
        return []
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    try:
        if not _has_columns(db):
            return []
        db.execute("BEGIN IMMEDIATE")
        try:
            sessions = [row[0] for row in db.execute(
                "SELECT DISTINCT session_id FROM messages WHERE role = 'user' AND content = ?", (TRANSCRIPT_NOTE,))]
            done = [_restore_session(db, session) for session in sessions]
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return done
    finally:
        db.close()


def _has_columns(db: sqlite3.Connection) -> bool:
    names = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    return {"id", "session_id", "role", "content", "active", "compacted"} <= names


def _restore_session(db: sqlite3.Connection, session: str) -> Restored:
    rows = db.execute("SELECT id, role, content, active, compacted FROM messages WHERE session_id = ? "
                      "ORDER BY id", (session,)).fetchall()
    ours: set[int] = set()  # the note and acknowledgement rows of each Endless compaction
    for index, (ident, role, content, _, _) in enumerate(rows):
        if role == "user" and content == TRANSCRIPT_NOTE:
            ours.add(ident)
            if index + 1 < len(rows) and rows[index + 1][1] == "assistant" and rows[index + 1][2] == TRANSCRIPT_ACK:
                ours.add(rows[index + 1][0])
    first_note = min(i for i, role, content, _, _ in rows if role == "user" and content == TRANSCRIPT_NOTE)
    last_note = max(ours)
    # the live transcript at Endless's first compaction began at Hermes's latest summary, if it had made one
    start = max((i for i, _, content, _, _ in rows
                 if i < first_note and isinstance(content, str) and content.startswith(HERMES_SUMMARY_STARTS)),
                default=rows[0][0])
    back = [i for i, _, _, active, compacted in rows
            if start <= i < last_note and i not in ours and not active and compacted]
    db.executemany("UPDATE messages SET active = 1, compacted = 0 WHERE id = ?", [(i,) for i in back])
    db.executemany("UPDATE messages SET active = 0, compacted = 0 WHERE id = ?", [(i,) for i in ours])
    live = db.execute("SELECT count(*) FROM messages WHERE session_id = ? AND active = 1", (session,)).fetchone()[0]
    columns = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
    if "message_count" in columns:
        db.execute("UPDATE sessions SET message_count = ? WHERE id = ?", (live, session))
    if "tool_call_count" in columns:
        calls = db.execute("SELECT coalesce(sum(json_array_length(tool_calls)), 0) FROM messages WHERE "
                           "session_id = ? AND active = 1 AND json_valid(tool_calls)", (session,)).fetchone()[0]
        db.execute("UPDATE sessions SET tool_call_count = ? WHERE id = ?", (calls, session))
    return Restored(session, live, len(back))
