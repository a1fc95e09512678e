"""Reading conversations from other tools into one neutral shape, for ``endless import``.

Three sources: a generic JSONL (``{role, content, at?, session?, title?}`` per
line), Claude Code session transcripts (JSONL, one event per line), and Hermes
Agent sessions in its SQLite ``state.db``.  Each reader yields :class:`Entry`
records in the source's order, as a stream, and raises :class:`FormatError`
naming the file and line (or table row) that cannot be read; the importer
reads every source to its end before it writes anything.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import orjson

from endless.core import moments
from endless.core import settings as limits
from endless.core.settings import IMPORT_SCAN_BLOCK, MOMENT_MAX, MOMENT_MIN
from endless.core.words import count

FORMATS = ("auto", "generic", "claude", "hermes", "codex")
GENERIC_ROLES = ("user", "assistant", "tool", "note")
_GENERIC_FIELDS = frozenset({"role", "content", "at", "session", "title", "name"})
# Claude Code writes a slash command the person typed as tags (checked on 2.1.332):
# ``<command-name>/plan</command-name><command-message>plan</command-message><command-args>X</command-args>``
# (a custom command's expanded prompt follows as a meta line), and a built-in command's output as
# ``<local-command-stdout>``: the command is kept as the person typed it, its output is the host's own.
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.S)
_HOST_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>")
HERMES_JSON_PREFIX = "\x00json:"  # how Hermes stores structured content in a TEXT column
SQLITE_MAGIC = b"SQLite format 3\x00"
CLAUDE_TYPES = {"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation",
                "progress", "attachment", "last-prompt", "atis-latch", "api-request", "cost-state"}


class FormatError(ValueError):
    """A line (or row) of an import source that cannot be read; the message names where."""


@dataclass(slots=True)
class Entry:
    """One thing said or done, as read from a source.

    ``role``: ``user``, ``assistant`` (the agent's words), ``call`` (a tool
    call: ``name`` and ``args`` JSON text), ``result`` (a tool's answer) or
    ``note`` (a memory from before the chat).
    """

    role: str
    text: str
    at: float | None
    session: str
    title: str
    where: str
    name: str | None = None
    args: str | None = None
    uid: str | None = None  # the source's own id of the event it came from (Claude Code's ``uuid``)


def parse_time(value: Any, where: str) -> float | None:
    """Unix seconds from a number or an ISO 8601 text (``Z`` allowed); None when absent.

    Only a real moment between 1970 and 2200 is accepted: a memory shows its
    times, and a number out of that range (microseconds taken for seconds, a
    negative time, 1e300) would be an unreadable date forever.
    """
    if value is None:
        return None
    kind = type(value)
    if (kind is int or kind is float) and 0.0 < value < 1e13:  # the usual case, inline: imports read millions
        number = value if value <= 1e11 else value / 1000.0
        if MOMENT_MIN < number < MOMENT_MAX:
            return float(number)
    if isinstance(value, bool):
        raise FormatError(f"{where}: 'at' must be a time, not {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
        if number > 1e11:
            number /= 1000.0  # milliseconds since the epoch
        return _checked(number, value, where)
    if isinstance(value, str):
        moment = moments.parse_iso(value)
        if moment is None:
            raise FormatError(f"{where}: {value!r} is not a time (use Unix seconds or ISO 8601, "
                              "e.g. 2026-05-01T09:30:00Z)")
        return _checked(moment, value, where)
    raise FormatError(f"{where}: 'at' must be Unix seconds or an ISO 8601 text, not {type(value).__name__}")


def _checked(seconds: float, value: Any, where: str) -> float:
    if seconds == 0.0:  # the epoch itself: what an exporter writes for a time it does not have
        raise FormatError(f"{where}: 'at' is {value!r}, the Unix epoch (1970-01-01 00:00 UTC), which stands "
                          "for no time; give the message's time, or leave 'at' out to take the previous line's")
    if not moments.is_moment(seconds):
        raise FormatError(f"{where}: {value!r} is not a moment between 1970 and 2200 (give Unix seconds or "
                          "milliseconds, or ISO 8601 such as 2026-05-01T09:30:00Z)")
    return seconds


@dataclass(frozen=True)
class Stretch:
    """The lines of a source from byte ``start`` (the start of line ``line``) to byte ``stop``
    (None: its end): one half of a long source, read on its own core."""

    start: int = 0
    line: int = 1
    stop: int | None = None


WHOLE = Stretch()


def _json_lines(path: Path, stretch: Stretch = WHOLE) -> Iterator[tuple[str, Any]]:
    """(``file:line``, decoded value) for each non-blank line; a bad line is a FormatError.

    Reading and decoding in one generator: a source of a million lines
    pays one generator step a line, not two.
    """
    name = str(path)
    loads, bad = orjson.loads, orjson.JSONDecodeError
    longest = limits.IMPORT_LINE_BYTES_MAX
    try:
        with open(path, "rb") as handle:
            lines: Iterator[bytes] = _bounded_lines(handle)
            if stretch.start:
                handle.seek(stretch.start)
            if stretch.stop is not None:
                lines = _until(lines, stretch.stop - stretch.start)
            for number, raw in enumerate(lines, start=stretch.line):
                if len(raw) > longest:
                    raise FormatError(_too_long(path, number))
                if raw.isspace():  # (a line read from a file is never empty)
                    continue
                try:
                    value = loads(raw)
                except bad as exc:
                    raise FormatError(f"{path}:{number}: not valid JSON ({exc})") from None
                yield f"{name}:{number}", value
    except OSError as exc:
        raise FormatError(f"{path}: cannot read it ({exc.strerror or exc})") from None


json_lines = _json_lines  # the same reader for the readers in modules of their own (codex)


def _bounded_lines(handle: Any) -> Iterator[bytes]:
    """The lines of ``handle``, none read past ``IMPORT_LINE_BYTES_MAX`` + 1 bytes (a longer one is cut
    there, and its caller names it: a source without newlines never fills the memory)."""
    return iter(lambda: handle.readline(limits.IMPORT_LINE_BYTES_MAX + 1), b"")


def _too_long(path: Path, number: int) -> str:
    return (f"{path}:{number}: a line longer than {limits.IMPORT_LINE_BYTES_MAX >> 20} MB; each message "
            "is one JSON line, so this is no conversation file (or holds a message far too long)")


def _until(lines: Iterator[bytes], length: int) -> Iterator[bytes]:
    """The lines that begin in the next ``length`` bytes."""
    for raw in lines:
        if length <= 0:
            return
        length -= len(raw)
        yield raw


def split_point(path: Path, lines_to_try: int = 10_000, share: float = 0.5) -> Stretch | None:
    """Where a generic source can be cut in two halves planned apart: the first line past ``share``
    of its bytes that opens a turn (a person's message or a note) and gives its time, as the
    second half's start.

    None when no such line comes soon after.  The lines looked at here are only
    looked at: a bad one is named by the reading itself, in order.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            cut = int(size * share)
            handle.seek(cut)
            longest = limits.IMPORT_LINE_BYTES_MAX
            rest = handle.readline(longest + 1)  # the rest of the line the cut falls in
            if len(rest) > longest:
                return None  # a line too long: the reading names it
            offset = cut + len(rest)
            for _ in range(lines_to_try):
                raw = handle.readline(longest + 1)
                if not raw or len(raw) > longest:
                    return None
                if _opens_a_turn(raw):
                    break
                offset += len(raw)
            else:
                return None
            handle.seek(0)
            newlines, left = 0, offset
            while left:
                block = handle.read(min(left, 1 << 22))
                if not block:
                    return None
                newlines += block.count(b"\n")
                left -= len(block)
    except OSError:
        return None
    return Stretch(offset, newlines + 1)


def _opens_a_turn(raw: bytes) -> bool:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(record, dict) or record.get("role") not in ("user", "note"):
        return False
    try:
        return parse_time(record.get("at"), "") is not None
    except FormatError:
        return False


def _scan(path: Path, marker: bytes) -> Iterator[dict]:
    """The objects of the lines that contain ``marker`` (others are not parsed; bad lines are left
    for the main pass to name)."""
    for raw in _marked_lines(path, marker):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def _marked_lines(path: Path, marker: bytes) -> Iterator[bytes]:
    """Each line holding ``marker``, once, in order: found by searching blocks of the file, not by
    walking its lines (a source of a million lines may have no title at all).

    Each block is searched where it lies: only a line that runs from one block into the next is
    joined (a source of 255 MB with no title: 0.68 s when each block was copied twice, 0.3 s now; the
    scan comes before planning can start).
    A marker holds no newline (it is found inside one line).
    """
    try:
        with open(path, "rb") as handle:
            rest: list[bytes] = []  # the line the blocks so far end inside
            held = lines = 0  # its bytes; the lines before it
            while True:
                block = handle.read(IMPORT_SCAN_BLOCK)
                if not block:
                    line = b"".join(rest)
                    if marker in line:
                        yield line
                    return
                first = block.find(b"\n")
                if first < 0:  # the line goes on past this block
                    rest.append(block)
                    held += len(block)
                    if held > limits.IMPORT_LINE_BYTES_MAX:  # /dev/zero: never a newline
                        raise FormatError(_too_long(path, lines + 1))
                    continue
                start = 0
                if rest:  # the line the last block ended inside ends here
                    line = b"".join(rest) + block[:first]
                    if marker in line:
                        yield line
                    start = first + 1
                last = block.rfind(b"\n")
                at = block.find(marker, start, last)
                while at >= 0:
                    begin = block.rfind(b"\n", start, at) + 1 or start
                    stop = block.find(b"\n", at, last + 1)
                    yield block[begin:stop]
                    at = block.find(marker, stop, last)
                rest, held = [block[last + 1:]], len(block) - last - 1
                lines += block.count(b"\n")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def detect(path: Path) -> str:
    """``hermes`` for an SQLite file, ``claude`` for a Claude Code transcript, ``codex`` for a Codex
    rollout (its first line a ``session_meta`` record), else ``generic``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
            if head == SQLITE_MAGIC:
                return "hermes"
            handle.seek(0)
            for raw in _bounded_lines(handle):
                if len(raw) > limits.IMPORT_LINE_BYTES_MAX:
                    return "generic"  # the generic reader names the line too long
                if raw.strip():
                    try:
                        first = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        return "generic"  # the generic reader names the bad line
                    if isinstance(first, dict) and first.get("type") == "session_meta" and "payload" in first:
                        return "codex"
                    if isinstance(first, dict) and "role" not in first and isinstance(first.get("type"), str) and (
                            first["type"] in CLAUDE_TYPES or isinstance(first.get("sessionId"), str)):
                        return "claude"  # (each release adds event types; every event names its session)
                    return "generic"
    except OSError as exc:
        raise FormatError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return "generic"


# -- generic JSONL ---------------------------------------------------------------------------


def _generic_titles(path: Path, default_session: str) -> dict[str, str]:
    """Each session's title: the last one any of its lines gives (a first pass over the titled lines)."""
    titles: dict[str, str] = {}
    for record in _scan(path, b'"title"'):
        title, session = record.get("title"), record.get("session", default_session)
        if isinstance(title, str) and title and isinstance(session, str):
            titles[session] = title
    return titles


def generic_titles(path: Path) -> dict[str, str]:
    """Each session's title in a generic source (what :func:`read_generic` reads first)."""
    return _generic_titles(path, f"import:{path.name}")


def read_generic(path: Path, stretch: Stretch = WHOLE, titles: dict[str, str] | None = None) -> Iterator[Entry]:
    """``{role, content, at?, session?, title?}`` per line; a line without ``at`` takes the previous time
    (``at: null`` or ``0``, a time said to be unknown, is a bad line: it would be given one silently).

    ``stretch``: only those lines (a half of a long source), with the ``titles``
    read from the whole source once.
    """
    default_session = f"import:{path.name}"
    if titles is None:
        titles = _generic_titles(path, default_session)
    last_at: float | None = None
    known = _GENERIC_FIELDS.issuperset
    for where, record in _json_lines(path, stretch):
        if type(record) is not dict:  # (what orjson makes of an object)
            raise FormatError(f"{where}: each line must be a JSON object with role and content")
        if not known(record):
            unknown = sorted(set(record) - _GENERIC_FIELDS)
            raise FormatError(f"{where}: unknown field(s) {', '.join(unknown)}; a line has role, content "
                              "and optionally at, session, title (and name for a tool)")
        get = record.get
        role = get("role")
        if role not in GENERIC_ROLES:
            raise FormatError(f"{where}: role must be one of {', '.join(GENERIC_ROLES)}, not {role!r}")
        content = get("content")
        if type(content) is not str:
            raise FormatError(f"{where}: content must be a text, not {type(content).__name__}")
        session = get("session", default_session)
        if type(session) is not str or not session:
            raise FormatError(f"{where}: session must be a non-empty text")
        title = get("title")
        if title is not None and type(title) is not str:
            raise FormatError(f"{where}: title must be a text")
        at = get("at")
        if at is None:
            if "at" in record:  # said to be unknown: not the previous line's time, silently
                raise FormatError(f"{where}: 'at' is null; give the message's time, or leave 'at' out to take "
                                  "the previous line's")
            at = last_at
        else:
            at = last_at = parse_time(at, where)
        name = get("name")
        yield Entry("result" if role == "tool" else role, content, at, session, titles.get(session) or session,
                    where, name=name if type(name) is str else None)


# -- Claude Code transcripts ------------------------------------------------------------------


def _block_text(content: Any) -> str:
    """The text of a tool result's content: a string, or text blocks (other blocks named in brackets)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return "" if content is None else str(content)


def claude_title(path: Path) -> str:
    """The title a transcript gives its session: its last ``summary`` line's (found without parsing the rest)."""
    summary = ""
    for record in _scan(path, b'"summary"'):
        if record.get("type") == "summary" and isinstance(record.get("summary"), str):
            summary = record["summary"]
    return summary


def read_claude(path: Path) -> Iterator[Entry]:
    """A Claude Code session transcript: user/assistant events with content blocks (see :func:`claude_entries`)."""
    summary = claude_title(path)
    for where, record in _json_lines(path):
        yield from claude_entries(record, where, summary, path.stem)


def claude_entries(record: Any, where: str, summary: str = "", fallback_session: str = "",
                   sidechain: bool = False) -> list[Entry]:
    """What one transcript event said or did, as entries (none for an event that is no conversation).

    Skipped: meta lines (``isMeta``), sidechains (a sub-agent's own transcript
    is read with ``sidechain`` set), the host's API error notices, thinking,
    and event types that carry no conversation (snapshots, attachments,
    system notes).  Live capture reads a transcript an event at a time from
    where it stopped, so this works on one event alone.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise FormatError(f"{where}: not a Claude Code transcript event (an object with a 'type')")
    kind = record["type"]
    if kind not in ("user", "assistant") or record.get("isMeta") or record.get("isApiErrorMessage"):
        return []
    if record.get("isCompactSummary") or record.get("isVisibleInTranscriptOnly"):
        return []  # the summary a compaction wrote: what it sums up is earlier in the file
    if bool(record.get("isSidechain")) != sidechain:
        return []
    message = record.get("message")
    if not isinstance(message, dict) or "content" not in message:
        raise FormatError(f"{where}: a {kind} event without a message and its content")
    session = record.get("sessionId") or fallback_session
    if not isinstance(session, str):
        raise FormatError(f"{where}: sessionId must be a text")
    title = summary or f"Claude Code {session[:8]}"
    if sidechain and isinstance(record.get("agentId"), str):
        session = f"{session}/agent-{record['agentId']}"
        title = f"{title}, sub-agent {record['agentId'][:8]}"
    uid = record.get("uuid") if isinstance(record.get("uuid"), str) else None
    at = parse_time(record.get("timestamp"), where)
    said = "user" if kind == "user" else "assistant"
    content = message["content"]
    if isinstance(content, str):
        text = _person_words(content) if said == "user" else content
        return [] if text is None else [Entry(said, text, at, session, title, where, uid=uid)]
    if not isinstance(content, list):
        raise FormatError(f"{where}: message content must be a text or a list of blocks")
    out = []
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise FormatError(f"{where}: a content block must be an object with a 'type'")
        btype = block["type"]
        if btype == "text":
            if not isinstance(block.get("text"), str):
                raise FormatError(f"{where}: a text block without its text")
            text = _person_words(block["text"]) if said == "user" else block["text"]
            if text is not None:
                out.append(Entry(said, text, at, session, title, where, uid=uid))
        elif btype == "tool_use":
            name = block.get("name")
            if not isinstance(name, str):
                raise FormatError(f"{where}: a tool_use block without its name")
            args = orjson.dumps(block.get("input", {})).decode()
            out.append(Entry("call", args, at, session, title, where, name=name, args=args, uid=uid))
        elif btype == "tool_result":
            text = _block_text(block.get("content"))
            if block.get("is_error"):
                text = f"(error) {text}"
            out.append(Entry("result", text, at, session, title, where, uid=uid))
        elif btype == "image":
            out.append(Entry(said, "[image]", at, session, title, where, uid=uid))
        # thinking and redacted_thinking are never logged (DESIGN §2.2)
    return out


def _person_words(text: str) -> str | None:
    """A user event's text as the person typed it: a slash command as ``/name args``; None for the output
    of a command Claude Code ran itself (not the person's words, not the model's)."""
    head = text.lstrip()
    if head.startswith(_HOST_OUTPUT):
        return None
    if "<command-name>" in head and head.startswith(("<command-name>", "<command-message>")):
        name = _COMMAND_NAME.search(head)
        if name is not None:
            args = _COMMAND_ARGS.search(head)
            return f"{name.group(1)} {args.group(1)}".strip() if args is not None else name.group(1)
    return text


# -- Hermes state.db --------------------------------------------------------------------------


def _hermes_content(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and value.startswith(HERMES_JSON_PREFIX):
        try:
            return _block_text(orjson.loads(value[len(HERMES_JSON_PREFIX):]))
        except orjson.JSONDecodeError:
            raise FormatError(f"{where}: structured content that is not valid JSON") from None
    return str(value)


@dataclass
class HermesSession:
    id: str
    title: str
    cwd: str | None
    source: str
    started_at: float


def hermes_sessions(path: Path) -> list[HermesSession]:
    with _connect(path) as db:
        rows = db.execute("SELECT rowid, id, title, cwd, source, started_at FROM sessions ORDER BY started_at, id")
        found = []
        for rowid, *r in rows:
            where = f"{path}: sessions row {rowid}"
            sid, title, cwd, source = (_row_text(v, where, c) for v, c in zip(r[:4], ("id", "title", "cwd", "source")))
            found.append(HermesSession(sid, title or "", cwd, source or "", float(_row_text(r[4], where, "started_at") or 0)))
        return found


def _row_text(value: Any, where: str, column: str) -> Any:
    """A column read as bytes (``text_factory``), as text: a row holding bytes that are not UTF-8 is a
    bad row, named, where sqlite3 would have failed the whole query without saying which."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: its {column} is not UTF-8 text (byte {exc.start} of it); Hermes stored it "
                          "damaged: leave its session out (choose others with --session) or repair the row") from None


class _connect:
    """A read-only connection to a Hermes ``state.db`` (it may be in use by Hermes: WAL, no lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
            self.db.text_factory = bytes  # decoded row by row (_row_text), so a damaged row is named
            tables = {_row_text(r[0], str(self.path), "table name")
                      for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as exc:
            raise FormatError(f"{self.path}: cannot read it as an SQLite database ({exc})") from None
        if not {"sessions", "messages"} <= tables:
            self.db.close()
            raise FormatError(f"{self.path}: not a Hermes state.db (no sessions and messages tables)")
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def read_hermes(path: Path, sessions: list[str] | None) -> Iterator[Entry]:
    """Messages of the chosen sessions, in insertion order; rewound (inactive, not compacted) rows skipped.

    Rows a compaction archived (``active = 0, compacted = 1``) are the original
    history, so they are imported; system rows are not conversation.
    """
    known = {s.id: s for s in hermes_sessions(path)}
    chosen = list(known) if sessions is None else sessions
    for sid in chosen:
        if sid not in known:
            raise FormatError(f"{path}: no session {sid!r} (it has {count(len(known), 'session')})")
    with _connect(path) as db:
        columns = {_row_text(r[1], str(path), "column name") for r in db.execute("PRAGMA table_info(messages)")}
        needed = {"id", "session_id", "role", "content", "tool_calls", "timestamp"}
        if not needed <= columns:
            raise FormatError(f"{path}: its messages table lacks {', '.join(sorted(needed - columns))}; "
                              "is it from Hermes Agent 0.19 or later?")
        keep = ("(active = 1 OR compacted = 1)" if {"active", "compacted"} <= columns else "1")
        name_col = "tool_name" if "tool_name" in columns else "NULL"
        for sid in chosen:
            session = known[sid]
            rows = db.execute(f"SELECT id, role, content, tool_calls, {name_col}, timestamp FROM messages "
                              f"WHERE session_id = ? AND {keep} ORDER BY id", (sid,))
            title = session.title or f"Hermes {sid}"
            for row_id, *row in rows:
                where = f"{path}: messages row {row_id}"
                role, content, tool_calls, tool_name, timestamp = (
                    _row_text(v, where, c) for v, c in zip(row, ("role", "content", "tool_calls", "tool_name",
                                                                  "timestamp")))
                at = parse_time(timestamp, where)
                text = _hermes_content(content, where)
                if role == "user":
                    yield Entry("user", text, at, sid, title, where)
                elif role == "assistant":
                    if text.strip():
                        yield Entry("assistant", text, at, sid, title, where)
                    for call in _hermes_calls(tool_calls, where):
                        yield Entry("call", call[1], at, sid, title, where, name=call[0], args=call[1])
                elif role == "tool":
                    yield Entry("result", text, at, sid, title, where, name=tool_name)


def _hermes_calls(raw: Any, where: str) -> list[tuple[str, str]]:
    if not raw:
        return []
    try:
        calls = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise FormatError(f"{where}: tool_calls is not valid JSON") from None
    if not isinstance(calls, list):
        raise FormatError(f"{where}: tool_calls must be a list")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise FormatError(f"{where}: a tool call without function.name")
        args = function.get("arguments", "{}")
        out.append((function["name"], args if isinstance(args, str) else orjson.dumps(args).decode()))
    return out


def read(path: Path, fmt: str, sessions: list[str] | None = None) -> tuple[str, Iterator[Entry]]:
    """The format one source is read as, and its entries as a stream (a bad line raises as it is reached)."""
    if not path.exists():
        raise FormatError(f"{path}: no such file")
    fmt = detect(path) if fmt == "auto" else fmt
    if fmt == "generic":
        return fmt, read_generic(path)
    if fmt == "claude":
        return fmt, read_claude(path)
    if fmt == "hermes":
        return fmt, read_hermes(path, sessions)
    if fmt == "codex":
        from endless.faces.importers.codex import read_codex  # (it reads lines with this module's reader)

        return fmt, read_codex(path)
    raise FormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
