"""A scripted agent: answers turn requests, calling tools by plan, steered by marker words.

A turn is the person's message (the last user message that is not a tool
result) and the steps after it: each step is one request, holding the turn's
own tool calls and their results so far.  The agent plans the whole turn from
the person's message and its seed (a random generator keyed by both, so every
step of a turn sees the same plan whatever order requests come in) and, at
each step, makes the next planned call or, once all are made, the final reply.

Marker words in the person's message (lines of a ``<chat>`` view or of the
recent block, ``id+n|…``, are ignored):

``[[tools:K]]``
    call K tools one after another, one per step, chosen among the request's
    own tools, before the final reply (without it: a seeded draw from
    ``tool_weights``);
``[[zoom:ID:N]]``
    call ``zoom`` with that id and n first, then quote in the final reply what
    the tool message answering it returned (several markers: in order;
    without ``[[tools:K]]`` no other call);
``[[call:NAME]]``
    call the request's tool NAME once (arguments made up from the request,
    as for ``[[tools:K]]``), after any zooms and before the ``[[tools:K]]``
    draws; several markers: in order; without ``[[tools:K]]`` no other call;
``[[fail:STATUS]]``, ``[[fail:STATUS:RETRY_AFTER]]``, ``[[fail:STATUS:RETRY_AFTER:TIMES]]``
    fail with that HTTP status (429 gets ``retry_after``, default
    ``retry_after`` seconds); with TIMES, only the turn's first TIMES requests
    fail and later ones answer;
``[[stall]]``
    never answer;
``[[slow:SECONDS]]``
    the whole answer arrives SECONDS after the request;
``[[reply:BYTES]]``
    a final reply of exactly BYTES UTF-8 bytes (more if quotes need the room).

A long turn's rebuilt head (its last user message says the turn is still
going) is read as the same turn carried on: the note counts the calls already
made and names the saved messages, the person's first, which the recent block
or the view shows; the agent goes on with the rest of its plan instead of
starting a new one, and quotes the saved results the head still shows.

Replies are made of varied English words drawn from the turn's generator and
name some of the facts (numbers, identifiers, names) of the person's message.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from endless.sim.model import ChatMessage, SimReply, SimRequest, ToolCall

_MARKER = re.compile(r"\[\[\s*(tools|zoom|call|fail|stall|slow|reply)\s*(?::([^\]]*))?\]\]", re.I)
_VIEW_LINE = re.compile(r"^\d+\+\d+\|.*$", re.M)
_CHAT = re.compile(r"<chat>.*?</chat>", re.S)
_CHAT_BLOCK = re.compile(r"<chat>(.*?)</chat>", re.S)
_LINE_NAME = re.compile(r"^(\d+)\+(\d+)\|", re.M)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
# The first words of Endless's note on a long turn's rebuilt head (prompts/turn/continued.txt),
# and how it counts the calls already saved.
CONTINUED = "This turn is still going."
_SAVED = re.compile(r"\((\d+) tool calls?\)[^()]*? messages (\d+) to (\d+)")
# How the recent block marks a message shortened to fit (prompts/turn/shortened.txt).
_SHORTENED = re.compile(r"\n\[… [\d,]+ characters of this message are not shown here; "
                        r"zoom\(\d+, 1\) reads it whole …\]\n")
_GAP = object()
_RECENT_NAME = re.compile(r"^(\d+)\+0\|", re.M)
_STEP_START = re.compile(r"^(did|said|result): ", re.M)

ERRORS = {
    400: "Bad request",
    401: "Invalid API key",
    403: "Permission denied",
    404: "Model not found",
    408: "Request timeout",
    409: "Conflict",
    413: "Request too large",
    429: "Rate limit reached, please retry later",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
    529: "Overloaded",
}

WORDS = (
    "about account action after again agree answer append archive around asked before began "
    "behind belong better between branch bright budget build buffer cache called careful carry "
    "change check choose clean clear client closer commit common compare config context copy "
    "correct count covers create current custom daily damage decide default define deliver "
    "detail direct doing domain double draft during early either enough entry error evening "
    "every exact expect extra field figure final finish first folder follow format forward "
    "found fresh friend garden gather gentle given global going green ground group handle "
    "happen header health heavy helper history holder honest house image import indeed inside "
    "island issue itself journal judge kept kernel kitchen label large later layer leave "
    "letter level light limit listen little local longer lower machine manual market matter "
    "measure memory merge method middle minute mirror model moment monday morning moving "
    "narrow native nearly needed network never newer night normal notice number object "
    "offline often option order other output owner packet paper parent partly pattern people "
    "period picked placed plain planet pocket policy portal prefix pretty prior private "
    "problem process proper public quick quiet rather reader ready reason recent record "
    "region remote render repair report request result return review river rough router "
    "safely sample saved schema screen search second select server settle shared shorter "
    "signal silver simple single small smooth socket solid source spring stable status "
    "steady stored stream strong study summer system table target thank thread through "
    "ticket timer today together token travel tried under unless update useful usual valley "
    "value verify version visit waiting wanted warm water weekly window winter within worker "
    "writer yellow yesterday"
).split()
_BY_LENGTH: dict[int, list[str]] = {}
for _w in WORDS:
    _BY_LENGTH.setdefault(len(_w), []).append(_w)
for _n, _fill in {1: "a", 2: "an", 3: "the"}.items():
    _BY_LENGTH.setdefault(_n, []).append(_fill)

OPENERS = (
    "Here is where things stand.", "I looked into it.", "Short answer first.",
    "Thanks, that helps.", "Understood.", "Good question.", "Done with the first pass.",
)


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: dict
    call_id: str
    quote: bool = False  # a zoom asked by a marker: its result is quoted in the final reply


@dataclass
class TurnPlan:
    """What the agent will do in one turn; the same for every step of the turn."""

    key: str
    calls: list[PlannedCall] = field(default_factory=list)
    reply_bytes: int = 0
    exact_size: bool = False
    fail: tuple[int, float | None, int | None] | None = None  # status, retry_after, times
    stall: bool = False
    slow: float | None = None
    facts: list[str] = field(default_factory=list)


@dataclass
class AgentStep:
    """What the last request got: ``action`` is ``tool``, ``final``, ``fail`` or ``stall``."""

    action: str
    plan: TurnPlan
    done: int  # tool calls already made in the turn before this step
    call: PlannedCall | None = None
    status: int = 200


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    if isinstance(tool.get("function"), Mapping):
        return tool["function"].get("name")
    return tool.get("name")


def _tool_schema(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(tool.get("function"), Mapping):
        return tool["function"].get("parameters") or {}
    return tool.get("parameters") or tool.get("input_schema") or {}


def _tools_off(choice: object) -> bool:
    if isinstance(choice, str):
        return choice == "none"
    if isinstance(choice, Mapping):
        return choice.get("type") == "none"
    return False


def _is_person(message: ChatMessage) -> bool:
    return message.role == "user" and message.tool_call_id is None


@dataclass
class EarlierSteps:
    """What a rebuilt head shows of its turn: the person's words and the steps already saved."""

    person: str
    calls: int
    results: list[str | None]  # None: a result the block does not show
    markers: str  # marker words after the note (a replay steering the agent puts them there)


