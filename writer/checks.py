"""Checking a writer's try (DESIGN §3.3): pure functions, no I/O.

``clean`` turns a raw reply into the line to judge; ``judge`` applies the
content checks in a fixed order and returns the first problem found as a
:class:`Verdict`; ``trim`` is the shortest-try fallback; ``cut_mark`` shows
where a retry's shorter limit falls; ``is_writer_task`` tells a writer call
from a turn.

**Cleaning.**  Surrounding whitespace goes; a closed ``<think>…</think>`` block
before the answer goes; a code fence around the whole reply goes; every line
loses any ``id+n|`` heads at its start (``40+8|``, ``41+0|41+1|``); the
non-empty lines are stripped and joined with one space, so a try is always one
line (the view folds newlines to spaces anyway, and a space join keeps the
judged text, its size and the stored text the same).  Cleaning is repeated
until nothing changes, so ``clean(clean(x)) == clean(x)``.

**Checks, in order** (the first that fails is the verdict's ``problem``):

``empty``
    nothing left after cleaning.
``refusal``
    the reply *opens* with a refusal ("I can't help…", "I cannot summarise…",
    "I'm sorry, but I can't…", "As an AI…", and the same in German, French,
    Spanish, Portuguese, Italian, Russian, Chinese, Japanese and Korean).  The
    list is short on purpose; an opening that the sources themselves contain
    (an agent's own "I can't do that" being summarised) is not a refusal.
``echo``
    the task's own tags (``<input>``, ``</input>``, ``Compaction:``, and the
    view's ``<chat>``/``</chat>``) appear in the try but in no source.
``malformed``
    no letter or digit at all; a JSON object or array, tool-call syntax or a
    model's special tokens (``<tool_call>``, ``<|im_start|>`` …); an unclosed
    thinking block; U+FFFD replacement characters.  Each except the first is
    excused when the sources hold the same text.
``too_long``
    more than ``accept_ratio × budget`` UTF-8 bytes (640 at 512).
``wrong_script``
    Han, Hiragana, Katakana or Hangul that no source uses (Han is allowed
    beside Japanese kana sources, and the two kana count as one script).
``invented``
    a fact of the try found in no source (see below).

**What counts as a fact** (the try is split into tokens at whitespace and
``, ; ( ) [ ] { } < > " “ ” „ « » ` | …``, and runs of three or more dots; a
thousands-grouped number such as ``5,433`` stays one token):

- *numbers* of two or more digits, or with a decimal part, compared after
  removing thousands separators (``,`` ``_`` ``'`` and thin/no-break spaces):
  ``5,433`` equals ``5433``.  A number is found when its digits occur in a
  source with no digit right before or after (``5432`` is not found in
  ``5433`` nor in ``54321``).  A unit or ordinal suffix is not part of the
  number (``100ms``, ``2nd``, ``512-byte``).  **Single-digit integers are not
  checked**: they are mostly counts that the messages spell in words ("two
  files", "both halves", "third try") or list markers, so checking them would
  reject faithful lines, while the facts that matter (ports, sizes, ids,
  dates, versions, times) have two or more digits or sit inside an
  identifier, which is checked whole.
- *identifiers*: tokens mixing letters and digits (``v2``, ``sha256``), with an
  inner ``_`` ``-`` ``.`` ``/`` ``\\`` (``MAX_POOL``, ``db-prod-7``,
  ``config.yaml``), with an inner capital (``getUser``), command-line flags
  (``--dry-run``), dot files (``.env``), and digit groups with inner
  punctuation (dates and times ``2026-10-08``, ``10:30``, versions
  ``1.2.3``).  Found when the token occurs in a source, case-sensitive, not
  glued to a letter, digit or ``_`` on either side (``getUser`` is not found in
  ``getUserById``; ``config.py`` is found in ``src/config.py``).
- *paths*: tokens starting ``/``, ``~/``, ``./``, ``../``, ``\\`` or a drive
  (``C:\\``), holding a ``\\``, two or more ``/``, or one ``/`` before a file
  name with an extension (``src/a.py``); found like identifiers, a trailing
  ``/`` ignored.
- *URLs* (``scheme://…``, ``www.…``): found when they occur in a source, so a
  shortened URL passes.
- *quoted strings* ("…", '…', `…`, «…», “…”, „…“, ‘…’, 「…」, 『…』): the
  quoted text is split at ellipses (an elided quote is checked piece by
  piece); each piece, stripped of outer punctuation, must occur in a source
  after normalising whitespace, quote marks and letter case.

Not facts: ordinary words (a capital at the start included: ``Postgres``,
``Deploy``), all-capital words (``HTTP``), words with apostrophes
(``don't``), compounds of plain words (``follow-up``, ``and/or``,
``TCP/IP`` — an invented kebab-case name made of plain words is therefore not
caught), one-letter abbreviations (``e.g.``, ``i.e.``), ordinals and counts
below 10.

Sources are the texts the try may draw on (for a merge: its two lines and
their messages, assembled by the caller).  ``id+n|`` heads are stripped from
every line of every source first, so heads never count as facts; tags
(``you:``, the agent's name) are ordinary text of the sources, so a try that
keeps them passes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

__all__ = [
    "PROBLEMS", "MARKER", "JOB_WORDS", "ELLIPSIS", "CUT_MARK", "Verdict", "Fact",
    "clean", "judge", "trim", "cut_mark", "is_writer_task", "utf8_size", "utf8_prefix",
    "accept_limit", "find_facts", "invented", "invented_facts", "strip_heads",
]

PROBLEMS = ("empty", "refusal", "echo", "malformed", "too_long", "wrong_script", "invented")
MARKER = "Compaction:"
JOB_WORDS = ("compress", "merge")
ELLIPSIS = "…"
CUT_MARK = "✂"


@dataclass(frozen=True)
class Verdict:
    """The outcome of judging one try.

    ``text`` is the cleaned try (what would be stored), ``size`` its UTF-8
    bytes.  ``problem`` is one of :data:`PROBLEMS` or ``None``; ``detail`` says
    what is wrong in words a feedback prompt can quote; ``items`` lists the
    offending pieces (the invented facts, the scripts found, the echoed tags).
    """

    ok: bool
    text: str
    problem: str | None
    detail: str
    size: int
    items: tuple[str, ...] = ()


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


# ---------------------------------------------------------------------------
# Bytes


def utf8_size(text: str) -> int:
    """Size in UTF-8 bytes (lone surrogates, which cannot be stored anyway, count 3)."""
    return len(text.encode("utf-8", "surrogatepass"))


def utf8_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` UTF-8 bytes, never cut inside a character."""
    if limit <= 0:
        return ""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # data[cut] is the first byte left out
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass")


