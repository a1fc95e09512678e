"""The simulator's own vocabulary: a request as the cache sees it, a scripted reply, cache usage.

Wire formats (OpenAI chat completions and responses, Anthropic messages) are parsed into a
:class:`SimRequest`; a scripted model answers it with a :class:`SimReply`; a
cache model turns the request's tokens into a :class:`CacheUsage`; the wire
layer renders the reply and the usage back in the provider's format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Segment:
    """One piece of the rendered prompt, in order: tools, system, then messages.

    ``block_end``: a content block ends here (Anthropic counts block boundaries
    for its 20-block lookback).  ``mark``: a cache mark at the end of this
    segment: ``"5m"`` or ``"1h"`` for an Anthropic ``cache_control``,
    ``"breakpoint"`` for an OpenAI explicit breakpoint, None for no mark.
    """

    text: str
    block_end: bool = True
    mark: str | None = None


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the wire carries it


@dataclass
class ChatMessage:
    """A message reduced to what scripted models read."""

    role: str  # "system", "user", "assistant", "tool"
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None


@dataclass
class SimRequest:
    api: str  # "openai" (chat completions), "responses" (OpenAI responses) or "anthropic"
    model: str
    segments: list[Segment]
    messages: list[ChatMessage]
    tools: list[dict]
    stream: bool
    cache_key: str | None  # prompt_cache_key, DeepSeek user id, Anthropic workspace
    max_tokens: int | None
    tool_choice: object = None
    raw: dict = field(default_factory=dict)

    def prompt_text(self) -> str:
        return "".join(s.text for s in self.segments)

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""


@dataclass
class SimReply:
    """What a scripted model answers, and how long the provider takes.

    ``status`` other than 200 makes the provider fail with that HTTP status
    and ``error`` as its message; ``stall`` makes it never answer.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    first_byte: float = 0.5  # seconds after the request until the first byte
    duration: float = 1.0  # seconds after the request until the last byte
    status: int = 200
    error: str = ""
    stall: bool = False
    retry_after: float | None = None


@dataclass(frozen=True)
class CacheUsage:
    """Input tokens split by what the cache did; ``uncached = input - read - write``."""

    input: int
    read: int
    write: int = 0
    write_1h: int = 0  # the part of ``write`` held for an hour (Anthropic)

    @property
    def uncached(self) -> int:
        return self.input - self.read - self.write


class CacheModel(Protocol):
    """A provider's prompt cache.

    ``tokens`` is the whole prompt tokenised; ``block_ends`` the token
    positions where content blocks end; ``marks`` maps token positions to
    their mark (``"5m"``, ``"1h"``, ``"breakpoint"``).  The model decides what
    is read, records what is written with the time it becomes readable
    (first byte or completion, per provider), and returns the usage.
    ``failed`` requests write nothing.
    """

    def request(self, tokens: list[int], block_ends: list[int], marks: dict[int, str],
                key: str | None, sent_at: float, first_byte_at: float, done_at: float,
                failed: bool = False) -> CacheUsage: ...


class Responder(Protocol):
    """A scripted model: answers a request (agent turns or writer ``Compaction:`` calls)."""

    def reply(self, request: SimRequest, now: float) -> SimReply: ...
