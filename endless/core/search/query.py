"""The search query language, one for every face (DESIGN §5).

Plain words are ranked by relevance (BM25 over the full-text index: any
order, stemmed, any case); a query that is one ``"quoted phrase"`` is found
exactly, newest first; ``/pattern/`` is a regular expression, newest first.
Words and quoted phrases mixed are ranked, each phrase required.  Filters
come beside the query (the tool's parameters, the CLI's flags, the RPC's
fields), never inside it, so a word like ``kind:`` is only a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from endless.core import moments
from endless.core.search.index import Filters
from endless.core.settings import (SEARCH_PHRASE_CHARS_MAX, SEARCH_TERMS_MAX, STOPWORDS)

WORDS, PHRASE, PATTERN = "words", "phrase", "pattern"
SCOPES = ("messages", "lines", "both")
# What a person calls a message, mapped to the log's kinds (endless.core.store.messages.KINDS).
KIND_NAMES = {
    "person": ("user",),
    "agent": ("reply", "said", "work"),
    "tool": ("trace", "call", "result"),
    "status": ("status", "note"),
}
_WORD = re.compile(r"[^\W_]+")
_QUOTED = re.compile(r'"([^"]*)"')


class QueryError(ValueError):
    """A query or filter that cannot be searched for; the message says why and what to write.

    ``arg`` names the filter at fault (``since``, ``kind`` …) apart from ``problem``, so each face
    can name it as its people type it (the CLI's ``--since``).
    """

    def __init__(self, message: str, arg: str | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.arg = arg
        self.problem = problem


def _bad(arg: str, problem: str) -> QueryError:
    return QueryError(f"{arg} {problem}", arg, problem)


@dataclass(frozen=True)
class Query:
    mode: str  # WORDS, PHRASE or PATTERN
    text: str  # the pattern's body, the phrase, or the words as typed
    words: tuple[str, ...] = ()  # ranked words, stopwords dropped (all kept when only stopwords)
    phrases: tuple[str, ...] = ()  # phrases that must appear (PHRASE: the one phrase)


def parse(query: object) -> Query:
    if not isinstance(query, str) or not query.strip():
        raise QueryError('give words to search for, a "quoted phrase" or a /regular expression/')
    text = query.strip()
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        body = text[1:-1]
        if not body:
            raise QueryError("the regular expression // is empty")
        return Query(PATTERN, body)
    phrases = tuple(p.strip() for p in _QUOTED.findall(text) if p.strip())
    if any(len(p) > SEARCH_PHRASE_CHARS_MAX for p in phrases):
        raise QueryError(f"a quoted phrase may be at most {SEARCH_PHRASE_CHARS_MAX:,} characters; "
                         "quote a shorter part of it")
    words = _words(without_phrases(text))
    if len(phrases) == 1 and not words and text.startswith('"') and text.endswith('"'):
        return Query(PHRASE, phrases[0], (), phrases)
    if not words and not phrases:
        raise QueryError(f"{query!r} holds no word to search for; search for words, "
                         "a \"quoted phrase\" or a /regular expression/")
    return Query(WORDS, text, words, phrases)


def without_phrases(text: str) -> str:
    """``text`` with its quoted phrases (and stray quotes) taken out."""
    return _QUOTED.sub(" ", text).replace('"', " ")


def words_of(text: str) -> tuple[str, ...]:
    """The words a ranked query keeps of ``text`` (stopwords dropped, or all if only stopwords)."""
    return _words(text)


def _words(text: str) -> tuple[str, ...]:
    found = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in found if w not in STOPWORDS]
    unique = tuple(dict.fromkeys(kept or found))
    return unique[:SEARCH_TERMS_MAX * 4]


ASKING = frozenset("what when where who whom whose why how which".split())  # words that start a question


def asks(text: str) -> bool:
    """Whether ``text`` is asked as a question ("what did we pick?", "which port we chose"), not typed as
    the words to find: it ends with a question mark or starts with a question word."""
    words = _WORD.findall(text.lower())
    return text.rstrip().endswith("?") or bool(words and words[0] in ASKING)


def fts_string(text: str) -> str:
    """``text`` as one FTS5 string (a phrase of its tokens), whatever characters it holds."""
    return '"' + text.replace('"', '""') + '"'


def kinds(value: object) -> tuple[str, ...] | None:
    """``person``, ``agent``, ``tool`` or ``status`` (or several, comma-separated) as log kinds."""
    if value is None or value == "" or value == []:
        return None
    names = value if isinstance(value, list) else str(value).split(",")
    out: list[str] = []
    for name in names:
        key = str(name).strip().lower()
        if key not in KIND_NAMES:
            raise _bad("kind", f"{name!r} is not one of {', '.join(KIND_NAMES)}")
        out.extend(KIND_NAMES[key])
    return tuple(out)


def scope(value: object) -> str:
    if value is None or value == "":
        return "messages"
    key = str(value).strip().lower()
    if key not in SCOPES:
        raise _bad("scope", f"{value!r} is not one of {', '.join(SCOPES)}")
    return key


def moment(value: object, name: str) -> float | None:
    """A date (``2026-11-30``, local midnight) or ISO time (``2026-11-30T14:05``, ``…Z``) as Unix seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        when: float | None = float(value)
    else:
        when = moments.parse_iso(str(value))
    if when is None:
        raise _bad(name, f"{value!r} is not a date or time; write it as 2026-11-30 or "
                         "2026-11-30T14:05 (local time) or 2026-11-30T13:05Z")
    if not moments.is_moment(when):  # year 1 or 9999: no time of the memory, and no date to show
        raise _bad(name, moments.OUT_OF_RANGE.format(value=value))
    return when


def filters(chat: object = None, kind: object = None, since: object = None, before: object = None,
            below: int | None = None) -> Filters:
    chat_text = None if chat is None or str(chat).strip() == "" else str(chat).strip()
    start, stop = moment(since, "since"), moment(before, "before")
    if start is not None and stop is not None and start >= stop:
        raise QueryError(f"since ({since}) must come before before ({before})")
    return Filters(kinds(kind), chat_text, start, stop, below)


def has_words(text: str) -> bool:
    """Whether the index's tokenizer finds a word in ``text`` (letters or digits)."""
    return bool(_WORD.search(text))


# Scripts written without spaces between words: the tokenizer takes a whole run as one word.
_UNSPACED = re.compile("[\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff"
                       "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")


def unspaced(text: str) -> bool:
    """Whether ``text`` holds a script without spaces between words (Thai, Lao, Myanmar, Khmer, CJK)."""
    return bool(_UNSPACED.search(text))
