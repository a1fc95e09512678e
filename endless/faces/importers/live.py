"""Live capture: what a coding agent's transcript gained since the last look, into the folder's memory.

Claude Code and Codex keep their own transcripts and never let a plugin
replace their history, so their hooks call ``endless capture`` (DESIGN §6).
Each call reads a transcript from where the last one stopped (a *place* per
transcript: byte offset, line, inode), groups its events into turns the way
``endless import`` does, and commits the turns that are over.  The turn still
going stays unread: its first event's offset is the place kept, and it is read
again, whole, once it ends (the next prompt, the agent's stop, the session's end).

Nothing is logged twice: a turn's id comes from its first event's own id, so a
hook fired twice, a capture killed between its commit and its place, a resumed
session that copies old events, and a later ``endless import`` of the same file
all meet the same id, checked under the memory's lock.  Captures of one
transcript run one at a time (a file lock beside the place).  Redaction is the
importer's, like every other way in.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterator

import orjson

from endless.core.memory import Memory
from endless.core.settings import (CAPTURE_LOCK_SECONDS, CAPTURE_READ_MAX, IMPORT_LINE_BYTES_MAX, IMPORT_SCAN_BLOCK,
                                   Settings, load_settings)
from endless.core.store import Presence, durable, workspace_key
from endless.faces.importers import formats
from endless.faces.importers.formats import Entry, FormatError
from endless.faces.importers.importer import Plan, commit, group
from endless.faces.kit.agent_sessions import Place, Session, note_session, place_path, read_place, save_place

AGENTS = ("claude", "codex")
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
# How a session's note says its last turn did not end well: a session's end after it adds to it.
FAILED = ("usage limit", "rate limit", "error", "interrupted")
COMPACTED = "compacted its context"  # the note a PreCompact hook leaves
MARK_BYTES = 256  # the bytes before a transcript's place that tell it was appended to, not rewritten
LIMIT_WORDS = ("usage limit", "rate limit", "limit reached", "quota", "credit balance")


def log(message: str) -> None:
    durable.log("capture", message)


@dataclass(frozen=True)
class Captured:
    turns: int
    messages: int
    skipped: int
    place: Place


@dataclass
class _Reading:
    """What one pass over a transcript's new bytes found."""

    entries: list[Entry] = field(default_factory=list)
    starts: dict[int, int] = field(default_factory=dict)  # line -> its byte offset
    end: int = 0  # just past the last whole line
    end_line: int = 1
    limit_hit: str = ""  # the host's own notice that a usage limit stopped the agent
    ended: str | None = None  # Codex: how the last turn read ended ('' well, else why); None: no end read since
    skipped: int = 0  # lines that could not be read (left out, counted: doctor shows them)
    bad: dict[int, int] = field(default_factory=dict)  # such a line -> its byte offset
    title: str = ""  # a Codex session's title (its first request), kept with the place for the next read
    rewritten: bool = False  # the bytes before the place are not those read last time


