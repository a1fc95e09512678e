"""The values of the host RPC's methods, as plain functions (DESIGN §6).

The RPC server, the History page and the CLI read commands all answer from
these functions, so ``endless view --json`` and ``POST /api/endless.view``
give the same value.  Memories are opened read-only and cold: they never take
the change lock and read only complete lines, so another process may commit
turns while they answer.

A function that cannot answer raises :class:`AnswerError` with one of the
DESIGN §6 codes and a message saying what went wrong and what to do.

The functions read the memory as it is: a caller that keeps a memory open
catches it up first (``memory.catch_up()``, or the RPC reader's cheaper check);
a freshly opened memory is already caught up.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager

import orjson

from endless.core.store import durable
from endless.core import moments
from endless.core.search import scan as recall
from endless.core.search import query as query_language
from endless.core.search import finder as search_mod
from endless.core.store import sessions
from endless.core.view import tiling
from endless.core.store import Key, InvalidKey, memory_id as key_memory_id
from endless.core.store import examine, stored_from
from endless.core.memory import Memory, MemoryUseError, NoMemory, memories_dir
from endless.core.settings import Settings

BAD_REQUEST = "endless/bad-request"
UNKNOWN_MEMORY = "endless/unknown-memory"
NO_LINE = "endless/no-line"
ALREADY_BOUND = "endless/already-bound"

MEMORY_ID = re.compile(r"[0-9a-f]{16}")
TEXT_LIMIT = 4096  # longest agent, project, session id or query accepted
_ENVELOPE_SLACK = 4096  # bytes kept free in a history page for the envelope around it


class AnswerError(Exception):
    """A request that cannot be answered; ``code`` is one of the DESIGN §6 error codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self):  # crosses from a search worker process intact
        return AnswerError, (self.code, self.message)


class ArgumentError(AnswerError):
    """A bad argument: ``arg`` is its RPC name, ``problem`` what is wrong with it.

    Each face names the argument as its people type it (the RPC ``limit``, the
    CLI ``--limit``), so the name is kept apart from the rest of the message.
    """

    def __init__(self, arg: str, problem: str) -> None:
        super().__init__(BAD_REQUEST, f"{arg} {problem}")
        self.arg = arg
        self.problem = problem

    def __reduce__(self):
        return ArgumentError, (self.arg, self.problem)


# -- arguments -------------------------------------------------------------------------


def memory_id_arg(value: Any) -> str:
    """16 lowercase hex digits, never a path."""
    if not isinstance(value, str) or not MEMORY_ID.fullmatch(value):
        raise ArgumentError("memoryId", f"must be 16 lowercase hex digits, not {_shown(value)}")
    return value


