"""Searching the whole history, newest first, without loading it (DESIGN §5).

A literal search scans the order log backwards in large chunks and looks for
the query as it appears inside a JSON string, so most of the file is only
lowered and searched in C; each candidate line is parsed and checked against
the message text itself.  A pattern search runs the ``regex`` engine with a
deadline, so a catastrophic pattern stops after its time limit instead of
hanging the process; a pattern that would take too much memory to compile is
refused before (:mod:`endless.core.search.pattern_guard`).  Every scan checks the
same deadline between chunks and always moves back through the file, so no
query runs past its time, and a stopped search says how far it got.
"""

from __future__ import annotations

import mmap
import re
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import orjson

if TYPE_CHECKING:  # the engine and the threads load when a scan runs, not with every search
    from concurrent.futures import ThreadPoolExecutor

    import regex

from endless.core.search import pattern_guard
from endless.core.search import query as query_language
from endless.core.search.snippets import snippet_marked
from endless.core.store import OrderLog, examine
from endless.core.settings import LONG_NEEDLE_BYTES

CHUNK = 4 << 20  # bytes of the mapped log one thread searches at a time


class SearchError(ValueError):
    """A query that cannot be searched for; the message says why (``arg``: the filter at fault, if one)."""

    def __init__(self, message: str, arg: str | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.arg = arg
        self.problem = problem


@dataclass(frozen=True)
class Hit:
    id: int  # the message's id (for a summary line: its first message)
    at: float
    title: str
    session: str
    kind: str  # the message's kind, or "line" for a summary line
    snippet: str
    marks: tuple[tuple[int, int], ...] = ()  # where the match is in the snippet, as character spans
    count: int = 1  # messages covered: 1 for a message, n for the summary line id+n
    line: str | None = None  # the view line that covers the hit (``id+n``), to zoom straight there


@dataclass
class Result:
    hits: list[Hit] = field(default_factory=list)
    more: bool = False
    stopped_at: int | None = None  # the oldest message searched when the time limit cut the search
    pattern: bool = False
    mode: str = query_language.WORDS
    indexed: int | None = None  # messages the index covered, when it could not catch up in time
    below: int | None = None  # the message count the search was pinned to (pass back for the next page)

    def go_on(self) -> int | None:
        """The ``below`` that searches what a search cut by its time limit had not reached (None: it
        was complete).  It searched messages ``go_on()`` to ``below - 1``; a ranked search that stopped
        ranked none, so its ``go_on()`` is ``below`` itself: the same search again."""
        if self.stopped_at is None:
            return None
        if self.below is None:
            return self.stopped_at
        return min(self.stopped_at, self.below)


def compile_pattern(body: str) -> "regex.Pattern[str]":
    import regex

    try:
        pattern_guard.check(body)
    except pattern_guard.PatternTooLarge as exc:
        raise SearchError(str(exc)) from exc
    try:
        return regex.compile(body, regex.IGNORECASE | regex.MULTILINE)
    except regex.error as exc:
        raise SearchError(f"the regular expression /{body}/ is not valid: {exc}") from exc


def scan_literal(log: OrderLog, text: str, skip: int, limit: int, seconds: float,
                 clock: Callable[[], float] = time.monotonic, keep: "Keep | None" = None,
                 below: int | None = None) -> Result:
    """Messages holding ``text`` as written (any case), newest first, by scanning the log itself
    (below message ``below`` only, if given, as :func:`scan_pattern`)."""
    want = skip + limit + 1
    found: list[Hit] = []
    result = Result(mode=query_language.PHRASE)
    result.stopped_at = _scan_literal(log, text, want, found, _Deadline(clock() + seconds, clock), keep, below)
    result.more = len(found) > skip + limit
    result.hits = found[skip:skip + limit]
    return result


def scan_pattern(log: OrderLog, body: str, skip: int, limit: int, seconds: float,
                 clock: Callable[[], float] = time.monotonic, keep: "Keep | None" = None,
                 below: int | None = None) -> Result:
    """Messages a regular expression matches, newest first, with a deadline inside every match.

    ``below``: only messages with a smaller id, the scan starting at the turn
    that holds the newest of them (a stopped search goes on from where it
    stopped without reading the newer part again).
    """
    pattern = compile_pattern(body)
    want = skip + limit + 1
    found: list[Hit] = []
    result = Result(pattern=True, mode=query_language.PATTERN)
    result.stopped_at = _scan_pattern(log, pattern, want, found, clock() + seconds, clock, keep, below)
    result.more = len(found) > skip + limit
    result.hits = found[skip:skip + limit]
    return result


Keep = Callable[[dict, dict], bool]  # (turn record, message) -> whether the filters let it through


@dataclass
class _Deadline:
    """When a literal scan must stop, and the oldest message it had searched to the end by then."""

    at: float
    clock: Callable[[], float]
    oldest: int | None = None

    def passed(self) -> bool:
        return self.clock() >= self.at

    def searched(self, message_id: int) -> None:
        self.oldest = message_id


def _scan_literal(log: OrderLog, text: str, want: int, found: list[Hit], deadline: _Deadline,
                  keep: Keep | None = None, below: int | None = None) -> int | None:
    """Collect hits of ``text``; returns the oldest message searched if the deadline cut it short."""
    needle_text = text.lower()
    start = _start(log, below, keep)
    if start is None:
        return None
    pinned, end, keep = start

    def match(message: str) -> int:
        return message.lower().find(needle_text)

    if text.isascii():
        done = _scan_ascii(log, end, text, match, want, found, deadline, keep)
    else:
        done = _scan_unicode(log, end, needle_text, match, want, found, deadline, keep)
    if done:
        return None
    return deadline.oldest if deadline.oldest is not None and deadline.oldest < pinned else pinned


def _scan_unicode(log: OrderLog, end: int, needle_text: str, match: Callable[[str], int], want: int,
                  found: list[Hit], deadline: _Deadline, keep: Keep | None) -> bool:
    """Lowering outside ASCII may change lengths: test line by line, after a cheap chunk check."""
    needle_str = orjson.dumps(needle_text).decode()[1:-1]
    for _, data in log.backward(end):
        if deadline.passed():
            return False
        if needle_str not in data.decode("utf-8", "replace").lower():
            _note_searched(data, deadline)
            continue
        for line in reversed(data.split(b"\n")):
            if line and needle_str in line.decode("utf-8", "replace").lower():
                _collect(line, match, found, deadline.searched, keep, len(needle_text))
                if len(found) >= want:
                    return True
        _note_searched(data, deadline)
    return True


def _note_searched(data: bytes, deadline: _Deadline) -> None:
    """Everything in ``data`` (whole lines) was searched: its first record's first message is the oldest."""
    end = data.find(b"\n")
    _note_first(data if end < 0 else data[:end], deadline)


def _first_id(data: bytes) -> int | None:
    """The first message id of the chunk's first record (None if it does not parse)."""
    end = data.find(b"\n")
    try:
        return int(orjson.loads(data if end < 0 else data[:end])["id"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _note_first(line: bytes, deadline: _Deadline) -> None:
    try:
        deadline.searched(int(orjson.loads(line)["id"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        pass


def _scan_ascii(log: OrderLog, end: int, text: str, match: Callable[[str], int], want: int,
                found: list[Hit], deadline: _Deadline, keep: Keep | None) -> bool:
    """ASCII words: a case-blind literal search over the mapped log; False if the deadline cut it.

    The needle is the query as it appears inside a JSON string; the file is
    searched in line-aligned chunks from the end, two chunks at a time on two
    threads (the ``regex`` engine releases the GIL), forward within a chunk,
    and each hit's line is parsed and checked against the message text
    itself.  A needle longer than ``LONG_NEEDLE_BYTES`` is looked for in the
    lowered chunk with ``bytes.find`` instead, which stays linear where the
    engine's case-blind search would compare the needle at every position
    (``'a' * 4096`` in a run of ``A``: half a minute).
    """
    if end <= 0:
        return True
    raw = orjson.dumps(text)[1:-1]
    if len(raw) > LONG_NEEDLE_BYTES:
        lowered = raw.lower()

        def hits_in(bounds: tuple[int, int]) -> list[int]:
            chunk = mapped[bounds[0]:bounds[1]].lower()
            out, at = [], chunk.find(lowered)
            while at >= 0:  # one hit a line is all the caller reads: go on after the line's end
                out.append(bounds[0] + at)
                line_end = chunk.find(b"\n", at)
                at = -1 if line_end < 0 else chunk.find(lowered, line_end + 1)
            return out
    else:
        import regex

        needle = regex.compile(regex.escape(raw), regex.IGNORECASE)

        def hits_in(bounds: tuple[int, int]) -> list[int]:
            left = max(0.0, deadline.at - deadline.clock())
            try:
                return [m.start() for m in needle.finditer(mapped, bounds[0], bounds[1], concurrent=True,
                                                           timeout=left)]
            except TimeoutError:
                return []

    with log.mapped() as mapped:
        if mapped is None:  # a store with no flat buffer: chunk by chunk
            return _scan_unicode(log, end, text.lower(), match, want, found, deadline, keep)
        stop = min(end, len(mapped))
        while stop > 0:
            if deadline.passed():
                return False
            spans = []
            for _ in range(_THREADS):
                if stop <= 0:
                    break
                start = _line_start_before(mapped, stop)
                spans.append((start, stop))
                stop = start
            results = list(_executor().map(hits_in, spans)) if len(spans) > 1 else [hits_in(spans[0])]
            for (start, stop_here), hits in zip(spans, results):
                line_end = stop_here + 1
                if deadline.passed():
                    return False
                for k in reversed(hits):
                    if k >= line_end:
                        continue  # another hit in a line already read
                    line_start = mapped.rfind(b"\n", start, k) + 1
                    line_end = mapped.find(b"\n", k, stop_here)
                    line_end = stop_here if line_end < 0 else line_end
                    _collect(mapped[line_start:line_end], match, found, None, keep, len(text))
                    if len(found) >= want:
                        return True
                    line_end = line_start
                line_end = mapped.find(b"\n", start, stop_here)
                _note_first(mapped[start:stop_here if line_end < 0 else line_end], deadline)
                # Drop the pages just read from this process's resident set (the OS keeps them
                # cached): a search over a large log must not count the whole file as our memory.
                aligned = start - start % mmap.PAGESIZE
                if hasattr(mapped, "madvise") and stop_here > aligned:
                    mapped.madvise(mmap.MADV_DONTNEED, aligned, stop_here - aligned)
    return True


def _line_start_before(mapped: mmap.mmap, stop: int) -> int:
    """Where the span ending at line end ``stop`` starts: about ``CHUNK`` back, at a line start.

    ``stop - 1`` is the span's own last newline, so a line start is a newline
    before it; a window inside one long record grows until it finds one, so
    the span always holds at least one whole line and the scan moves back.
    """
    size = CHUNK
    while True:
        start = max(0, stop - size)
        if start == 0:
            return 0
        nl = mapped.find(b"\n", start, stop - 1)
        if nl >= 0:
            return nl + 1
        size *= 2


_THREADS = max(1, min(2, os.cpu_count() or 1))
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="endless-search")
    return _pool


def _collect(line: bytes, match: Callable[[str], int], found: list[Hit],
             searched: Callable[[int], None] | None = None, keep: Keep | None = None,
             width: int = 0) -> None:
    """Add the line's matching messages to ``found``, newest first; ``searched(id)`` after each.

    ``match`` gives where the match starts; ``width`` how long it is (0: ask
    ``match.span`` when the caller has one, for a pattern).
    """
    line = line.rstrip()
    record, _ = examine(line)
    if record is None:
        return  # damage: the log's reader reports it, a search never shows it
    first, messages = record["id"], record["m"]
    for k in range(len(messages) - 1, -1, -1):
        message = messages[k]
        text = message.get("x", "")
        if keep is not None and not keep(record, message):
            if searched is not None:
                searched(first + k)
            continue
        pos = match(text)
        if pos >= 0:
            span = getattr(match, "last_span", None)
            end = span[1] if width == 0 and span is not None else pos + width
            piece, marks = snippet_marked(text, [(pos, max(end, pos))])
            found.append(Hit(first + k, _moment(message.get("at")), record.get("t", ""),
                             record.get("s", ""), message.get("k", ""), piece, marks))
        if searched is not None:
            searched(first + k)


def _moment(at: object) -> float:
    return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else float("nan")


_CONTEXT = re.compile(r"\(\?(?!:)|\\[AZzG]|[*+?}]\+|\{[a-z]")


def joinable(body: str) -> bool:
    """Whether a match of ``body`` in one message is also a match where that message sits among
    others joined by newlines (so a chunk with no match in the join has none in any message)."""
    return _CONTEXT.search(body) is None


def _chunk_lines(data: bytes, pattern: "regex.Pattern[str]", keep: Keep | None, seconds: float
                 ) -> tuple[int, list[bytes]] | None:
    """The chunk's first message id and the lines (turns) of it that may hold a match, oldest first;
    None to look at every line, one message at a time (a damaged line, a message without text).

    The messages' texts, joined by newlines (so ``^`` and ``$`` match at each message's ends, as
    alone), are searched at once; a stretch with a match is halved until a few turns are left.
    """
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        records = orjson.loads(b"[" + b",".join(lines) + b"]")
        texts = [[m["x"] for m in r["m"] if keep is None or keep(r, m)] for r in records]
        first = int(records[0]["id"]) if records else None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
        return None
    if first is None or len(records) != len(lines) or not all(type(t) is str for ts in texts for t in ts):
        return None
    deadline = time.monotonic() + seconds

    def holds(lo: int, hi: int) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return pattern.search("\n".join(t for ts in texts[lo:hi] for t in ts), timeout=left) is not None

    kept: list[int] = []
    stretches = [(0, len(records))] if holds(0, len(records)) else []
    while stretches:
        lo, hi = stretches.pop()
        if hi - lo <= _FEW_TURNS:
            kept.extend(range(lo, hi))
            continue
        mid = (lo + hi) // 2
        stretches += [(a, b) for a, b in ((lo, mid), (mid, hi)) if holds(a, b)]
    return first, [lines[k] for k in sorted(kept)]


_FEW_TURNS = 8


# Characters a required piece of a pattern may hold, so that a message holding it holds the same
# bytes in the log: JSON writes them as they are, and no other character matches them in any case
# (i, k and s do: the dotted İ, the Kelvin sign K and the long ſ).
_PLAIN = frozenset("abcdefghjlmnopqrtuvwxyzABCDEFGHJLMNOPQRTUVWXYZ0123456789 -_,;:'!@#%&=<>~`/")


def required_piece(body: str) -> bytes | None:
    """Bytes every line holding a match must hold (lowered, ASCII), from the pattern's plain start; None
    when it has none of 3 characters or more, or may not need it (an alternation, inline flags)."""
    if "|" in body or not joinable(body):
        return None
    start = 0
    while start < len(body) and body[start] in _PLAIN | set("iksIKS"):
        start += 1
    plain = body[:start]
    if start < len(body) and body[start] in "?*{":  # the last character may be left out or repeated
        plain = plain[:-1]
    pieces = "".join(c if c in _PLAIN else "\0" for c in plain).split("\0")
    best = max(pieces, key=len, default="")
    return best.lower().encode() if len(best) >= 3 else None


def _start(log: OrderLog, below: int | None, keep: Keep | None
           ) -> tuple[int, int, Keep | None] | None:
    """Where a scan starts: the message count it is pinned to, the byte it reads back from, and
    ``keep`` narrowed to messages under the pin; None when there is nothing to scan."""
    pinned = log.total if below is None else min(below, log.total)
    if pinned <= 0:
        return None
    if pinned < log.total:
        inner = keep
        keep = lambda record, message: (_message_id(record, message) < pinned  # noqa: E731
                                        and (inner is None or inner(record, message)))
    return pinned, _end_below(log, pinned), keep


def _end_below(log: OrderLog, below: int) -> int:
    """The byte end of the turn holding message ``below - 1`` (the log's end if it cannot be told)."""
    turn_of = getattr(log, "turn_of", None)
    offsets, lengths = getattr(log, "offsets", None), getattr(log, "lengths", None)
    if below >= log.total or turn_of is None or offsets is None or lengths is None:
        return log.end
    turn = turn_of(below - 1)
    if turn is None or turn >= len(offsets):
        return log.end
    return min(log.end, offsets[turn] + lengths[turn] + 1)


def _message_id(record: dict, message: dict) -> int:
    """The id of ``message`` inside its turn ``record`` (found by identity: a turn holds few)."""
    for k, other in enumerate(record["m"]):
        if other is message:
            return record["id"] + k
    return record["id"]


def _scan_pattern(log: OrderLog, pattern: "regex.Pattern[str]", want: int, found: list[Hit],
                  deadline: float, clock: Callable[[], float], keep: Keep | None = None,
                  below: int | None = None) -> int | None:
    """Scan every line (below message ``below``) with the pattern; returns the oldest message searched
    if time ran out (``below``, or the log's total, when it ran out before the first)."""
    start = _start(log, below, keep)
    if start is None:
        return None
    pinned, end, keep = start
    oldest: int | None = None

    def searched(message_id: int) -> None:
        # The oldest message searched to the end: a time limit can strike inside a turn.
        nonlocal oldest
        oldest = message_id

    class Match:
        last_span: tuple[int, int] | None = None

        def __call__(self, text: str) -> int:
            left = deadline - clock()
            if left <= 0:
                raise TimeoutError
            found_at = pattern.search(text, timeout=left)
            if found_at is None:
                return -1
            self.last_span = found_at.span()
            return found_at.start()

    match = Match()
    whole = joinable(pattern.pattern)
    piece = required_piece(pattern.pattern)
    for _, data in log.backward(end):
        if piece is not None and piece not in data.lower():  # no line of the chunk can match
            if deadline - clock() <= 0:
                return oldest if oldest is not None and oldest < pinned else pinned
            at = _first_id(data)
            if at is not None:
                oldest = at if oldest is None else min(oldest, at)
                continue
        if whole:
            left = deadline - clock()
            if left <= 0:
                return oldest if oldest is not None and oldest < pinned else pinned
            try:  # (half the time left at most: a slow pattern then goes on message by message)
                narrowed = _chunk_lines(data, pattern, keep, left / 2)
            except TimeoutError:
                narrowed = None
            if narrowed is not None:
                # only the turns that may match are read one message at a time; when they are
                # done, every message of the chunk was searched
                first, lines = narrowed
                ended = _collect_back(lines, match, found, searched, keep, want, deadline, clock)
                if ended is not None:
                    return None if ended == _FULL else (oldest if oldest is not None and oldest < pinned
                                                        else pinned)
                oldest = first if oldest is None else min(oldest, first)
                continue
        ended = _collect_back(data.split(b"\n"), match, found, searched, keep, want, deadline, clock)
        if ended is not None:
            return None if ended == _FULL else (oldest if oldest is not None and oldest < pinned else pinned)
    return None


_FULL, _OUT_OF_TIME = "full", "out of time"


def _collect_back(lines: list[bytes], match: Callable[[str], int], found: list[Hit],
                  searched: Callable[[int], None] | None,
                  keep: Keep | None, want: int, deadline: float, clock: Callable[[], float]) -> str | None:
    """Collect the hits of ``lines``, newest first; ``_FULL`` once ``want`` are found,
    ``_OUT_OF_TIME`` when the deadline passed, None when every line was searched."""
    for k in range(len(lines) - 1, -1, -1):
        if not lines[k]:
            continue
        if deadline - clock() <= 0:
            return _OUT_OF_TIME
        try:
            _collect(lines[k], match, found, searched, keep)
        except TimeoutError:
            return _OUT_OF_TIME
        if len(found) >= want:
            return _FULL
    return None
