"""OpenAI Responses on the wire (``POST /v1/responses``): request → :class:`SimRequest`, reply → JSON or SSE.

What Codex and Hermes's ``codex_responses`` mode send: ``input`` as a string
or a list of items (messages with ``input_text``/``output_text`` parts,
``function_call`` and ``function_call_output``; also ``reasoning``,
``custom_tool_call``/``_output`` and ``local_shell_call``/``_output``, which
are rendered into the prompt but offered to no scripted model),
``instructions``, ``tools``, ``tool_choice``, ``prompt_cache_key``,
``max_output_tokens`` and ``previous_response_id`` (the simulator keeps the
items of recent stored responses; see :class:`ResponseStore`).

The prompt renders exactly as the chat-completions wire renders the same
conversation (``instructions`` as a system message, a ``function_call`` as a
tool call of the assistant message before it, a ``function_call_output`` as a
tool message), so one conversation costs the same tokens and gets the same
cache reads on either wire.  A function tool ``{"type": "function", "name",
…}`` renders as its chat form ``{"type": "function", "function": {…}}``.  A
namespace tool ``{"type": "namespace", "name", "tools": [function tools]}``
(how Codex 0.171 offers an MCP server's tools: ``mcp__<server>``) renders as
sent, and its functions are offered to the scripted models by their own names;
a call to one carries ``namespace`` on its ``function_call`` item.

Usage: ``input_tokens`` (all of them), ``input_tokens_details.cached_tokens``
(and ``cache_write_tokens`` when the cache model wrote any),
``output_tokens``.  A stream is the event sequence the ``openai`` SDK's
``responses.stream`` accumulates: ``response.created``, ``response.in_progress``,
per output item ``output_item.added`` … ``output_item.done`` (with
``content_part``/``output_text`` or ``function_call_arguments`` events
between), ``response.completed``; ``sequence_number`` counts from 0.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .model import CacheUsage, ChatMessage, Segment, SimReply, SimRequest, ToolCall
from .wire import WireError, canonical_json, header, pieces, sse

STORED_RESPONSES = 512  # how many responses previous_response_id can name (oldest dropped first)
MESSAGE_ROLES = {"user", "assistant", "system", "developer"}


class ResponseStore:
    """The items (input and output) of recent responses, for ``previous_response_id``.

    Bounded: a long simulated run keeps only the newest ``limit``, as the real
    service expires old ones; naming a dropped or unknown id is the API's 400.
    """

    def __init__(self, limit: int = STORED_RESPONSES) -> None:
        self.limit = limit
        self._items: OrderedDict[str, list[dict]] = OrderedDict()

    def get(self, response_id: str) -> list[dict] | None:
        return self._items.get(response_id)

    def put(self, response_id: str, items: list[dict]) -> None:
        self._items[response_id] = items
        while len(self._items) > self.limit:
            self._items.popitem(last=False)


def _part_text(part: Any, where: str) -> tuple[str, str | None]:
    """The prompt text of one content part, and its cache mark."""
    if isinstance(part, str):
        return part, None
    if not isinstance(part, dict):
        raise WireError(400, f"Invalid content part at {where}: expected an object", param=where)
    kind = part.get("type")
    mark = "breakpoint" if part.get("prompt_cache_breakpoint") else None
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise WireError(400, f"Invalid content part at {where}: 'text' must be a string", param=where)
        return text, mark
    if kind == "refusal":
        return str(part.get("refusal", "")), mark
    if kind in ("input_image", "input_file", "input_audio"):
        return f"[{kind[len('input_'):]}]", mark
    raise WireError(400, f"Invalid content part type at {where}: {kind!r} (expected input_text, "
                         f"output_text, refusal, input_image, input_file or input_audio)", param=where)


def _output_text(output: Any, where: str) -> str:
    """A tool result (``output``) as text: a string, or a list of content parts."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(_part_text(part, where)[0] for part in output)
    raise WireError(400, f"Invalid 'output' at {where}: expected a string or an array of content parts",
                    param=where)


def _call_id(item: dict, kind: str, where: str) -> str:
    """The ``call_id`` that pairs a call with its output (a local shell call may carry only its ``id``)."""
    call_id = item.get("call_id") or (item.get("id") if kind.startswith("local_shell") else None)
    if not isinstance(call_id, str) or not call_id:
        raise WireError(400, f"Missing required parameter: '{where}.call_id'.", param=f"{where}.call_id",
                        code="missing_required_parameter")
    return call_id


def _chat_tool(tool: dict) -> dict:
    """A Responses function tool in its chat-completions form (the same prompt text on both wires)."""
    if tool.get("type") != "function" or "function" in tool:
        return tool
    function = {k: v for k, v in tool.items() if k != "type"}
    return {"type": "function", "function": function}