def accept_limit(budget: int, accept_ratio: float = 1.25) -> int:
    """The largest accepted size: ``floor(budget × ratio)`` (640 at 512)."""
    return math.floor(budget * accept_ratio + 1e-9)


# ---------------------------------------------------------------------------
# Cleaning

_HEAD = re.compile(r"^\s*(?:\d+\+\d+\s*\|\s*)+")
_THINK_BLOCK = re.compile(r"^<think>.*?</think>", re.S | re.I)
_FENCED = re.compile(r"^(```|~~~)[^\n]*\n(.*?)\n?[ \t]*\1[ \t]*$", re.S)
_FENCED_INLINE = re.compile(r"^```(?!`)(.*?)(?<!`)```$", re.S)
_FENCE_OPEN = re.compile(r"^(?:```|~~~)[^\n`]*\n")
_FENCE_CLOSE = re.compile(r"\n[ \t]*(?:```|~~~)$")


def strip_heads(line: str) -> str:
    """One line without the ``id+n|`` heads at its start (repeated heads too)."""
    while True:
        stripped = _HEAD.sub("", line, count=1)
        if stripped == line:
            return line
        line = stripped


def _clean_once(text: str) -> str:
    text = text.strip()
    text = _THINK_BLOCK.sub("", text, count=1).strip()
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(2)
    else:
        inline = _FENCED_INLINE.match(text)
        if inline:
            text = inline.group(1)
        else:  # a fence opened and never closed, or closed and never opened
            text = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", text, count=1), count=1)
    lines = []
    for raw in text.splitlines():
        line = strip_heads(raw).strip()
        if line:
            lines.append(line)
    return " ".join(lines)