def int_arg(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(name, f"must be a whole number, not {_shown(value)}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ArgumentError(name, f"must be {bound}, not {value}")
    return value


def text_arg(name: str, value: Any, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ArgumentError(name, "must be a non-empty string")
    if len(value) > TEXT_LIMIT:
        raise ArgumentError(name, f"is longer than {TEXT_LIMIT} characters")
    if "\x00" in value:
        raise ArgumentError(name, "must not contain a NUL character")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- opening ---------------------------------------------------------------------------


def open_memory(settings: Settings, memory_id: Any, root: Path | None = None,
                listed_by: str = "endless.memories", missing: str | None = None) -> Memory:
    """A memory opened read-only and cold, or ``endless/unknown-memory``.

    ``listed_by``: what lists the memories in the caller's face (the RPC method, or the CLI command);
    ``missing``: what to say when there is no such memory (only then: a memory that exists but
    cannot be read says why).
    """
    mid = memory_id_arg(memory_id)
    try:
        return Memory.open(memory_id=mid, settings=settings, root=root, readonly=True, create=False)
    except NoMemory:
        raise AnswerError(UNKNOWN_MEMORY, missing or f"there is no memory {mid}; list them with {listed_by}") from None
    except MemoryUseError as exc:
        raise AnswerError(UNKNOWN_MEMORY, f"memory {mid} cannot be read: {exc}") from None


def memory_ids(root: Path) -> list[str]:
    """The ids of every memory folder under ``root`` (folders with a ``key.json``); never through a link."""
    durable.guard_root(root)
    durable.refuse_linked_folders(memories_dir(root))
    try:
        names = os.listdir(memories_dir(root))
    except FileNotFoundError:
        return []
    return sorted(n for n in names if MEMORY_ID.fullmatch(n) and (memories_dir(root) / n / "key.json").exists())


# -- the methods -------------------------------------------------------------------------


def bind(settings: Settings, args: dict, root: Path | None = None) -> dict:
    """``endless.bind``: bind a session to ``(agent, project)`` before its first turn."""
    session = text_arg("sessionId", args.get("sessionId"))
    agent = text_arg("agent", args.get("agent"))
    project = text_arg("project", args.get("project"))
    agent_name = text_arg("agentName", args.get("agentName"), required=False)
    try:
        key = Key(agent, project)
        key_memory_id(agent, project)
    except InvalidKey as exc:
        raise AnswerError(BAD_REQUEST, str(exc)) from None
    root = Path(root) if root is not None else settings.memory_root()
    try:
        record = sessions.bind(root, session, key, agent_name)
    except sessions.AlreadyBound as exc:
        raise AnswerError(ALREADY_BOUND, str(exc)) from None
    return {"memoryId": record.memory_id}


def memory_summary(memory: Memory, usage: Any = None) -> dict:
    """One entry of ``endless.memories``; ``usage``: the memory's ``UsageLog`` if one is kept open."""
    from endless.writer.usage import UsageLog

    first = memory.message(0) if memory.total else None
    last = memory.message(memory.total - 1) if memory.total else None
    if usage is None:
        totals = UsageLog(memory.folder, readonly=True).totals()
    else:
        usage.refresh()
        totals = usage.totals()
    return {"memoryId": memory.memory_id, "agent": memory.key.agent, "project": memory.key.project,
            "keyedBy": keyed_by(memory.key.project), "alsoBy": [],
            "turns": memory.turns, "firstAt": None if first is None else moments.moment_or_none(first.at),
            "lastAt": None if last is None else moments.moment_or_none(last.at),
            "writerUsage": {k: totals.get(k, 0) for k in ("calls", "cacheRead", "miss", "output", "cost")}}


def memories(settings: Settings, args: dict, root: Path | None = None,
             summary_of: Any = None) -> dict:
    """``endless.memories``: every memory (of ``agent`` if given), the most recently used first.

    ``summary_of(memory_id)`` may supply entries from memories a server keeps open.
    """
    agent = text_arg("agent", args.get("agent"), required=False)
    root = Path(root) if root is not None else settings.memory_root()
    found = []
    unreadable = []
    for mid in memory_ids(root):
        try:
            if summary_of is not None:
                entry = summary_of(mid)
            else:
                with open_memory(settings, mid, root) as memory:
                    entry = memory_summary(memory)
        except AnswerError:
            continue  # a folder that is not (or no longer) a readable memory
        except OSError as exc:  # one memory Endless may not read: named, and the others still listed
            unreadable.append({"memoryId": mid, "error": f"{exc.strerror or exc}: {exc.filename or root / mid}"})
            continue
        if agent is None or entry["agent"] == agent:
            found.append(entry)
    also = aliases_by_target(settings, root)
    found = [{**entry, "alsoBy": also.get(entry["memoryId"], [])} for entry in found]
    found.sort(key=lambda e: (-(e["lastAt"] or 0.0), e["memoryId"]))
    value: dict = {"memories": found}
    if unreadable:
        value["unreadable"] = unreadable
    return value


def keyed_by(project: str) -> dict:
    """``{kind, value, folder}``: what a key's project is made of (repo, id, path, chat) and the folder below
    the identity's top, as ``endless memories`` shows it."""
    from endless.core.store import shown_project as shown

    return shown(project).to_json()


def aliases_by_target(settings: Settings, root: Path) -> dict[str, list[dict]]:
    """The other keys each memory is found by (its aliases, store.directory), as ``keyedBy`` values."""
    from endless.core.store import open_directory

    directory = open_directory(settings, root)
    try:
        aliases = directory.aliases()
    finally:
        directory.close()
    also: dict[str, list[dict]] = {}
    for alias in aliases:
        also.setdefault(alias.target, []).append({**keyed_by(alias.project), "agent": alias.agent})
    return also


class TimeCache:
    """Times of messages by id: they never change once committed, so they are kept for good."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = limit
        self.times: dict[int, float | None] = {}

    def at(self, memory: Memory, message_id: int) -> float | None:
        if message_id in self.times:
            return self.times[message_id]
        stored = memory.message(message_id)
        value = None if stored is None else moments.moment_or_none(stored.at)
        if len(self.times) >= self.limit:
            self.times.clear()
        if stored is not None:
            self.times[message_id] = value
        return value


def line_value(memory: Memory, part: tiling.Part, times: TimeCache | None = None) -> dict:
    """``{id, n, text, from, to}`` of one line (``text`` None while it is unwritten)."""
    times = times or TimeCache()
    first, end = tiling.first(part), tiling.end(part)
    text = memory.node_text(*part) if memory.is_built(*part) else None
    return {"id": first, "n": tiling.count(part), "text": text,
            "from": times.at(memory, first), "to": times.at(memory, end - 1)}


def view(memory: Memory, times: TimeCache | None = None) -> dict:
    """``endless.view``: the chat view's lines, oldest first."""
    times = times or TimeCache()
    return {"lines": [line_value(memory, part, times) for part in memory.views.chat.parts]}


def zoom(memory: Memory, args: dict, times: TimeCache | None = None) -> dict:
    """``endless.zoom``: the two halves of ``id+n``, or for ``n`` = 1 message ``id`` whole, paged."""
    ident = int_arg("id", args.get("id"), 0)
    n = int_arg("n", args.get("n"), 1)
    page = int_arg("page", args.get("page", 1) if args.get("page") is not None else 1, 1)
    part = tiling.parse_name(ident, n, memory.total)
    if part is None:
        raise AnswerError(NO_LINE, why_no_line(ident, n, memory.total, memory.memory_id, bool(memory.log.damage)))
    if n == 1:
        return {"message": _message_value(memory, ident, page)}
    if not memory.is_built(*part):
        raise AnswerError(NO_LINE, f"line {ident}+{n} is not written yet; open its messages one by one")
    return {"lines": [line_value(memory, half, times) for half in tiling.children(part)]}


def why_no_line(ident: int, n: int, total: int, memory_id: str, damaged: bool = False) -> str:
    """What is wrong with the name ``ident+n``, and only that: its size, its start, or its place."""
    name = f"{ident}+{n}"
    if n & (n - 1):
        return f"no line {name}: a line covers 1, 2, 4, 8, … messages (a power of two), not {n}"
    if ident % n:
        below = ident - ident % n
        return (f"no line {name}: a line of {n} messages starts at a multiple of {n}, "
                f"such as {below}+{n} or {below + n}+{n}")
    what = f"message {ident}" if n == 1 else f"line {name}"
    # Damaged records' messages cannot be counted: say so, rather than a count that looks whole.
    note = ("; its order log has damaged records, whose messages cannot be read (`endless doctor` names them)"
            if damaged else "")
    if total == 0:
        return f"no {what}: memory {memory_id} holds no {'readable ' if damaged else ''}messages yet{note}"
    return f"no {what}: memory {memory_id} holds messages 0 to {total - 1}{note}"


def _message_value(memory: Memory, ident: int, page: int) -> dict:
    stored = memory.message(ident)
    if stored is None:
        raise AnswerError(NO_LINE, f"message {ident} cannot be read: its record in the log is damaged")
    size = memory.settings.zoom_page_chars
    pages = max(1, -(-len(stored.text) // size))
    if page > pages:
        raise AnswerError(NO_LINE, f"message {ident} has {pages} page{'s' if pages > 1 else ''}, "
                                   f"not {page}")
    return {"id": ident, "kind": stored.kind, "text": stored.text[(page - 1) * size:page * size],
            "at": moments.moment_or_none(stored.at), "sessionId": stored.session, "sessionTitle": stored.title,
            "page": page, "pages": pages}


def date(memory: Memory, args: dict) -> dict:
    """The time of message ``id`` (the CLI's ``endless date``; the tool's answer as data)."""
    from endless.core.lookback import local_time

    ident = int_arg("id", args.get("id"), 0)
    if ident >= memory.total:
        raise AnswerError(NO_LINE, f"no message {ident}: memory {memory.memory_id} holds "
                                   f"messages 0 to {memory.total - 1}")
    stored = memory.message(ident)
    if stored is None:
        raise AnswerError(NO_LINE, f"message {ident} cannot be read: its record in the log is damaged")
    return {"id": ident, "at": moments.moment_or_none(stored.at), "local": local_time(stored.at)}


@dataclass(frozen=True)
class LogSnapshot:
    """What a search or a history page needs of the order log, taken under the reader's lock."""

    end: int
    total: int
    turns: int


def snapshot(memory: Memory) -> LogSnapshot:
    log = memory.log
    return LogSnapshot(log.end, log.total, len(log.offsets))


def history(memory: Memory, args: dict, settings: Settings,
            guard: ContextManager | None = None) -> dict:
    """``endless.history``: a page of turns, oldest first inside it.

    ``before`` (default: past the newest) pages back: turns ``[before − limit,
    before)``.  ``from`` (a turn number) or ``since`` (a date or time, as the
    search's filter takes it) pages forward: turns from that one (or from the
    first turn at or after ``since``) on, so a page can open at the oldest turn
    or at a day and read on.  The value carries ``next`` (ask ``before`` it for
    older turns) and, on a page with turns, ``later`` (ask ``from`` it for newer
    ones) when there are.

    The page is cut before ``settings.history_page_bytes`` of JSON at its far
    end (a turn that alone is larger has its longest texts cut, each marked
    ``truncated``; zoom opens the whole message).  ``guard`` is held while the
    turn offsets are read, not while the turns are.
    """
    guard = guard if guard is not None else contextlib.nullcontext()
    limit = args.get("limit")
    limit = settings.history_limit if limit is None else int_arg("limit", limit, 1, settings.history_limit_max)
    given = [name for name in ("before", "from", "since") if args.get(name) is not None]
    if len(given) > 1:
        raise AnswerError(BAD_REQUEST, f"give one of before, from and since, not {' and '.join(given)}: "
                                       "before pages back, from and since page forward")
    since = _since_arg(args.get("since"))
    with guard:
        snap = snapshot(memory)
        offsets = memory.log.offsets[:snap.turns]
        lengths = memory.log.lengths[:snap.turns]
    budget = settings.history_page_bytes - _ENVELOPE_SLACK
    with memory.log.reading() as fd:
        if since is not None or args.get("from") is not None:
            if since is not None:
                first = _first_turn_since(fd, offsets, lengths, since)
            else:
                first = min(int_arg("from", args.get("from"), 0), snap.turns)
            numbers = range(first, min(snap.turns, first + limit))
        else:
            before = args.get("before")
            before = snap.turns if before is None else min(int_arg("before", before, 0), snap.turns)
            first = before
            numbers = range(before - 1, max(0, before - limit) - 1, -1)
        turns = _page(fd, numbers, offsets, lengths, budget, memory.log)
    turns.sort(key=lambda t: t["turn"])
    low = turns[0]["turn"] if turns else first
    high = turns[-1]["turn"] + 1 if turns else first
    value: dict = {"turns": turns}
    if low > 0:
        value["next"] = low
    if turns and high < snap.turns:
        value["later"] = high
    return value


def _since_arg(value: Any) -> float | None:
    try:
        return query_language.moment(value, "since")
    except query_language.QueryError as exc:
        raise ArgumentError("since", exc.problem or str(exc)) from None


def _page(fd: Callable[[int, int], bytes] | None, numbers: range, offsets: Any, lengths: Any, budget: int,
          log: Any = None) -> list[dict]:
    """The turns ``numbers`` in the order given, until the next would pass ``budget`` bytes of JSON."""
    turns: list[dict] = []
    used = 0
    for k in numbers:
        turn = _turn_value(fd, k, offsets[k], lengths[k], log)
        size = len(orjson.dumps(turn)) + 1
        if used + size > budget:
            if turns:
                break
            turn, size = _cut_to_fit(turn, budget)
        turns.append(turn)
        used += size
    return turns


def _first_turn_since(fd: Callable[[int, int], bytes] | None, offsets: Any, lengths: Any, since: float) -> int:
    """The first turn at or after ``since`` (turns are committed in time order; an import sorts its own).

    A binary search reading one record a step; a damaged record or one
    without a time counts as earlier.  Past the newest turn: the turn count.
    """
    low, high = 0, len(offsets)
    while low < high:
        middle = (low + high) // 2
        at = _turn_value(fd, middle, offsets[middle], lengths[middle])["at"]
        if at is not None and at >= since:
            high = middle
        else:
            low = middle + 1
    return low


def _turn_value(fd: Callable[[int, int], bytes] | None, turn: int, offset: int, length: int, log: Any = None) -> dict:
    """``log``: the memory's order log, to show forgotten messages as tombstones."""
    record = None
    if fd is not None:
        try:
            record, _ = examine(fd(offset, length), turn)  # None: damage, shown as damaged
            if record is not None and log is not None and turn < len(log.firsts) and (
                    log.tids[turn] == 0 or log.firsts[turn] != record["id"]):
                record = None  # out of order: the log's reader counts it as damage
            messages = [] if record is None else [stored_from(record, k, turn) for k in range(len(record["m"]))]
            messages = [log.shown(m) for m in messages] if log is not None else messages
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
            record = None
    if record is None:
        return {"turn": turn, "at": None, "sessionId": None, "sessionTitle": None, "status": "damaged",
                "entries": []}
    return {"turn": turn, "at": moments.moment_or_none(record.get("at")), "sessionId": record.get("s"),
            "sessionTitle": record.get("t"), "status": record.get("st"),
            "entries": [_entry(m, None if log is None else log.forgotten) for m in messages]}


def _entry(m: Any, forgotten: dict[int, float] | None) -> dict:
    entry = {"id": m.id, "kind": m.kind, "text": m.text}
    if forgotten and m.id in forgotten:
        entry["forgottenAt"] = forgotten[m.id]  # the text is its tombstone
    return entry


def _cut_to_fit(turn: dict, budget: int) -> tuple[dict, int]:
    """Cut the longest texts of a turn too large for a page alone until it fits."""
    size = len(orjson.dumps(turn)) + 1
    entries = sorted(turn["entries"], key=lambda e: -len(e["text"]))
    for entry in entries:
        if size <= budget:
            break
        # Every character is at least one byte of JSON: cutting ``over`` characters (and room for
        # the ``truncated`` mark) is enough.
        entry["text"] = entry["text"][:max(0, len(entry["text"]) - (size - budget) - 32)]
        entry["truncated"] = True
        size = len(orjson.dumps(turn)) + 1
    return turn, size


def search(memory: Memory, args: dict, settings: Settings,
           guard: ContextManager | None = None) -> dict:
    """``endless.search``: up to ``limit`` (≤ 50) hits from ``offset``, in the query language of DESIGN §5.

    Ranked words come best first, a phrase or a pattern newest first.  Each
    hit carries its ``turn`` (so a page can show it in place), the marked
    spans of its snippet and the view line covering it.  ``below`` pins the
    search to the messages that existed at its first page: pass back the
    value answered, and later pages neither repeat nor skip a hit while new
    turns arrive.  A search that ran out of time says how far it got.
    """
    guard = guard if guard is not None else contextlib.nullcontext()
    query = text_arg("query", args.get("query"))
    limit = args.get("limit")
    limit = settings.search_hits_rpc if limit is None else int_arg("limit", limit, 1, settings.search_hits_rpc)
    offset = int_arg("offset", args.get("offset") or 0, 0)
    below = args.get("below")
    below = None if below is None else int_arg("below", below, 0)
    filters = {name: args.get(name) for name in ("chat", "kind", "since", "before", "scope")}
    with guard as fresh:
        corpus = search_mod.corpus_of(fresh if isinstance(fresh, Memory) else memory)
        try:
            result = search_mod.search(corpus, query, offset, limit, settings.regex_seconds, below=below,
                                       **filters)
        except recall.SearchError as exc:
            if exc.arg is not None:  # a filter: named as each face's people type it
                raise ArgumentError(exc.arg, exc.problem or "") from None
            raise AnswerError(BAD_REQUEST, f"cannot search: {exc}") from None
        hits = [{"id": h.id, "n": h.count, "at": moments.moment_or_none(h.at), "sessionTitle": h.title,
                 "kind": h.kind, "snippet": h.snippet, "marks": [list(m) for m in h.marks],
                 "line": h.line, "turn": memory.log.turn_of(h.id)} for h in result.hits]
    value: dict = {"hits": hits, "mode": result.mode, "more": result.more, "below": result.below}
    if result.more:  # (a first page's title hits come on top of its messages: they take no offset)
        value["next"] = offset + sum(1 for h in hits if h["kind"] != "title")
    if result.stopped_at is not None:
        # A partial answer: what it covered and the ``below`` that searches the rest (same query, offset 0).
        value["stoppedAt"] = result.stopped_at
        value["partial"] = True
        value["searched"] = {"from": result.go_on(), "to": result.below}
        value["goOn"] = {"below": result.go_on()}
    if result.indexed is not None:
        value["indexed"] = result.indexed
    return value


def answer(memory: Memory, method: str, args: dict, settings: Settings,
           times: TimeCache | None = None) -> dict:
    """The value of a read method on an open memory (the CLI's single entry)."""
    if method == "view":
        return view(memory, times)
    if method == "zoom":
        return zoom(memory, args, times)
    if method == "history":
        return history(memory, args, settings)
    if method == "search":
        return search(memory, args, settings)
    if method == "date":
        return date(memory, args)
    raise AnswerError(BAD_REQUEST, f"there is no read method {method!r}")
