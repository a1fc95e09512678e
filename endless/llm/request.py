"""A model request in neutral form, and its OpenAI and Anthropic wire forms with cache marks.

Turns and writer calls share this: the same system prompt, tools and view
blocks must render to the same bytes, so both read one cached prefix.  The
view travels as content blocks of 4 lines, so a cache mark can sit on the last
whole block and stay valid while lines are appended after it (DESIGN §3.4).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import orjson

VIEW_BLOCK_LINES = 4
ANTHROPIC_LOOKBACK = 20
ANTHROPIC_MAX_MARKS = 4
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


def anthropic_mark_positions(request: Request) -> list[tuple[int, int]]:
    """Where the (at most 4) Anthropic marks go, as (message index, block index); -1 means the system.

    The end of the system prompt, the last whole view block, the block 20
    blocks before it (a mark looks back only 20 blocks), the end of the request.
    """
    marks: list[tuple[int, int]] = [(-1, 0)]
    if request.view_message is not None and request.view_blocks > 0:
        last_whole = request.view_blocks - 1
        marks.append((request.view_message, last_whole))
        earlier = last_whole - ANTHROPIC_LOOKBACK
        if earlier >= 0:
            marks.append((request.view_message, earlier))
    if request.messages:
        last = len(request.messages) - 1
        end = (last, max(0, len(request.messages[last].blocks) - 1))
        if end not in marks:
            marks.append(end)
    return sorted(set(marks))[:ANTHROPIC_MAX_MARKS]


OPENAI_READ_BREAKPOINTS = 80  # OpenAI reads at the latest 80 breakpoints of a request


def openai_breakpoint_positions(request: Request) -> list[tuple[int, int]]:
    """The end of the system prompt and of every whole view block (the latest 79).

    OpenAI reads only at breakpoints of the current request, never at an
    unmarked prefix.  Marking just the view's last whole block would lose the
    whole view each time a new block fills up: the previous request wrote its
    entry at the block before, which the new request would no longer mark.
    Marking every block keeps each earlier entry readable; writes go to the
    latest few marks only, so old blocks cost nothing more.
    """
    marks = [(-1, 0)]
    if request.view_message is not None and request.view_blocks > 0:
        first = max(0, request.view_blocks - (OPENAI_READ_BREAKPOINTS - 1))
        marks.extend((request.view_message, k) for k in range(first, request.view_blocks))
    return marks


def to_openai(request: Request, model: str, style: str = "none") -> dict:
    """Keyword arguments for ``chat.completions.create``."""
    marks = set(openai_breakpoint_positions(request)) if style == "openai-breakpoints" else set()

    def content(blocks: list[str], index: int):
        if not marks:
            return "".join(blocks)
        return [_openai_part(text, (index, k) in marks) for k, text in enumerate(blocks)]

    messages: list[dict] = [{"role": "system", "content": content([request.system], -1)}]
    for index, m in enumerate(request.messages):
        if m.role == "tool":
            messages.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text()})
            continue
        out: dict = {"role": m.role, "content": content(m.blocks, index) if m.blocks else ""}
        if m.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in m.tool_calls]
            if not m.blocks:
                out["content"] = None
        messages.append(out)
    kwargs: dict = {"model": model, "messages": messages, "max_tokens": request.max_tokens}
    if request.tools:
        kwargs["tools"] = [{"type": "function", "function": copy.deepcopy(t)} for t in request.tools]
        kwargs["tool_choice"] = request.tool_choice
    if style == "openai-breakpoints" and request.cache_key:
        kwargs["prompt_cache_key"] = request.cache_key
    return kwargs


def _openai_part(text: str, marked: bool) -> dict:
    part: dict = {"type": "text", "text": text}
    if marked:
        part["prompt_cache_breakpoint"] = {"mode": "explicit"}
    return part


LONG_TTL = "1h"  # system and view marks: a pause of a few minutes must not lose the view


def to_anthropic(request: Request, model: str, style: str = "anthropic", ttl: str | None = None) -> dict:
    """Keyword arguments for ``messages.create``; tool results merge into user messages.

    Marks on the system prompt and the view keep a one-hour entry (written
    at 2× instead of 1.25×, only for what is new): with the default five
    minutes, every pause longer than that re-bills the whole view.  The end
    of the request, which changes every turn, keeps five minutes.  ``ttl``
    sets one lifetime for all marks instead.
    """
    positions = sorted(anthropic_mark_positions(request)) if style == "anthropic" else []
    last = positions[-1] if positions else None
    marks = set(positions)

    def control_for(position: tuple[int, int]) -> dict:
        control: dict = {"type": "ephemeral"}
        chosen = ttl if ttl else (None if position == last and len(positions) > 1 else LONG_TTL)
        if chosen:
            control["ttl"] = chosen
        return control

    def text_block(text: str, position: tuple[int, int] | None) -> dict:
        block: dict = {"type": "text", "text": text}
        if position is not None and position in marks:
            block["cache_control"] = control_for(position)
        return block

    messages: list[dict] = []
    for index, m in enumerate(request.messages):
        if m.role == "tool":
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id or "",
                      "content": [text_block(t, None) for t in m.blocks if t]
                      or [{"type": "text", "text": "(empty)"}]}
            marked = [(index, k) for k in range(max(1, len(m.blocks))) if (index, k) in marks]
            if marked:
                result["cache_control"] = control_for(marked[0])  # on the result itself: a nested mark is not read
            if messages and messages[-1]["role"] == "user" and _is_results(messages[-1]):
                messages[-1]["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
            continue
        blocks = [text_block(t, (index, k)) for k, t in enumerate(m.blocks) if t]
        for call in m.tool_calls:
            try:
                arguments = orjson.loads(call.arguments or "{}")
            except orjson.JSONDecodeError:
                arguments = {"_raw": call.arguments}
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        if not blocks:
            blocks = [{"type": "text", "text": "(empty)"}]
        messages.append({"role": m.role, "content": blocks})
    kwargs: dict = {"model": model, "max_tokens": request.max_tokens, "messages": messages,
                    "system": [text_block(request.system, (-1, 0))]}
    if request.tools:
        kwargs["tools"] = [{"name": t["name"], "description": t["description"],
                            "input_schema": copy.deepcopy(t["parameters"])} for t in request.tools]
        kwargs["tool_choice"] = {"type": request.tool_choice if request.tool_choice in ("none", "auto")
                                 else "auto"}
    return kwargs


def _is_results(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)