def clean(reply: str | None) -> str:
    """The try as one line: heads, fences, a leading thinking block and outer blanks removed.

    Lines are joined with one space (see the module notes); repeated until stable.
    """
    text = reply or ""
    for _ in range(16):
        cleaned = _clean_once(text)
        if cleaned == text:
            break
        text = cleaned
    return text


# ---------------------------------------------------------------------------
# Sources

_SEP_CHARS = ",_'\u2009\u202f\u00a0"
_THOUSANDS_BODY = r"(?<![\w.,'])\d{1,3}(?:[,_'\u2009\u202f\u00a0]\d{3})+(?!\d)"
_THOUSANDS = re.compile(_THOUSANDS_BODY)
_ELLIPSES = re.compile(r"…|\.{3,}")


def _unsep(text: str) -> str:
    """Thousands separators removed from grouped numbers (``5,433`` → ``5433``)."""
    return _THOUSANDS.sub(lambda m: "".join(c for c in m.group(0) if c not in _SEP_CHARS), text)


# Fullwidth forms (ＡＢＣ１２３) read as their ASCII letters and digits; one character for one, so
# places in the text stay the same.
_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}


def _blank_ellipses(text: str) -> str:
    """Ellipses replaced by as many spaces (positions kept)."""
    return _ELLIPSES.sub(lambda m: " " * len(m.group(0)), text)


_QUOTE_MAP = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "„": '"', "«": '"', "»": '"'})


def _fold(text: str) -> str:
    """For quoted strings: separators, quote marks, whitespace and case normalised."""
    return " ".join(_unsep(text.translate(_FULLWIDTH)).translate(_QUOTE_MAP).split()).casefold()


