"""The offline writer (DESIGN §3.3 fallback, §3.4 embedded default): deterministic, no model.

It writes a line only from pieces of its input, so it cannot invent a fact,
and always within the budget in UTF-8 bytes, never cutting inside a
character, with "…" wherever something was left out.

**A message** (``offline_leaf``) arrives as ``tag: text``; a ``trace`` arrives
as ``did:`` / ``result:`` / ``said:`` lines.  The text is read as segments
made of sentences (each line split at sentence ends): a message is one
segment under its tag (a later line such as ``Error: …`` is part of it), a
trace has one segment per step, a merge's line one per tag opening a line.
The line is filled in this order, each step only while it fits:

1. the tag (always) and the person's own words: for a ``you:`` segment its
   opening sentence (two if the first is short) and every sentence that reads
   as an order, rule, decision, correction or preference ("never…",
   "always…", "use…", "don't…", "we decided…", "actually…"); in a trace,
   the opening of every ``did:`` step, each shortened to its share, so the
   line says what was done to what, and the opening of every ``said:`` (the
   agent's words on what the step was for; then a command gets a smaller
   share, and a smaller one still in a merge); otherwise the first sentence;
2. the opening sentence of every other segment (the agent's answer, a
   result);
3. names, numbers, paths, identifiers, URLs and quoted strings found in the
   sentences left out or cut short, listed after a "…" (in a merge, none
   from a command or its output) (a number with its unit word; no
   command flags, JSON keys, bare one- to three-digit numbers or capitalised
   clause openers such as "Yes" or "Fixed", nothing from the rows of a pasted
   table or log);
4. the remaining sentences in their order, as much as fits.

The chosen sentences are shown in their original order; a sentence that does
not fit whole is cut at a word boundary with "…".

**A merge** (``offline_merge``) takes two lines (``id+n|`` heads stripped),
gives each half a fair share of the budget (what one half does not need goes
to the other), writes each half as above and joins them with a newline (like
a free parent; the view folds it to a space), so both halves keep their tags
and most important items.

A last pass runs :func:`writer.checks.judge` on the result with the inputs
as its sources, kept apart (so the line passes against them in any order and
beside any other sources); pieces that the checks would still flag (a number
cut short, a quotation mark that pairs across two pieces) are removed — the
line is then the checks' cleaned, one-line form — so the line always passes
the checks, whatever the input (given at least one letter or digit after
cleaning, and a budget of a few dozen bytes; below about 24 bytes only the
tag or a single word is left).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from endless.core.settings import LINE_BUDGET
from endless.writer.checks import ELLIPSIS, judge, trim, utf8_size
from endless.writer.facts import find_facts, invented_facts, strip_heads

__all__ = ["offline_leaf", "offline_merge", "PERSON_TAG", "TRACE_TAGS"]

PERSON_TAG = "you"
TRACE_TAGS = ("did", "result", "said")

_TAG = re.compile(r"^([^\W\d][\w.@'’+\-]*(?: [\w.@'’+\-]+){0,2}):(?=\s|$)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])\s*")
_RULE = re.compile(
    r"\b(?:always|never|don(?:'|’)?t|do not|must(?:n(?:'|’)?t)?|should(?:n(?:'|’)?t)?|please|make sure|ensure"
    r"|avoid|instead|prefer|i want|i need|we need|i(?:'|’)?d like|let(?:'|’)?s|from now on|remember|no more"
    r"|stop|wrong|correct(?:ion)?|actually|decid(?:e|ed|ing)|decision|rule|only|not)\b", re.I)
_IMPERATIVE = re.compile(
    r"^(?:add|remove|use|run|fix|make|keep|stop|try|change|rename|move|delete|write|put|check|update"
    r"|install|deploy|commit|push|set|revert|undo|test|show|tell|explain|create|build|drop|replace|ensure"
    r"|go|do|don(?:'|’)?t|never|always|please|let(?:'|’)?s|call|send|open|close|merge|split|read|look)\b",
    re.I)
_NAME = re.compile(r"(?<=[\w,;:)\]] )([^\W\d_]+(?:[-'’][^\W\d_]+)?)(?![\w\-/\\]|[.:'’][\w/])")
_BLANKS = re.compile(r"[ \t]+")
_SHORT_OPENING = 60  # bytes: an opening sentence this short brings the next one along
_MIN_CUT = 24  # bytes: a sentence is cut to fit only when at least this much room is left
_PASTED_ROWS = 6  # a message with this many rows of data holds a pasted table or log


@dataclass
class _Segment:
    head: str  # "you:" as written, or "" for text before any tag
    tag: str  # the tag, casefolded ("" when none)
    units: list[str] = field(default_factory=list)


def _lines(text: str) -> list[str]:
    """The text's lines, heads stripped, each run of blanks one space, empty lines left out."""
    out = []
    for raw in (text or "").splitlines():
        line = strip_heads(raw)
        if "\t" in line or "  " in line:  # (else every run is one space already: the usual line)
            line = _BLANKS.sub(" ", line)
        line = line.strip()
        if line:
            out.append(line)
    return out


