"""Ranking a question over the messages: BM25 first, then what a question means past its words.

People ask "what name did we give the staging cluster?" and the answer is the
agent's reply "Let's go with Heron", which holds none of those words; they
ask "what did we decide last Tuesday?" and no message says "Tuesday".  Plain
BM25 over the question's words finds the message that asked, not the one
that answered.  So the ranking (measured by scripts/bench_meaning.py, on our
own harder corpus and on a public long-dialogue benchmark) does, in order:

1. **Times.**  A time the query names is read as a range of time
   (:mod:`endless.core.search.when`) and its words taken out.  (Dropping the
   words that frame a question, "what kind of", "how likely", like stop words
   is built and off: measured, it gains nothing.)
2. **All words first.**  The messages holding every word rank first (an AND,
   fast at any size); promised, and kept.
3. **A pool by BM25.**  The best ``SEARCH_POOL`` messages holding any of the
   words (the rarest words while their rows stay under ``SEARCH_POSTINGS_MAX``),
   and as many again from inside the named time, if any.
4. **Neighbours.**  Each message gains part of the score of the best-scored
   message within ``SEARCH_NEIGHBOUR_WIDTH`` of it in the same chat: the
   reply to a question, the detail after its topic sentence.
5. **Time.**  A message inside the named time scores ``1 + SEARCH_TIME_BOOST``
   times as much: favoured, never filtered (a person's "last week" is loose).
6. **Summary lines.**  The written summary lines holding the words (those of
   at most 16 messages) give each message they cover a share of the best
   score: a wider, coarser neighbourhood, and a model writer's words for it.
7. **Speakers.**  A name the question holds that the memory uses to address
   one side ("Thanks, Jolene!") is that side's
   (:mod:`endless.core.search.speakers`): its messages score
   ``1 + SEARCH_SPEAKER_BOOST`` times as much and the name leaves the words
   (people name the one they talk to, so the name marks the greetings, not
   the answer).  On the public benchmark: top 5 68.3% to 73.3%, top 20
   83.9% to 86.9%.
8. **Feedback** (off by default: measured, it adds about a point at 20 hits
   and nothing at 5).  The words most typical of the best few messages are
   searched for too and their scores added, weighed lower.  Other words a
   model wrote for the question (``expand``: the writer's model, when one is
   set) are searched for the same way, weighed as the question's own.

Steps 4, 6, 7 and 8 (and the question words) are for a query asked as a question
("which database did we pick?", :func:`endless.core.search.query.asks`) with no
quoted phrase: it asks for the answer, which may hold none of its words.  Words typed as words
("postgres billing") promise hits that hold them, ranked by BM25 as they
always were (a time they name still counts).

Not here, measured: a dense embedding ranking fused by reciprocal rank
(all-MiniLM-L6-v2, int8 ONNX, the only small English model a package
registry ships whole) found less than BM25 alone on the public benchmark
(46% at 20 hits against 72%); fused with the neighbours' ranking it gained at
best a point (weight 0.15) and lost 10 at 5 hits at equal weight; and it
embedded 16-22 messages a second on the 2 shared cores: most of a day for a
million messages.

All of it stands on the index's primitives (``ranked``, ``term_docs``,
``about``), so another index under the finder ranks the same way.  Every
query runs under the search's deadline; the work is bounded by the pool.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from endless.core.search import query as ql
from endless.core.store import durable
from endless.core.search import speakers, when
from endless.core.search.index_rows import Filters, Placed, line_part
from endless.core.search.word_index import WordIndex
from endless.core.settings import (QUESTION_WORDS, SEARCH_ALONE_SHARE, SEARCH_EXPANSION_WEIGHT,
                                   SEARCH_EXPANSION_WORDS, SEARCH_FEEDBACK_DOCS, SEARCH_FEEDBACK_WEIGHT,
                                   SEARCH_FEEDBACK_WORDS, SEARCH_LINE_LEVEL_MAX, SEARCH_LINE_POOL,
                                   SEARCH_LINE_WEIGHT, SEARCH_NEIGHBOUR_DECAY, SEARCH_NEIGHBOUR_WEIGHT,
                                   SEARCH_NEIGHBOUR_WIDTH, SEARCH_POOL, SEARCH_POSTINGS_MAX, SEARCH_SPEAKER_BOOST,
                                   SEARCH_TERMS_MAX, SEARCH_TIME_BOOST, STOPWORDS)


@dataclass(frozen=True)
class Ranking:
    """Which methods a ranked search uses past plain BM25 (the default: what measured best)."""

    question_words: bool = False  # measured: no gain on either corpus (LoCoMo -0.4 at 20 hits)
    neighbours: bool = True
    time: bool = True
    lines: bool = True
    feedback: bool = False
    speakers: bool = True


DEFAULT = Ranking()
PLAIN = Ranking(question_words=False, neighbours=False, time=False, lines=False, feedback=False, speakers=False)


@dataclass(frozen=True)
class Ranked:
    """A message as ranked: ``tier`` 0 holds every word; higher ``score`` is better."""

    tier: int
    score: float
    key: int


_WORD = re.compile(r"[^\W_]+")


def question(q: ql.Query, now: float, ranking: Ranking) -> tuple[tuple[str, ...], list[when.Span]]:
    """The words a query is ranked by, and the times it names."""
    ranking = as_asked(q, ranking)
    words = q.words
    spans: list[when.Span] = []
    if ranking.time and q.mode == ql.WORDS:
        spans, rest = when.read(ql.without_phrases(q.text), now)
        if spans:
            words = ql.words_of(rest) or words
    if ranking.question_words:
        words = tuple(w for w in words if w not in QUESTION_WORDS) or words
    return words, spans


def as_asked(q: ql.Query, ranking: Ranking) -> Ranking:
    """The methods that apply to ``q``: a question gets them all, typed words only the time (and so does
    a question with a quoted phrase: each phrase is required in every hit)."""
    if ql.asks(q.text) and not q.phrases:
        return ranking
    return replace(ranking, question_words=False, neighbours=False, lines=False, feedback=False, speakers=False)


def match_expressions(index: WordIndex, words: tuple[str, ...], phrases: tuple[str, ...]
                      ) -> tuple[str | None, str | None]:
    """The FTS5 expressions of all the words (None: not worth a tier of its own) and of any of them.

    The first lets FTS5 skip through the common words' rows instead of
    scoring each, so it stays fast at any size.  The second looks at every
    row holding a word, so it takes the rarest words while those rows stay
    under ``SEARCH_POSTINGS_MAX``: a cap on work, which reaches only the
    messages that lack some word.  A word found nowhere matches nothing and
    is left out.  Each phrase is required in both.
    """
    if words:  # a word whose stem is a stop word ("using" is "us") matches every message holding that word
        stems = index.stems(list(words))
        words = tuple(w for w, stem in zip(words, stems) if stem not in STOPWORDS or stem == w) or words
    docs = index.term_docs(list(words)) if words else {}
    present = sorted((w for w in words if docs.get(w, 0) > 0), key=lambda w: docs[w])
    joined = " AND ".join(ql.fts_string(p) for p in phrases)
    if not present:
        return (None, joined) if joined else (None, None)
    every = " AND ".join(([f"({joined})"] if joined else []) + [ql.fts_string(w) for w in present])
    kept: list[str] = []
    rows = 0
    for word in present[:SEARCH_TERMS_MAX]:
        if kept and rows + docs[word] > SEARCH_POSTINGS_MAX:
            break
        kept.append(word)
        rows += docs[word]
    anyof = " OR ".join(ql.fts_string(w) for w in kept)
    if joined:
        anyof = f"({joined}) AND ({anyof} OR {' OR '.join(ql.fts_string(p) for p in phrases)})"
    return (every if len(present) > 1 or joined else None), anyof


def messages(index: WordIndex, q: ql.Query, filters: Filters, want: int, deadline: float, now: float,
             ranking: Ranking, said: Callable[[int], tuple[str, str] | None],
             expand: Callable[[str], Sequence[str]] | None = None) -> list[Ranked]:
    """The best ``want`` messages for a ranked query, best first.

    ``said``: a message's kind and text, from the log.  ``expand`` (a
    question only): other words for it, written by a model; searched for
    too, weighed as its own words.  A failing one adds nothing."""
    ranking = as_asked(q, ranking)
    words, spans = question(q, now, ranking)
    who = speakers.speaker(index, q.text, words, said, filters, deadline) if ranking.speakers else None
    if who is not None:
        words = tuple(w for w in words if w not in who.words) or words
    every, anyof = match_expressions(index, words, q.phrases)
    expanding = expand is not None and ql.asks(q.text) and not q.phrases
    if anyof is None and not expanding:
        return []
    first: dict[int, float] = {}
    if every is not None:
        first = {r.key: -r.score for r in index.ranked("words", every, filters, 0, want, deadline)}
    if anyof is not None and not (ranking.neighbours or spans or ranking.lines or ranking.feedback or expanding):
        rest = index.ranked("words", anyof, filters, 0, want + len(first), deadline)  # plain BM25: no pool
        return _ordered(first, {r.key: -r.score for r in rest if r.key not in first}, want)
    ranges = [(s.since, s.before) for s in spans]
    scores = _pool(index, anyof, filters, ranges, deadline) if anyof is not None else {}
    scores.update({k: max(v, scores.get(k, 0.0)) for k, v in first.items()})
    totals, _ = _smoothed(index, scores, filters, ranges, ranking)
    matched = set(scores)  # the messages holding a word searched for
    if ranking.lines and anyof is not None:
        _add_lines(index, anyof, filters, deadline, totals)
    if who is not None:
        _favour(index, totals, speakers.kinds_filter(filters, who))
    sources = []
    if ranking.feedback:
        text_of = lambda key: (said(key) or ("", ""))[1]  # noqa: E731
        sources.append((SEARCH_FEEDBACK_WEIGHT, lambda: _feedback_words(index, totals, words, text_of)))
    if expanding:
        sources.append((SEARCH_EXPANSION_WEIGHT, lambda: _expansion(expand, q.text, words)))  # type: ignore[arg-type]
    for weight, source in sources:
        extra = source()
        if extra:
            _, more = match_expressions(index, extra, ())
            if more is not None:
                found = _pool(index, more, filters, ranges, deadline)
                matched.update(found)
                others, _ = _smoothed(index, found, filters, ranges, ranking)
                top, other_top = max(totals.values(), default=1.0), max(others.values(), default=1.0)
                other_top = other_top or 1.0
                for key, value in others.items():
                    totals[key] = totals.get(key, 0.0) + weight * value * top / other_top
    return _ordered({k: totals.get(k, v) for k, v in first.items()},
                    {k: v for k, v in totals.items() if k not in first}, want, matched)


def _ordered(first: dict[int, float], rest: dict[int, float], want: int,
             matched: set[int] | None = None) -> list[Ranked]:
    """Tier 0 (every word) before the rest, each best first, the newest first at equal scores.

    ``matched``: the messages holding a word; the others (brought by their
    neighbours or a line) take at most ``SEARCH_ALONE_SHARE`` of any first n hits, so
    a page keeps the weaker messages that do hold the words."""
    out = [Ranked(0, s, k) for k, s in sorted(first.items(), key=lambda item: (-item[1], -item[0]))]
    ranked = [Ranked(1, s, k) for k, s in sorted(rest.items(), key=lambda item: (-item[1], -item[0]))]
    if matched is None:
        return (out + ranked)[:want]
    waiting: list[Ranked] = []
    alone = 0
    for item in ranked:
        if len(out) >= want:
            break
        if item.key in matched:
            out.append(item)
        else:
            waiting.append(item)
        while waiting and len(out) < want and alone + 1 <= SEARCH_ALONE_SHARE * (len(out) + 1):
            out.append(waiting.pop(0))
            alone += 1
    return (out + waiting)[:want]


def _pool(index: WordIndex, expression: str, filters: Filters, ranges: list[tuple[float, float]],
          deadline: float) -> dict[int, float]:
    """BM25 (higher better) of the best ``SEARCH_POOL`` matches, and as many from inside each named time."""
    scores = {r.key: -r.score for r in index.ranked("words", expression, filters, 0, SEARCH_POOL, deadline)}
    for since, before in ranges:
        inside = _narrowed(filters, since, before)
        if inside is None:
            continue
        for r in index.ranked("words", expression, inside, 0, SEARCH_POOL, deadline):
            scores.setdefault(r.key, -r.score)
    return scores


def _narrowed(filters: Filters, since: float, before: float) -> Filters | None:
    """The filters limited to ``since``..``before`` as well (None: the two do not meet)."""
    start = since if filters.since is None else max(since, filters.since)
    stop = before if filters.before is None else min(before, filters.before)
    return None if start >= stop else replace(filters, since=start, before=stop)


def _smoothed(index: WordIndex, scores: dict[int, float], filters: Filters,
              ranges: list[tuple[float, float]], ranking: Ranking) -> tuple[dict[int, float], dict[int, Placed]]:
    """Each message's score with its neighbours' and its time's part; only messages the filters keep."""
    width = SEARCH_NEIGHBOUR_WIDTH if ranking.neighbours else 0
    around = {k + d for k in scores for d in range(-width, width + 1)}
    placed = index.about(sorted(around), filters) if (width or ranges) else {}
    totals: dict[int, float] = {}
    for key in around:
        here = placed.get(key)
        if (width or ranges) and (here is None or not here.kept):
            continue
        total = scores.get(key, 0.0)
        if width and here is not None:
            context = 0.0
            for d in range(1, width + 1):
                for other in (key - d, key + d):
                    there = placed.get(other)
                    if other in scores and there is not None and there.session == here.session:
                        context = max(context, scores[other] * SEARCH_NEIGHBOUR_DECAY ** (d - 1))
            total += SEARCH_NEIGHBOUR_WEIGHT * context
        if ranges and here is not None and here.at is not None and any(a <= here.at < b for a, b in ranges):
            total *= 1.0 + SEARCH_TIME_BOOST
        if total > 0:
            totals[key] = total
    return totals, placed