def _ws(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class _Hay:
    raw: str  # sources joined by newlines, heads stripped from every line
    lower_raw: str  # the same, casefolded
    plain: str  # raw, separators removed, ellipses blanked: where tokens are looked for
    folded: str  # for quoted strings
    ws: str  # whitespace-collapsed raw, for whole-text exemptions
    lower_ws: str  # the same, casefolded
    scripts: frozenset[str]


@lru_cache(maxsize=256)
def _source_hay(source: str) -> tuple[_Hay, bool]:
    """One source's haystack, and whether it has any line at all.

    Cached per source: a message is a source of its own line and of every
    merge above it, so each is normalised once rather than once per merge.
    256 sources cover merges up to level 8; at most about 90 MB even if every
    one were a 60,000-character trace.
    """
    lines = [strip_heads(line) for line in (source or "").splitlines()]
    raw = "\n".join(lines)
    ws = _ws(raw)
    plain = _blank_ellipses(_unsep(raw.translate(_FULLWIDTH)))
    return _Hay(raw, raw.casefold(), plain, _fold(raw), ws, ws.casefold(), frozenset(_scripts(raw))), bool(lines)


@lru_cache(maxsize=64)
def _haystack(sources: tuple[str, ...]) -> _Hay:
    """The sources' haystacks joined as if their lines were one text (every piece keeps its places)."""
    parts = [hay for hay, has_lines in map(_source_hay, sources) if has_lines]
    if len(parts) == 1:
        return parts[0]

    def spaced(texts) -> str:
        return " ".join(t for t in texts if t)

    ws = spaced(p.ws for p in parts)
    return _Hay("\n".join(p.raw for p in parts), "\n".join(p.lower_raw for p in parts),
                "\n".join(p.plain for p in parts), spaced(p.folded for p in parts), ws, ws.casefold(),
                frozenset().union(*(p.scripts for p in parts)))


def _hay_of(sources: Sequence[str] | _Hay) -> _Hay:
    if isinstance(sources, _Hay):
        return sources
    if isinstance(sources, str):
        sources = [sources]
    return _haystack(tuple(sources))


# ---------------------------------------------------------------------------
# Refusals, echoes, malformed replies

# "I can't", "I cannot", "I am unable to", "I'm not able to", "I won't" …
_CANT = (r"(?:\s+(?:can(?:'|’)?t|cannot|can not|am (?:not able|unable) to|won(?:'|’)?t|will not)"
         r"|(?:'|’)m (?:not able|unable) to)")
_REFUSALS = [re.compile(p, re.I) for p in (
    # English
    rf"^(?:i(?:'|’)?m sorry|i am sorry|sorry|unfortunately|apologies)\b[^.!?…\n]{{0,40}}?\b(?:i|we){_CANT}\b",
    rf"^i{_CANT}\s+(?:help|assist|comply|do (?:that|this)|summari[sz]e|complete|fulfil+|provide|process"
    r"|perform|write|create|continue|answer)\b",
    r"^as an? (?:ai|artificial intelligence|(?:large )?language model|llm)\b",
    r"^i(?:'|’)?m (?:just |only )?an? (?:ai|language model)\b",
    r"^i am (?:just |only )?an? (?:ai|language model)\b",
    # German
    r"^(?:es tut mir leid|entschuldigung|leider)\b[^.!?…\n]{0,40}?\bkann ich\b[^.!?…\n]{0,30}?\bnicht\b",
    r"^ich kann (?:dir |ihnen )?(?:dabei |hierbei |damit |hier )?(?:leider )?nicht (?:helfen|zusammenfassen)",
    r"^als (?:eine )?(?:ki|künstliche intelligenz|sprachmodell)\b",
    # French
    r"^(?:désolée?|je suis désolée?|je regrette)\b[^.!?…\n]{0,40}?\bje ne (?:peux|suis) pas\b",
    r"^je ne peux pas (?:vous |t(?:'|’))?(?:aider|répondre|résumer|faire)",
    r"^en tant qu(?:e |'|’)(?:ia|intelligence artificielle|modèle de langage)\b",
    # Spanish / Portuguese / Italian
    r"^(?:lo siento|disculpa|disculpe)\b[^.!?…\n]{0,40}?\bno puedo\b",
    r"^no puedo (?:ayudar|resumir|hacer|cumplir)",
    r"^como (?:una? )?(?:ia|inteligencia artificial|modelo de lenguaje)\b",
    r"^(?:desculpe|sinto muito|lamento)\b[^.!?…\n]{0,40}?\bnão posso\b",
    r"^não posso (?:ajudar|resumir|fazer)",
    r"^como (?:uma? )?(?:ia|inteligência artificial|modelo de linguagem)\b",
    r"^(?:mi dispiace|spiacente)\b[^.!?…\n]{0,40}?\bnon posso\b",
    r"^non posso (?:aiutar|riassumere|fare)",
    r"^come (?:un(?:'|’)?|una )?\s?(?:ia|intelligenza artificiale|modello linguistico)\b",
    # Russian
    r"^(?:извините|простите|к сожалению)\b[^.!?…\n]{0,40}?\bне могу\b",
    r"^я не могу (?:помочь|выполнить|сделать|пересказать|обобщить|кратко)",
    r"^как (?:ии|искусственный интеллект|языковая модель)\b",
    # Chinese / Japanese / Korean
    r"^(?:抱歉|对不起|很抱歉|對不起)[，,]?[^。！？…\n]{0,20}?(?:无法|不能|無法)",
    r"^我(?:无法|不能|無法)(?:帮助|协助|完成|提供|总结|满足|幫助|協助)",
    r"^作为(?:一个|一名)?(?:人工智能|AI|语言模型)",
    r"^申し訳(?:ありません|ございません)",
    r"^(?:AIとして|私はAIなので)",
    r"^(?:죄송합니다|죄송하지만)",
    r"^(?:AI로서|인공지능으로서)",
)]

_ECHO_TAGS = (("<input>", True), ("</input>", True), (MARKER, False), ("<chat>", True), ("</chat>", True))

_TOOL_MARKERS = re.compile(
    r"<\|[^|<>\n]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?tool_call\b|</?tool_use\b|</?function_calls?\b"
    r"|<function=|\[TOOL_CALLS\]|\"tool_calls\"\s*:|</?invoke\b|</?tool_result\b", re.I)


def _refusal(text: str, hay: _Hay) -> str | None:
    for pattern in _REFUSALS:
        match = pattern.search(text)
        if match:
            said = _ws(match.group(0)).casefold()
            if said and said in hay.lower_ws:
                return None  # the messages themselves say it
            return match.group(0)
    return None


def _echo(text: str, hay: _Hay) -> list[str]:
    found = []
    lowered = text.casefold()
    for tag, any_case in _ECHO_TAGS:
        if any_case:
            if tag in lowered and tag not in hay.lower_raw:
                found.append(tag)
        elif tag in text and tag not in hay.raw:
            found.append(tag)
    return found


def _malformed(text: str, hay: _Hay) -> str | None:
    if not any(c.isalnum() for c in text):
        return "it has no letters or digits"
    if text[0] in "{[":
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)) and _ws(text) not in hay.ws:
            return "it is JSON, not a line of prose"
    marker = _TOOL_MARKERS.search(text)
    if marker and marker.group(0).casefold() not in hay.lower_raw:
        return f"it holds tool-call syntax ({marker.group(0)})"
    lowered = text.casefold()
    for tag in ("<think>", "</think>"):
        if tag in lowered and tag not in hay.lower_raw:
            return "it holds an unfinished thinking block"
    if "\ufffd" in text and "\ufffd" not in hay.raw:
        return "it holds broken characters (U+FFFD)"
    return None


