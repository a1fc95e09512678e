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
    view's ``<chat>``/``</chat>``) appear in the try but in no source; or the
    try repeats the instructions: at least ``PROMPT_ECHO_SHARE`` (0.3) of its
    word 5-grams occur in the texts of ``prompts/`` (the task, the writer's
    and the turn's sections, every feedback message) or in the fixed words of
    a feedback's detail, and in no source (a model that parrots its last
    message would otherwise store "Write the line itself: …" as a memory
    line).  The instruction texts are read once from the package.
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

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from endless import prompts
from endless.core.settings import LINE_BUDGET, PROMPT_ECHO_SHARE, PROMPT_ECHO_WORDS
from endless.writer.facts import (SCRIPT_PATTERNS, Fact, Haystack, foreign_scripts, haystack_of,
                                  invented_facts, squeeze_ws, strip_heads)

__all__ = [
    "PROBLEMS", "MARKER", "JOB_WORDS", "ELLIPSIS", "CUT_MARK", "Verdict",
    "clean", "judge", "trim", "cut_mark", "is_writer_task", "utf8_size", "utf8_prefix", "accept_limit",
    "word_grams", "instruction_grams", "DETAIL_TEXTS",
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

_THINK_BLOCK = re.compile(r"^<think>.*?</think>", re.S | re.I)
_FENCED = re.compile(r"^(```|~~~)[^\n]*\n(.*?)\n?[ \t]*\1[ \t]*$", re.S)
_FENCED_INLINE = re.compile(r"^```(?!`)(.*?)(?<!`)```$", re.S)
_FENCE_OPEN = re.compile(r"^(?:```|~~~)[^\n`]*\n")
_FENCE_CLOSE = re.compile(r"\n[ \t]*(?:```|~~~)$")




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


def _refusal(text: str, hay: Haystack) -> str | None:
    for pattern in _REFUSALS:
        match = pattern.search(text)
        if match:
            said = squeeze_ws(match.group(0)).casefold()
            if said and said in hay.lower_ws:
                return None  # the messages themselves say it
            return match.group(0)
    return None


# How a feedback names an echoed tag: in words, so the feedback itself never holds the tag.
_TAG_WORDS = {"<input>": "input tag", "</input>": "closing input tag", MARKER: "marker",
              "<chat>": "view tag", "</chat>": "closing view tag"}

# The fixed words of the details below, which a feedback quotes: part of what a try must not repeat.
DETAIL_TEXTS = (
    "it is empty", "it refuses the task instead of writing the line", "it repeats the task's own",
    "it repeats the task's instructions instead of describing the input", "it has no letters or digits",
    "it is JSON, not a line of prose", "it holds tool-call syntax", "it holds an unfinished thinking block",
    "it holds broken characters (U+FFFD)",
)

_WORD = re.compile(r"\w+")
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")
_PROMPT_FOLDERS = ("writer", "turn", "chat")


def word_grams(text: str, n: int = PROMPT_ECHO_WORDS) -> list[tuple[str, ...]]:
    """The runs of ``n`` consecutive words of ``text``, in any case, punctuation ignored."""
    words = _WORD.findall(text.casefold())
    return [tuple(words[k:k + n]) for k in range(len(words) - n + 1)]


@functools.lru_cache(maxsize=1)
def instruction_grams() -> frozenset[tuple[str, ...]]:
    """Word runs of every text in ``prompts/`` a writer call can hold, and of the feedback details.

    A template's placeholders break a run: what fills them (the input, a
    size, the cut try) is not instruction text.
    """
    grams: set[tuple[str, ...]] = set()
    texts = [prompts.text(name) for folder in _PROMPT_FOLDERS for name in prompts.names(folder)]
    for text in [*texts, *DETAIL_TEXTS]:
        for piece in _PLACEHOLDER.split(text):
            grams.update(word_grams(piece))
    return frozenset(grams)


def _instructions_echoed(text: str, sources: Sequence[str]) -> bool:
    """Whether the try is mostly the task's own words (see ``PROMPT_ECHO_SHARE`` in the settings)."""
    grams = word_grams(text)
    if not grams:
        return False
    known = instruction_grams()
    echoed = [g for g in grams if g in known]
    if len(echoed) < PROMPT_ECHO_SHARE * len(grams):
        return False
    quoted = {g for source in sources for g in word_grams(source)}
    return sum(1 for g in echoed if g not in quoted) >= PROMPT_ECHO_SHARE * len(grams)


def _echo(text: str, hay: Haystack) -> list[str]:
    found = []
    lowered = text.casefold()
    for tag, any_case in _ECHO_TAGS:
        if any_case:
            if tag in lowered and tag not in hay.lower_raw:
                found.append(tag)
        elif tag in text and tag not in hay.raw:
            found.append(tag)
    return found


def _malformed(text: str, hay: Haystack) -> str | None:
    if not any(c.isalnum() for c in text):
        return "it has no letters or digits"
    if text[0] in "{[":
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)) and squeeze_ws(text) not in hay.ws:
            return "it is JSON, not a line of prose"
    marker = _TOOL_MARKERS.search(text)
    if marker and marker.group(0).casefold() not in hay.lower_raw:
        return f"it holds tool-call syntax: “{marker.group(0)}”"
    lowered = text.casefold()
    for tag in ("<think>", "</think>"):
        if tag in lowered and tag not in hay.lower_raw:
            return "it holds an unfinished thinking block"
    if "\ufffd" in text and "\ufffd" not in hay.raw:
        return "it holds broken characters (U+FFFD)"
    return None


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


def judge(reply: str | None, sources: Sequence[str], budget: int = LINE_BUDGET,
          accept_ratio: float = 1.25) -> Verdict:
    """Clean the reply, then check it in the order of DESIGN §3.3 (see the module notes)."""
    text = clean(reply)
    size = utf8_size(text)

    def fail(problem: str, detail: str, items: Iterable[str] = ()) -> Verdict:
        return Verdict(False, text, problem, detail, size, tuple(items))

    if not text:
        return fail("empty", "it is empty")
    hay = haystack_of(sources)
    refused = _refusal(text, hay)
    if refused:
        return fail("refusal", "it refuses the task instead of writing the line", [refused])
    echoed = _echo(text, hay)
    if echoed:
        return fail("echo", f"it repeats the task's own {_list([_TAG_WORDS[tag] for tag in echoed])}", echoed)
    if _instructions_echoed(text, sources):
        return fail("echo", "it repeats the task's instructions instead of describing the input")
    broken = _malformed(text, hay)
    if broken:
        return fail("malformed", broken)
    limit = accept_limit(budget, accept_ratio)
    if size > limit:
        return fail("too_long", f"the line is {size:,} bytes; the limit is {budget:,} bytes "
                    f"and nothing over {limit:,} is accepted", [str(size)])
    foreign = foreign_scripts(text, hay)
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
    if space > 0 and not any(SCRIPT_PATTERNS[s].search(prefix) for s in SCRIPT_PATTERNS):
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
