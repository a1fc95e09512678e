"""One search, in any of the query language's three modes, for every face (DESIGN §5).

Words are ranked by the full-text index (:mod:`endless.core.search.index`),
which is caught up first, within the search's own time budget; a quoted
phrase takes the index's candidates newest first and keeps those that hold
the phrase as written; a pattern scans the log itself
(:mod:`endless.core.search.scan`), since no index can answer a regular
expression.  Every hit is read back from the log, so what a face shows is
the message as stored, never the index's idea of it.
"""

from __future__ import annotations

import heapq
import re
import sqlite3
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import orjson

from endless.core.store import durable
from endless.core.store import node_part
from endless.core.search import upkeep as index_upkeep
from endless.core.search import query as ql
from endless.core.search import ranking as rank
from endless.core.search import scan as recall
from endless.core.search import snippets
from endless.core.search import index as si
from endless.core.view import tiling
from endless.core.search.scan import Hit, Result, SearchError
from endless.core.words import count

if TYPE_CHECKING:
    from endless.core.search.upkeep import Sources
    from endless.core.search.word_index import WordIndex
    from endless.core.store import OrderLog, TreeStore
    from endless.core.view import ViewKeeper


class Searchable(Protocol):
    """What a search reads of an open memory (``Memory`` is one)."""

    log: "OrderLog"
    tree: "TreeStore"
    views: "ViewKeeper"
    search_index: "WordIndex"

    def index_sources(self) -> "Sources": ...

_PHRASE_BATCH = 200  # candidates a phrase search reads from the index at a time


@dataclass
class Corpus:
    """What a search reads: the log as of its start, the index, and how to read hits back."""

    log: object  # the order log or a snapshot of it: ``path``, ``end``, ``total``
    index: "WordIndex"
    sources: index_upkeep.Sources
    record_of: Callable[[int], tuple[dict, int] | None]  # the turn record holding a message, and its place
    line_text: Callable[[int, int], str | None]
    covering: Callable[[int], str | None] = lambda _id: None  # the view line that covers a message
    wrong: list[int] = field(default_factory=list)  # index rows the log contradicts (kind, time, chat, id)


def search(corpus: Corpus, query: object, skip: int, limit: int, seconds: float, *,
           chat: object = None, kind: object = None, since: object = None, before: object = None,
           scope: object = None, below: int | None = None,
           clock: Callable[[], float] = time.monotonic, ranking: rank.Ranking = rank.DEFAULT,
           now: float | None = None, expand: Callable[[str], Sequence[str]] | None = None) -> Result:
    """Hits ``skip .. skip+limit`` and whether more exist; a stopped search says how far it got.

    The first page starts with the chats whose title matches (kind ``title``,
    named by the chat's first message, newest first, at most ``limit``): a
    title is text the memory keeps and sends, so what can be forgotten by its
    words must be found by them.  A hit from a turn logged before its chat had
    a title (Hermes titles a chat after its first exchange) carries the title
    the chat got later, when known.

    Every hit the index gives is read back from the log and checked against
    the filters there (kind, time, chat, id): an index that says otherwise
    is wrong (derived data someone changed), so the hit is dropped, the
    index removed and rebuilt from the log, and the search run again on it
    (with its own ``seconds``: the clock is read by the search alone).

    Ranked words are ranked as ``ranking`` says (:mod:`endless.core.search.ranking`);
    ``now`` is when the question is asked (default: the wall clock), for the
    times it names ("yesterday"); ``expand`` gives a question's other words
    (a model's: ``Memory.expand_query``).
    """
    asked = time.time() if now is None else now
    try:
        result = _search(corpus, query, skip, limit, seconds, chat=chat, kind=kind, since=since, before=before,
                         scope=scope, below=below, clock=clock, ranking=ranking, now=asked, expand=expand)
    except _Damaged as damaged:
        corpus.wrong.clear()
        corpus.index.discard(damaged.error)
        result = _search(corpus, query, skip, limit, seconds, chat=chat,
                         kind=kind, since=since, before=before, scope=scope, below=below, clock=clock, retried=True,
                         ranking=ranking, now=asked, expand=expand)
    else:
        if corpus.wrong:
            corpus.index.discard(f"{count(len(corpus.wrong), 'row')} the order log contradicts, at message "
                                 f"{corpus.wrong[0]}")
            corpus.wrong.clear()
            result = _search(corpus, query, skip, limit, seconds, chat=chat,
                             kind=kind, since=since, before=before, scope=scope, below=below, clock=clock,
                             retried=True, ranking=ranking, now=asked, expand=expand)
            corpus.wrong.clear()  # (rebuilt from the log this time: what is still contradicted is dropped)
    if skip == 0 and kind is None and ql.scope(scope) != "lines":
        q, filters = ql.parse(query), ql.filters(chat, kind, since, before, result.below)
        result.hits = _title_hits(corpus, q, filters, clock() + seconds)[:limit] + result.hits
    result.hits = _titled(corpus, result.hits)
    return result