# ---------------------------------------------------------------------------
# Scripts

_SCRIPT_RANGES = {
    "Han": "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
           "\uf900-\ufaff\U00020000-\U0003134f",
    "Hiragana": "\u3041-\u309f",
    "Katakana": "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d",
    "Hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uffa0-\uffdc",
}
_SCRIPT_RES = {name: re.compile(f"[{chars}]") for name, chars in _SCRIPT_RANGES.items()}
_KANA = {"Hiragana", "Katakana"}


def _scripts(text: str) -> list[str]:
    return [name for name, pattern in _SCRIPT_RES.items() if pattern.search(text)]


def _foreign_scripts(text: str, hay: _Hay) -> list[str]:
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
    """The facts one stripped token holds (none for an ordinary word)."""
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


def _quote_found(content: str, hay: _Hay) -> bool:
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
    spaced = _blank_ellipses(text.translate(_FULLWIDTH))
    tokens: list[Fact] = []
    for match in _TOKEN.finditer(spaced):
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


def _found(fact: Fact, hay: _Hay) -> bool:
    if fact.kind == "quote":
        return _quote_found(fact.key, hay)
    if fact.kind == "url":
        return fact.key in hay.plain
    if fact.kind == "number":
        return _bounded(hay.plain, fact.key, str.isdigit)
    return _bounded(hay.plain, fact.key, _word)


def invented_facts(text: str, sources: Sequence[str] | _Hay, unique: bool = True) -> list[Fact]:
    """The facts of ``text`` found in no source, in order (each text once unless ``unique`` is false)."""
    hay = _hay_of(sources)
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


# ---------------------------------------------------------------------------
# Judging

_KIND_WORDS = {"number": "a number", "identifier": "an identifier", "path": "a path", "url": "a URL",
               "quote": "a quotation"}


def _kind_words(fact: Fact) -> str:
    if fact.kind == "identifier" and not any(c.isalpha() for c in fact.text):
        return "a number"  # a date, a time, a version
    return _KIND_WORDS[fact.kind]


def _list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def judge(reply: str | None, sources: Sequence[str], budget: int = 512,
          accept_ratio: float = 1.25) -> Verdict:
    """Clean the reply, then check it in the order of DESIGN §3.3 (see the module notes)."""
    text = clean(reply)
    size = utf8_size(text)

    def fail(problem: str, detail: str, items: Iterable[str] = ()) -> Verdict:
        return Verdict(False, text, problem, detail, size, tuple(items))

    if not text:
        return fail("empty", "the reply is empty")
    hay = _hay_of(sources)
    refused = _refusal(text, hay)
    if refused:
        return fail("refusal", f"the reply refuses the task instead of writing the line (“{refused}”)",
                    [refused])
    echoed = _echo(text, hay)
    if echoed:
        return fail("echo", f"the reply repeats the task's own {'tags' if len(echoed) > 1 else 'tag'} "
                    f"{_list(echoed)}", echoed)
    broken = _malformed(text, hay)
    if broken:
        return fail("malformed", f"the reply is not a summary line: {broken}")
    limit = accept_limit(budget, accept_ratio)
    if size > limit:
        return fail("too_long", f"the line is {size:,} bytes; the limit is {budget:,} bytes "
                    f"and nothing over {limit:,} is accepted", [str(size)])
    foreign = _foreign_scripts(text, hay)
    if foreign:
        return fail("wrong_script", f"the line is written in {_list(foreign)}, "
                    f"a script the messages do not use; write in the messages' language", foreign)
    missing = invented_facts(text, hay)
    if missing:
        shown = [f"{fact.text} ({_kind_words(fact)})" for fact in missing]
        return fail("invented", f"{_list(shown)} {'appears' if len(missing) == 1 else 'appear'} "
                    f"nowhere in the messages", [fact.text for fact in missing])
    return Verdict(True, text, None, "", size)


