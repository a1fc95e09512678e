"""OpenAI chat completions on the wire: request → :class:`SimRequest`, reply → JSON or SSE.

Covers what OpenAI, DeepSeek, OpenRouter and vLLM speak: text given as a
string or as content parts, tool definitions, assistant tool calls and tool
results, explicit cache breakpoints (``prompt_cache_breakpoint`` on a content
part, GPT-5.6 and later, or a ``cache_control`` marker as OpenRouter passes
through: both become ``mark="breakpoint"``), ``prompt_cache_key`` (or
DeepSeek's ``user_id``, or ``user``) as the cache partition key.

Usage is rendered for a *flavour*: ``"openai"`` gives
``prompt_tokens_details.cached_tokens`` (and ``cache_write_tokens`` when the
cache model wrote any); ``"deepseek"`` adds ``prompt_cache_hit_tokens`` and
``prompt_cache_miss_tokens``.
"""

from __future__ import annotations

from typing import Any

from .model import CacheUsage, ChatMessage, Segment, SimReply, SimRequest, ToolCall
from .wire import WireError, canonical_json, dumps, header, pieces, retry_headers, sse

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise WireError(400, "Invalid content part: expected an object", param="messages")
    kind = part.get("type", "text")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise WireError(400, "Invalid content part: 'text' must be a string", param="messages")
        return text
    if kind == "refusal":
        return str(part.get("refusal", ""))
    if kind == "image_url":
        return "[image]"
    if kind == "input_audio":
        return "[audio]"
    if kind == "file":
        return "[file]"
    raise WireError(400, f"Invalid content part type: {kind!r}", param="messages")


def _part_mark(part: Any) -> str | None:
    if isinstance(part, dict) and (part.get("prompt_cache_breakpoint") or part.get("cache_control")):
        return "breakpoint"
    return None


def parse_request(body: Any) -> SimRequest:
    """A chat-completions body as the simulator sees it; :class:`WireError` (400) if malformed."""
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError(400, "you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "'messages' must be a non-empty array", param="messages")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise WireError(400, "'tools' must be an array", param="tools")

    segments: list[Segment] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise WireError(400, "Invalid tool: expected an object", param="tools")
        segments.append(Segment((header("tools") if i == 0 else "") + canonical_json(tool) + "\n"))

    chat: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise WireError(400, f"Invalid message at messages[{index}]", param="messages")
        role = message.get("role")
        if role not in ROLES:
            raise WireError(400, f"Invalid value for 'role' at messages[{index}]: {role!r}",
                            param=f"messages[{index}].role")
        detail = message.get("name") if role != "tool" else message.get("tool_call_id")
        head = header(role, detail if isinstance(detail, str) else None)

        content = message.get("content")
        parts: list[tuple[str, str | None]] = []
        if content is None:
            pass
        elif isinstance(content, str):
            parts.append((content, None))
        elif isinstance(content, list):
            parts.extend((_part_text(part), _part_mark(part)) for part in content)
        else:
            raise WireError(400, f"Invalid 'content' at messages[{index}]", param="messages")
        text = "".join(p for p, _ in parts)

        calls: list[ToolCall] = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = canonical_json(arguments)
            calls.append(ToolCall(str(call.get("id", "")), str(function.get("name", "")), arguments))
            parts.append((f"<|tool_call|> {calls[-1].id} {calls[-1].name} {arguments}", None))

        if not parts:
            segments.append(Segment(head))
        for i, (part, mark) in enumerate(parts):
            segments.append(Segment((head if i == 0 else "") + part + "\n", mark=mark))

        chat_role = {"developer": "system", "function": "tool"}.get(role, role)
        tool_call_id = message.get("tool_call_id") if role == "tool" else None
        chat.append(ChatMessage(chat_role, text, calls, tool_call_id))

    cache_key = body.get("prompt_cache_key") or body.get("user_id") or body.get("user")
    max_tokens = body.get("max_completion_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    return SimRequest(api="openai", model=model, segments=segments, messages=chat, tools=tools,
                      stream=bool(body.get("stream")),
                      cache_key=str(cache_key) if cache_key is not None else None,
                      max_tokens=max_tokens, tool_choice=body.get("tool_choice"), raw=body)


def include_usage(request: SimRequest) -> bool:
    options = request.raw.get("stream_options") or {}
    return bool(isinstance(options, dict) and options.get("include_usage"))


def usage_json(usage: CacheUsage, output_tokens: int, flavour: str = "openai") -> dict:
    details: dict[str, int] = {"cached_tokens": usage.read, "audio_tokens": 0}
    if usage.write:
        details["cache_write_tokens"] = usage.write
    out: dict[str, Any] = {
        "prompt_tokens": usage.input,
        "completion_tokens": output_tokens,
        "total_tokens": usage.input + output_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0},
    }
    if flavour == "deepseek":
        out["prompt_cache_hit_tokens"] = usage.read
        out["prompt_cache_miss_tokens"] = usage.input - usage.read
    return out


