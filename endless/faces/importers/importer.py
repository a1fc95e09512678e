"""``endless import``: earlier conversations into a memory, once, resumably (DESIGN §2.2, §6).

The sources (generic JSONL, Claude Code transcripts, a Hermes ``state.db``) are
read and checked to their end first (:mod:`endless.faces.importers.formats`),
as streams, the new turns kept in a spill file: a bad line names its file and
line, and nothing is written.  The commits then plan the views once, at the
end, so an import's time grows with its length, not its square.  Entries are grouped into
turns the way a live chat logs them: a person's message starts a turn; the
agent's words, tool calls and results join it as the trace and the reply.

A turn's identity is its session, the kind and exact text of its first
message, and how many turns of that session began with the same words
before it.  Turns already in the memory (an earlier import, or turns the
Hermes plugin captured live under the same session id) are skipped, so
importing the same file twice adds nothing.  New turns are appended after
what the memory holds, oldest first, with their original times, in
batches that are each committed durably: an interrupted import is resumed by
running it again.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import shutil
import sys
import tempfile
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

import orjson

from endless.core.store import durable
from endless.core import moments
from endless.core.privacy import redact
from endless.core.store import InvalidKey, Presence, identity_key, messages_identity
from endless.faces.kit.oserrors import os_error_said
from endless.faces.kit.choose import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose,
                            key_of, workspace_of)
from endless.faces.importers.scope import Scope, scope_of
from endless.faces.importers.formats import FORMATS, Entry, FormatError, hermes_sessions, read
from endless.faces.kit.terminal import one_line, title
from endless.core.memory import Memory, MemoryUseError
from endless.core.store import record_tail, tail_tid, with_tid
from endless.core.store import COMPLETED, EncodedTurn, TurnRecord
from endless.core.store import KINDS, Message, TraceBuilder, prepare
from endless.core.store import utf8_size
from endless.core.settings import IMPORT_FOLLOWER_FROM, SPILL_READ_WINDOW, Settings, load_settings
from endless.core.words import agree, count
from endless.faces.kit.signals import Terminated, exit_code, raise_on_sigterm
from endless.faces.kit.writing_cost import WRITERS, CatchUp, catch_up_cost, choose_writer

BATCH_TURNS = 2000  # turns per durable commit (one fsync each)
CATCH_UP_LOG = "catch-up.log"  # in the memory's folder: what a detached catch-up says
BATCH_BYTES = 8 << 20
SPILL_QUEUE = 1000  # planned turns whose secrets are looked for at once
PROGRESS_FROM = 200  # turns: below this no progress bar is worth drawing
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
TAG_GUESS = 12  # bytes a line's tag adds, about (the catch-up's count of messages too long to be free)
SOURCES_APART = b"\0"  # between a spilled turn's escaped sources (JSON escapes every control character)


def log(message: str) -> None:
    durable.log("import", message)


@dataclass
class PlannedTurn:
    session: str
    title: str
    at: float
    messages: list[Message]
    where: str
    # Set when the turn is spilled (Plan.flush), from its messages as the memory keeps them:
    base: str = ""  # identity without the occurrence count
    occurrence: int = 0
    key: int = 0  # identity_key(base), set with the occurrence
    uid: str | None = None  # the source's own id of the turn's first event, where it has one

    @property
    def tid(self) -> str:
        return source_turn_id(self.uid) if self.uid else turn_id(self.base, self.occurrence)


def turn_id(base: str, occurrence: int) -> str:
    """An imported turn's id: its identity and occurrence, hashed (the same turn, the same id)."""
    return hashlib.sha256(f"{base}#{occurrence}".encode()).hexdigest()[:16]


def source_turn_id(uid: str) -> str:
    """The id of a turn whose first event the source names (a Claude Code ``uuid``): the same event
    read live, imported later or copied into a resumed session is one turn, logged once."""
    return hashlib.sha256(f"event:{uid}".encode()).hexdigest()[:16]


def present(memory: Memory) -> Presence:
    """How many turns of the memory begin with each identity (reads every turn record once)."""
    return Presence.of(memory)


# -- grouping entries into turns -----------------------------------------------------------


def group(entries: Iterable[Entry], settings: Settings, granularity: str,
          fallback_at: float, current: dict[str, list[Entry]] | None = None,
          keep_open: bool = False) -> Iterator[PlannedTurn]:
    """Turns in the order they close: a person's message opens one; a note is a turn of its own.

    ``current``: each session's open turn, to start from and to leave behind; with
    ``keep_open`` the turns still open at the end stay there (a source planned in halves).
    """
    current = {} if current is None else current

    def close(session: str) -> PlannedTurn | None:
        group_ = current.pop(session, None)
        return plan_turn(group_, settings, granularity, fallback_at) if group_ else None

    for entry in entries:
        if entry.role == "note":
            if (done := close(entry.session)) is not None:
                yield done
            current[entry.session] = [entry]
            if (done := close(entry.session)) is not None:
                yield done
            continue
        if entry.role == "user":
            open_ = current.get(entry.session)
            # Several text blocks of one event are one message; a new event is a new turn.
            if (open_ and open_[-1].where == entry.where
                    and all(e.role == "user" and e.where == entry.where for e in open_)):
                open_.append(entry)
                continue
            if (done := close(entry.session)) is not None:
                yield done
        current.setdefault(entry.session, []).append(entry)
    if keep_open:
        return
    for session in list(current):
        if (done := close(session)) is not None:
            yield done