def _mark(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _mark_at(handle: BinaryIO, offset: int) -> str:
    """A fingerprint of the bytes just before ``offset`` (kept with the place: the next read checks that the
    file still holds them there, else it was rewritten, not appended to)."""
    if offset <= 0:
        return ""
    start = max(0, offset - MARK_BYTES)
    return _mark(os.pread(handle.fileno(), offset - start, start))


def _read_new(transcript: Path, place: Place, agent: str, sidechain: bool) -> _Reading:
    """The whole lines past ``place`` and their entries (a torn last line is left for the next look).

    Read a line at a time (a transcript of 100 MB is not held twice), at most ``CAPTURE_READ_MAX`` bytes
    (the rest: the next capture); a line longer than the importer's limit is a bad line, skipped.
    """
    reading = _Reading(end=place.offset, end_line=place.line)
    with open(transcript, "rb") as handle:
        if place.mark and _mark_at(handle, place.offset) != place.mark:
            reading.rewritten = True
            return reading
        handle.seek(place.offset)
        offset, number = place.offset, place.line
        state = _codex_state(transcript, place) if agent == "codex" else None
        while offset - place.offset < CAPTURE_READ_MAX:
            raw = handle.readline(IMPORT_LINE_BYTES_MAX + 1)
            if not raw.endswith(b"\n"):
                if len(raw) <= IMPORT_LINE_BYTES_MAX:
                    break  # the end, or a line the host is still writing
                length = _rest_of_line(handle, len(raw))
                if length is None:
                    break  # an endless line still being written: looked at again next time
                reading.starts[number] = offset
                log(f"{transcript}:{number}: a line of {length:,} bytes, past {IMPORT_LINE_BYTES_MAX:,}; left out")
                reading.skipped += 1
                reading.bad[number] = offset
                offset, number = offset + length, number + 1
                continue
            reading.starts[number] = offset
            where = f"{transcript}:{number}"
            offset += len(raw)
            number += 1
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                log(f"{where}: not JSON; left out")
                reading.skipped += 1
                reading.bad[number - 1] = reading.starts[number - 1]
                continue
            try:
                if agent == "claude":
                    reading.limit_hit = _limit_notice(record) or reading.limit_hit
                    reading.entries += formats.claude_entries(record, where, "", transcript.stem, sidechain)
                else:
                    reading.entries += _codex_entries(record, where, state)
                    ended = _codex_turn_end(record)
                    reading.ended = ended if ended is not None else (None if _said_something(record) else
                                                                      reading.ended)
            except FormatError as exc:
                log(f"{exc}; left out")
                reading.skipped += 1
                reading.bad[number - 1] = reading.starts[number - 1]
    reading.end, reading.end_line = offset, number
    if state is not None:
        reading.title = state.title
    return reading


def _rest_of_line(handle: BinaryIO, read: int) -> int | None:
    """The whole length of a line whose first ``read`` bytes were read, its newline included (the handle
    left past it); None when the file ends before the line does."""
    length = read
    while True:
        block = handle.read(IMPORT_SCAN_BLOCK)
        if not block:
            return None
        at = block.find(b"\n")
        if at >= 0:
            handle.seek(at + 1 - len(block), os.SEEK_CUR)
            return length + at + 1
        length += len(block)


def _skipped_before(reading: _Reading, offset: int) -> int:
    return sum(1 for line, start in reading.bad.items() if start < offset)


def _limit_notice(record: object) -> str:
    """The text of a Claude Code API error notice about a usage limit, or ''."""
    if not isinstance(record, dict) or not record.get("isApiErrorMessage"):
        return ""
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else " ".join(
        b.get("text", "") for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str))
    return text.strip()[:200] if any(word in text.lower() for word in LIMIT_WORDS) else ""


def _codex_state(transcript: Path, place: Place) -> object:
    """What reading a rollout from ``place`` starts from: its session (the ``session_meta`` of its first
    line, read again when the read starts past it, else the id in the file name: every turn's id and chat
    depend on it) and the title found by an earlier read."""
    from endless.faces.importers import codex  # (loaded only for Codex)

    session = codex.session_of_name(transcript)
    if place.offset > 0:
        try:
            found = codex.rollout_meta(transcript).get("id")
        except FormatError:
            found = None
        session = found if isinstance(found, str) and found else session
    return codex.CodexState(session=session, title=place.title)


def _codex_turn_end(record: object) -> str | None:
    from endless.faces.importers import codex

    return codex.turn_end(record)


def _said_something(record: object) -> bool:
    """A rollout line of the conversation (after a turn's end, it starts the next turn)."""
    return isinstance(record, dict) and record.get("type") == "response_item"


def _codex_entries(record: object, where: str, state: object) -> list[Entry]:
    from endless.faces.importers import codex

    return codex.codex_entries(record, where, state)


