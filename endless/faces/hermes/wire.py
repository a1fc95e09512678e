"""Hermes's provider requests, read and rewritten: ``chat_completions`` and ``anthropic_messages``.

Hermes hands the ``llm_request`` middleware the finished keyword arguments
of the SDK call.  This module reads from them what Endless needs (the system
prompt, the tools, where the current turn starts, the turn's own steps) and
puts a new request together: Hermes's keyword arguments, with the system
prompt, tools and history replaced by the head of DESIGN §4, then the turn's
own part exactly as Hermes built it.  Hermes's cache marks are stripped and
ours placed (the head's marks, plus one at the end when there is room).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import orjson

from endless.llm.anthropic_api import ANTHROPIC_MAX_MARKS, anthropic_mark_positions, anthropic_reply, to_anthropic
from endless.llm.openai_api import openai_reply, to_openai
from endless.llm.request import Request, ToolCallOut

MODES = ("chat_completions", "anthropic_messages")
MARK_KEYS = ("cache_control", "prompt_cache_breakpoint")


class WireError(ValueError):
    """A request this module cannot read; the middleware then sends the safe request."""


def strip_marks(value: Any) -> Any:
    """A copy without any cache mark (Hermes's or ours)."""
    if isinstance(value, dict):
        return {k: strip_marks(v) for k, v in value.items() if k not in MARK_KEYS}
    if isinstance(value, list):
        return [strip_marks(v) for v in value]
    return value


def has_marks(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k in MARK_KEYS for k in value) or any(has_marks(v) for v in value.values())
    if isinstance(value, list):
        return any(has_marks(v) for v in value)
    return False


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or its text blocks joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return str(content)


def system_text(kwargs: dict, mode: str) -> str:
    if mode == "chat_completions":
        messages = kwargs.get("messages") or []
        if messages and messages[0].get("role") == "system":
            return content_text(messages[0].get("content"))
        return ""
    return content_text(kwargs.get("system"))


def conversation(kwargs: dict, mode: str) -> list[dict]:
    """The messages after the system prompt."""
    messages = list(kwargs.get("messages") or [])
    if mode == "chat_completions" and messages and messages[0].get("role") == "system":
        return messages[1:]
    return messages


def neutral_tools(kwargs: dict, mode: str) -> list[dict]:
    """Hermes's tools as ``{name, description, parameters}``, in Hermes's order."""
    out = []
    for tool in kwargs.get("tools") or []:
        if mode == "chat_completions":
            fn = tool.get("function") or {}
            out.append({"name": fn.get("name", ""), "description": fn.get("description", ""),
                        "parameters": strip_marks(fn.get("parameters") or {"type": "object"})})
        else:
            out.append({"name": tool.get("name", ""), "description": tool.get("description", ""),
                        "parameters": strip_marks(tool.get("input_schema") or {"type": "object"})})
    return out


def is_person_message(message: dict, mode: str) -> bool:
    """A user-role message that is not (only) tool results."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if mode == "anthropic_messages" and isinstance(content, list):
        return any(isinstance(b, dict) and b.get("type") == "text" for b in content) and not all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return True


def find_anchor(messages: list[dict], mode: str, user_message: str) -> int:
    """Index of the message that starts the current turn.

    The last person message holding the text ``pre_llm_call`` reported
    (Hermes may have merged an earlier failed turn's message into it, or
    appended plugin context); else the last person message.  Synthetic
    nudges Hermes adds later in the turn come after it and are the turn's own.
    """
    needle = (user_message or "").strip()
    last_person = -1
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not is_person_message(message, mode):
            continue
        if last_person < 0:
            last_person = index
        if needle and needle in content_text(message.get("content")):
            return index
    if last_person < 0:
        raise WireError("the request holds no message of the person")
    return last_person


@dataclass
class Step:
    said: str
    calls: list[ToolCallOut]
    results: dict[str, str]


def own_steps(own: list[dict], mode: str) -> list[Step]:
    """The turn's complete tool steps (an assistant message with calls, then their results)."""
    steps: list[Step] = []
    current: Step | None = None
    for message in own:
        role = message.get("role")
        if role == "assistant":
            said, calls = _assistant(message, mode)
            if calls:
                current = Step(said, calls, {})
                steps.append(current)
            else:
                current = None
        elif role == "tool" and current is not None:
            current.results[message.get("tool_call_id") or ""] = content_text(message.get("content"))
        elif role == "user" and mode == "anthropic_messages" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result" and current is not None:
                    inner = block.get("content")
                    current.results[block.get("tool_use_id") or ""] = (
                        inner if isinstance(inner, str) else content_text(inner))
    return [s for s in steps if all(c.id in s.results for c in s.calls)]


def _assistant(message: dict, mode: str) -> tuple[str, list[ToolCallOut]]:
    if mode == "chat_completions":
        calls = [ToolCallOut(c.get("id", ""), (c.get("function") or {}).get("name", ""),
                             (c.get("function") or {}).get("arguments") or "{}")
                 for c in message.get("tool_calls") or []]
        return content_text(message.get("content")), calls
    content = message.get("content")
    if isinstance(content, str):
        return content, []
    calls = [ToolCallOut(b.get("id", ""), b.get("name", ""), orjson.dumps(b.get("input") or {}).decode())
             for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    return content_text(content), calls


# -- building the new request ----------------------------------------------------------------


def mark_style(kwargs: dict, mode: str, route_style: str) -> str:
    """``anthropic`` (cache_control marks), ``openai-breakpoints`` or ``none``."""
    if mode == "anthropic_messages" or has_marks(kwargs):
        return "anthropic"
    return route_style if route_style == "openai-breakpoints" else "none"


def render_head(head: Request, kwargs: dict, mode: str, style: str) -> dict:
    """The head as wire pieces: ``{"system"?, "messages", "tools"}`` (frozen for the turn)."""
    model = kwargs.get("model") or "model"
    if mode == "anthropic_messages":
        out = to_anthropic(head, model, style="anthropic" if style == "anthropic" else "none")
        return {"system": out["system"], "messages": out["messages"], "tools": out.get("tools", [])}
    if style == "anthropic":
        out = to_openai(head, model, style="none")
        _openai_cache_control(out["messages"], anthropic_mark_positions(head), head)
    else:
        out = to_openai(head, model, style=style)
    return {"messages": out["messages"], "tools": out.get("tools", []),
            "prompt_cache_key": out.get("prompt_cache_key")}


def _openai_cache_control(messages: list[dict], marks: list[tuple[int, int]], head: Request) -> None:
    """Anthropic-style marks on an OpenAI-shaped list (OpenRouter and gateways to Claude)."""
    for index, block in marks:
        position = index + 1  # messages[0] is the system prompt
        blocks = [head.system] if index < 0 else head.messages[index].blocks
        message = messages[position]
        if message.get("role") == "tool" or not blocks:
            continue
        message["content"] = [{"type": "text", "text": text} for text in blocks if text] or \
            [{"type": "text", "text": ""}]
        live = [k for k, text in enumerate(blocks) if text]
        if block in live:
            message["content"][live.index(block)]["cache_control"] = {"type": "ephemeral"}


def count_marks(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(count_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_marks(v) for v in value)
    return 0


def assemble(kwargs: dict, mode: str, frozen: dict, own: list[dict], style: str) -> dict:
    """Hermes's keyword arguments with our head and the turn's own part (marks stripped)."""
    out = {k: v for k, v in kwargs.items() if k not in ("messages", "system", "tools", "tool_choice")}
    own = strip_marks(own)
    messages = copy.deepcopy(frozen["messages"]) + own
    if style == "anthropic" and own and count_marks(frozen["messages"]) + (
            count_marks(frozen.get("system")) if mode == "anthropic_messages" else 0) < ANTHROPIC_MAX_MARKS:
        _mark_last(messages[-1])
    out["messages"] = messages
    if mode == "anthropic_messages":
        out["system"] = copy.deepcopy(frozen["system"])
    if frozen["tools"]:
        out["tools"] = copy.deepcopy(frozen["tools"])
        if "tool_choice" in kwargs:
            out["tool_choice"] = kwargs["tool_choice"]
    if frozen.get("prompt_cache_key") and "prompt_cache_key" not in out:
        out["prompt_cache_key"] = frozen["prompt_cache_key"]
    return out


def _mark_last(message: dict) -> None:
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        if content[-1].get("type") in ("text", "tool_result", "tool_use"):
            content[-1]["cache_control"] = {"type": "ephemeral"}


def safe_request(kwargs: dict, mode: str, system: str, message: str, notice: str) -> dict:
    """System prompt + the current message + a one-line notice: never the full history."""
    text = f"{message}\n\n[{notice}]"
    out = {k: v for k, v in kwargs.items() if k not in ("messages", "system")}
    if mode == "anthropic_messages":
        out["system"] = system
        out["messages"] = [{"role": "user", "content": text}]
    else:
        out["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return strip_marks(out)


def own_answer(mode: str, model: str, text: str) -> Any:
    """The provider's answer object for ``mode``, holding ``text``: what Hermes takes from the ``llm_execution``
    middleware when Endless answers a request itself (no model is asked)."""
    if mode == "anthropic_messages":
        return anthropic_reply(text, model)
    if mode == "chat_completions":
        return openai_reply(text, model)
    raise WireError(f"no answer shape for {mode!r} requests")