def plan_turn(entries: list[Entry], settings: Settings, granularity: str,
              fallback_at: float) -> PlannedTurn | None:
    if len(entries) == 2 and entries[0].role == "user" and entries[1].role == "assistant":
        return _question_and_answer(entries[0], entries[1], settings, fallback_at)
    return _plan_any(entries, settings, granularity, fallback_at)


def _question_and_answer(question: Entry, answer: Entry, settings: Settings, fallback_at: float) -> PlannedTurn:
    """The usual turn, a question and its answer: what :func:`_plan_any` makes of it, made directly
    (an import of a million messages plans half a million of them)."""
    asked_at = fallback_at if question.at is None else question.at
    messages = prepare("user", question.text, asked_at, settings)
    if answer.text.strip():
        messages += prepare("reply", answer.text, fallback_at if answer.at is None else answer.at, settings)
    return PlannedTurn(question.session, question.title, asked_at, messages, question.where, uid=question.uid)


def _plan_any(entries: list[Entry], settings: Settings, granularity: str,
              fallback_at: float) -> PlannedTurn | None:
    first = entries[0]
    at = lambda e: fallback_at if e.at is None else e.at  # noqa: E731
    messages: list[Message] = []
    i = 0
    if first.role in ("user", "note"):
        texts = []
        while i < len(entries) and entries[i].role == first.role and entries[i].where == first.where:
            texts.append(entries[i].text)
            i += 1
        head_text = "\n\n".join(texts)
        messages += prepare(first.role, head_text, at(first), settings)
    rest = entries[i:]
    last_step = next((k for k in range(len(rest) - 1, -1, -1) if rest[k].role in ("call", "result")), -1)
    steps, replies = rest[:last_step + 1], rest[last_step + 1:]
    if steps:
        messages += _steps(steps, settings, granularity, first.title, at)
    reply = "\n\n".join(e.text for e in replies if e.text.strip())
    if reply:
        messages += prepare("reply", reply, at(replies[-1]), settings)
    if not messages:
        return None  # nothing but empty words: no turn
    return PlannedTurn(first.session, first.title, at(first), messages, first.where, uid=first.uid)


def _steps(steps: list[Entry], settings: Settings, granularity: str, title: str, at) -> list[Message]:
    """The agent's words between calls, its calls and their results: one trace, or one message each."""
    if granularity == "step":
        out: list[Message] = []
        for e in steps:
            kind = {"assistant": "said", "call": "call", "result": "result", "user": "said"}[e.role]
            text = f"{e.name} {e.args}" if e.role == "call" else e.text
            out += prepare(kind, text, at(e), settings)
        return out
    trace = TraceBuilder(settings)
    own_tool = False
    for e in steps:
        if e.role == "call":
            try:
                args = orjson.loads(e.args or "{}")
            except orjson.JSONDecodeError:
                args = None
            from endless.core.lookback import lookback_words  # the search modules, for sources with tool calls only

            words = lookback_words(e.name or "", args, title)
            own_tool = words is not None
            trace.add("did", f"{e.name} {e.args}", words)
        elif e.role == "result":
            trace.add("result", e.text, "" if own_tool else None)
            own_tool = False
        elif e.text.strip():
            trace.add("said", e.text)
    return prepare("trace", trace.text(), at(steps[-1]), settings, trace.writer_text())


# -- the plan, the estimate and the commit --------------------------------------------------