def capture(transcript: Path, agent: str, workspace: Path, *, final: bool = False, turn_over: bool = False,
            sidechain: bool = False, settings: Settings | None = None, root: Path | None = None,
            event: str = "", session: str = "", stopped: str = "") -> Captured:
    """Commit the turns the transcript gained since the last capture; returns what landed.

    ``turn_over``: the host says the agent finished its turn (a stop hook), so the
    last turn is committed once it ends with the agent's words; ``final``: the
    session ended, every turn read is committed.
    """
    from filelock import FileLock

    settings = settings or load_settings()
    root = Path(root) if root is not None else settings.memory_root()
    transcript = Path(transcript).resolve()
    if not transcript.is_file():  # before any memory is opened (or made) for it
        log(f"{transcript}: no such transcript; nothing captured")
        return Captured(0, 0, 0, Place(str(transcript)))
    lock_path = place_path(root, transcript).with_suffix(".lock")
    durable.make_dir(lock_path.parent)
    with FileLock(str(lock_path), timeout=CAPTURE_LOCK_SECONDS):
        # Commits only: the views' merges are planned by whoever opens the memory next to write or chat.
        memory = Memory.open(workspace_key(None, workspace), settings=settings, root=root, create=True,
                             views="append")
        try:
            done = _capture_locked(memory, root, transcript, agent, workspace, final, turn_over, sidechain,
                                   event, session, stopped)
        finally:
            memory.close()
    if agent == "claude" and not sidechain and settings.capture_subagents:
        for helper in subagent_transcripts(transcript):  # each its own chat, captured like the session
            capture(helper, agent, workspace, final=final, turn_over=turn_over, sidechain=True, settings=settings,
                    root=root)
    if not sidechain and settings.capture_catch_up and (done.turns or final):
        _write_lines(workspace, settings, root, final)
    return done


def _write_lines(workspace: Path, settings: Settings, root: Path, final: bool) -> None:
    """The memory's summary lines, written after the capture released its transcript (a hook's capture runs
    in the background at a low priority, so the agent never waits for them); a failure is only logged."""
    from endless.faces.kit.catching_up import catch_up_if_behind

    try:
        with Memory.open(workspace_key(None, workspace), settings=settings, root=root, create=False,
                         views="append") as memory:
            done = catch_up_if_behind(memory, final)
    except Exception as exc:  # (the turns are in; the lines are written by the next capture or catch-up)
        log(f"{workspace}: writing the memory's lines failed: {exc!r}")
        return
    if done is not None and not done["elsewhere"]:
        log(f"{workspace}: wrote {done['written']} summary lines ({done['writer']} writer), {done['left']} left")


def subagent_transcripts(transcript: Path) -> list[Path]:
    """A Claude Code session's sub-agent transcripts (``<session>/subagents/agent-*.jsonl`` beside it)."""
    folder = transcript.with_suffix("") / "subagents"
    try:
        return sorted(folder.glob("agent-*.jsonl"))
    except OSError:
        return []