def earlier_steps(text: str) -> EarlierSteps | None:
    """The turn so far, read back from a rebuilt head; None for an ordinary message.

    The note counts the calls already made and names the saved messages, the
    person's first; the view or the recent block shows them, results cut in
    the middle or left out where they did not fit.
    """
    at = text.rfind(CONTINUED)
    if at < 0:
        return None
    markers = " ".join(m.group(0) for m in _MARKER.finditer(text, at))
    saved = _SAVED.search(text, at)
    if saved is None:
        return EarlierSteps("", 0, [], markers)
    calls, first, last = (int(g) for g in saved.groups())
    body = text[:at]
    chat_end = body.rfind("</chat>")
    recent = dict(_recent_messages(body, chat_end + len("</chat>") if chat_end >= 0 else 0))
    view = body[:chat_end] if chat_end >= 0 else ""

    def shown(ident: int) -> str | None:
        if ident in recent:
            return recent[ident]
        line = re.search(rf"^{ident}\+1\|(.*)$", view, re.M)
        return line.group(1) if line else None

    person_line = shown(first) or ""
    person = person_line.split(": ", 1)[1] if ": " in person_line else ""
    found: list = []  # results in order, _GAP where some were left out or cut
    for ident in range(first + 1, last + 1):
        message = shown(ident)
        if message is None or message.startswith("note: "):
            found.append(_GAP)
            continue
        for k, piece in enumerate(_SHORTENED.split(message)):
            if k:
                found.append(_GAP)
            entries = _STEP_START.split(piece)  # text before the first step, then tag, text, tag, text...
            found += [entry.rstrip("\n") for tag_name, entry in zip(entries[1::2], entries[2::2])
                      if tag_name == "result"]
    gaps = [k for k, r in enumerate(found) if r is _GAP]
    known = len(found) - len(gaps)
    results: list[str | None]
    if not gaps and known == calls:
        results = found
    elif len(gaps) == 1 and known <= calls:  # one run is missing: the others keep their places
        results = [*found[:gaps[0]], *[None] * (calls - known), *found[gaps[0] + 1:]]
    else:
        results = [None] * calls  # quotes by position would go wrong
    return EarlierSteps(person, calls, results, markers)