@dataclass
class Plan:
    """The new turns of an import, kept on disk until they are committed.

    A million messages held as Python objects take gigabytes; here each new
    turn is one encoded line in an unlinked spill file (next to the memory,
    so a full disk says so before anything is committed), and what stays in
    memory is its time, place and identity: 40 bytes a turn.  The turns come back in
    time order (ties in source order); for sources already in time order
    that is a sequential read.
    """

    spill: IO[bytes]
    settings: Settings
    # How many turns began with each identity so far in this plan, and in the memory (turns it holds
    # are skipped): counted as the turns are spilled, in the order they were taken.
    counted: Counter = field(default_factory=Counter)
    # Once planned (see planned_all), the identities more than one planned turn begins with: the commit
    # counts only these again (no later turn of the plan asks after any other).
    repeated: set[int] | None = None
    have: Presence = field(default_factory=Presence)
    skipped: int = 0
    messages: int = 0
    sources: list[tuple[str, str, int]] = field(default_factory=list)  # (path, format, entries)
    long_messages: int = 0  # messages too long to be their own line
    long_bytes: int = 0  # and their writer sources' bytes
    ats: array = field(default_factory=lambda: array("d"))
    offsets: array = field(default_factory=lambda: array("Q"))
    lengths: array = field(default_factory=lambda: array("Q"))
    keys: array = field(default_factory=lambda: array("Q"))  # each turn's identity key
    occurrences: array = field(default_factory=lambda: array("Q"))  # and how many turns began so before it
    redacted: dict[int, dict[str, int]] = field(default_factory=dict)  # turn -> secrets replaced in it
    sizes: array = field(default_factory=lambda: array("I"))  # each turn's messages
    # The turns holding messages too long to be their own line, in plan order; how many each holds, and
    # their bytes (arrays: a long import has a hundred thousand such turns; a join counts them again).
    long_turns: array = field(default_factory=lambda: array("Q"))
    long_counts: array = field(default_factory=lambda: array("I"))
    long_sizes: array = field(default_factory=lambda: array("Q"))
    bases: bytearray | None = None  # each turn's identity, 16 bytes, when kept (a half's plan: see halves)
    tids: dict[int, str] = field(default_factory=dict)  # turn -> its turn id, where not the one spilled
    by_event: bool = False  # some turns carry their source's event id (their ids are checked at commit)
    _spilled: int = 0  # the spill's bytes (asking the file costs a system call a turn)
    _waiting: list[PlannedTurn] = field(default_factory=list)  # added, not encoded yet (see add)
    _titles: dict[str, str] = field(default_factory=dict)  # each title as kept (see _kept_title)
    _committed: int | None = None  # the turns planned, once their places were let go (see let_go)

    @property
    def turns(self) -> int:
        return len(self.ats) if self._committed is None else self._committed

    def let_go(self) -> None:
        """The turns are committed: their times, places and identities are not asked again (44 bytes a
        turn, 14.5 MB after planning 1M records, held while the views are planned); the counts stay."""
        self._committed = self.turns
        self.ats, self.offsets, self.lengths = array("d"), array("Q"), array("Q")
        self.keys, self.occurrences, self.sizes = array("Q"), array("Q"), array("I")
        self.long_turns, self.long_counts, self.long_sizes = array("Q"), array("I"), array("Q")
        self.tids, self.redacted = {}, {}

    def add(self, turn: PlannedTurn) -> None:
        """Keep the turn encoded as the log will hold it (redacted), but for its place, unless the
        memory holds it already (then it is counted as skipped).

        Turns wait in a short queue: their secrets are looked for a queue at a time
        (:func:`redact.messages_each`), far cheaper than a turn at a time; a turn's
        identity is counted when it leaves the queue, in the order turns were added.
        """
        self._waiting.append(turn)
        if len(self._waiting) >= SPILL_QUEUE:
            self.flush()

    def flush(self) -> None:
        """Encode the queued turns into the spill (before it is read back)."""
        waiting, settings = self._waiting, self.settings
        if not waiting:
            return
        self._waiting = []
        self.spill.seek(self._spilled)  # where the next turn goes, whatever was read back meanwhile
        everything = [m for turn in waiting for m in turn.messages]
        if settings.redact_secrets:
            kept, each = redact.messages_each(everything)
        else:
            kept, each = everything, [None] * len(everything)
        budget = settings.line_budget
        dumps = orjson.dumps
        # What the commit needs of each message besides the log's bytes (see EncodedTurn): its
        # kind, its writer source's bytes, and that source escaped when it may be a free line.
        # Made for the whole queue at once: an import plans a million messages.
        sources = [m.text if m.writer_text is None else m.writer_text for m in kept]
        sizes = list(map(utf8_size, sources))
        escaped = [dumps(x)[1:-1] if size <= budget else b"" for x, size in zip(sources, sizes)]
        records = [m.to_record() for m in kept]
        codes = [KIND_CODES[m.kind] for m in kept]
        entries: list[bytes] = []
        spilled = self._spilled
        secrets = each.count(None) != len(each)  # (the usual queue holds none)
        longs_here = bool(sizes) and max(sizes) + TAG_GUESS > budget
        k = 0
        for turn in waiting:
            # The turn's identity from its messages as the memory keeps them (secrets redacted), as
            # the memory counts its turns: a turn imported before, or logged live, is recognised.
            turn.base = messages_identity(turn.session, records[k:k + len(turn.messages)])
            turn.key = identity_key(turn.base)
            k += len(turn.messages)
        occurring, new = self.count([turn.key for turn in waiting])
        k = 0
        for number, turn in enumerate(waiting):
            n = len(turn.messages)
            end = k + n
            turn.occurrence = occurring[number]
            self.by_event = self.by_event or turn.uid is not None
            if new is not None and not new[number]:
                self.skipped += 1
                k = end
                continue
            if secrets and each[k:end].count(None) != n:
                self.redacted[len(self.ats)] = dict(sum((c for c in each[k:end] if c is not None), Counter()))
            title = self._kept_title(turn.title)
            entry = b"\n".join((record_tail(turn.tid, turn.session, title, COMPLETED, turn.at, records[k:end]),
                                dumps([turn.session, title, codes[k:end], sizes[k:end]]),
                                SOURCES_APART.join(escaped[k:end])))
            self.offsets.append(spilled)
            self.lengths.append(len(entry))
            spilled += len(entry)
            self.ats.append(turn.at)
            self.keys.append(turn.key)
            self.occurrences.append(turn.occurrence)
            self.sizes.append(n)
            if self.bases is not None:
                self.bases += bytes.fromhex(turn.base)
            entries.append(entry)
            longs = [size + TAG_GUESS for size in sizes[k:end] if size + TAG_GUESS > budget] if longs_here else None
            if longs:
                self.long_turns.append(len(self.ats) - 1)
                self.long_counts.append(len(longs))
                self.long_sizes.append(sum(longs))
                self.long_messages += len(longs)
                self.long_bytes += sum(longs)
            self.messages += n
            k = end
        self.spill.write(b"".join(entries))
        self._spilled = self.spill.tell()

    def planned_all(self) -> None:
        """Every turn is planned: keep the identities said more than once, and let the count go (a
        counter of half a million identities is 18 MB after a long import)."""
        self.flush()
        self.repeated = {key for key, times in self.counted.items() if times > 1}
        self.counted = Counter()

    def _kept_title(self, title: str) -> str:
        """A chat's title as the log keeps it (redacted), looked at once per title: a chat's turns share it."""
        if not self.settings.redact_secrets or not title:
            return title
        kept = self._titles.get(title)
        if kept is None:
            kept = self._titles[title] = redact.redact(title).text
        return kept

    def count(self, keys: Sequence[int]) -> tuple[list[int], list[bool] | None]:
        """Count turns' identities in the order they are planned: each one's occurrence of its
        identity so far, and whether it is new to the memory (None: every one is)."""
        counted, held = self.counted, self.have.counts
        occurring = []
        for key in keys:  # (``get``: a Counter's missing key costs a Python call, and most keys are new)
            occurrence = counted.get(key, 0)
            counted[key] = occurrence + 1
            occurring.append(occurrence)
        if not held or not any(held.get(key, 0) > occurrence for key, occurrence in zip(keys, occurring)):
            return occurring, None
        return occurring, [held.get(key, 0) <= occurrence for key, occurrence in zip(keys, occurring)]

    def in_order(self) -> Iterator[TurnRecord]:
        """The new turns, oldest first (as they will be logged)."""
        for turn, _, _ in self.planned():
            raw = orjson.loads(b"{" + turn.tail)
            yield TurnRecord(raw["s"], raw["t"], [Message.from_record(m) for m in raw["m"]], tid=raw["tid"],
                             at=raw["at"])

    def planned(self) -> Iterator[tuple[EncodedTurn, int, int]]:
        """The new turns, oldest first, each with its identity key and occurrence (for the commit's check)."""
        self.flush()
        self.spill.flush()
        ats, offsets, lengths, keys, occurrences = self.ats, self.offsets, self.lengths, self.keys, self.occurrences
        redacted, tids = self.redacted, self.tids
        fd = self.spill.fileno()
        in_order = all(ats[k] <= ats[k + 1] for k in range(len(ats) - 1))  # the usual source: read straight through
        loads = orjson.loads
        # In time order the spill is read a window at a time and cut into entries (a read call a turn
        # cost a tenth of a long commit): a window is read where a run of neighbouring entries starts.
        # An entry apart from its neighbours (out of time order, or a turn a long source planned in
        # halves closed at the join) is read alone, and the window stays for the run it interrupts.
        window, window_at = b"", 0
        last = len(ats) - 1
        for k in range(len(ats)) if in_order else sorted(range(len(ats)), key=ats.__getitem__):
            offset, length = offsets[k], lengths[k]
            start = offset - window_at
            if 0 <= start and start + length <= len(window):
                entry = window[start:start + length]
            elif in_order and k < last and offsets[k + 1] == offset + length:
                window, window_at = os.pread(fd, max(SPILL_READ_WINDOW, length), offset), offset
                entry = window[:length]
            else:
                entry = os.pread(fd, length, offset)
            tail, meta, joined = entry.split(b"\n", 2)
            if tids and k in tids:
                tail = with_tid(tail, tids[k])
            session, title, kinds, sizes = loads(meta)
            yield (EncodedTurn(tail, session, title, ats[k], kinds, sizes, joined.split(SOURCES_APART),
                               redacted.get(k)), keys[k], occurrences[k])

    def append_spill(self, other: IO[bytes]) -> int:
        """Copy another plan's spill after this one's (flushed); returns where it starts here."""
        self.spill.seek(self._spilled)
        other.seek(0)
        shutil.copyfileobj(other, self.spill, 1 << 20)
        start, self._spilled = self._spilled, self.spill.tell()
        return start

    def close(self) -> None:
        self.spill.close()


