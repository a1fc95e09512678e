"""Anthropic messages on the wire: request → :class:`SimRequest`, reply → JSON or SSE.

Every content block (each tool, each system block, each message block) is one
:class:`Segment` with ``block_end=True``, in Anthropic's order tools → system →
messages.  A ``cache_control`` on a block becomes that segment's mark
(``"1h"`` when its ``ttl`` says so, else ``"5m"``); a top-level
``cache_control`` (automatic caching) marks the last block, unless that block
already carries one.  Like the real API, more than 4 marks, or a 1-hour mark
after a 5-minute one, is a 400.

Usage: ``input_tokens`` is the uncached part only; ``cache_read_input_tokens``,
``cache_creation_input_tokens`` and ``cache_creation.{ephemeral_5m,1h}``
carry the rest (``CacheUsage.write_1h`` is the one-hour part of ``write``).
"""

from __future__ import annotations

from typing import Any

import orjson

from .model import CacheUsage, ChatMessage, Segment, SimReply, SimRequest, ToolCall
from .wire import WireError, canonical_json, dumps, header, pieces, retry_headers, sse

MAX_MARKS = 4


def _mark(block: Any) -> str | None:
    if not isinstance(block, dict):
        return None
    control = block.get("cache_control")
    if not control:
        return None
    if not isinstance(control, dict) or control.get("type", "ephemeral") != "ephemeral":
        raise WireError(400, "cache_control.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise WireError(400, f"cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
    return ttl


def _without_mark(block: dict) -> dict:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_block_text(block)[0] for block in content)
    raise WireError(400, "tool_result.content: expected a string or an array of blocks")


def _block_text(block: Any) -> tuple[str, str]:
    """The prompt text of one content block, and its type."""
    if isinstance(block, str):
        return block, "text"
    if not isinstance(block, dict):
        raise WireError(400, "content blocks must be objects")
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise WireError(400, "text block: 'text' must be a string")
        return text, kind
    if kind == "tool_use":
        return f"<|tool_use|> {block.get('id', '')} {block.get('name', '')} " \
               f"{canonical_json(block.get('input', {}))}", kind
    if kind == "tool_result":
        error = " error" if block.get("is_error") else ""
        return f"<|tool_result{error}|> {block.get('tool_use_id', '')}\n" \
               f"{_result_text(block.get('content'))}", kind
    if kind in ("thinking", "redacted_thinking"):
        return str(block.get("thinking", block.get("data", ""))), kind
    if kind in ("image", "document", "search_result"):
        return f"[{kind}]", kind
    raise WireError(400, f"Unknown content block type: {kind!r}")


def parse_request(body: Any, *, count_only: bool = False) -> SimRequest:
    """A messages body as the simulator sees it; :class:`WireError` (400) if malformed.

    ``count_only``: a ``/v1/messages/count_tokens`` body (no ``max_tokens``).
    """
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError(400, "model: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "messages: at least one message is required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) and not count_only:
        raise WireError(400, "max_tokens: Field required")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise WireError(400, "tools: Input should be a valid list")

    segments: list[Segment] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise WireError(400, "tools: each tool must be an object")
        segments.append(Segment((header("tools") if i == 0 else "") + canonical_json(_without_mark(tool))
                                + "\n", mark=_mark(tool)))

    system = body.get("system")
    system_text = ""
    if system:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        if not isinstance(blocks, list):
            raise WireError(400, "system: Input should be a string or a list of text blocks")
        for i, block in enumerate(blocks):
            text, _ = _block_text(block)
            system_text += text
            segments.append(Segment((header("system") if i == 0 else "") + text + "\n", mark=_mark(block)))

    chat: list[ChatMessage] = []
    if system_text:
        chat.append(ChatMessage("system", system_text))
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise WireError(400, f"messages.{index}.role: Input should be 'user' or 'assistant'")
        role = message["role"]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise WireError(400, f"messages.{index}.content: Input should be a string or a list")
        head = header(role)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for i, block in enumerate(blocks):
            text, kind = _block_text(block)
            segments.append(Segment((head if i == 0 else "") + text + "\n", mark=_mark(block)))
            if kind == "tool_use":
                calls.append(ToolCall(str(block.get("id", "")), str(block.get("name", "")),
                                      canonical_json(block.get("input", {}))))
            elif kind == "tool_result":
                chat.append(ChatMessage("tool", _result_text(block.get("content")),
                                        tool_call_id=str(block.get("tool_use_id", ""))))
            elif kind == "text":
                texts.append(text)
        if not blocks:
            segments.append(Segment(head))
        if texts or calls or not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            chat.append(ChatMessage(role, "".join(texts), calls))

    top = body.get("cache_control")
    if top:
        ttl = _mark({"cache_control": top})
        last = len(segments) - 1
        while last >= 0 and not segments[last].text.strip():
            last -= 1
        if last >= 0:
            existing = segments[last].mark
            if existing is None:
                segments[last] = Segment(segments[last].text, True, ttl)
            elif existing != ttl:
                raise WireError(400, "cache_control: the automatic breakpoint's ttl differs from the "
                                     "ttl already set on the last block")

    marks = [s.mark for s in segments if s.mark]
    if len(marks) > MAX_MARKS:
        raise WireError(400, f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. "
                             f"Found {len(marks)}.")
    if any(mark == "5m" and "1h" in marks[i + 1:] for i, mark in enumerate(marks)):
        raise WireError(400, "a ttl='1h' cache_control block must not come after a ttl='5m' "
                             "cache_control block")

    metadata = body.get("metadata") or {}
    cache_key = metadata.get("user_id") if isinstance(metadata, dict) else None
    return SimRequest(api="anthropic", model=model, segments=segments, messages=chat, tools=tools,
                      stream=bool(body.get("stream")), cache_key=cache_key, max_tokens=max_tokens,
                      tool_choice=body.get("tool_choice"), raw=body)