def _recent_messages(text: str, start: int) -> list[tuple[int, str]]:
    """The recent block's messages (id, ``tag: text``) from ``start`` on.

    Its ids only grow, while a zoom result a trace quotes names older
    messages: that tells the block's own ``id+0|`` lines from quoted ones.
    (A long turn's block may skip ids after a note naming the left-out ones.)
    """
    out: list[tuple[int, str]] = []
    ident, begin = -1, None
    for match in _RECENT_NAME.finditer(text, start):
        if int(match.group(1)) <= ident:
            continue
        if begin is not None:
            out.append((ident, text[begin:match.start()].rstrip("\n")))
        ident, begin = int(match.group(1)), match.end()
    if begin is not None:
        out.append((ident, text[begin:].rstrip("\n")))
    return out


def marker_text(text: str) -> str:
    """The person's own words: the message without a ``<chat>`` view or ``id+n|`` lines."""
    return _VIEW_LINE.sub(" ", _CHAT.sub(" ", text))


def _facts(text: str) -> list[str]:
    plain = _MARKER.sub(" ", text)
    out: list[str] = []
    previous = "."
    for token in plain.split():
        bare = token.strip(".,;:!?()[]{}<>\"'`«»“”")
        starts_sentence = previous[-1:] in ".!?:"
        previous = token
        if not bare or bare in out:
            continue
        if (any(ch.isdigit() for ch in bare) or "/" in bare or "_" in bare
                or re.search(r"[a-z][A-Z]", bare) or re.search(r"\w\.\w", bare)
                or (not starts_sentence and bare[:1].isupper() and len(bare) > 2 and bare.isalpha())):
            out.append(bare)
    return out