def _capture_locked(memory: Memory, root: Path, transcript: Path, agent: str, workspace: Path, final: bool,
                    turn_over: bool, sidechain: bool, event: str, session: str, stopped: str) -> Captured:
    place = read_place(root, transcript)
    try:
        st = os.stat(transcript)
    except FileNotFoundError:
        log(f"{transcript}: no such transcript; nothing captured")
        return Captured(0, 0, 0, place)
    if place.inode != st.st_ino or st.st_size < place.offset:  # a new file there: read it from its start
        place = Place(str(transcript), 0, 1, st.st_ino)
    reading = _read_new(transcript, place, agent, sidechain)
    if reading.rewritten:  # the same file, rewritten (shorter or longer): read again whole, ids keep it once
        log(f"{transcript}: rewritten since the last capture; read again from its start")
        place = Place(str(transcript), 0, 1, st.st_ino)
        reading = _read_new(transcript, place, agent, sidechain)
    settings = memory.settings
    current: dict[str, list[Entry]] = {}
    closed = list(group(reading.entries, settings, memory.granularity, st.st_mtime, current, keep_open=True))
    # A stop ends the turn once its reply is written (the host may write it after the hook runs), or at once
    # when the host's own notice says a usage limit stopped it: that turn gets no reply.
    # Codex writes where a turn ends (task_complete, whether it answered or failed): then it is over.
    answered = all(turns[-1].role == "assistant" for turns in current.values())
    if current and (final or reading.ended is not None or (turn_over and (reading.limit_hit or answered))):
        closed += list(group([], settings, memory.granularity, st.st_mtime, current))
    if current:  # the turn still going is read again from its first line next time
        first_line = min(_line_of(turns[0]) for turns in current.values())
        kept = Place(str(transcript), reading.starts[first_line], first_line, st.st_ino)
    else:
        kept = Place(str(transcript), reading.end, reading.end_line, st.st_ino)
    # Lines left out are counted once: those before the place kept were read for the last time.
    kept.skipped = place.skipped + (reading.skipped if not current else _skipped_before(reading, kept.offset))
    kept.agent, kept.memory, kept.title = agent, memory.memory_id, reading.title
    with open(transcript, "rb") as handle:
        kept.mark = _mark_at(handle, kept.offset)
    landed = skipped = messages = 0
    if closed:
        have = Presence(scanned=memory.turns)  # ids decide here: counting every turn held costs the whole log
        with tempfile.TemporaryFile(prefix=".capture-", dir=memory.folder) as spill:
            plan = Plan(spill, settings, have=have)
            for turn in closed:
                plan.add(turn)
            plan.flush()
            done = commit(memory, plan, False, None, have, plan_views=False)
        landed, messages, skipped = done.turns, done.messages, done.skipped + plan.skipped
    save_place(root, transcript, kept)
    sid = session or (closed[-1].session if closed else "") or transcript.stem
    if not sidechain:  # (a sub-agent's work is told with its session's)
        _note(root, memory, agent, sid, transcript, workspace, reading, landed, event, stopped, kept.line)
    if landed:
        log(f"{transcript.name}: {landed} turn(s), {messages} message(s) into memory {memory.memory_id}")
    return Captured(landed, messages, skipped, kept)


def _note(root: Path, memory: Memory, agent: str, session: str, transcript: Path, workspace: Path,
          reading: _Reading, landed: int, event: str, stopped: str, kept_line: int) -> None:
    times = [e.at for e in reading.entries if e.at is not None]
    files = list(_files_written(reading.entries))
    # (the turn still going is read again next time: its failures are counted then, once)
    failures = [f"{e.text[8:160].strip()}" for e in reading.entries
                if e.role == "result" and e.text.startswith("(error) ") and _line_of(e) < kept_line]

    def change(s: Session) -> None:
        if times:
            s.started = s.started if s.started is not None else min(times)
            s.last_at = max(times + ([s.last_at] if s.last_at else []))
        s.event = event or s.event
        if reading.ended == "":
            s.stopped = ""  # its last turn ended well (Codex said so): what stopped it before is past
        if reading.limit_hit:
            s.stopped = f"usage limit ({reading.limit_hit})"
        elif reading.ended:  # a Codex turn that failed: at its quota, a rate limit, an error
            s.stopped = reading.ended
        elif stopped:  # the session ended after its last turn failed (or was interrupted): both are told
            failed = s.stopped.split(", then ", 1)[0] if s.stopped.startswith(FAILED) else ""
            s.stopped = f"{failed}, then {stopped}" if failed and stopped.startswith("ended") else stopped
        elif event in ("UserPromptSubmit", "SessionStart"):
            s.stopped = ""  # going again
        elif event in ("Stop", "notify") and s.stopped == COMPACTED:
            s.stopped = ""  # a turn ended after the compaction: it went on
        for path in files:
            if path in s.files:
                s.files.remove(path)
            s.files.append(path)
        s.files = s.files[-50:]
        s.failures = (s.failures + failures)[-5:]
        s.turns += landed

    note_session(root, memory.memory_id, change, agent, session, str(transcript), str(workspace))


def _line_of(entry: Entry) -> int:
    return int(entry.where.rsplit(":", 1)[1])


def _files_written(entries: list[Entry]) -> Iterator[str]:
    """The files the agent's own edit tools wrote (a shell command's writes are not guessed at)."""
    for entry in entries:
        if entry.role != "call" or not entry.args:
            continue
        key = FILE_TOOLS.get(entry.name or "")
        if key is None and entry.name not in ("apply_patch",):
            continue
        try:
            args = orjson.loads(entry.args)
        except orjson.JSONDecodeError:
            continue
        if key is not None and isinstance(args, dict) and isinstance(args.get(key), str):
            yield args[key]
        elif entry.name == "apply_patch":
            patch = args.get("input") if isinstance(args, dict) else args if isinstance(args, str) else ""
            for line in str(patch or "").splitlines():
                for marker in ("*** Update File: ", "*** Add File: ", "*** Delete File: "):
                    if line.startswith(marker):
                        yield line[len(marker):].strip()


