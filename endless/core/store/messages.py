"""Messages as the log keeps them: kinds, tags, caps and splitting (DESIGN §2.2).

Tool output is clipped to its head and tail with a note of what was cut; what
people and the agent say is never cut, only split into consecutive messages
when it is very long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from endless.core.settings import Settings

KINDS = ("user", "reply", "trace", "call", "result", "said", "work", "status", "note")
TURN_KINDS = {"user", "reply", "trace", "work", "status", "note"}
STEP_KINDS = {"user", "reply", "call", "result", "said", "work", "status", "note"}
_FIXED_TAGS = {"call": "did", "result": "result", "said": "said", "work": "colleague",
               "status": "note", "note": "note"}
STEP_TAGS = ("did", "result", "said")


class MessageError(ValueError):
    """A message that cannot be logged as given."""


@dataclass(slots=True, unsafe_hash=True)
class Message:
    """One message about to be logged; ``writer_text`` only when the writer reads other words.

    Never changed once made, yet not a frozen dataclass: one costs three times as
    much to make, and an import makes two for each of a million messages.  (It
    hashes as a frozen one would.)
    """

    kind: str
    text: str
    at: float
    writer_text: str | None = None

    @classmethod
    def from_record(cls, record: dict) -> "Message":
        """The message of a ``{"k", "x", "at", "w"?}`` record (:meth:`to_record`'s inverse)."""
        return cls(record["k"], record["x"], record["at"], record.get("w"))

    def to_record(self) -> dict:
        record = {"k": self.kind, "x": self.text, "at": self.at}
        if self.writer_text is not None and self.writer_text != self.text:
            record["w"] = self.writer_text
        return record


@dataclass(frozen=True)
class Stored:
    """A logged message with its place in the memory."""

    id: int
    kind: str
    text: str
    at: float
    session: str
    title: str
    turn: int
    writer_text: str | None = None

    def source_text(self, settings: Settings, agent_name: str | None = None) -> str:
        """``tag: text`` as the view's level-0 line and the recent block show it."""
        return render(self.kind, self.text, settings, agent_name)

    def writer_source(self, settings: Settings, agent_name: str | None = None) -> str:
        return render(self.kind, self.writer_text if self.writer_text is not None else self.text,
                      settings, agent_name)

    def writer_task_input(self, settings: Settings, agent_name: str | None = None) -> str:
        """The writer source as one writer call reads it: tool output trimmed (:func:`writer_input`)."""
        text = self.writer_text if self.writer_text is not None else self.text
        return render(self.kind, writer_input(self.kind, text, settings), settings, agent_name)


def tag(kind: str, settings: Settings, agent_name: str | None = None) -> str | None:
    if kind == "user":
        return settings.person_tag
    if kind == "reply":
        return agent_name or settings.agent_name
    if kind == "trace":
        return None
    try:
        return _FIXED_TAGS[kind]
    except KeyError:
        raise MessageError(f"unknown message kind {kind!r}; kinds are {', '.join(KINDS)}") from None


def render(kind: str, text: str, settings: Settings, agent_name: str | None = None) -> str:
    """A trace carries its own ``did:``/``result:``/``said:`` tags; other kinds get one."""
    name = tag(kind, settings, agent_name)
    return text if name is None else f"{name}: {text}"


def check_kind(kind: str, granularity: str) -> None:
    allowed = TURN_KINDS if granularity == "turn" else STEP_KINDS
    if kind not in allowed:
        raise MessageError(f"kind {kind!r} is not logged at granularity {granularity!r}; "
                           f"use one of {', '.join(sorted(allowed))}")


def cap_middle(text: str, keep: int) -> str:
    """Keep the first and last ``keep`` characters, saying how much was cut between."""
    if len(text) <= 2 * keep:
        return text
    cut = len(text) - 2 * keep
    unit = "character" if cut == 1 else "characters"
    return f"{text[:keep]}\n[… {cut:,} {unit} cut …]\n{text[-keep:]}"


_STEP_START = re.compile(r"^(?:did|result|said): ", re.M)


def writer_input(kind: str, text: str, settings: Settings) -> str:
    """What a writer call reads of a tool message: the steps whole, each result's middle left out.

    A 512-byte line cannot carry what the middle of a 40 KB build log says,
    yet reading it costs the writer as much as the agent paid for it once.
    Every ``did:`` and ``said:`` step stays (what was done to what), each
    ``result:`` keeps its head and tail, where commands echo and errors end,
    and the whole keeps its first and last ``writer_input_keep_chars``.  Person
    messages and replies are never shortened.  The log keeps every character.
    """
    if kind not in ("trace", "result", "call"):
        return text
    keep = settings.writer_result_keep_chars
    if kind == "result":
        text = cap_middle(text, keep)
    elif kind == "trace" and len(text) > 2 * keep:
        starts = [m.start() for m in _STEP_START.finditer(text)]
        if not starts or starts[0] != 0:
            starts.insert(0, 0)
        steps = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
        text = "".join(cap_middle(step.rstrip("\n"), keep) + ("\n" if step.endswith("\n") else "")
                       if step.startswith("result: ") else step for step in steps)
    return cap_middle(text, settings.writer_input_keep_chars)


def split_long(text: str, limit: int) -> list[str]:
    """Cut text longer than ``limit`` characters into parts, at a line or word break if one is near."""
    if len(text) <= limit:
        return [text]
    parts = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", limit // 2, limit)
        if cut < 0:
            cut = rest.rfind(" ", limit // 2, limit)
        cut = limit if cut < 0 else cut + 1
        parts.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        parts.append(rest)
    return parts


def prepare(kind: str, text: str, at: float, settings: Settings,
            writer_text: str | None = None) -> list[Message]:
    """The message(s) to log for one thing said or done: capped or split as DESIGN §2.2 says."""
    if not isinstance(text, str):
        raise MessageError(f"message text must be a string, not {type(text).__name__}")
    tag(kind, settings)  # rejects an unknown kind
    if kind in ("result", "call"):
        return [Message(kind, cap_middle(text, settings.result_cap_chars), at,
                        None if writer_text is None else cap_middle(writer_text, settings.result_cap_chars))]
    if kind == "trace":
        return [Message(kind, cap_middle(text, settings.trace_cap_chars), at,
                        None if writer_text is None else cap_middle(writer_text, settings.trace_cap_chars))]
    if len(text) <= settings.message_split_chars:
        return [Message(kind, text, at, writer_text)]
    return [Message(kind, part, at) for part in split_long(text, settings.message_split_chars)]


@dataclass
class TraceBuilder:
    """Collects a turn's steps into one ``trace`` message (granularity ``turn``).

    Each step is a ``did:``, ``result:`` or ``said:`` line.  The writer's copy
    may word a step differently (the look-back tools), so both are kept.
    """

    settings: Settings
    lines: list[str] = field(default_factory=list)
    writer_lines: list[str] = field(default_factory=list)

    def add(self, step_tag: str, text: str, writer_text: str | None = None) -> None:
        if step_tag not in STEP_TAGS:
            raise MessageError(f"a trace step is one of {', '.join(STEP_TAGS)}, not {step_tag!r}")
        if step_tag == "result":
            text = cap_middle(text, self.settings.result_cap_chars)
        self.lines.append(f"{step_tag}: {text}")
        if writer_text != "":
            shown = text if writer_text is None else writer_text
            self.writer_lines.append(f"{step_tag}: {shown}" if writer_text is None or step_tag != "did"
                                     else shown)

    @property
    def empty(self) -> bool:
        return not self.lines

    def text(self) -> str:
        return "\n".join(self.lines)

    def writer_text(self) -> str | None:
        joined = "\n".join(self.writer_lines)
        return None if joined == self.text() else joined


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (most lines are)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))
