"""Facts in a writer's try, and whether the line's sources hold them (DESIGN §3.3, ``invented``).

Numbers, identifiers, paths, URLs and quoted strings are what a small model
makes up; a try may carry only those its sources hold.  The sources are
normalised once each (heads stripped, separators and quotes folded) into a
haystack that every try of every line above them searches.  Pure functions,
no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence


@dataclass(frozen=True)
class Fact:
    """A fact-like piece of a try: ``kind`` is number, identifier, path, url or quote.

    ``text`` is the piece as written, ``key`` what is looked for in the sources,
    ``start``/``end`` its place in the text it was found in.
    """

    kind: str
    text: str
    key: str
    start: int
    end: int


_HEAD = re.compile(r"^\s*(?:\d+\+\d+\s*\|\s*)+")


def strip_heads(line: str) -> str:
    """One line without the ``id+n|`` heads at its start (repeated heads too)."""
    while True:
        stripped = _HEAD.sub("", line, count=1)
        if stripped == line:
            return line
        line = stripped


# ---------------------------------------------------------------------------
# Sources

_SEP_CHARS = ",_'\u2009\u202f\u00a0"
_THOUSANDS_BODY = r"(?<![\w.,'])\d{1,3}(?:[,_'\u2009\u202f\u00a0]\d{3})+(?!\d)"
_THOUSANDS = re.compile(_THOUSANDS_BODY)
# What every grouped number holds: a digit, a separator, a digit.  The offline writer normalises every
# source it reads, and most hold none: this pattern, which starts with a digit rather than a look
# behind, tells so in half the time (40,000 realistic messages: 66 ms against 149).
_THOUSANDS_HINT = re.compile(r"\d[,_'\u2009\u202f\u00a0]\d")
_ELLIPSES = re.compile(r"…|\.{3,}")


def _unsep(text: str) -> str:
    """Thousands separators removed from grouped numbers (``5,433`` → ``5433``)."""
    if _THOUSANDS_HINT.search(text) is None:  # (no grouped number: most texts, found at twice the speed)
        return text
    return _THOUSANDS.sub(lambda m: "".join(c for c in m.group(0) if c not in _SEP_CHARS), text)


# Fullwidth forms (ＡＢＣ１２３) read as their ASCII letters and digits; one character for one, so
# places in the text stay the same.
_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_ANY_FULLWIDTH = re.compile("[\uff01-\uff5e]")


def _widths(text: str) -> str:
    """``text`` with fullwidth forms read as ASCII.  A text without any (nearly all: the writer's own
    lines hold "…" and are not ASCII) is returned as it is, found by a search in C: a translation by
    a table looks up every character."""
    if text.isascii() or _ANY_FULLWIDTH.search(text) is None:
        return text
    return text.translate(_FULLWIDTH)


def _blank_ellipses(text: str) -> str:
    """Ellipses replaced by as many spaces (positions kept)."""
    if "…" in text:  # (the writer's own lines hold many: a replacement in C, not a call each)
        text = text.replace("…", " ")
    if "..." not in text:
        return text
    return _ELLIPSES.sub(lambda m: " " * len(m.group(0)), text)


_QUOTE_MAP = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "„": '"', "«": '"', "»": '"'})
_ANY_QUOTE_MARK = re.compile("[’‘“”„«»]")


def _fold(text: str) -> str:
    """For quoted strings: separators, quote marks, whitespace and case normalised."""
    return _fold_unsep(_unsep(_widths(text)))


def _fold_unsep(text: str) -> str:
    """:func:`_fold` of a text read as ASCII with its separators removed already."""
    if not text.isascii() and _ANY_QUOTE_MARK.search(text) is not None:
        text = text.translate(_QUOTE_MAP)
    return " ".join(text.split()).casefold()


def squeeze_ws(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Haystack:
    raw: str  # sources joined by newlines, heads stripped from every line
    lower_raw: str  # the same, casefolded
    plain: str  # raw, separators removed, ellipses blanked: where tokens are looked for
    folded: str  # for quoted strings
    ws: str  # whitespace-collapsed raw, for whole-text exemptions
    lower_ws: str  # the same, casefolded
    scripts: frozenset[str]


@lru_cache(maxsize=256)
def _source_hay(source: str) -> tuple[Haystack, bool]:
    """One source's haystack, and whether it has any line at all.

    Cached per source: a message is a source of its own line and of every
    merge above it, so each is normalised once rather than once per merge.
    256 sources cover merges up to level 8; at most about 90 MB even if every
    one were a 60,000-character trace.
    """
    lines = [strip_heads(line) for line in (source or "").splitlines()]
    raw = "\n".join(lines)
    ws = squeeze_ws(raw)
    unsep = _unsep(_widths(raw))
    plain = _blank_ellipses(unsep)
    return (Haystack(raw, raw.casefold(), plain, _fold_unsep(unsep), ws, ws.casefold(), frozenset(_scripts(raw))),
            bool(lines))


@lru_cache(maxsize=64)
def _haystack(sources: tuple[str, ...]) -> Haystack:
    """The sources' haystacks joined as if their lines were one text (every piece keeps its places)."""
    parts = [hay for hay, has_lines in map(_source_hay, sources) if has_lines]
    if len(parts) == 1:
        return parts[0]

    def spaced(texts) -> str:
        return " ".join(t for t in texts if t)

    ws = spaced(p.ws for p in parts)
    return Haystack("\n".join(p.raw for p in parts), "\n".join(p.lower_raw for p in parts),
                "\n".join(p.plain for p in parts), spaced(p.folded for p in parts), ws, ws.casefold(),
                frozenset().union(*(p.scripts for p in parts)))


