"""Everything about talking to Claude through the Anthropic SDK, kept in one place.

Anthropic caches only where a request says so, with at most four marks that
each look back 20 blocks, bills a one-hour entry differently from a
five-minute one, merges tool results into user messages and names its stop
reasons and token counts its own way.  This module turns the neutral request
into that wire form, reads the answer back into the shared
:class:`~endless.llm.client.Completion`, and is the only code that knows any
of it (DESIGN §3.4).
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import orjson

from endless.llm.client import SDKClient, Completion, Usage, bulk_in_extra_body, fit_kwargs, as_int, complete_with
from endless.llm.models import merge_params, reasoning_params
from endless.llm.request import Request, ToolCallOut

ANTHROPIC_LOOKBACK = 20
ANTHROPIC_MAX_MARKS = 4
LONG_TTL = "1h"  # system and view marks: a pause of a few minutes must not lose the view

_ANTHROPIC_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                    "tool_use": "tool_calls", "refusal": "refusal", "pause_turn": "pause",
                    "model_context_window_exceeded": "length"}


# -- the wire form -------------------------------------------------------------------------------


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


# -- the answer ----------------------------------------------------------------------------------


def anthropic_usage(usage: Any) -> Usage:
    """Usage from a message: ``cache_read_input_tokens``, ``cache_creation_input_tokens``, ``input_tokens``."""
    if usage is None:
        return Usage()
    creation = getattr(usage, "cache_creation", None)
    long = as_int(getattr(creation, "ephemeral_1h_input_tokens", 0)) if creation is not None else 0
    return Usage(cached=as_int(getattr(usage, "cache_read_input_tokens", 0)),
                 uncached=as_int(getattr(usage, "input_tokens", 0)),
                 cache_write=as_int(getattr(usage, "cache_creation_input_tokens", 0)),
                 output=as_int(getattr(usage, "output_tokens", 0)), cache_write_long=long)


def anthropic_reply(text: str, model: str) -> Any:
    """A finished message holding ``text``, as the SDK returns one, for a harness that takes an answer
    Endless gives itself instead of a model's (no request was sent; no tokens were used)."""
    from anthropic.types import Message

    return Message.model_validate({
        "id": "endless-own-answer", "type": "message", "role": "assistant", "model": model or "endless",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0}})


def _overloaded_class() -> type | None:
    anthropic = sys.modules.get("anthropic")
    if anthropic is None:
        return None
    # anthropic 0.87 has the class but does not export it at the top level (2.x does).
    found = getattr(anthropic, "OverloadedError", None)
    if found is None:
        exceptions = getattr(anthropic, "_exceptions", None)
        found = getattr(exceptions, "OverloadedError", None)
    return found


# -- the client ----------------------------------------------------------------------------------


class AnthropicProvider(SDKClient):
    """Messages through ``anthropic.AsyncAnthropic``."""

    def request_kwargs(self, request: Request) -> dict:
        """The keyword arguments the SDK call gets (reasoning and cache marks included)."""
        route = self.route
        kwargs = to_anthropic(request, route.model, route.style or "anthropic")
        merge_params(kwargs, reasoning_params(route))
        return fit_kwargs(self.client.messages.create, kwargs)

    async def complete(self, request: Request) -> Completion:
        """Send ``request``; a :class:`Completion`, or :class:`~endless.llm.errors.ProviderError`
        after the SDK's retries."""
        import anthropic

        return await complete_with(self.route, self._now, self.request_kwargs(request), self._call,
                                   (anthropic.APIError,), self._completion, overloaded=_overloaded_class())

    async def _call(self, kwargs: dict) -> Any:
        return await self.client.messages.create(**bulk_in_extra_body(kwargs))

    def _completion(self, response: Any, duration: float) -> Completion:
        text = "".join(getattr(block, "text", "") for block in (getattr(response, "content", None) or [])
                       if getattr(block, "type", None) == "text")
        raw_stop = getattr(response, "stop_reason", None) or ""
        calls = tuple(ToolCallOut(block.id, block.name, json.dumps(block.input or {}))
                      for block in (getattr(response, "content", None) or [])
                      if getattr(block, "type", None) == "tool_use")
        return Completion(text=text, usage=anthropic_usage(getattr(response, "usage", None)), duration=duration,
                          model=getattr(response, "model", None) or self.route.model,
                          stop_reason=_ANTHROPIC_STOPS.get(raw_stop, raw_stop), tool_calls=calls)