def _segments(text: str, message: bool = False) -> list[_Segment]:
    """Segments of ``text``; in a ``message`` only its own tag (or a trace's step tags) starts one.

    In a message, a later line such as ``Error: …`` is part of what the
    person or the agent wrote; in a trace every ``did:``/``result:``/``said:``
    line is a step; in a merge's lines any tag at a line's start opens a segment.
    """
    segments: list[_Segment] = []
    bodies: list[list[str]] = []
    trace = False
    for line in _lines(text):
        match = _TAG.match(line)
        if match and message and segments:
            match = match if trace and match.group(1).casefold() in TRACE_TAGS else None
        if match:
            if not segments:
                trace = match.group(1).casefold() in TRACE_TAGS
            segments.append(_Segment(line[:match.end()], match.group(1).casefold()))
            body = line[match.end():].strip()
            bodies.append([body] if body else [])
        elif segments:
            bodies[-1].append(line)
        else:
            segments.append(_Segment("", ""))
            bodies.append([line])
    for segment, body in zip(segments, bodies):
        segment.units = [unit for line in body for unit in _SENTENCE_END.split(line) if unit]
    return segments


def _render(segments: Sequence[_Segment], chosen: dict[tuple[int, int], str], items: Sequence[str]) -> str:
    """The chosen sentences in their order, tags kept, "…" for every gap, then the items."""
    out: list[str] = []
    previous: tuple[int, int] | None = None
    for i, j in sorted(chosen):
        if previous is None or previous[0] != i:
            if previous is not None:
                p_i, p_j = previous
                if p_j < len(segments[p_i].units) - 1 or i > p_i + 1:
                    out.append(ELLIPSIS)  # the end of a segment, or whole segments, left out
            if segments[i].head:
                out.append(segments[i].head)
            if j > 0:
                out.append(ELLIPSIS)
        elif j > previous[1] + 1:
            out.append(ELLIPSIS)
        out.append(chosen[(i, j)])
        previous = (i, j)
    if previous is not None:
        p_i, p_j = previous
        if (p_j < len(segments[p_i].units) - 1 or p_i < len(segments) - 1 or items):
            out.append(ELLIPSIS)
    if items:
        out.append(", ".join(items))
    text = " ".join(out)
    return re.sub(r"…(?:\s+…)+", ELLIPSIS, text)


def _is_rule(sentence: str) -> bool:
    return bool(_RULE.search(sentence) or _IMPERATIVE.match(sentence))


def _names(sentence: str) -> list[str]:
    """Runs of capitalised words that do not open the sentence (Ada Lovelace, Postgres)."""
    out: list[str] = []
    run: list[str] = []
    end = -1
    for match in _NAME.finditer(sentence):
        word = match.group(1)
        if not (word[0].isupper() and len(word) > 1):
            continue
        if run and match.start() == end + 1 and sentence[end] == " ":
            run.append(word)
        else:
            if run:
                out.append(" ".join(run))
            run = [word]
        end = match.end()
    if run:
        out.append(" ".join(run))
    return out