def _title_hits(corpus: Corpus, q: ql.Query, filters: si.Filters, deadline: float) -> list[Hit]:
    """The titled chats whose title holds the words (all of them), the phrase or the pattern."""
    if q.mode == ql.PATTERN:
        try:
            pattern = recall.compile_pattern(q.text)
        except SearchError:
            return []
        find = lambda title: [m.span() for m in pattern.finditer(title) if m.end() > m.start()]  # noqa: E731
    else:  # each word (or the phrase) where a word starts, as the index matches words (endings allowed)
        needles = list(q.phrases) if q.mode == ql.PHRASE else q.text.replace('"', " ").split()
        starts = [re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, n.split())), re.IGNORECASE) for n in needles]

        def find(title: str) -> list[tuple[int, int]]:
            spans = [[m.span() for m in pattern.finditer(title)] for pattern in starts]
            return sorted(x for found in spans for x in found) if spans and all(spans) else []
    try:  # (a pattern's search scans the log: the index's chats are caught up here, as far as time allows)
        index_upkeep.catch_up(corpus.index, corpus.sources, deadline)
    except (si.IndexBusy, si.Stopped, sqlite3.Error, OSError):
        pass
    try:
        chats = corpus.index.chats(filters, lambda title: bool(find(title))) if corpus.index.exists() else []
    except (sqlite3.Error, OSError):
        return []
    hits = []
    for session, title, first, at in chats:
        found = find(title)
        if found:  # a long title is cut around its first match, as a message's snippet is
            text, marks = snippets.snippet_marked(title, found)
            hits.append(Hit(first, at, title, session, "title", text, marks, line=corpus.covering(first)))
    return sorted(hits, key=lambda h: -h.id)


def _titled(corpus: Corpus, hits: list[Hit]) -> list[Hit]:
    known: dict[str, str] = {}
    out = []
    for hit in hits:
        if hit.title or not hit.session or hit.kind == "line":
            out.append(hit)
            continue
        if hit.session not in known:
            known[hit.session] = corpus.index.chat_title(hit.session)
        out.append(replace(hit, title=known[hit.session]) if known[hit.session] else hit)
    return out


class _Damaged(Exception):
    """The index file is damaged (SQLite says so): removed and rebuilt, and the search run again once."""

    def __init__(self, error: sqlite3.DatabaseError) -> None:
        super().__init__(str(error))
        self.error = error