def usage_json(usage: CacheUsage, output_tokens: int) -> dict:
    return {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.write,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.write - usage.write_1h,
                           "ephemeral_1h_input_tokens": usage.write_1h},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _tool_input(call: ToolCall) -> dict:
    try:
        value = orjson.loads(call.arguments) if call.arguments else {}
    except orjson.JSONDecodeError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def _content(reply: SimReply) -> list[dict]:
    blocks: list[dict] = []
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    blocks.extend({"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
                  for call in reply.tool_calls)
    return blocks


def _stop_reason(reply: SimReply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def message_json(request: SimRequest, reply: SimReply, usage: CacheUsage, output_tokens: int, *,
                 response_id: str) -> dict:
    return {"id": response_id, "type": "message", "role": "assistant", "model": request.model,
            "content": _content(reply), "stop_reason": _stop_reason(reply), "stop_sequence": None,
            "usage": usage_json(usage, output_tokens)}


def stream_events(request: SimRequest, reply: SimReply, usage: CacheUsage, output_tokens: int, *,
                  response_id: str, piece_chars: int = 48) -> list[bytes]:
    """The SSE events of a streamed message, ``message_start`` … ``message_stop``."""
    start_usage = usage_json(usage, 1)
    events = [sse({"type": "message_start",
                   "message": {"id": response_id, "type": "message", "role": "assistant",
                               "model": request.model, "content": [], "stop_reason": None,
                               "stop_sequence": None, "usage": start_usage}}, "message_start"),
              sse({"type": "ping"}, "ping")]
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}}, "content_block_start"))
            events.extend(sse({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
                          for piece in pieces(block["text"], piece_chars))
        else:
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": block["id"],
                                                 "name": block["name"], "input": {}}},
                              "content_block_start"))
            events.extend(sse({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}},
                              "content_block_delta")
                          for piece in pieces(canonical_json(block["input"]), piece_chars))
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    final_usage = usage_json(usage, output_tokens)
    final_usage.pop("service_tier")
    events.append(sse({"type": "message_delta",
                       "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                       "usage": final_usage}, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
    429: "rate_limit_error", 500: "api_error", 503: "api_error", 504: "timeout_error",
    529: "overloaded_error",
}


def error_response(status: int, message: str, *, retry_after: float | None = None,
                   request_id: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """Anthropic's error JSON: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if not message:
        message = "Overloaded" if status == 529 else f"Error {status}"
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    headers = {"content-type": "application/json", **retry_headers(retry_after)}
    if request_id:
        body["request_id"] = request_id
        headers["request-id"] = request_id
    return status, headers, dumps(body)


def models_json(models: list[tuple[str, int]], created_at: str) -> dict:
    data = [model_json(name, length, created_at) for name, length in models]
    return {"data": data, "has_more": False,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}


def model_json(name: str, context_length: int, created_at: str) -> dict:
    return {"type": "model", "id": name, "display_name": name, "created_at": created_at,
            "max_input_tokens": context_length, "context_length": context_length}