# -- the command ---------------------------------------------------------------------------------


def _capture_command(args) -> int:
    """``endless capture``: run by the agents' hooks (in the background), or by hand to catch up."""
    from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, EXIT_USAGE

    if args.agent not in AGENTS:
        print(f"[endless.capture] --agent must be one of {', '.join(AGENTS)}", file=__import__("sys").stderr)
        return EXIT_USAGE
    if args.nice > 0:
        try:
            os.nice(args.nice)
        except OSError:
            pass  # (not allowed here: the capture runs at the agent's priority)
    if args.event:  # run by a hook: its stderr is agents.log, where each line says when
        import logging
        import sys

        from endless.core import diagnostics

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(diagnostics.LOG_FILE_FORMAT))
        with diagnostics.diverted_to(handler):
            return _capture_run(args, EXIT_OK, EXIT_FAILED, EXIT_USAGE)
    return _capture_run(args, EXIT_OK, EXIT_FAILED, EXIT_USAGE)


def _capture_run(args, EXIT_OK: int, EXIT_FAILED: int, EXIT_USAGE: int) -> int:
    if not Path(args.transcript).is_file():
        print(f"[endless.capture] {args.transcript}: no such transcript file; give the path of a Claude Code "
              "transcript (~/.claude/projects/…/SESSION.jsonl) or a Codex rollout", file=__import__("sys").stderr)
        return EXIT_USAGE
    try:
        done = capture(Path(args.transcript), args.agent, Path(args.workspace or ".").resolve(),
                       final=args.final, turn_over=args.turn_over, sidechain=args.sidechain,
                       event=args.event or "", session=args.session or "", stopped=args.stopped or "")
    except Exception as exc:  # a capture that fails is said in the log; the agent is never stopped by it
        log(f"{args.transcript}: capture failed: {exc!r}")
        return EXIT_FAILED
    if args.json:
        import sys

        sys.stdout.write(orjson.dumps({"turns": done.turns, "messages": done.messages, "skipped": done.skipped,
                                       "offset": done.place.offset}).decode() + "\n")
    return EXIT_OK


def add_capture_parser(sub) -> None:
    import argparse

    parser = sub.add_parser("capture", help="capture what a Claude Code or Codex transcript gained (hooks run it)",
                            description=("Read a coding agent's transcript from where the last capture stopped and "
                                         "commit its finished turns into the memory of the workspace. Installed "
                                         "hooks run it (`endless claude install`, `endless codex install`); "
                                         "running it by hand is safe: nothing is logged twice."),
                            epilog="example:\n  endless capture --agent claude --transcript ~/.claude/projects/X/S.jsonl",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", required=True, choices=AGENTS, help="whose transcript it is")
    parser.add_argument("--transcript", required=True, metavar="FILE", help="the transcript (JSONL) to read")
    parser.add_argument("--workspace", metavar="DIR", help="the folder whose memory it goes into (default: here)")
    parser.add_argument("--session", metavar="ID", help="the agent's session id")
    parser.add_argument("--event", metavar="NAME", help="the hook that ran it")
    parser.add_argument("--stopped", metavar="HOW", help="how the session stopped, as its host said")
    parser.add_argument("--turn-over", action="store_true", help="the agent finished its turn")
    parser.add_argument("--final", action="store_true", help="the session ended: commit every turn read")
    parser.add_argument("--sidechain", action="store_true", help="a sub-agent's transcript (its own chat)")
    parser.add_argument("--json", action="store_true", help="print what landed as JSON")
    parser.add_argument("--nice", type=int, default=0, metavar="N",
                        help="run N steps below the current priority (hooks: yield the CPU to the agent)")
    parser.set_defaults(run=_capture_command)
