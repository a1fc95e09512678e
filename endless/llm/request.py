"""A model request in neutral form, before any provider's wire form.

Every model call Endless makes (a turn, a writer call, chat, replay, the
Hermes plugin) builds this one shape, so the same system prompt, tools and
view blocks render to the same bytes whichever caller sent them, and all of
them read one cached prefix.  The view travels as content blocks of 4 lines,
so a cache mark can sit on the last whole block and stay valid while lines
are appended after it (DESIGN §3.4).  Where the marks go and how they are
spelled is each provider's business (:mod:`endless.llm.openai_api`,
:mod:`endless.llm.anthropic_api`); this module only says where the view is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

VIEW_BLOCK_LINES = 4
MARK_STYLES = ("none", "anthropic", "openai-breakpoints")


@dataclass
class ToolCallOut:
    id: str
    name: str
    arguments: str  # JSON text


@dataclass
class Msg:
    """One message: ``user``, ``assistant`` or ``tool`` (a tool result)."""

    role: str
    blocks: list[str]
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    tool_call_id: str | None = None

    def text(self) -> str:
        return "".join(self.blocks)


@dataclass
class Request:
    system: str
    tools: list[dict]  # {name, description, parameters}
    messages: list[Msg]
    view_message: int | None = None  # index of the message whose blocks start with the view
    view_blocks: int = 0  # how many of that message's first blocks are whole 4-line view blocks
    tool_choice: str = "auto"  # or "none"
    cache_key: str | None = None
    max_tokens: int = 1024

    def rendered(self) -> str:
        """The request as plain text, marks left out: what prefix comparisons look at."""
        tools = orjson.dumps(self.tools).decode()
        parts = [tools, self.system]
        for m in self.messages:
            parts.append(m.role + ":" + m.text())
            parts.extend(f"call {c.name} {c.arguments}" for c in m.tool_calls)
        return "\n".join(parts)


def view_message_blocks(lines: list[str], tail: list[str] | None = None) -> tuple[list[str], int]:
    """Blocks for the view message: ``<chat>`` and 4 lines a block, a partial block, ``</chat>``, then ``tail``.

    Returns the blocks and how many are whole 4-line view blocks.  ``</chat>``
    gets a block of its own so a whole block's bytes never change when lines
    are appended.
    """
    blocks: list[str] = []
    whole = 0
    for start in range(0, len(lines), VIEW_BLOCK_LINES):
        chunk = lines[start:start + VIEW_BLOCK_LINES]
        text = "".join(line + "\n" for line in chunk)
        if start == 0:
            text = "<chat>\n" + text
        blocks.append(text)
        if len(chunk) == VIEW_BLOCK_LINES:
            whole += 1
    if not lines:
        blocks.append("<chat>\n")
    blocks.append("</chat>\n")
    blocks.extend(tail or [])
    return blocks, whole