def expand_input(body: dict, store: ResponseStore | None) -> list[dict]:
    """The request's items: those of ``previous_response_id`` (if named), then ``input``."""
    raw = body.get("input")
    if raw is None:
        raise WireError(400, "Missing required parameter: 'input'.", param="input",
                        code="missing_required_parameter")
    if isinstance(raw, str):
        items: list[Any] = [{"type": "message", "role": "user", "content": raw}]
    elif isinstance(raw, list):
        items = list(raw)
    else:
        raise WireError(400, "Invalid type for 'input': expected a string or an array of input items.",
                        param="input")
    previous = body.get("previous_response_id")
    if previous is None:
        return items
    if not isinstance(previous, str) or not previous:
        raise WireError(400, "Invalid 'previous_response_id': expected a response id string.",
                        param="previous_response_id")
    earlier = store.get(previous) if store is not None else None
    if earlier is None:
        raise WireError(400, f"Previous response with id '{previous}' not found. Send the whole "
                             f"conversation in 'input' instead, or name a response this simulator "
                             f"stored (store is not false).",
                        param="previous_response_id", code="previous_response_not_found")
    return [*earlier, *items]


def parse_request(body: Any, store: ResponseStore | None = None) -> tuple[SimRequest, list[dict]]:
    """A responses body as the simulator sees it, and its whole item list (for the store).

    :class:`WireError` (400) if malformed.
    """
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError(400, "Missing required parameter: 'model'.", param="model",
                        code="missing_required_parameter")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise WireError(400, "Invalid 'tools': expected an array of tool objects.", param="tools")
    for index, tool in enumerate(tools):
        if tool.get("type") in ("function", "namespace") and not isinstance(tool.get("name"), str):
            raise WireError(400, f"Missing required parameter: 'tools[{index}].name'.",
                            param=f"tools[{index}].name", code="missing_required_parameter")
        if tool.get("type") == "namespace":
            inner = tool.get("tools")
            if not isinstance(inner, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                      for t in inner):
                raise WireError(400, f"Invalid 'tools[{index}].tools': expected an array of function tools "
                                     "each with a name.", param=f"tools[{index}].tools")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise WireError(400, "Invalid type for 'instructions': expected a string.", param="instructions")
    items = expand_input(body, store)

    segments: list[Segment] = []
    for i, tool in enumerate(tools):
        segments.append(Segment((header("tools") if i == 0 else "") + canonical_json(_chat_tool(tool)) + "\n"))
    chat: list[ChatMessage] = []
    if instructions:
        segments.append(Segment(header("system") + instructions + "\n"))
        chat.append(ChatMessage("system", instructions))

    open_assistant = False  # the last item was an assistant message (or a call after one): calls join it
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise WireError(400, f"Invalid input item at {where}: expected an object", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in MESSAGE_ROLES:
                raise WireError(400, f"Invalid value for 'role' at {where}: {role!r} (expected user, "
                                     f"assistant, system or developer)", param=f"{where}.role")
            content = item.get("content")
            if isinstance(content, str):
                parts = [(content, None)]
            elif isinstance(content, list):
                parts = [_part_text(part, f"{where}.content[{i}]") for i, part in enumerate(content)]
            else:
                raise WireError(400, f"Invalid 'content' at {where}: expected a string or an array",
                                param=f"{where}.content")
            head = header(role)
            if not parts:
                segments.append(Segment(head))
            for i, (text, mark) in enumerate(parts):
                segments.append(Segment((head if i == 0 else "") + text + "\n", mark=mark))
            chat.append(ChatMessage("system" if role == "developer" else role, "".join(t for t, _ in parts)))
            open_assistant = role == "assistant"
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = _call_id(item, kind, where)
            if kind == "local_shell_call":
                name, arguments = "local_shell", canonical_json(item.get("action") or {})
            else:
                name = str(item.get("name", ""))
                arguments = item.get("arguments" if kind == "function_call" else "input", "")
                if not isinstance(arguments, str):
                    arguments = canonical_json(arguments)
            call = ToolCall(call_id, name, arguments)
            line = f"<|tool_call|> {call.id} {call.name} {arguments}\n"
            if open_assistant:
                segments.append(Segment(line))
                chat[-1].tool_calls.append(call)
            else:
                segments.append(Segment(header("assistant") + line))
                chat.append(ChatMessage("assistant", "", [call]))
            open_assistant = True
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            call_id = _call_id(item, kind, where)
            text = _output_text(item.get("output"), f"{where}.output")
            segments.append(Segment(header("tool", call_id) + text + "\n"))
            chat.append(ChatMessage("tool", text, tool_call_id=call_id))
            open_assistant = False
        elif kind == "reasoning":
            summary = item.get("summary") or []
            text = "".join(_part_text(part, f"{where}.summary")[0] for part in summary) \
                if isinstance(summary, list) else ""
            segments.append(Segment(header("reasoning") + (text or "[reasoning]") + "\n"))
            open_assistant = False  # a call after it opens its own assistant message
        elif kind == "item_reference":
            raise WireError(400, f"Unsupported input item at {where}: 'item_reference' (send the item "
                                 f"itself, or use previous_response_id)", param=where)
        else:
            raise WireError(400, f"Invalid input item type at {where}: {kind!r} (expected message, "
                                 f"function_call, function_call_output or reasoning)", param=where)

    if not any(m.role != "system" for m in chat):
        raise WireError(400, "'input' must hold at least one user or assistant message or tool output.",
                        param="input")

    function_tools = [t for t in tools if t.get("type") == "function"]
    function_tools += [{**inner, "namespace": t["name"]} for t in tools if t.get("type") == "namespace"
                       for inner in t["tools"] if inner.get("type", "function") == "function"]
    cache_key = body.get("prompt_cache_key") or body.get("safety_identifier") or body.get("user")
    return SimRequest(api="responses", model=model, segments=segments, messages=chat, tools=function_tools,
                      stream=bool(body.get("stream")),
                      cache_key=str(cache_key) if cache_key is not None else None,
                      max_tokens=body.get("max_output_tokens"), tool_choice=body.get("tool_choice"),
                      raw=body), items


def usage_json(usage: CacheUsage, output_tokens: int) -> dict:
    details: dict[str, int] = {"cached_tokens": usage.read}
    if usage.write:
        details["cache_write_tokens"] = usage.write
    return {"input_tokens": usage.input, "input_tokens_details": details,
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input + output_tokens}


def output_items(reply: SimReply, response_id: str, request: SimRequest | None = None) -> list[dict]:
    """The reply as completed output items: a message (unless only calls), then each function call
    (with its ``namespace`` when the request offered the function inside one)."""
    serial = response_id.removeprefix("resp_")
    items: list[dict] = []
    if reply.text or not reply.tool_calls:
        items.append({"id": f"msg_{serial}", "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": [],
                                   "logprobs": []}]})
    spaces: dict[str, str] = {}
    for tool in request.tools if request is not None else []:
        if isinstance(tool.get("namespace"), str) and isinstance(tool.get("name"), str):
            spaces.setdefault(tool["name"], tool["namespace"])
    for index, call in enumerate(reply.tool_calls):
        item = {"id": f"fc_{serial}_{index}", "type": "function_call", "status": "completed",
                "call_id": call.id, "name": call.name, "arguments": call.arguments}
        if call.name in spaces:
            item["namespace"] = spaces[call.name]
        items.append(item)
    return items