def _favour(index: WordIndex, totals: dict[int, float], theirs: Filters) -> None:
    """The messages the named speaker said (``theirs``: the filters narrowed to their kinds) score more."""
    placed = index.about(sorted(totals), theirs)
    for key, here in placed.items():
        if here.kept and key in totals:
            totals[key] *= 1.0 + SEARCH_SPEAKER_BOOST


def _expansion(expand: Callable[[str], Sequence[str]], text: str, words: tuple[str, ...]) -> tuple[str, ...]:
    """The model's other words for the question, as query words (its own words and stop words left out)."""
    try:
        said = expand(text)
    except Exception as exc:  # a model's failure must never fail the search
        durable.log("search", f"the query expansion failed ({type(exc).__name__}: {exc}); searched without it")
        return ()
    asked = set(words)
    found = ql.words_of(" ".join(str(s) for s in said)[:2000]) if said else ()
    return tuple(w for w in found if w not in asked and w not in STOPWORDS)[:SEARCH_EXPANSION_WORDS]


def _add_lines(index: WordIndex, expression: str, filters: Filters, deadline: float,
               totals: dict[int, float]) -> None:
    """Each message a matching written line covers gains a share of the best score, as the line ranks."""
    lines = [r for r in index.ranked("line_words", expression, replace(filters, kinds=None, chat=None), 0,
                                     SEARCH_LINE_POOL, deadline) if line_part(r.key)[0] <= SEARCH_LINE_LEVEL_MAX]
    if not lines:
        return
    best_line = max(-r.score for r in lines) or 1.0
    share: dict[int, float] = {}
    for r in lines:
        level, ix = line_part(r.key)
        for key in range(ix << level, (ix + 1) << level):
            share[key] = max(share.get(key, 0.0), -r.score / best_line)
    placed = index.about([k for k in share if k not in totals], filters)
    top = max(totals.values(), default=1.0)
    for key, part in share.items():
        if key in totals or (key in placed and placed[key].kept):
            totals[key] = totals.get(key, 0.0) + SEARCH_LINE_WEIGHT * part * top


def _feedback_words(index: WordIndex, totals: dict[int, float], words: tuple[str, ...],
                    text_of: Callable[[int], str | None]) -> tuple[str, ...]:
    """The words most typical of the best few messages (common in them, rare in the memory)."""
    best = sorted(totals, key=lambda k: (-totals[k], -k))[:SEARCH_FEEDBACK_DOCS]
    asked = set(words)
    weight: Counter[str] = Counter()
    for rank, key in enumerate(best):
        text = text_of(key) or ""
        for word in {w.lower() for w in _WORD.findall(text[:4000])}:
            if len(word) > 2 and not word.isdigit() and word not in STOPWORDS and word not in QUESTION_WORDS \
                    and word not in asked:
                weight[word] += 1.0 / (1.0 + 0.2 * rank)
    candidates = [w for w, _ in weight.most_common(4 * SEARCH_FEEDBACK_WORDS)]
    if not candidates:
        return ()
    docs = index.term_docs(candidates)
    total = max(1, index.count())
    useful = [w for w in candidates if docs.get(w, 0) > 1]
    useful.sort(key=lambda w: -weight[w] * math.log(1 + total / (1 + docs[w])))
    return tuple(useful[:SEARCH_FEEDBACK_WORDS])