def haystack_of(sources: Sequence[str] | Haystack) -> Haystack:
    if isinstance(sources, Haystack):
        return sources
    if isinstance(sources, str):
        sources = [sources]
    return _haystack(tuple(sources))


# ---------------------------------------------------------------------------
# Scripts

_SCRIPT_RANGES = {
    "Han": "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
           "\uf900-\ufaff\U00020000-\U0003134f",
    "Hiragana": "\u3041-\u309f",
    "Katakana": "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d",
    "Hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uffa0-\uffdc",
}
SCRIPT_PATTERNS = {name: re.compile(f"[{chars}]") for name, chars in _SCRIPT_RANGES.items()}
_ANY_SCRIPT = re.compile(f"[{''.join(_SCRIPT_RANGES.values())}]")
_KANA = {"Hiragana", "Katakana"}


def _scripts(text: str) -> list[str]:
    if text.isascii() or _ANY_SCRIPT.search(text) is None:  # (one search, not one a script, for most texts)
        return []
    return [name for name, pattern in SCRIPT_PATTERNS.items() if pattern.search(text)]


def foreign_scripts(text: str, hay: Haystack) -> list[str]:
    used = hay.scripts
    out = []
    for script in _scripts(text):
        if script in used:
            continue
        if script in _KANA and used & _KANA:
            continue
        if script == "Han" and used & _KANA:  # Japanese writes kanji beside kana
            continue
        out.append(script)
    return out


# ---------------------------------------------------------------------------
# Facts

_CJK_CHARS = "".join(_SCRIPT_RANGES.values())
_CJK = re.compile(f"[{_CJK_CHARS}]")
# Token breaks; CJK characters break tokens too (Chinese and Japanese write no spaces, Korean
# glues particles to words), so 端口5433 holds the number 5433.
_SPLIT = r"\s,;()\[\]{}<>\"“”„«»‹›「」『』`|…、。，：；！？（）【】" + _CJK_CHARS
_TOKEN = re.compile(rf"(?:{_THOUSANDS_BODY}|[^{_SPLIT}])+")
# The tokens that may hold a fact: _TOKEN's, less the words of ASCII letters with no capital after their
# first letter or no small letter at all ("the", "Tuesday", "HTTP"), which hold none (see _token_facts).
# Most of a text is such words, and the offline writer looks for facts in every source and line it
# writes: passed over by the regular expression, they cost no call each.  (The look behind tests a word
# only where it starts, after a break, not again at each of its letters; every tail of such a word is one
# too, so it changes nothing found.)
_FACT_TOKEN = re.compile(rf"(?<![^{_SPLIT}])(?!(?:[A-Z]?[a-z]+|[A-Z]+)(?![^{_SPLIT}]))"
                         rf"(?:{_THOUSANDS_BODY}|[^{_SPLIT}])+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?|" + _THOUSANDS_BODY.replace(r"(?<![\w.,'])", "") + r"(?:\.\d+)?")