def _search(corpus: Corpus, query: object, skip: int, limit: int, seconds: float, *,
            chat: object = None, kind: object = None, since: object = None, before: object = None,
            scope: object = None, below: int | None = None,
            clock: Callable[[], float] = time.monotonic, retried: bool = False,
            ranking: rank.Ranking = rank.DEFAULT, now: float = 0.0,
            expand: Callable[[str], Sequence[str]] | None = None) -> Result:
    try:
        q = ql.parse(query)
        where = ql.scope(scope)
        filters = ql.filters(chat, kind, since, before, below)
    except ql.QueryError as exc:
        raise SearchError(str(exc), exc.arg, exc.problem) from None
    if where == "lines" and (filters.kinds is not None or filters.chat is not None):
        raise SearchError("kind and chat filter messages; summary lines cover many chats and kinds "
                          "(search scope messages or both)")
    deadline = clock() + seconds
    seconds = max(0.0, deadline - clock())  # what the scans below may take: one deadline for the whole search
    pinned = corpus.log.total if below is None else min(below, corpus.log.total)  # type: ignore[attr-defined]
    filters = replace(filters, below=pinned)
    if q.mode == ql.PATTERN:
        return _pattern(corpus, q, filters, where, skip, limit, seconds, clock, pinned)
    if ql.unspaced(q.text) and where == "messages":
        # Chinese, Japanese, Thai…: no spaces between words, so the index holds whole runs of
        # text as one word; such a query is looked for as written, in the log itself.
        text = q.phrases[0] if q.mode == ql.PHRASE else " ".join(q.text.replace('"', " ").split())
        result = recall.scan_literal(corpus.log, text, skip, limit, seconds, clock, _keep(filters),  # type: ignore[arg-type]
                                     below=pinned)
        result.below = pinned
        result.hits = [replace(h, line=corpus.covering(h.id)) for h in result.hits]
        return result
    corpus.index.clock = clock
    result = Result(mode=q.mode, below=pinned)
    try:
        try:
            caught_up = index_upkeep.catch_up(corpus.index, corpus.sources, deadline)
        except si.IndexBusy:
            caught_up = False
        if not caught_up:
            result.indexed = corpus.index.count()
        if q.mode == ql.PHRASE:
            _phrase(corpus, q, filters, where, skip, limit, deadline, result)
        else:
            _ranked(corpus, q, filters, where, skip, limit, deadline, result, ranking, now, expand)
    except si.Stopped:
        result.stopped_at = pinned
    except (sqlite3.Error, OSError) as exc:
        if isinstance(exc, sqlite3.DatabaseError) and si.is_damage(exc) and not retried:
            raise _Damaged(exc) from None
        # The index cannot be used (a read-only or full disk, a file another program holds): a
        # phrase is still found by reading the log itself; ranked words need the index.
        durable.log("search", f"the search index {corpus.index.path} cannot be used: {exc}")
        if q.mode == ql.PHRASE and where == "messages":
            scanned = recall.scan_literal(corpus.log, q.phrases[0], skip, limit,  # type: ignore[arg-type]
                                          max(0.0, deadline - clock()), clock, _keep(filters), below=pinned)
            scanned.below = pinned
            return scanned
        raise SearchError(f"the search index {corpus.index.path} cannot be used ({exc}); "
                          'search for a "quoted phrase" or a /pattern/ until it can') from None
    return result


# -- ranked words --------------------------------------------------------------------------------

def _ranked(corpus: Corpus, q: ql.Query, filters: si.Filters, where: str, skip: int, limit: int,
            deadline: float, result: Result, ranking: rank.Ranking, now: float,
            expand: Callable[[str], Sequence[str]] | None) -> None:
    """Messages ranked by :mod:`endless.core.search.ranking`; summary lines by BM25, all words first."""
    want = skip + limit + 1
    rows: list[tuple[int, float, str, int]] = []  # messages as ranked: (tier, lower is better, table, key)
    lines: list[tuple[int, float, str, int]] = []
    if where in ("messages", "both"):
        def said(mid: int) -> tuple[str, str] | None:
            found = corpus.record_of(mid)
            if found is None:
                return None
            message = found[0]["m"][found[1]]
            return str(message.get("k", "")), str(message.get("x", ""))

        rows += [(r.tier, -r.score, "words", r.key)
                 for r in rank.messages(corpus.index, q, filters, want, deadline, now, ranking, said,
                                     expand)]
    if where in ("lines", "both") and filters.kinds is None and filters.chat is None:
        words, _ = rank.question(q, now, ranking)
        every, anyof = rank.match_expressions(corpus.index, words, q.phrases)
        seen: set[int] = set()
        for tier, expression in enumerate((every, anyof)):
            if expression is None or len(seen) >= want:
                continue
            found = [r for r in corpus.index.ranked("line_words", expression, filters, 0, want + len(seen), deadline)
                     if r.key not in seen][:want - len(seen)]
            seen.update(r.key for r in found)
            lines += [(tier, r.score, "line_words", r.key) for r in found]
    lines.sort(key=lambda row: (row[0], row[1], -row[3]))
    rows = list(heapq.merge(rows, lines, key=lambda row: (row[0], row[1])))  # each kept in its own order
    result.more = len(rows) > skip + limit
    terms = [w for w in q.words] + list(q.phrases)
    for _, _, table, key in rows[skip:skip + limit]:
        hit = _message_hit(corpus, key, terms, filters=filters) if table == "words" else _line_hit(corpus, key, terms)
        if hit is not None:
            result.hits.append(hit)