Source = tuple[Path, str, Iterator[Entry]]  # (path, format read as, its entries as a stream)


def open_sources(paths: list[Path], fmt: str, sessions: list[str] | None, project: Scope | None,
                 all_sessions: bool, left_out: list[Path] | None = None) -> list[Source]:
    """Each source with the format it is read as; its entries are read (and checked) by :func:`make_plan`.

    Codex rollouts are scoped like Hermes sessions: only those run in the
    memory's workspace (or named with ``--session``) are read, unless
    ``all_sessions``; the others are added to ``left_out``.
    """
    from endless.faces.importers.formats import detect

    out = []
    rollouts: list[tuple[Path, str | None]] = []  # every Codex rollout met, with its folder
    for path in _expand(paths):
        kind = detect(path) if fmt == "auto" and path.exists() else fmt
        chosen = sessions
        if kind == "hermes" and chosen is None and not all_sessions:
            chosen = _hermes_workspace_sessions(path, project)
        if kind == "codex" and not all_sessions:
            cwd = _rollout_in_scope(path, project, sessions)
            rollouts.append((path, cwd))
            if cwd is not None:
                if left_out is not None:
                    left_out.append(path)
                continue
        used, entries = read(path, kind, chosen)
        out.append((path, used, entries))
    if rollouts and not out:  # (with other sources, the left-out rollouts are only said)
        raise FormatError(_no_rollout_here(rollouts, project, sessions))
    return out