def response_json(request: SimRequest, output: list[dict] | None, usage: dict | None, *,
                  response_id: str, created: int) -> dict:
    """The Response object; ``output=None`` gives the in-progress shell the stream opens with."""
    body = request.raw
    return {
        "id": response_id, "object": "response", "created_at": created,
        "status": "in_progress" if output is None else "completed",
        "background": False, "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None, "model": request.model, "output": output or [],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "service_tier": "default", "store": body.get("store", True) is not False,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
        "top_logprobs": 0, "top_p": body.get("top_p", 1.0), "truncation": "disabled",
        "usage": usage, "user": None, "metadata": body.get("metadata") or {},
    }


def stream_events(request: SimRequest, reply: SimReply, usage: CacheUsage, output_tokens: int, *,
                  response_id: str, created: int, piece_chars: int = 48) -> list[bytes]:
    """The SSE events of a streamed response, ``response.created`` … ``response.completed``."""
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(sse({"type": kind, "sequence_number": len(events), **fields}, kind))

    emit("response.created", response=response_json(request, None, None, response_id=response_id,
                                                    created=created))
    emit("response.in_progress", response=response_json(request, None, None, response_id=response_id,
                                                        created=created))
    items = output_items(reply, response_id, request)
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                 part=empty)
            for piece in pieces(text, piece_chars):
                emit("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                     delta=piece, logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                 text=text, logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                 part=item["content"][0])
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            for piece in pieces(item["arguments"], piece_chars):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                     delta=piece)
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                 name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response_json(request, items, usage_json(usage, output_tokens),
                                                      response_id=response_id, created=created))
    return events


def stored_items(items: list[dict], output: list[dict]) -> list[dict]:
    """What a later ``previous_response_id`` continues from: this request's items, then its output."""
    return [*items, *output]