def _message_hit(corpus: Corpus, mid: int, terms: list[str], spans: list[tuple[int, int]] | None = None,
                 text: str | None = None, filters: si.Filters | None = None) -> Hit | None:
    found = corpus.record_of(mid)
    if found is None:
        return None
    record, k = found
    message = record["m"][k]
    if filters is not None and not _agrees(filters, mid, record, message):
        corpus.wrong.append(mid)
        return None
    body = message.get("x", "") if text is None else text
    piece, marks = snippets.snippet_marked(body, spans if spans is not None else word_spans(corpus, body, terms))
    at = message.get("at")
    at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else float("nan")
    return Hit(mid, at, record.get("t", ""), record.get("s", ""), message.get("k", ""), piece, marks,
               1, corpus.covering(mid))


def _line_hit(corpus: Corpus, key: int, terms: list[str], spans: list[tuple[int, int]] | None = None
              ) -> Hit | None:
    level, ix = si.line_part(key)
    text = corpus.line_text(level, ix)
    if text is None:
        return None
    first = tiling.first((level, ix))
    piece, marks = snippets.snippet_marked(text, spans if spans is not None else word_spans(corpus, text, terms))
    found = corpus.record_of(first)
    at = float("nan")
    if found is not None:
        value = found[0]["m"][found[1]].get("at")
        at = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else at
    return Hit(first, at, "", "", "line", piece, marks, tiling.count((level, ix)), tiling.name((level, ix)))


def word_spans(corpus: Corpus, text: str, terms: list[str]) -> list[tuple[int, int]]:
    """Where the text holds the query's words, as the index's tokenizer sees them (stems included)."""
    return corpus.index.token_spans(text, terms)


# -- an exact phrase ----------------------------------------------------------------------------------

def _phrase(corpus: Corpus, q: ql.Query, filters: si.Filters, where: str, skip: int, limit: int,
            deadline: float, result: Result) -> None:
    """Candidates from the index (the phrase's words in a row), kept when the text holds it as written."""
    phrase = q.phrases[0]
    want = skip + limit + 1
    if not ql.has_words(phrase):
        # Only punctuation: the index has no word of it to look up; scan the log for it.
        if where == "lines":
            raise SearchError(f"{phrase!r} holds no word; search messages for it")
        scanned = recall.scan_literal(corpus.log, phrase, skip, limit, max(0.0, deadline - corpus.index.clock()),  # type: ignore[arg-type]
                                      corpus.index.clock, _keep(filters), filters.below)
        result.hits, result.more, result.stopped_at = scanned.hits, scanned.more, scanned.stopped_at
        return
    needle = phrase.lower()
    found: list[tuple[int, Hit]] = []
    tables = [t for t, s in (("words", "messages"), ("line_words", "lines")) if where in (s, "both")]
    for table in tables:
        after: int | None = None
        kept = 0
        while kept < want:
            rows = corpus.index.newest(table, ql.fts_string(phrase), filters, after, _PHRASE_BATCH, deadline)
            for row in rows:
                hit = _verified(corpus, table, row.key, needle, filters)
                if hit is not None:
                    order = row.key if table == "words" else tiling.end(si.line_part(row.key)) - 1
                    found.append((order, hit))
                    kept += 1
                    if kept >= want:
                        break
            if len(rows) < _PHRASE_BATCH:
                break
            after = rows[-1].key
            if corpus.index.clock() >= deadline:
                raise si.Stopped
    found.sort(key=lambda item: -item[0])
    result.more = len(found) > skip + limit
    result.hits = [hit for _, hit in found[skip:skip + limit]]


def _verified(corpus: Corpus, table: str, key: int, needle: str, filters: si.Filters) -> Hit | None:
    if table == "words":
        got = corpus.record_of(key)
        if got is None:
            return None
        text = got[0]["m"][got[1]].get("x", "")
        spans = _occurrences(text, needle)
        return _message_hit(corpus, key, [], spans, text, filters) if spans else None
    text = corpus.line_text(*si.line_part(key)) or ""
    spans = _occurrences(text, needle)
    return _line_hit(corpus, key, [], spans) if spans else None


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    """Where the phrase is in ``text``: any case, any run of whitespace for a space (at most 64)."""
    pieces = needle.split()
    pattern = re.compile(r"\s+".join(re.escape(p) for p in pieces), re.IGNORECASE)
    out = []
    for found in pattern.finditer(text):
        out.append(found.span())
        if len(out) >= 64:
            break
    return out


# -- a pattern ----------------------------------------------------------------------------------------

