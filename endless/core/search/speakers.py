"""Who a question is about: a name the memory's own messages call one side of the conversation.

"What pets does Jolene have?" is answered by what Jolene said ("This is
Susie, my second snake"), while the messages holding the word "Jolene" are
mostly the other side's ("Cool, Jolene!"): people name the one they talk to,
seldom themselves.  So a name in a question is read the way the memory uses
it: the messages holding it are sampled (the newest few, through the index),
and where one side mostly *addresses* someone by it ("Thanks, Jolene!",
"Hey Jolene", "…, Jolene.") the name is the other side's.  A question naming
one side's speaker then favours that side's messages, and the name itself
leaves the question's words (it says who, not what).

The sides are the log's: the person (``user``) and the agent (``reply``,
``said``, ``work``); a memory imported from a conversation between two
people keeps one of them as each.  Nothing is stored: the sample is read at
question time, bounded, so forgetting a message forgets what it taught.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from endless.core.search import query as ql
from endless.core.search.index_rows import Filters
from endless.core.search.word_index import WordIndex
from endless.core.settings import (QUESTION_WORDS, SEARCH_SPEAKER_ADDRESSED_MIN, SEARCH_SPEAKER_SAMPLE,
                                   SEARCH_SPEAKER_SHARE, STOPWORDS)

PERSON, AGENT = ql.KIND_NAMES["person"], ql.KIND_NAMES["agent"]
_NAME = re.compile(r"\b[A-Z][^\W\d_]*[a-z][^\W\d_]*\b")  # a capitalised word: "Jolene", "McKenzie"
_GREETING = r"(?:hey|hi|hello|dear|thanks|thank\s+you|congrats|congratulations|wow|oh|yo|bye|morning|sorry|yes|yeah)"


@dataclass(frozen=True)
class Speaker:
    """The side a question's name belongs to: the kinds of its messages, and the words naming it."""

    kinds: tuple[str, ...]
    words: tuple[str, ...]


def names(text: str) -> list[str]:
    """The capitalised words of a question that may be names (its question words and stop words not)."""
    out: list[str] = []
    for found in _NAME.findall(text[:2000]):
        word = found.lower()
        if word not in STOPWORDS and word not in QUESTION_WORDS and word not in ql.ASKING and found not in out:
            out.append(found)
    return out[:4]


def addressed(text: str, name: str) -> bool:
    """Whether ``text`` speaks to someone called ``name``: the name set off as a greeting or by a comma,
    not as the subject or object of a sentence."""
    n = re.escape(name)
    after = r"(?=\s*(?:[,!?.;:)]|$))"
    return bool(re.search(rf"(?:^|[.!?]\s+|\b{_GREETING}[,!]?\s+){n}{after}|,\s*{n}{after}", text[:4000],
                          re.IGNORECASE | re.MULTILINE))


def side_of(index: WordIndex, name: str, read: Callable[[int], tuple[str, str] | None], filters: Filters,
            deadline: float) -> tuple[str, ...] | None:
    """The kinds of the side called ``name`` (None: not known): the other side from the one that,
    in the newest messages holding the name, addresses someone by it."""
    rows = index.newest("words", ql.fts_string(name), Filters(below=filters.below), None,
                        SEARCH_SPEAKER_SAMPLE, deadline)
    by_person = by_agent = 0
    for row in rows:
        said = read(row.key)
        if said is None or not addressed(said[1], name):
            continue
        if said[0] in PERSON:
            by_person += 1
        elif said[0] in AGENT:
            by_agent += 1
    total = by_person + by_agent
    if total < SEARCH_SPEAKER_ADDRESSED_MIN:
        return None
    if by_person >= SEARCH_SPEAKER_SHARE * total:
        return AGENT
    if by_agent >= SEARCH_SPEAKER_SHARE * total:
        return PERSON
    return None


def speaker(index: WordIndex, text: str, words: tuple[str, ...], read: Callable[[int], tuple[str, str] | None],
            filters: Filters, deadline: float) -> Speaker | None:
    """The side the question asks about, if its names call one side only."""
    sides: dict[tuple[str, ...], list[str]] = {}
    for name in names(text):
        if name.lower() not in words:
            continue
        side = side_of(index, name, read, filters, deadline)
        if side is not None:
            sides.setdefault(side, []).append(name.lower())
    if len(sides) != 1:
        return None
    (kinds, named), = sides.items()
    return Speaker(kinds, tuple(named))


def kinds_filter(filters: Filters, found: Speaker) -> Filters:
    """The filters narrowed to the speaker's kinds (to tell, by the index, which messages are theirs)."""
    kinds = found.kinds if filters.kinds is None else tuple(k for k in filters.kinds if k in found.kinds)
    return replace(filters, kinds=kinds)
