"""Everything about talking to an OpenAI-compatible server, kept in one place.

OpenAI, DeepSeek, OpenRouter, vLLM, llama.cpp and Ollama all take chat
completions, yet each spells caching, reasoning and usage its own way:
GPT-5.6 and later read the prompt cache only at explicit breakpoints,
reasoning models refuse ``max_tokens``, DeepSeek counts cache hits in fields
of its own.  This module turns the neutral request into that wire form,
reads the answer back into the shared :class:`~endless.llm.client.Completion`,
and is the only code that knows any of it.
"""

from __future__ import annotations

import copy
from typing import Any

from endless.llm.client import SDKClient, Completion, Usage, bulk_in_extra_body, fit_kwargs, as_int, complete_with
from endless.llm.errors import ProviderError
from endless.llm.models import merge_params, openai_reasoning_rule, reasoning_params
from endless.llm.request import Request, ToolCallOut

OPENAI_READ_BREAKPOINTS = 80  # OpenAI reads at the latest 80 breakpoints of a request

_OPENAI_STOPS = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
                 "content_filter": "content_filter"}


# -- the wire form -------------------------------------------------------------------------------


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


# -- the answer ----------------------------------------------------------------------------------


def openai_usage(usage: Any) -> Usage:
    """Usage from a chat completion: OpenAI ``prompt_tokens_details.cached_tokens`` (+
    ``cache_write_tokens``), DeepSeek ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``."""
    if usage is None:
        return Usage()
    prompt = as_int(getattr(usage, "prompt_tokens", 0))
    details = getattr(usage, "prompt_tokens_details", None)
    cached = as_int(getattr(details, "cached_tokens", 0)) if details is not None else 0
    write = as_int(getattr(details, "cache_write_tokens", 0)) if details is not None else 0
    hit = getattr(usage, "prompt_cache_hit_tokens", None)
    miss = getattr(usage, "prompt_cache_miss_tokens", None)
    if hit is not None:
        cached = as_int(hit)
    uncached = as_int(miss) if miss is not None else max(0, prompt - cached - write)
    return Usage(cached=cached, uncached=uncached, cache_write=write,
                 output=as_int(getattr(usage, "completion_tokens", 0)))


def openai_reply(text: str, model: str) -> Any:
    """A finished chat completion holding ``text``, as the SDK returns one, for a harness that takes an
    answer Endless gives itself instead of a model's (no request was sent; no tokens were used)."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate({
        "id": "endless-own-answer", "object": "chat.completion", "created": 0, "model": model or "endless",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})


# -- the client ----------------------------------------------------------------------------------


class OpenAIProvider(SDKClient):
    """Chat completions through ``openai.AsyncOpenAI`` (OpenAI, DeepSeek, OpenRouter, vLLM, llama.cpp, Ollama)."""

    def request_kwargs(self, request: Request) -> dict:
        """The keyword arguments the SDK call gets (reasoning and cache marks included)."""
        route = self.route
        kwargs = to_openai(request, route.model, route.style or "none")
        if route.flavour == "openai" and openai_reasoning_rule(route.model) is not None \
                and "max_tokens" in kwargs:
            # Reasoning models refuse max_tokens ("use 'max_completion_tokens' instead").
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
        merge_params(kwargs, reasoning_params(route))
        return fit_kwargs(self.client.chat.completions.create, kwargs)

    async def complete(self, request: Request) -> Completion:
        """Send ``request``; a :class:`Completion`, or :class:`ProviderError` after the SDK's retries."""
        import openai

        return await complete_with(self.route, self._now, self.request_kwargs(request), self._call,
                                   (openai.APIError,), self._completion)

    async def _call(self, kwargs: dict) -> Any:
        return await self.client.chat.completions.create(**bulk_in_extra_body(kwargs))

    def _completion(self, response: Any, duration: float) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ProviderError("server", "the answer carried no choices", route=self.route.describe())
        choice = choices[0]
        message = choice.message
        text = getattr(message, "content", None) or ""
        stop = _OPENAI_STOPS.get(choice.finish_reason or "", choice.finish_reason or "")
        refusal = getattr(message, "refusal", None)
        if refusal and not text:
            text, stop = refusal, "refusal"
        calls = tuple(ToolCallOut(c.id, c.function.name, c.function.arguments or "{}")
                      for c in (getattr(message, "tool_calls", None) or []) if getattr(c, "function", None))
        return Completion(text=text, usage=openai_usage(getattr(response, "usage", None)), duration=duration,
                          model=getattr(response, "model", None) or self.route.model, stop_reason=stop,
                          tool_calls=calls)