def _finish_reason(reply: SimReply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def completion_json(request: SimRequest, reply: SimReply, usage: CacheUsage, output_tokens: int, *,
                    response_id: str, created: int, flavour: str = "openai") -> dict:
    message: dict[str, Any] = {"role": "assistant",
                               "content": reply.text if (reply.text or not reply.tool_calls) else None,
                               "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for call in reply.tool_calls]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "system_fingerprint": "fp_endless_sim",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _finish_reason(reply)}],
        "usage": usage_json(usage, output_tokens, flavour),
    }


def stream_events(request: SimRequest, reply: SimReply, usage: CacheUsage, output_tokens: int, *,
                  response_id: str, created: int, flavour: str = "openai",
                  piece_chars: int = 48) -> list[bytes]:
    """The SSE events of a streamed completion, ending with ``data: [DONE]``."""
    with_usage = include_usage(request)

    def chunk(delta: dict | None, finish: str | None = None, *, usage_part: dict | None = None,
              choices: bool = True) -> bytes:
        body: dict[str, Any] = {
            "id": response_id, "object": "chat.completion.chunk", "created": created,
            "model": request.model, "system_fingerprint": "fp_endless_sim",
            "choices": ([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                        if choices else []),
        }
        if with_usage:
            body["usage"] = usage_part
        return sse(body)

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events.extend(chunk({"content": piece}) for piece in pieces(reply.text, piece_chars))
    for index, call in enumerate(reply.tool_calls):
        events.append(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                             "function": {"name": call.name, "arguments": ""}}]}))
        events.extend(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                      for piece in pieces(call.arguments, piece_chars))
    events.append(chunk({}, _finish_reason(reply)))
    if with_usage:
        events.append(chunk(None, usage_part=usage_json(usage, output_tokens, flavour), choices=False))
    events.append(b"data: [DONE]\n\n")
    return events


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", "timeout"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    529: ("server_error", "overloaded"),
}


def error_response(status: int, message: str, *, code: str | None = None, param: str | None = None,
                   retry_after: float | None = None) -> tuple[int, dict[str, str], bytes]:
    """OpenAI's error JSON: ``{"error": {"message", "type", "param", "code"}}``."""
    kind, default_code = _ERROR_TYPES.get(status, ("server_error" if status >= 500
                                                   else "invalid_request_error", None))
    body = {"error": {"message": message or f"Error {status}", "type": kind, "param": param,
                      "code": code or default_code}}
    headers = {"content-type": "application/json", **retry_headers(retry_after)}
    return status, headers, dumps(body)


def models_json(models: list[tuple[str, int]], created: int) -> dict:
    """``GET /v1/models``; each model carries its context length as OpenRouter and vLLM name it."""
    return {"object": "list", "data": [model_json(name, length, created) for name, length in models]}


def model_json(name: str, context_length: int, created: int) -> dict:
    return {"id": name, "object": "model", "created": created, "owned_by": "endless-sim",
            "context_length": context_length, "max_model_len": context_length}