def _agrees(filters: si.Filters, mid: int, record: dict, message: dict) -> bool:
    """Whether the log's own message (its record read back) is one the filters let through."""
    if filters.below is not None and mid >= filters.below:
        return False
    keep = _keep(filters)
    return keep is None or keep(record, message)


def _keep(filters: si.Filters) -> recall.Keep | None:
    """The filters as a test of a turn record and one of its messages (for the scans of the log)."""
    if filters.kinds is None and filters.chat is None and filters.since is None and filters.before is None:
        return None
    chat = filters.chat.lower() if filters.chat is not None else None

    def keep(record: dict, message: dict) -> bool:
        if filters.kinds is not None and message.get("k") not in filters.kinds:
            return False
        if chat is not None and record.get("s") != filters.chat and chat not in str(record.get("t", "")).lower():
            return False
        at = message.get("at")
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            return filters.since is None and filters.before is None
        if filters.since is not None and at < filters.since:
            return False
        return filters.before is None or at < filters.before

    return keep


def _pattern(corpus: Corpus, q: ql.Query, filters: si.Filters, where: str, skip: int, limit: int,
             seconds: float, clock: Callable[[], float], pinned: int) -> Result:
    """A regular expression over the messages (the log) and/or the written summary lines (the tree)."""
    started = clock()
    want = skip + limit + 1
    result = Result(pattern=True, mode=ql.PATTERN, below=pinned)
    found: list[tuple[int, Hit]] = []
    if where in ("messages", "both"):
        scanned = recall.scan_pattern(corpus.log, q.text, 0, want, seconds, clock, _keep(filters),  # type: ignore[arg-type]
                                      below=pinned)
        found += [(h.id, replace(h, line=corpus.covering(h.id))) for h in scanned.hits]
        result.stopped_at = scanned.stopped_at
    if where in ("lines", "both") and result.stopped_at is None:
        left = seconds
        lines, stopped = _pattern_lines(corpus, q, filters, want, clock() + left, clock)
        found += lines
        if stopped:  # (every message searched, not every line: nothing below to go on with)
            result.stopped_at = pinned
    found.sort(key=lambda item: -item[0])
    result.more = len(found) > skip + limit
    result.hits = [hit for _, hit in found[skip:skip + limit]]
    return result


def _pattern_lines(corpus: Corpus, q: ql.Query, filters: si.Filters, want: int, deadline: float,
                   clock: Callable[[], float]) -> tuple[list[tuple[int, Hit]], bool]:
    """Written summary lines the pattern matches, the latest stored first; True if time ran out.

    The index knows which stored lines were written (free ones repeat
    messages, searched already); the texts are read from the tree file itself.
    """
    pattern = recall.compile_pattern(q.text)
    corpus.index.clock = clock
    try:
        index_upkeep.catch_up(corpus.index, corpus.sources, deadline)
    except si.IndexBusy:
        pass
    written = corpus.index.line_keys()
    found: list[tuple[int, Hit]] = []
    if not written:
        return found, False
    for _, data in corpus.sources.tree.backward(corpus.sources.tree_end):
        for line in reversed(data.split(b"\n")):
            if clock() >= deadline:
                return found, True
            part = node_part(line) if line else None
            if part is None or si.line_key(*part) not in written:
                continue
            try:
                text = orjson.loads(line)["text"]
                match = pattern.search(text, timeout=max(0.0, deadline - clock()))
            except TimeoutError:
                return found, True
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if match is None or not corpus.index.line_in_time(part, filters):
                continue
            hit = _line_hit(corpus, si.line_key(*part), [], [match.span()])
            if hit is not None:
                found.append((tiling.end(part) - 1, hit))
                if len(found) >= want:
                    return found, False
    return found, False


def corpus_of(memory: Searchable) -> Corpus:
    """A search over an open memory as this process last read it."""
    log = memory.log

    def record_of(mid: int) -> tuple[dict, int] | None:
        turn = log.turn_of(mid)
        record = None if turn is None else log.read_record(turn)
        if record is None or not 0 <= mid - record["id"] < len(record["m"]):
            return None
        return record, mid - record["id"]

    def covering(mid: int) -> str | None:
        part = memory.views.covering(mid)
        return None if part is None else tiling.name(part)

    return Corpus(log, memory.search_index, memory.index_sources(), record_of, memory.tree.cached_text,
                  covering)