_NUM_UNIT = re.compile(r"(\d+(?:\.\d+)?)(?:-?[^\W\d_]{1,10}|[°%‰×][^\W\d_]{0,3})")
_ABBREV = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]\.?")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.\-]*://|www\.)")


def _word(c: str) -> bool:
    """A character that glues to an identifier: a letter, digit or ``_``, not a CJK character."""
    return (c.isalnum() or c == "_") and not _CJK.match(c)


def _keep_lead(token: str) -> bool:
    """A token whose leading punctuation means something: a path, a flag, a dot file, a negative…"""
    return (token.startswith(("/", "~/", "./", "../", "\\")) or bool(_DRIVE.match(token))
            or bool(re.match(r"-{1,2}[^\W\d_]", token)) or bool(re.match(r"\.[^\W\d]", token)))


def _strip_token(token: str, start: int) -> tuple[str, int]:
    """Outer punctuation off a token (a possessive ``'s`` too); returns the token and its new start."""
    end = len(token)
    while end > 0 and not (_word(token[end - 1]) or token[end - 1] in "/\\"):
        end -= 1
    token = token[:end]
    if token.endswith(("'s", "’s")) and len(token) > 2 and _word(token[-3]):
        token = token[:-2]
    if not _keep_lead(token):
        lead = 0
        while lead < len(token) and not _word(token[lead]):
            lead += 1
        token, start = token[lead:], start + lead
    while len(token) > 1 and token.endswith("/") and not token.endswith("//"):
        token = token[:-1]
    return token, start


def _has_inner_capital(token: str) -> bool:
    """Whether a small letter is followed by a capital (``iPhone``, ``getValue``).

    Asked of nearly every word a catch-up reads: a word with no capital after its first letter, or
    none in small letters at all, is answered by a test or two in C; only the rest are walked.
    """
    if token[1:].islower() or token.isupper():
        return False
    return any(a.islower() and b.isupper() for a, b in zip(token, token[1:]))


def _is_path(token: str) -> bool:
    if token.startswith(("~/", "./", "../", "\\")) or _DRIVE.match(token) or "\\" in token:
        return True
    if token.startswith("/") and len(token) > 1:
        return True
    slashes = token.count("/")
    if slashes >= 2:
        return True
    return slashes == 1 and bool(_EXTENSION.search(token.split("/")[-1])) and not token.endswith("/")


def _plain_word(part: str) -> bool:
    return part.replace("'", "").replace("’", "").isalpha() and not _has_inner_capital(part)


def _token_facts(token: str, start: int, out: list[Fact]) -> None:
    """The facts one stripped token holds (none for an ordinary word).

    A token of ASCII letters alone (most of a text) is answered at once, as the rules below answer
    it: an identifier if a capital follows a small letter inside it (``iPhone``), else nothing.
    Why: the offline writer looks for facts in every source and line it writes, and after a long
    import these rules, run for every word, were 40% of a catch-up.
    """
    if token.isascii() and token.isalpha():
        if _has_inner_capital(token):
            out.append(Fact("identifier", token, _unsep(token), start, start + len(token)))
        return
    _token_facts_by_rules(token, start, out)


def _token_facts_by_rules(token: str, start: int, out: list[Fact]) -> None:
    token, start = _strip_token(token, start)
    if not token or not any(c.isalnum() for c in token):
        return
    end = start + len(token)
    if _URL.match(token):
        out.append(Fact("url", token, token, start, end))
        return
    if _is_path(token):
        out.append(Fact("path", token, _unsep(token), start, end))
        return
    if "/" in token:  # one slash, no file: and/or, 5433/tcp, TCP/IP — each side on its own
        at = token.index("/")
        _token_facts(token[:at], start, out)
        _token_facts(token[at + 1:], start + at + 1, out)
        return
    if _NUMBER.fullmatch(token):  # a sign was stripped with the other leading punctuation
        key = _unsep(token)
        if key.isdigit() and len(key) == 1:
            return  # single-digit integers are not checked (see the module notes)
        out.append(Fact("number", token, key, start, end))
        return
    unit = _NUM_UNIT.fullmatch(token)
    if unit:
        _token_facts(unit.group(1), start, out)
        return
    if "-" in token[1:-1] and not re.search(r"[_.\\:/]", token) and not token.startswith("-"):
        parts = token.split("-")
        if all(_plain_word(p) for p in parts if p):
            return  # follow-up, long-term, built-in
        if _NUMBER.fullmatch(parts[0]) and all(_plain_word(p) for p in parts[1:] if p):
            _token_facts(parts[0], start, out)  # 10-minute-long: the number alone
            return
    if _ABBREV.fullmatch(token):
        return  # e.g., i.e., U.S.
    has_digit = any(c.isdigit() for c in token)
    has_letter = any(c.isalpha() for c in token)
    inner = token[1:-1]
    if ((has_digit and has_letter) or any(c in inner for c in "_-.\\") or _has_inner_capital(token)
            or token.startswith(("-", ".")) or (has_digit and any(not c.isalnum() for c in token))):
        out.append(Fact("identifier", token, _unsep(token), start, end))
        return
    if ":" in token:  # key:value without digits — each side on its own
        at = token.index(":")
        _token_facts(token[:at], start, out)
        _token_facts(token[at + 1:], start + at + 1, out)


