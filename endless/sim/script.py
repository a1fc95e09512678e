"""A seeded conversation script: what the person says, which tools run and how much they return.

The benchmark (``scripts/simulate.py``), the demo and the CI run replay the
same kind of conversation, so the mix lives here, in one place.  Per 100 turns
(shuffled within each hundred, so any stretch of 100 turns has the exact mix):

* 60 chat turns: the person writes 50–300 bytes, the reply is 300–1,500 bytes;
* 25 tool turns: 2–8 tool steps with results of 1–10 KB each;
* 10 long pastes: the person's message is 4–20 KB;
* 5 heavy tool turns: 4–8 steps whose results add up to 20–60 KB.

Three chats share the workspace and take turns at random.  The gap before a
turn is drawn from a log-normal law with a median of 30 s (``gaps=False``: no
gap at all).  The first 100 turns plant up to 20 exact facts (a code, a port, a
rule, a name) that a later question may need word for word.

Each turn carries the scripted agent's marker words (``[[tools:K]]``,
``[[reply:B]]``, see :mod:`endless.sim.agent_model`) apart from the person's
text: the replay hands them to the agent beside the request, so the agent's
side follows the script while the memory holds only what the person wrote.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

TOPICS = ("the release branch", "the cache layer", "the login page", "the nightly build",
          "the billing export", "the search index", "the mobile layout", "the retry queue",
          "the database migration", "the onboarding guide", "the metrics dashboard", "the backup job")
WORDS = ("we should check whether the current plan still holds after the last review and decide what "
         "to change first because the team wants a short answer with numbers and a clear next step "
         "before the meeting on thursday so please keep it simple and tell me what you would do "
         "about the failing tests the slow queries and the config that nobody understands anymore").split()
NAME_PARTS = ("al", "bri", "cor", "dan", "el", "fen", "gra", "hol", "is", "jor", "ka", "lun",
              "mar", "nor", "os", "pel", "quin", "ros", "sel", "tam", "ul", "ves", "wyn", "zor")
KINDS = ("chat",) * 60 + ("tool",) * 25 + ("paste",) * 10 + ("heavy",) * 5
CHATS = ("Planning", "Debugging", "Writing")
NIGHT = 14 * 3600.0


@dataclass
class ScriptTurn:
    """One turn of the script."""

    number: int
    chat: int
    kind: str  # chat | tool | paste | heavy
    person: str
    results: list[int] = field(default_factory=list)  # bytes of each tool result, in step order
    reply_bytes: int = 600
    gap: float = 0.0  # seconds of quiet before the turn
    facts: list[str] = field(default_factory=list)  # planted facts stated in this turn
    markers: str = ""  # the scripted agent's steering words, sent beside the person's text
    outputs: list[str] = field(default_factory=list)  # written tool results, in step order (else made up)
    at: float | None = None  # the turn's wall time (Unix seconds); then ``gap`` is what is left until it
    chat_title: str = ""  # the chat's title (default: one of CHATS)

    @property
    def title(self) -> str:
        return self.chat_title or CHATS[self.chat % len(CHATS)]

    @property
    def session(self) -> str:
        return f"chat-{self.chat + 1}"


def prose(rng: random.Random, size: int) -> str:
    """Plain words of about ``size`` bytes, with a number now and then."""
    out: list[str] = []
    total = 0
    while total < size:
        word = str(rng.randint(2, 9999)) if rng.random() < 0.06 else rng.choice(WORDS)
        out.append(word)
        total += len(word) + 1
    text = " ".join(out)[:max(1, size)]
    return text[0].upper() + text[1:] + "."


def fact(rng: random.Random, k: int) -> str:
    """The k-th planted fact: an exact string a question may later need word for word."""
    kind = k % 4
    if kind == 0:
        letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(2))
        return f"the deploy code for {rng.choice(TOPICS)} is {letters}-{rng.randint(1000, 9999)}-{rng.choice(['ZETA', 'KILO', 'ONYX', 'FERN'])}"
    if kind == 1:
        return f"the staging server for {rng.choice(TOPICS)} listens on port {rng.randint(20000, 59999)}"
    if kind == 2:
        return (f"rule {rng.randint(10, 99)}: never merge into {rng.choice(TOPICS)} "
                f"after {rng.randint(13, 21)}:{rng.choice(['00', '15', '30', '45'])} on a {rng.choice(['Friday', 'Monday', 'holiday'])}")
    name = "".join(rng.choice(NAME_PARTS) for _ in range(2)).capitalize() + " " + \
        "".join(rng.choice(NAME_PARTS) for _ in range(3)).capitalize()
    return f"the new owner of {rng.choice(TOPICS)} is {name}"


def make_script(turns: int, seed: int = 7, *, gaps: bool = True, facts: int = 20,
                chats: int = 3, median_gap: float = 30.0, days: int = 1) -> list[ScriptTurn]:
    """``days`` > 1 spreads the turns over that many days, with a night between them."""
    rng = random.Random(seed)
    kinds: list[str] = []
    while len(kinds) < turns:
        deck = list(KINDS)
        rng.shuffle(deck)
        kinds.extend(deck)
    planted_at = sorted(rng.sample(range(min(100, turns)), min(facts, min(100, turns))))
    out: list[ScriptTurn] = []
    fact_no = 0
    for number in range(turns):
        kind = kinds[number]
        chat = rng.randrange(chats)
        gap = rng.lognormvariate(math.log(median_gap), 0.8) if gaps and number else 0.0
        results: list[int] = []
        if kind == "chat":
            person = prose(rng, rng.randint(50, 300))
        elif kind == "tool":
            person = prose(rng, rng.randint(50, 300))
            results = [rng.randint(1000, 10_000) for _ in range(rng.randint(2, 8))]
        elif kind == "paste":
            person = "Here is the log I mentioned:\n" + prose(rng, rng.randint(4000, 20_000))
        else:
            person = prose(rng, rng.randint(50, 300))
            steps = rng.randint(4, 8)
            total = rng.randint(20_000, 60_000)
            results = [total // steps] * steps
        planted: list[str] = []
        if fact_no < len(planted_at) and planted_at[fact_no] == number:
            planted = [fact(rng, fact_no)]
            fact_no += 1
            person = f"Please remember this exactly: {planted[0]}. {person}"
        reply = rng.randint(300, 1500)
        if days > 1 and number and number % max(1, turns // days) == 0:
            gap += NIGHT
        markers = f"[[tools:{len(results)}]] [[reply:{reply}]]"
        out.append(ScriptTurn(number, chat, kind, person, results, reply, gap, planted, markers))
    return out


def tool_result(turn: ScriptTurn, step: int) -> str:
    """The deterministic output of the turn's ``step``-th tool call: the written one, if the turn has it."""
    if step < len(turn.outputs):
        return turn.outputs[step]
    size = turn.results[step] if step < len(turn.results) else 200
    rng = random.Random(f"result:{turn.number}:{step}")
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"{rng.randint(1, 999):>4} | " + prose(rng, rng.randint(40, 120))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def mix_summary(script: list[ScriptTurn]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for turn in script:
        counts[turn.kind] = counts.get(turn.kind, 0) + 1
    return counts