# ---------------------------------------------------------------------------
# Trimming and the cut mark

_BREAK_AFTER = "，。、；：！？）」』】,;:)"


def _cut_point(text: str, prefix: str) -> int:
    """Where to cut ``text`` so that it ends within ``prefix``: a word boundary if one is near.

    The last whitespace is used when it keeps at least half of the prefix;
    otherwise (CJK text, one very long token) the last CJK punctuation mark,
    then simply the end of the prefix (a character boundary).
    """
    n = len(prefix)
    if n < len(text) and text[n].isspace():
        return n
    space = max(prefix.rfind(c) for c in (" ", "\t", "\n"))
    if space > 0 and space * 2 >= n:
        return space
    mark = max(prefix.rfind(c) for c in _BREAK_AFTER)
    if mark >= 0 and (mark + 1) * 2 >= n:
        return mark + 1
    if space > 0 and not any(_SCRIPT_RES[s].search(prefix) for s in _SCRIPT_RES):
        return space
    # A character boundary, but not inside a run of digits or Latin letters (端口54|33).
    at = n
    if 0 < n < len(text) and _latin_word(prefix[-1]) and _latin_word(text[n]):
        while at > 0 and _latin_word(prefix[at - 1]):
            at -= 1
    return at if at > 0 else n


def _latin_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def trim(text: str, budget: int) -> str:
    """``text`` cut to at most ``budget`` UTF-8 bytes at a word boundary, ending in "…".

    Text that fits is returned unchanged.  The "…" (3 bytes) counts toward the
    budget; a cut never falls inside a character; trailing blanks and ``,;:``
    before the "…" go.  With no whitespace near the end (CJK, one long token)
    the cut falls at a character boundary.  A budget under 4 bytes gives "…"
    alone or nothing.
    """
    if utf8_size(text) <= budget:
        return text
    room = budget - utf8_size(ELLIPSIS)
    if room <= 0:
        return ELLIPSIS if budget >= utf8_size(ELLIPSIS) else ""
    prefix = utf8_prefix(text, room)
    kept = text[:_cut_point(text, prefix)].rstrip()
    while kept and kept[-1] in ",;:-–—·/" and len(kept) > 1:
        kept = kept[:-1].rstrip()
    if kept.endswith(ELLIPSIS):
        return kept
    return kept + ELLIPSIS


def cut_mark(text: str, at_bytes: int, mark: str = CUT_MARK) -> str:
    """``text`` up to ``at_bytes`` UTF-8 bytes (never inside a character) followed by ``mark``.

    For the too-long feedback: it shows where a cut at the retry's limit (0.75 ×
    the budget) falls.  A text that fits gets the mark at its end.
    """
    return utf8_prefix(text, at_bytes) + mark


# ---------------------------------------------------------------------------
# Writer calls

_TASK = re.compile(rf"^\s*{re.escape(MARKER)}[ \t]*\n?[ \t]*(?:{'|'.join(JOB_WORDS)})\b", re.I)


def is_writer_task(messages_last_text: str | None) -> bool:
    """A call is a writer task only when its last message starts with ``Compaction:`` and a job word.

    Blank space before the marker and between it and the job word is allowed;
    the marker is case-sensitive, the job word (``compress``, ``merge``) not.
    """
    if not messages_last_text:
        return False
    match = _TASK.match(messages_last_text)
    return bool(match) and MARKER in match.group(0)