def _rollout_in_scope(path: Path, project: Scope | None, sessions: list[str] | None) -> str | None:
    """None when the rollout is to be read: its session is one of ``sessions`` or (none given) it ran
    in ``project``; else the folder it ran in (``"?"`` when it names none), to say why it is left out."""
    from endless.faces.importers.codex import rollout_meta, session_of_name

    meta = rollout_meta(path)
    cwd = meta.get("cwd") if isinstance(meta.get("cwd"), str) and meta.get("cwd") else None
    if sessions is not None:
        return None if (meta.get("id") or session_of_name(path)) in sessions else (cwd or "?")
    if project is None:
        return None
    if cwd is not None and project.holds(cwd):
        return None
    return cwd or "?"


def same_folder(one: str, other: str) -> bool:
    """Whether two paths name one folder (real paths compared: links and ``..`` resolved)."""
    return str(Path(one).resolve()) == str(Path(other).resolve())


def _no_rollout_here(rollouts: list[tuple[Path, str | None]], project: Scope | None,
                     sessions: list[str] | None) -> str:
    folders = Counter(cwd for _, cwd in rollouts)
    shown = ", ".join(f"{folder} ({n})" if folder != "?" else f"no folder named ({n})"
                      for folder, n in folders.most_common(3))
    more = f" and {count(len(folders) - 3, 'other folder')}" if len(folders) > 3 else ""
    found = f"{count(len(rollouts), 'Codex rollout')} found, run in {shown}{more}"
    if sessions is not None:
        return (f"none of the {found} is session {', '.join(sessions)}; `--session ID` takes a rollout's "
                "session id (its file name ends with it), or take them all with --all-sessions")
    wanted = project.shown if project else "?"
    return (f"{found}; none ran in {wanted}; import the memory of that folder with --workspace DIR, "
            "pick rollouts with --session ID, or take them all with --all-sessions")


def make_plan(sources: list[Source], settings: Settings, granularity: str, have: Presence,
              spill_dir: Path | None) -> Plan:
    """Read every source to its end and keep the turns the memory does not hold yet.

    Nothing is written to the memory here: a bad line anywhere raises
    :class:`FormatError` before the first commit.
    """
    from endless.faces.importers import halves

    plan = Plan(tempfile.TemporaryFile(prefix=".import-", dir=spill_dir), settings, have=have)
    try:
        for path, used, entries in sources:
            if used == "generic" and halves.worth_it(path):  # (a module of its own, loaded only for these)
                read = halves.plan_in_halves(path, plan, granularity, spill_dir)
                plan.sources.append((str(path), used, read))
                continue
            counted = Counted(entries)
            for turn in group(counted, settings, granularity, path.stat().st_mtime):
                plan.add(turn)
            plan.sources.append((str(path), used, counted.count))
        plan.planned_all()
    except BaseException:
        plan.close()
        raise
    return plan


class Counted:
    """An entry stream that counts what passed through it."""

    def __init__(self, entries: Iterator[Entry]) -> None:
        self.entries, self.count = entries, 0

    def __iter__(self) -> Iterator[Entry]:
        for entry in self.entries:
            self.count += 1
            yield entry


def _expand(paths: list[Path]) -> list[Path]:
    """Files as given; a folder's .jsonl files, or, a folder holding none (Codex's ``sessions`` folder,
    dated ``YYYY/MM/DD/``), the Codex rollouts anywhere below it, oldest first by name."""
    out = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.jsonl")) or sorted(path.rglob("rollout-*.jsonl"), key=lambda p: p.name)
            if not found:
                raise FormatError(f"{path}: a folder without .jsonl files (nor Codex rollouts, rollout-*.jsonl, "
                                  "in folders below it)")
            out += found
        else:
            out.append(path)
    return out


AGENTS = ("codex", "claude")


def agent_sources(agent: str, project: Scope | None) -> list[Path]:
    """Where ``--agent`` finds its transcripts: Codex's sessions folder (every rollout, scoped to the
    workspace by the reading), or Claude Code's project folder for the workspace."""
    if agent == "codex":
        home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        folder = home / "sessions"
        if not folder.is_dir():
            raise FormatError(f"no Codex sessions folder at {folder} (Codex keeps its rollouts there; set "
                              "CODEX_HOME if yours is elsewhere, or give the rollouts' folder as PATH)")
        return [folder]
    if agent == "claude":
        if project is None or project.folder is None:
            raise FormatError("--agent claude finds the transcripts of a workspace folder; give it with "
                              "--workspace DIR (not --memory), or give the transcripts as PATH")
        home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
        folder = home / "projects" / claude_project_name(project.folder)
        if not folder.is_dir() or not any(folder.glob("*.jsonl")):
            raise FormatError(f"no Claude Code transcripts for {project.folder} at {folder} (Claude Code keeps a "
                              "folder's sessions there once it ran in it; give the transcripts as PATH otherwise)")
        return [folder]
    raise FormatError(f"unknown agent {agent!r}; use one of {', '.join(AGENTS)}")


def claude_project_name(folder: str) -> str:
    """The name Claude Code gives a folder's transcripts folder: its absolute path with every character
    but ASCII letters and digits as ``-`` (``/tmp/my.proj_x`` → ``-tmp-my-proj-x``, Claude Code 2.1.197)."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(Path(folder).resolve()))


def _hermes_workspace_sessions(path: Path, project: Scope | None) -> list[str]:
    """Sessions Hermes ran in the memory's workspace (CLI sessions record their cwd)."""
    everything = hermes_sessions(path)
    if project is None:
        return [s.id for s in everything]
    wanted = project.shown
    chosen = [s.id for s in everything if s.cwd and project.holds(s.cwd)]
    if not chosen:
        raise FormatError(f"{path}: {_none_of(len(everything))} ran in {wanted}; pick sessions "
                          "with --session ID, or take them all with --all-sessions")
    return chosen