class ScriptedAgent:
    """A Responder for turn requests.

    Knobs: ``reply_bytes`` (300, 1500) the final reply's size range;
    ``tool_weights`` how many tool calls a turn without ``[[tools:K]]`` makes
    (default 0: 55%, 1: 25%, 2: 12%, 3: 8%); ``tool_preference`` weights per
    tool name (``zoom`` 3, ``recall_search`` 2, ``date`` 1, ``clarify`` 0, any
    other 1: Hermes's ``clarify`` waits for the person to answer, which a
    headless run never does, so only ``[[call:clarify]]`` calls it);
    ``latency_median`` (1.5 s) and ``latency_sigma`` (0.5), with the first
    byte after ``first_byte_share`` (0.1–0.3) of the duration; ``retry_after``
    (1.0 s) for a 429 that names none; ``quote_chars`` (4,000) the most of a
    tool result quoted.  ``last_step`` tells what the last request got.
    """

    def __init__(self, seed: int = 0, reply_bytes: tuple[int, int] = (300, 1500), *,
                 tool_weights: Mapping[int, float] | None = None,
                 tool_preference: Mapping[str, float] | None = None,
                 latency_median: float = 1.5, latency_sigma: float = 0.5,
                 first_byte_share: tuple[float, float] = (0.1, 0.3), retry_after: float = 1.0,
                 quote_chars: int = 4000) -> None:
        self.seed = seed
        self.reply_bytes = reply_bytes
        self.tool_weights = dict(tool_weights if tool_weights is not None
                                 else {0: 0.55, 1: 0.25, 2: 0.12, 3: 0.08})
        self.tool_preference = dict(tool_preference if tool_preference is not None
                                    else {"zoom": 3.0, "recall_search": 2.0, "date": 1.0, "clarify": 0.0})
        self.latency_median = latency_median
        self.latency_sigma = latency_sigma
        self.first_byte_share = first_byte_share
        self.retry_after = retry_after
        self.quote_chars = quote_chars
        self.requests = 0
        self.last_step: AgentStep | None = None
        self._failures: dict[str, int] = {}

    # -- the Responder --------------------------------------------------------

    def reply(self, request: SimRequest, now: float) -> SimReply:
        self.requests += 1
        messages = request.messages
        person_at = next((i for i in range(len(messages) - 1, -1, -1) if _is_person(messages[i])), None)
        after = messages[person_at + 1:] if person_at is not None else list(messages)
        earlier = earlier_steps(messages[person_at].text) if person_at is not None else None
        done = sum(len(m.tool_calls) for m in after if m.role == "assistant")
        done += earlier.calls if earlier else 0
        plan = self.plan(request, person_at, earlier)
        rng = random.Random(f"{self.seed}:{plan.key}:{done}")
        duration = self.latency_median * math.exp(self.latency_sigma * rng.gauss(0.0, 1.0))
        first = duration * rng.uniform(*self.first_byte_share)
        if plan.slow is not None:
            duration = first = plan.slow

        if plan.fail is not None:
            status, retry_after, times = plan.fail
            failed = self._failures.get(plan.key, 0)
            if times is None or failed < times:
                self._failures[plan.key] = failed + 1
                if status == 429 and retry_after is None:
                    retry_after = self.retry_after
                self.last_step = AgentStep("fail", plan, done, status=status)
                return SimReply(status=status, error=ERRORS.get(status, f"HTTP {status}"),
                                retry_after=retry_after, first_byte=min(first, 0.2),
                                duration=min(duration, 0.2) if plan.slow is None else duration)
        if plan.stall:
            self.last_step = AgentStep("stall", plan, done)
            return SimReply(stall=True, first_byte=first, duration=duration)

        offered = {_tool_name(t) for t in request.tools} if not _tools_off(request.tool_choice) else set()
        if done < len(plan.calls) and offered:
            call = plan.calls[done]
            self.last_step = AgentStep("tool", plan, done, call=call)
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            return SimReply(text="", tool_calls=[ToolCall(call.call_id, call.name, arguments)],
                            first_byte=first, duration=duration)

        text = self._final_text(plan, rng, after, earlier.results if earlier else [])
        self.last_step = AgentStep("final", plan, done)
        return SimReply(text=text, first_byte=first, duration=duration)

    # -- the plan -------------------------------------------------------------

    def plan(self, request: SimRequest, person_at: int | None = None,
             earlier: EarlierSteps | None = None) -> TurnPlan:
        """The turn's plan: from the person's message, the conversation before it and the seed.

        On a rebuilt head (``earlier``) the person's words are those the recent
        block shows, and markers after the note steer it as they would the message.
        """
        messages = request.messages
        if person_at is None:
            person_at = next((i for i in range(len(messages) - 1, -1, -1)
                              if _is_person(messages[i])), None)
        digest = hashlib.sha256(str(self.seed).encode())
        for message in messages[:(person_at + 1) if person_at is not None else 0]:
            digest.update(message.role.encode())
            digest.update(b"\0")
            digest.update(message.text.encode("utf-8", "surrogatepass"))
            digest.update(b"\1")
        key = digest.hexdigest()[:32]
        rng = random.Random(f"plan:{self.seed}:{key}")
        person = messages[person_at].text if person_at is not None else ""
        own = marker_text(person) if earlier is None else f"{marker_text(earlier.person)} {earlier.markers}"
        plan = TurnPlan(key=key, facts=_facts(own))
        lo, hi = self.reply_bytes
        plan.reply_bytes = rng.randint(min(lo, hi), max(lo, hi))
        count: int | None = None
        zooms: list[tuple[int, int]] = []
        named: list[str] = []
        for match in _MARKER.finditer(own):
            word, arg = match.group(1).lower(), (match.group(2) or "").strip()
            parts = [p.strip() for p in arg.split(":")] if arg else []
            try:
                if word == "tools":
                    count = max(0, int(parts[0]))
                elif word == "zoom":
                    zooms.append((int(parts[0]), int(parts[1]) if len(parts) > 1 else 1))
                elif word == "call":
                    if parts and parts[0]:
                        named.append(parts[0])
                elif word == "fail":
                    status = int(parts[0])
                    retry_after = float(parts[1]) if len(parts) > 1 and parts[1] else None
                    times = int(parts[2]) if len(parts) > 2 and parts[2] else None
                    plan.fail = (status, retry_after, times)
                elif word == "stall":
                    plan.stall = True
                elif word == "slow":
                    plan.slow = max(0.0, float(parts[0]))
                elif word == "reply":
                    plan.reply_bytes = max(1, int(parts[0]))
                    plan.exact_size = True
            except (IndexError, ValueError):
                continue  # a marker with bad arguments is just words
        if count is None and (named or zooms):  # a scripted call is the whole plan unless tools:K asks more
            count = 0
        if count is None:
            choices = sorted(self.tool_weights)
            weights = [self.tool_weights[c] for c in choices]
            count = rng.choices(choices, weights)[0] if sum(weights) > 0 else 0
        prefix = "toolu_" if request.api == "anthropic" else "call_"
        for ident, n in zooms:
            plan.calls.append(PlannedCall("zoom", {"id": ident, "n": n},
                                          f"{prefix}{rng.getrandbits(64):016x}", quote=True))
        tools = [t for t in request.tools if _tool_name(t)]
        by_name = {_tool_name(t): t for t in tools}
        for name in named:
            if name in by_name:
                plan.calls.append(PlannedCall(name, _Context(request, own).arguments(
                    name, _tool_schema(by_name[name]), rng), f"{prefix}{rng.getrandbits(64):016x}"))
        if tools:
            names = [_tool_name(t) for t in tools]
            weights = [self.tool_preference.get(name or "", 1.0) for name in names]
            if sum(weights) <= 0:
                weights = [1.0] * len(tools)
            context = _Context(request, own)
            for _ in range(count):
                tool = rng.choices(tools, weights)[0]
                name = _tool_name(tool) or "tool"
                plan.calls.append(PlannedCall(name, context.arguments(name, _tool_schema(tool), rng),
                                              f"{prefix}{rng.getrandbits(64):016x}"))
        return plan

    # -- the final reply ------------------------------------------------------

    def _final_text(self, plan: TurnPlan, rng: random.Random, after: Sequence[ChatMessage],
                    saved: Sequence[str | None] = ()) -> str:
        results = _tool_results(after)
        results.ordered[:0] = saved  # a rebuilt head's saved results came first
        parts: list[str] = [rng.choice(OPENERS)]
        if plan.facts:
            shown = plan.facts[:]
            rng.shuffle(shown)
            shown = shown[:max(1, min(5, len(shown)))]
            parts.append("You mentioned " + ", ".join(shown) + ".")
        quotes: list[str] = []
        for index, call in enumerate(plan.calls):
            if not call.quote:
                continue
            got = results.get(call.call_id)
            if got is None and index < len(results.ordered):
                got = results.ordered[index]
            if got is None:
                quotes.append(f"zoom({call.arguments['id']}, {call.arguments['n']}) returned nothing.")
                continue
            quotes.append(f"zoom({call.arguments['id']}, {call.arguments['n']}) returned: "
                          f"«{got[:self.quote_chars]}»")
        made = [c for c in plan.calls if not c.quote]
        if made:
            parts.append(f"I made {len(made)} tool call{'s' if len(made) > 1 else ''} ("
                         + ", ".join(c.name for c in made) + ").")
        head = " ".join(parts + quotes)
        head_size = len(head.encode())
        # The reply is exactly the planned size, unless quoted tool results need more room.
        target = plan.reply_bytes if (plan.exact_size and not quotes) else max(plan.reply_bytes, head_size)
        body = _prose(rng, target - head_size - 1) if target > head_size + 1 else ""
        text = f"{head} {body}".strip() if body else head
        return _exact(text, target, rng, keep=head_size if quotes else 0)