# Capitalised words that open a clause (after a colon, a quote, a list) more often than they name anything.
_NOT_NAMES = frozenset("""a an and another any as at but by did do does done each either every few first
for fixed from good great he her here his how i i'd i'll i'm if in is it it's its just last let's maybe
me my new next no nobody none not now ok okay on one or our perfect please same she so some sorry that
the their then there these they this those to today tomorrow twice until we what when where which who
why with yes yesterday you your""".split())
# Words after a number that are not its unit ("18 because …", "3 of them").
_NOT_UNITS = _NOT_NAMES | frozenset("""about above after again against all also am are around be because been
before being below between both can could had has have into less more most of off once only over per than
too under very was were will would""".split())
_UNIT = re.compile(r"\s([^\W\d_][^\W\d_'’]{1,11})\b")


def _is_data(unit: str) -> bool:
    """A row of a table, a log or code rather than a sentence: it does not end like one."""
    return not unit.rstrip().rstrip("\"'”’»)]").endswith((".", "!", "?", ":", "…"))


def _is_table(unit: str) -> bool:
    """Rows of a table folded onto one line (a merge reads its halves so): many field separators."""
    return sum(unit.count(c) for c in ";|\t") >= 2 * _PASTED_ROWS


def _useful(fact, sentence: str) -> str | None:
    """A fact as an item a reader can use, or None for noise.

    A command's flags (``-q``), a JSON key (``"cmd"``) and a bare number of a
    few digits say nothing once out of their sentence; a number keeps the word
    after it when that is its unit ("45 minutes", "4.59 euros").
    """
    text = fact.text
    if text.startswith("-") or (fact.kind == "quote" and len(text) <= 7 and sentence[fact.end:fact.end + 1] == ":"):
        return None
    if fact.kind == "number":
        unit = _UNIT.match(sentence, fact.end)
        if unit and unit.group(1).casefold() not in _NOT_UNITS:
            return sentence[fact.start:unit.end()]
        if sum(c.isdigit() for c in text) <= 3:  # "18", "0.31" (a test's seconds): meaningless alone
            return None
    return text


def _items_of(sentence: str) -> list[str]:
    """Facts first (numbers, paths, identifiers, URLs, quotations), then names; noise left out."""
    facts = [item for item in (_useful(f, sentence) for f in find_facts(sentence)) if item]
    names = [re.sub(r"['’]s$", "", n) for n in _names(sentence)]
    names = [n for n in names if n.split()[0].casefold() not in _NOT_NAMES]
    return facts + [n for n in names if not any(n in item for item in facts)]