def _none_of(sessions: int) -> str:
    """``none of its 3 sessions``, ``its one session``, ``it has no session``: a subject that reads."""
    if sessions == 0:
        return "no session"
    if sessions == 1:
        return "its one session never"
    return f"none of its {count(sessions, 'session')}"


def estimate(plan: Plan, settings: Settings, total_before: int, writer: str,
             folder: Path | None, now: float) -> CatchUp:
    """Writer lines, calls, cost and time the new messages will take, before they land (a bound)."""
    after = total_before + plan.messages
    merges = sum((after >> level) - (total_before >> level) for level in range(1, max(after, 1).bit_length()))
    return catch_up_cost(settings, writer, plan.long_messages, merges, plan.long_bytes, folder, now)


def left_after(memory: Memory, plan: Plan, writer: str, now: float) -> CatchUp:
    """What the writer has left once the import landed (free lines are stored already)."""
    from endless.writer.pace import leaves_left, lines_left

    slots = memory.built_slots()
    leaves = leaves_left(slots, memory.total)
    merges = lines_left(slots, memory.total) - leaves
    return catch_up_cost(memory.settings, writer, leaves, merges, plan.long_bytes, memory.folder, now)


def commit(memory: Memory, plan: Plan, show_progress: bool,
           landed: Callable[[int, int], None] | None = None, have: Presence | None = None,
           index: bool = True, plan_views: bool = True) -> Landed:
    """Append the new turns in durable batches, then plan the views once (``plan_views``); says what landed.

    ``landed(first, end)`` hears of each batch's messages once they are durable (the offline
    choice is recorded batch by batch, so an interrupted import keeps it for what landed).
    Each batch is checked again under the memory's lock against the log as it is then
    (``have``, the count the plan was made from, brought up to date): a turn another
    import or a live chat logged since the plan was made is skipped, not logged twice.
    ``index=False``: the import's helper process keeps the search index (see index_follower).
    """
    have = have if have is not None else Presence()
    done = Landed()
    progress = None
    task = None
    if show_progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        progress.start()
        task = progress.add_task("turns", total=plan.turns)
    try:
        batch: list[tuple[EncodedTurn, int, int]] = []
        size = 0
        for planned in plan.planned():
            batch.append(planned)
            size += len(planned[0].tail)
            if len(batch) >= BATCH_TURNS or size >= BATCH_BYTES:
                done.add(_commit_batch(memory, plan, batch, landed, have, index), len(batch))
                batch, size = [], 0
                if progress is not None:
                    progress.update(task, completed=done.turns + done.skipped)
        if batch:
            done.add(_commit_batch(memory, plan, batch, landed, have, index), len(batch))
            if progress is not None:
                progress.update(task, completed=done.turns + done.skipped)
        del batch
        plan.let_go()
        if done.turns and plan_views:
            memory.plan_views()
    finally:
        if progress is not None:
            progress.stop()
    return done


@dataclass
class Landed:
    """What an import's commit logged, and what it found there already at commit time."""

    turns: int = 0
    messages: int = 0
    skipped: int = 0  # planned turns another process logged between the plan and the commit

    def add(self, infos: list, planned: int) -> None:
        self.turns += len(infos)
        self.messages += sum(i.count for i in infos)
        self.skipped += planned - len(infos)


def _commit_batch(memory: Memory, plan: Plan, batch: list[tuple[EncodedTurn, int, int]],
                  landed: Callable[[int, int], None] | None, have: Presence, index: bool) -> list:
    def admit(m: Memory) -> list:
        if plan.by_event:  # under the lock: a turn whose event id is logged already (captured live) is there
            logged = m.log.held_tids(tail_tid(planned[0].tail) for planned in batch)
            if logged:
                return have.admit(m, [planned for planned in batch if tail_tid(planned[0].tail) not in logged])
        return have.admit(m, batch)

    infos = memory.bulk_commit(admit, index=index)
    have.committed(infos, plan.repeated)
    if infos and landed is not None:
        landed(infos[0].first, infos[-1].first + infos[-1].count)
    return infos


# -- the command ----------------------------------------------------------------------------


def _when(at: float) -> str:
    return moments.local(at)


def _preview(turn: TurnRecord) -> str:
    head = turn.messages[0]
    text = " ".join(head.text.split())
    text = text if len(text) <= 72 else text[:71] + "…"
    kinds = Counter(m.kind for m in turn.messages)
    what = ", ".join(f"{n} {k}" for k, n in kinds.items())
    chat = f"{title(turn.title)}  " if turn.title else ""  # no empty «» for a turn without a title
    return one_line(f"+ {_when(turn.at)}  {chat}{what}  {head.kind}: {text}")