class _Results:
    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}
        self.ordered: list[str | None] = []

    def get(self, call_id: str) -> str | None:
        return self.by_id.get(call_id)


def _tool_results(after: Sequence[ChatMessage]) -> _Results:
    results = _Results()
    for message in after:
        if message.role == "tool" or (message.role == "user" and message.tool_call_id):
            results.ordered.append(message.text)
            if message.tool_call_id:
                results.by_id[message.tool_call_id] = message.text
    return results


def _prose(rng: random.Random, size: int) -> str:
    """Sentences of varied words, about ``size`` bytes (never more)."""
    if size <= 0:
        return ""
    out: list[str] = []
    total = 0
    while True:
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 14))]
        sentence = " ".join(words).capitalize() + rng.choice(".....?!")
        extra = len(sentence) + (1 if out else 0)
        if total + extra > size:
            room = size - total - (1 if out else 0)
            if room >= 2:
                cut = sentence[:room]
                space = cut.rfind(" ")
                cut = cut[:space] if space > 0 else cut
                if cut:
                    out.append(cut.rstrip() + ".")
            break
        out.append(sentence)
        total += extra
    return " ".join(out)


def _exact(text: str, size: int, rng: random.Random, keep: int = 0) -> str:
    """``text`` made exactly ``size`` UTF-8 bytes: cut at a word, then padded with a fitting word."""
    data = text.encode("utf-8")
    if len(data) > size:
        limit = max(size, keep)
        cut = data[:limit].decode("utf-8", "ignore")
        if limit == size and len(cut) > 1:
            space = cut.rfind(" ")
            if space > max(0, keep) // 2 and space > 0:
                cut = cut[:space]
        text = cut
    missing = size - len(text.encode("utf-8"))
    while missing > 0:
        if missing == 1:
            text += "."
            break
        length = min(missing - 1, max(_BY_LENGTH))
        while length not in _BY_LENGTH:
            length -= 1
        text += " " + rng.choice(_BY_LENGTH[length])
        missing = size - len(text.encode("utf-8"))
    return text