class _Composer:
    def __init__(self, segments: list[_Segment], budget: int, person_tag: str, merge: bool = False) -> None:
        self.segments = segments
        self.merge = merge  # a merge's lines: the words said matter more than the commands run
        self.budget = budget
        self.person = person_tag.casefold()
        self.chosen: dict[tuple[int, int], str] = {}
        self.items: list[str] = []
        self.item_keys: list[tuple[int, int]] = []

    def size(self, chosen=None, items=None) -> int:
        return utf8_size(_render(self.segments, self.chosen if chosen is None else chosen,
                                 self.items if items is None else items))

    def add(self, key: tuple[int, int], text: str, cut: bool, cap: int | None = None) -> bool:
        if key in self.chosen:
            return True
        if cap is not None and utf8_size(text) > cap:
            text = trim(text, cap)
        trial = dict(self.chosen)
        trial[key] = text
        if self.size(trial) <= self.budget:
            self.chosen = trial
            return True
        if not cut:
            return False
        trial[key] = ""
        room = self.budget - self.size(trial)
        while room >= _MIN_CUT:
            piece = trim(text, room)
            if not any(c.isalnum() for c in piece):
                return False
            trial[key] = piece
            if self.size(trial) <= self.budget:
                self.chosen = trial
                return True
            room -= max(1, self.size(trial) - self.budget)
        return False

    def compose(self) -> str:
        segments = self.segments
        if not any(s.units for s in segments):
            return trim(_render(segments, {}, []) or " ".join(s.head for s in segments), self.budget)
        first: list[tuple[int, int]] = []  # the person's words, the trace's steps
        second: list[tuple[int, int]] = []  # other openings
        dids = [i for i, s in enumerate(segments) if s.tag == "did" and s.units]
        # In a trace the agent's own words (``said:``) tell what each step was for; with them, a
        # command keeps only its opening, so that what was said and found gets the room.
        saids = [i for i, s in enumerate(segments) if s.tag == "said" and s.units] if dids else []
        share = self.budget // 4 if self.merge else self.budget * (1 if saids else 2) // 3
        did_cap = max(48, share // max(1, len(dids)))
        for i, segment in enumerate(segments):
            if not segment.units:
                continue
            if segment.tag == self.person:
                first.append((i, 0))
                first += [(i, j) for j in range(1, len(segment.units)) if _is_rule(segment.units[j])]
                if utf8_size(segment.units[0]) < _SHORT_OPENING and len(segment.units) > 1 \
                        and (i, 1) not in first:
                    first.append((i, 1))
            elif segment.tag == "did" or i in saids:
                first.append((i, 0))
            else:
                second.append((i, 0))
        if not first:
            first, second = second[:1], second[1:]
        # In a trace the agent's words come before results, and results rich in facts (or late:
        # the outcome) before the others.
        second.sort(key=lambda key: (segments[key[0]].tag == "result",
                                     -len(find_facts(segments[key[0]].units[0])), -key[0])
                    if segments[key[0]].tag in ("said", "result") else (False, 0, -10**9 + key[0]))
        for key in first:
            cap = did_cap if segments[key[0]].tag == "did" else None
            self.add(key, segments[key[0]].units[key[1]], cut=True, cap=cap)
        for key in second:
            self.add(key, segments[key[0]].units[key[1]], cut=True)
        # Facts of the sentences left out.
        seen = set()
        tags = {segment.tag for segment in segments}  # "Assistant" in a merge is a tag, not a name
        body = _render(segments, self.chosen, [])
        room = self.budget - self.size()
        for i, segment in enumerate(segments):
            if room < 6:
                break
            pasted = sum(map(_is_data, segment.units)) >= _PASTED_ROWS
            for j, unit in enumerate(segment.units):
                kept = self.chosen.get((i, j))
                tool = segment.tag in ("did", "result")  # a command's or its output's pieces, out of context
                if kept == unit or (tool and (kept is not None or self.merge)) or room < 6 \
                        or (pasted and _is_data(unit)) or _is_table(unit):
                    continue  # kept whole; or the numbers of a pasted table or log, which say nothing
                for item in _items_of(unit):
                    if (item in seen or item.casefold() in tags or utf8_size(item) > min(room, self.budget // 3) or item in body
                            or any(item in kept for kept in self.items)):
                        continue
                    seen.add(item)
                    trial = self.items + [item]
                    if self.size(items=trial) <= self.budget:
                        self.items = trial
                        self.item_keys.append((i, j))
                        room = self.budget - self.size()
        # The rest, in order.
        for i, segment in enumerate(segments):
            for j, unit in enumerate(segment.units):
                if (i, j) in self.chosen or unit in self.chosen.values():
                    continue  # a sentence said twice is kept once
                freed = sum(utf8_size(item) + 2 for item, k in zip(self.items, self.item_keys) if k == (i, j))
                if utf8_size(unit) > self.budget - self.size() + freed:
                    continue
                keep = [(item, k) for item, k in zip(self.items, self.item_keys) if k != (i, j)]
                saved_items, saved_keys = self.items, self.item_keys
                self.items = [item for item, _ in keep]
                self.item_keys = [k for _, k in keep]
                if not self.add((i, j), unit, cut=False):
                    self.items, self.item_keys = saved_items, saved_keys
        # One last sentence, cut to fit, when there is room.
        left_out = [(i, j) for i, segment in enumerate(segments) for j, unit in enumerate(segment.units)
                    if (i, j) not in self.chosen and unit not in self.chosen.values()]
        if left_out and self.budget - self.size() >= 2 * _MIN_CUT:
            i, j = left_out[0]
            self.add((i, j), segments[i].units[j], cut=True)
        return _render(segments, self.chosen, self.items)


def _compose(text: str, budget: int, person_tag: str, message: bool = False) -> str:
    segments = _segments(text, message)
    whole = _render(segments, {(i, j): u for i, s in enumerate(segments) for j, u in enumerate(s.units)}, [])
    if utf8_size(whole) <= budget:
        return whole
    return _Composer(segments, budget, person_tag, merge=not message).compose()


def _repair(line: str, sources: Sequence[str]) -> str:
    """``line`` without the pieces the fact check flags: tokens dropped, stray quotation marks blanked."""
    chars = list(line)
    for fact in invented_facts(line, sources, unique=False):
        if fact.kind == "quote":
            chars[fact.start] = " "
            chars[fact.end - 1] = " "
        else:
            for k in range(fact.start, fact.end):
                chars[k] = ""
    fixed = re.sub(r" {2,}", " ", "".join(chars)).strip()
    return re.sub(r"…(?:\s+…)+", ELLIPSIS, fixed)


def _fallbacks(text: str, budget: int) -> list[str]:
    """Last resorts: the first tag alone, then single whole words of the input."""
    out = []
    for segment in _segments(text):
        if segment.head:
            out.append(segment.head)
            break
    for line in _lines(text):
        for word in line.split(" "):
            if any(c.isalnum() for c in word) and utf8_size(word) <= budget:
                out.append(word)
                if len(out) > 8:
                    return out
    return out


def _safe(line: str, sources: Sequence[str], budget: int, inputs: Sequence[str]) -> str:
    candidate = line
    for _ in range(64):
        verdict = judge(candidate, sources, budget, 1.0)
        if verdict.ok:
            return candidate
        if verdict.problem != "invented":
            break
        fixed = _repair(verdict.text, sources)
        if fixed == verdict.text:
            break
        candidate = fixed
    for text in inputs:
        for fallback in _fallbacks(text, budget):
            if judge(fallback, sources, budget, 1.0).ok:
                return fallback
    return candidate


def _apart(*inputs: str) -> list[str]:
    """The inputs as sources kept apart, so that nothing found in them spans two of them.

    A line that passes against these passes against the same inputs in any
    order and beside any other sources.
    """
    out = []
    for text in inputs:
        out += [text, "\x00"]
    return out


def offline_leaf(source: str, budget: int = LINE_BUDGET, person_tag: str = PERSON_TAG) -> str:
    """A line of at most ``budget`` UTF-8 bytes for one message given as ``tag: text``."""
    line = _compose(source, budget, person_tag, message=True)
    return _safe(line, _apart(source), budget, [source])


def offline_merge(left: str, right: str, budget: int = LINE_BUDGET, person_tag: str = PERSON_TAG) -> str:
    """A line of at most ``budget`` bytes for two neighbouring lines: both halves kept, newline-joined."""
    whole_left = _compose(left, 10**9, person_tag)
    whole_right = _compose(right, 10**9, person_tag)
    if not whole_left or not whole_right:
        line = _compose(whole_left or whole_right, budget, person_tag)
        return _safe(line, _apart(left, right), budget, [left, right])
    room = budget - 1  # the newline between the halves
    if utf8_size(whole_left) + utf8_size(whole_right) <= room:
        line = whole_left + "\n" + whole_right
    else:
        share_left = room // 2
        share_right = room - share_left
        if utf8_size(whole_left) <= share_left:
            share_left, share_right = utf8_size(whole_left), room - utf8_size(whole_left)
        elif utf8_size(whole_right) <= share_right:
            share_right, share_left = utf8_size(whole_right), room - utf8_size(whole_right)
        line = _compose(left, share_left, person_tag) + "\n" + _compose(right, share_right, person_tag)
        line = line.strip("\n")
    return _safe(line, _apart(left, right), budget, [left, right])