def _import_command(args: argparse.Namespace) -> int:
    """``endless import``, with Python's cycle collector paused while it runs.

    An import keeps hundreds of thousands of young objects alive until their
    batch lands, and the collector walks each of them again and again: about a
    tenth of an import's time, measured.  An import makes almost no reference
    cycles (a few hundred objects were left after 100,000 messages), so nothing
    piles up meanwhile.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _import(args)
    finally:
        if collecting:
            gc.enable()


def _import(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except Exception as exc:  # SettingsError: main() maps it too, but say it in import's words
        print(f"[endless.import] {exc}", file=sys.stderr)
        return EXIT_USAGE
    memory: Memory | None = None
    plan: Plan | None = None
    raise_on_sigterm()
    try:
        if not args.memory:
            try:
                key_of(args)
            except InvalidKey as exc:  # an .endless-id that names nothing: said before anything is read
                print(f"[endless.import] {exc}", file=sys.stderr)
                return EXIT_USAGE
        try:
            memory = choose(args, readonly=True, settings=settings)
        except ChoiceError as exc:
            if args.memory:
                print(f"[endless.import] {exc}", file=sys.stderr)
                return EXIT_USAGE
            memory = None  # a workspace without a memory yet: the import creates it
        by_folder = None if args.memory else workspace_of(args)
        project = scope_of(memory.key.project if memory else None, by_folder,
                           key_of(args).project if by_folder is not None else None)
        target = memory.memory_id if memory else key_of(args).memory_id
        granularity = memory.granularity if memory else settings.granularity
        writer = choose_writer(args.writer, settings)  # a ChoiceError: said below, exit 2
        if not args.paths and not args.agent:
            print("[endless.import] nothing to import: give the files or folders as PATH, or --agent codex "
                  "(or claude) to find that agent's transcripts of this folder", file=sys.stderr)
            return EXIT_USAGE
        try:
            paths = [Path(p) for p in args.paths]
            if args.agent:
                paths += agent_sources(args.agent, project)
            left_out: list[Path] = []
            sources = open_sources(paths, args.format, args.session or None, project, args.all_sessions, left_out)
            if left_out:
                print(f"[endless.import] left out {count(len(left_out), 'Codex rollout')} run in other folders "
                      "(take them with --all-sessions)", file=sys.stderr)
            # Every source is read to its end here, before the memory is opened for writing.
            have = present(memory) if memory else Presence()
            plan = make_plan(sources, settings, granularity, have,
                             memory.folder if memory and not args.dry_run else None)
        except FormatError as exc:
            print(f"[endless.import] {one_line(exc)}. Nothing was imported; fix the source and run the import again.",
                  file=sys.stderr)
            return EXIT_USAGE
        summary = {"memoryId": target, "sources": [{"path": p, "format": f, "entries": n}
                                                   for p, f, n in plan.sources],
                   "turns": plan.turns, "messages": plan.messages, "skipped": plan.skipped}
        before = memory.total if memory else 0
        folder = memory.folder if memory else None
        if args.dry_run:
            try:
                guess = estimate(plan, settings, before, writer, folder, time.time())
            except FormatError as exc:
                print(f"[endless.import] {exc}", file=sys.stderr)
                return EXIT_USAGE
            _print_dry_run(args, plan, summary, guess, target, bool(settings.writer_route.strip()))
            return EXIT_OK
        if memory is not None:
            memory.close()
        memory = choose(args, readonly=False, create=True, settings=settings)
        before = memory.total
        show = plan.turns >= PROGRESS_FROM and sys.stderr.isatty() and not args.no_progress
        record = None
        if writer == "offline":
            from endless.writer.stretches import offline_stretches

            record = offline_stretches(memory).add
        if memory.turns < have.scanned:  # the log got shorter since it was read: count it again
            have = Presence()
        helper = None
        if plan.messages >= IMPORT_FOLLOWER_FROM:  # its search index is kept on the second core
            from endless.faces.importers import index_follower

            helper = index_follower.start(memory.folder, memory.granularity)
            memory.on_free_stretch(index_follower.tell_free(helper))
        try:
            done = commit(memory, plan, show, record, have, index=helper is None)
        except BaseException:
            if helper is not None:
                index_follower.finish(helper, completed=False)
            raise
        if helper is not None:
            index_follower.finish(helper, completed=True)
        landed = done.turns
        summary["turns"], summary["messages"] = landed, done.messages
        summary["skipped"] = plan.skipped + done.skipped
        guess = None
        if landed:
            guess = left_after(memory, plan, writer, time.time())
            summary["writer"] = guess.to_json()
        skipped = summary["skipped"]
        if not args.json:
            sys.stdout.write(f"imported {count(landed, 'turn')} ({count(done.messages, 'message')}) into memory "
                             f"{memory.memory_id}; {count(skipped, 'turn')} "
                             f"{agree(skipped, 'was', 'were')} there already\n")
        if guess is not None and guess.lines:
            summary["catchUp"] = _catch_up_after(args, memory, guess)
        if args.json:
            sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    except ChoiceError as exc:
        print(f"[endless.import] {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (MemoryUseError, OSError) as exc:
        said = os_error_said(exc) if isinstance(exc, OSError) else str(exc)
        print(f"[endless.import] stopped: {one_line(said)}. The turns committed so far are kept; run the same import "
              "again to add the rest.", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, Terminated) as stop:
        print("[endless.import] stopped. The turns committed so far are kept; run the same import again to add "
              "the rest.", file=sys.stderr)
        return exit_code(stop)
    finally:
        if plan is not None:
            plan.close()
        if memory is not None:
            memory.close()


def _catch_up_after(args: argparse.Namespace, memory: Memory, guess: CatchUp) -> dict:
    """Get the import's lines written: here when the offline writer is quick enough, else by a detached
    ``endless catch-up`` that outlives the import (none with ``--no-catch-up`` or the import_catch_up
    setting off); says which, and returns it for ``--json``.  With the model, what it costs and the
    spend cap are said (in ``guess``) before anything is spent."""
    import subprocess

    def said(text: str) -> None:
        if not args.json:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()  # (before a catch-up starts spending)

    if args.no_catch_up or not memory.settings.import_catch_up:
        said(f"catching up: {guess.sentence()}; `endless doctor` shows the progress, `endless catch-up` writes "
             "them now")
        return {"how": "left", "lines": guess.lines}
    wait = memory.settings.import_catch_up_wait_seconds
    quick = guess.writer == "offline" and guess.seconds is not None and guess.seconds <= wait
    if quick:
        from endless.faces.kit.catching_up import catch_up

        done = catch_up(memory, "offline", sys.stderr.isatty() and not args.no_progress)
        if done["elsewhere"]:
            holder = f" (pid {done['holder']})" if done.get("holder") is not None else ""
            said(f"catching up: {guess.sentence()}; the memory's writer runs in another process{holder}, which "
                 "writes them; `endless doctor` shows the progress")
            return {"how": "elsewhere", **done}
        said(f"wrote {count(done['written'], 'line')} by the offline writer in {done['seconds']:.1f} s"
             + (f"; {count(done['left'], 'line')} left to a chat's writer" if done["left"] else ""))
        return {"how": "written", **done}
    said(f"catching up: {guess.sentence()}")
    command = [sys.executable, "-m", "endless", "catch-up", "--memory", memory.memory_id, "--no-progress",
               "--writer", guess.writer, "--background"]
    log_path = memory.folder / CATCH_UP_LOG
    err = durable.open_append(log_path)  # what it says (its diagnostics, a failure) is kept there
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                 start_new_session=True)  # its own session: a Ctrl-C of this terminal spares it
    finally:
        os.close(err)
    said(f"started a detached `endless catch-up` (pid {child.pid}) that writes them after this import ends; "
         f"`endless doctor` shows its progress; stop it with `kill {child.pid}` (`endless catch-up` goes on "
         f"where it stopped); it logs to {log_path}")
    return {"how": "background", "pid": child.pid, "lines": guess.lines, "log": str(log_path)}


def _print_dry_run(args: argparse.Namespace, plan: Plan, summary: dict, guess: CatchUp, target: str,
                   routed: bool) -> None:
    summary["writer"] = guess.to_json()
    if args.json:
        summary["new"] = [{"session": t.session, "title": t.title, "at": t.at,
                           "messages": [{"kind": m.kind, "text": m.text, "at": m.at} for m in t.messages]}
                          for t in plan.in_order()]
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    for turn in plan.in_order():
        sys.stdout.write(_preview(turn) + "\n")
    sys.stdout.write(f"would add {count(plan.turns, 'turn')} ({count(plan.messages, 'message')}) to memory "
                     f"{target}; {count(plan.skipped, 'turn')} {agree(plan.skipped, 'is', 'are')} there already\n")
    sys.stdout.write(f"writer: {guess.sentence()}\n")
    other = "model" if guess.writer == "offline" else "offline"
    sys.stdout.write(f"(choose with --writer {other}" + (
        "; it needs the writer_route setting" if other == "model" and not routed else "")
        + ")\n")


def add_import_parser(sub: Any) -> None:
    parser = sub.add_parser("import", help="import earlier conversations (JSONL, Claude Code, Codex, Hermes state.db)",
                            epilog="example:\n  endless import ~/.hermes/state.db --dry-run",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=("Import conversations into a memory: a generic JSONL "
                                         "({role, content, at?, session?, title?} per line), Claude Code "
                                         "session transcripts (.jsonl files or their folder), Codex rollouts "
                                         "(files, or ~/.codex/sessions: those run in the workspace) or Hermes "
                                         "sessions from a state.db. Turns already in the memory are skipped; running "
                                         "the same import again adds nothing and resumes an interrupted one."))
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files (or folders of .jsonl files, or Codex's sessions folder) to import")
    add_memory_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="auto", help="the sources' format (default: detect)")
    parser.add_argument("--agent", choices=AGENTS, default=None,
                        help=("find the agent's own transcripts of the workspace: codex (rollouts in "
                              "$CODEX_HOME/sessions, default ~/.codex/sessions), claude (~/.claude/projects/…)"))
    parser.add_argument("--session", action="append", metavar="ID",
                        help=("Hermes, Codex: import this session (repeatable; default: the sessions run in the "
                              "workspace)"))
    parser.add_argument("--all-sessions", action="store_true",
                        help="Hermes, Codex: import every session, whatever folder it ran in")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the turns and messages that would be added and the writer's estimated cost")
    parser.add_argument("--json", action="store_true", help="print the summary (and with --dry-run the turns) as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--no-catch-up", action="store_true",
                        help="leave the imported messages' lines unwritten even when the import_catch_up setting "
                             "is on (`endless catch-up` writes them later)")
    parser.add_argument("--writer", choices=WRITERS, default=None,
                        help=("who writes the imported messages' lines: offline (free, no model, minutes) or "
                              "model (the writer_route, in the background, under the spend cap); default: "
                              "model when writer_route is set, else offline"))
    parser.set_defaults(run=_import_command)