_QUOTE_RES = [re.compile(p) for p in (
    r'"([^"]+)"', r"“([^“”]+)”", r"„([^„“”]+)[“”]", r"«([^«»]+)»", r"‹([^‹›]+)›", r"「([^「」]+)」",
    r"『([^『』]+)』", r"`([^`]+)`", r"‘([^‘’]+)’",
    r"(?<![\w'’])'(?=[^\s'])([^'\n]*?[^\s'])'(?![\w'’])",
)]
_ELISION = re.compile(r"\[\s*(?:…|\.{3})\s*\]|\(\s*(?:…|\.{3})\s*\)|…|\.{3,}")


def _quotes(text: str) -> list[Fact]:
    out = []
    for pattern in _QUOTE_RES:
        for match in pattern.finditer(text):
            out.append(Fact("quote", match.group(0), match.group(1), match.start(), match.end()))
    out.sort(key=lambda f: f.start)
    return out


def _quote_found(content: str, hay: Haystack) -> bool:
    for piece in _ELISION.split(content):
        start, end = 0, len(piece)
        while start < end and not piece[start].isalnum():
            start += 1
        while end > start and not piece[end - 1].isalnum():
            end -= 1
        piece = piece[start:end]
        if piece and _fold(piece) not in hay.folded:
            return False
    return True


def find_facts(text: str) -> list[Fact]:
    """Every fact-like piece of ``text`` in order: quoted strings, then tokens, by position."""
    facts = _quotes(text)
    spaced = _blank_ellipses(_widths(text))
    tokens: list[Fact] = []
    for match in _FACT_TOKEN.finditer(spaced):
        _token_facts(match.group(0), match.start(), tokens)
    return sorted(facts + tokens, key=lambda f: (f.start, f.kind != "quote"))


def _bounded(hay: str, key: str, inside) -> bool:
    """``key`` occurs in ``hay`` with no ``inside`` character glued to either end."""
    if not key:
        return True
    glue_left, glue_right = inside(key[0]), inside(key[-1])
    at = hay.find(key)
    while at >= 0:
        stop = at + len(key)
        left_ok = not glue_left or at == 0 or not inside(hay[at - 1])
        right_ok = not glue_right or stop == len(hay) or not inside(hay[stop])
        if left_ok and right_ok:
            return True
        at = hay.find(key, at + 1)
    return False


def _found(fact: Fact, hay: Haystack) -> bool:
    if fact.kind == "quote":
        return _quote_found(fact.key, hay)
    if fact.kind == "url":
        return fact.key in hay.plain
    if fact.kind == "number":
        return _bounded(hay.plain, fact.key, str.isdigit)
    return _bounded(hay.plain, fact.key, _word)


def invented_facts(text: str, sources: Sequence[str] | Haystack, unique: bool = True) -> list[Fact]:
    """The facts of ``text`` found in no source, in order (each text once unless ``unique`` is false)."""
    hay = haystack_of(sources)
    out, seen = [], set()
    for fact in find_facts(text):
        if _found(fact, hay) or (unique and fact.text in seen):
            continue
        seen.add(fact.text)
        out.append(fact)
    return out


def invented(text: str, sources: Sequence[str]) -> list[str]:
    """The texts of the facts of ``text`` found in no source."""
    return [fact.text for fact in invented_facts(text, sources)]