class _Context:
    """Plausible arguments for a tool call, from the request's own text."""

    def __init__(self, request: SimRequest, person: str) -> None:
        # Read from the request only when a call needs them: most calls (a terminal command) never do.
        self.request = request
        self.person = person

    @functools.cached_property
    def _whole(self) -> str:
        return "\n".join(m.text for m in self.request.messages)

    @functools.cached_property
    def names(self) -> list[tuple[int, int]]:
        names: list[tuple[int, int]] = []
        for block in _CHAT_BLOCK.findall(self._whole):
            names += [(int(a), int(b)) for a, b in _LINE_NAME.findall(block)]
        if not names:  # a view carried outside the messages (a system segment, say)
            for block in _CHAT_BLOCK.findall(self.request.prompt_text()):
                names += [(int(a), int(b)) for a, b in _LINE_NAME.findall(block)]
        return names

    @functools.cached_property
    def recent(self) -> list[int]:
        return [int(a) for a, b in _LINE_NAME.findall(_CHAT.sub(" ", self._whole)) if b == "0"]

    @functools.cached_property
    def words(self) -> list[str]:
        words = [w for w in _WORD.findall(_MARKER.sub(" ", self.person)) if len(w) >= 4]
        return words or [w for w in _WORD.findall(_CHAT.sub(" ", self._whole))][:200]

    def line(self, rng: random.Random) -> tuple[int, int]:
        pool = [(i, max(1, n)) for i, n in self.names] + [(i, 1) for i in self.recent]
        return rng.choice(pool) if pool else (0, 1)

    def message_id(self, rng: random.Random) -> int:
        ids = [i for i, _ in self.names] + self.recent
        return rng.choice(ids) if ids else 0

    def word(self, rng: random.Random) -> str:
        return rng.choice(self.words) if self.words else rng.choice(WORDS)

    def arguments(self, name: str, schema: Mapping[str, Any], rng: random.Random) -> dict:
        if name == "zoom":
            ident, n = self.line(rng)
            return {"id": ident, "n": n}
        if name == "date":
            return {"id": self.message_id(rng)}
        if name == "recall_search":
            return {"query": self.word(rng)}
        properties = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        out: dict[str, Any] = {}
        for key in required or list(properties)[:1]:
            out[key] = self._value(key, properties.get(key) or {}, rng)
        return out

    def _value(self, key: str, spec: Mapping[str, Any], rng: random.Random) -> Any:
        if "enum" in spec and spec["enum"]:
            return rng.choice(list(spec["enum"]))
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        lowered = key.lower()
        if kind == "integer":
            low = int(spec.get("minimum", 0))
            return low + rng.randint(0, 9)
        if kind == "number":
            return round(rng.uniform(0, 10), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return []
        if kind == "object":
            return {}
        if any(w in lowered for w in ("path", "file", "dir")):
            return rng.choice(("README.md", "src/main.py", "notes/todo.txt", "pyproject.toml"))
        if any(w in lowered for w in ("command", "cmd", "shell")):
            return rng.choice(("ls -la", "git status", "pytest -q", "cat README.md"))
        if "url" in lowered:
            return "https://example.com/" + self.word(rng).lower()
        if any(w in lowered for w in ("query", "search", "pattern", "term")):
            return self.word(rng)
        if any(w in lowered for w in ("content", "text", "body", "message")):
            return " ".join(rng.choice(WORDS) for _ in range(8))
        return self.word(rng)
