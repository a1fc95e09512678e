"""The provider simulator's wire formats, through the real ``openai`` and ``anthropic`` SDKs.

Every test talks to a :class:`Simulator` the way a harness would: through the
in-process transport (on the simulated clock) or through the loopback server
(uvicorn in a thread, real time).  The same file runs against both SDK
generations: the current ones (``openai`` 3.x / ``anthropic`` 2.x on
``httpx2``) in ``.venv`` and the ones Hermes pins (``openai`` 2.24 /
``anthropic`` 0.87 on ``httpx``) in ``.venv-pinned``.

The responders and cache model here are tiny and deterministic, so the
numbers the SDKs read back can be checked exactly; one test at the end runs
through the real tokenizer and cache models.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from endless.sim import clock
from endless.sim.model import CacheUsage, SimReply, SimRequest, ToolCall
from endless.sim.server import free_port, running
from endless.sim.simulator import Route, Simulator
from endless.sim.transport import anthropic_client, openai_client, transport_for
from endless.sim.wire import WireError
from endless.sim import wire_anthropic, wire_openai

# anthropic 0.87 has the class but does not export it at the top level (2.x does).
OverloadedError = getattr(anthropic, "OverloadedError", None) or anthropic._exceptions.OverloadedError

LONG_TEXT = ("The quick brown fox jumps over the lazy dog while the cache stays warm. " * 6).strip()


class WordTokenizer:
    """Words, punctuation and runs of spaces, each one token; ids from a growing vocabulary."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.vocabulary.setdefault(piece, len(self.vocabulary))
                for piece in re.findall(r"\w+|[^\w\s]|\s+", text)]


class ScriptedResponder:
    """Marker words in the last user text choose the reply (``TOOL``, ``RATE``, ``RATE_ONCE``,
    ``OVERLOAD``, ``UNAVAILABLE``, ``STALL``, ``SLOW``); otherwise a long plain answer."""

    def __init__(self) -> None:
        self.seen: list[SimRequest] = []
        self.rate_once_done = False

    def reply(self, request: SimRequest, now: float) -> SimReply:
        self.seen.append(request)
        said = request.last_user_text()
        if "RATE_ONCE" in said:
            if not self.rate_once_done:
                self.rate_once_done = True
                return SimReply(status=429, error="slow down", retry_after=7, first_byte=0.2)
            return SimReply(text="after the wait", first_byte=0.5, duration=1.0)
        if "RATE" in said:
            return SimReply(status=429, error="Rate limit reached for requests", retry_after=3)
        if "OVERLOAD" in said:
            return SimReply(status=529, error="Overloaded")
        if "UNAVAILABLE" in said:
            return SimReply(status=503, error="Server Overloaded")
        if "STALL" in said:
            return SimReply(stall=True)
        if "TOOL" in said:
            return SimReply(text="Let me look.",
                            tool_calls=[ToolCall("call_zoom_1", "zoom", '{"id": 42, "depth": 2}'),
                                        ToolCall("call_date_2", "date", '{"when": "2026-11-29"}')],
                            first_byte=0.4, duration=1.5)
        if "SLOW" in said:
            return SimReply(text=LONG_TEXT, first_byte=2.0, duration=30.0)
        return SimReply(text=LONG_TEXT, first_byte=0.3, duration=1.2)


class MarkCache:
    """A toy prompt cache: entries at marked positions, readable once the writing request is done.

    ``read`` is the longest marked prefix an earlier, finished request wrote;
    ``write`` the marked prefix beyond it (``write_1h`` the part up to the last
    ``"1h"`` mark).  Every call is kept for inspection.
    """

    def __init__(self) -> None:
        self.entries: dict[tuple, float] = {}
        self.calls: list[dict] = []

    def request(self, tokens, block_ends, marks, key, sent_at, first_byte_at, done_at, failed=False):
        tokens = list(tokens)
        self.calls.append({"tokens": tokens, "block_ends": list(block_ends), "marks": dict(marks),
                           "key": key, "sent_at": sent_at, "first_byte_at": first_byte_at,
                           "done_at": done_at, "failed": failed})
        read = 0
        for position in sorted(marks):
            if self.entries.get((key, tuple(tokens[:position])), float("inf")) <= sent_at:
                read = position
        last = max(marks, default=0)
        write = max(0, last - read)
        one_hour = max([p for p, m in marks.items() if m == "1h" and p > read], default=read)
        if not failed:
            for position in marks:
                if position > read:
                    self.entries.setdefault((key, tuple(tokens[:position])), done_at)
        return CacheUsage(input=len(tokens), read=read, write=write, write_1h=one_hour - read)


def make_sim(tmp_path: Path | None = None, *, flavour: str = "openai", context_length: int = 100_000,
             **routes: Route) -> tuple[Simulator, ScriptedResponder, MarkCache]:
    responder, cache = ScriptedResponder(), MarkCache()
    table = {"*": Route(responder, cache, context_length=context_length, flavour=flavour)}
    table.update(routes)
    log = tmp_path / "requests.jsonl" if tmp_path is not None else None
    return Simulator(table, tokenizer=WordTokenizer(), log_path=log), responder, cache


TOOLS_OPENAI = [{"type": "function", "function": {
    "name": "zoom", "description": "Show the lines under a line.",
    "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}}]
TOOLS_ANTHROPIC = [{"name": "zoom", "description": "Show the lines under a line.",
                    "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}]


def system_parts() -> list[dict]:
    return [{"type": "text", "text": "You are the endless agent.\n",
             "prompt_cache_breakpoint": {"mode": "explicit"}},
            {"type": "text", "text": "line one\nline two\n"}]


# -- the in-process transport, current or pinned SDKs, on the simulated clock ---------------------


def test_transport_matches_the_sdk_http_library():
    sim, _, _ = make_sim()
    for client_class in (openai.DefaultAsyncHttpxClient, anthropic.DefaultAsyncHttpxClient,
                         openai.DefaultHttpxClient, anthropic.DefaultHttpxClient):
        transport = transport_for(client_class, sim)
        library = transport.library
        base = library.AsyncBaseTransport if "Async" in client_class.__name__ else library.BaseTransport
        assert isinstance(transport, base)
        assert issubclass(client_class, library.AsyncClient if "Async" in client_class.__name__
                          else library.Client)
    # Anthropic's client accepts it (2.x refuses plain httpx clients outright).
    client = anthropic_client(sim)
    assert client is not None


def test_openai_whole_and_streamed_with_tool_calls_and_cached_tokens(tmp_path):
    sim, responder, cache = make_sim(tmp_path)

    async def main():
        client = openai_client(sim, max_retries=0)
        messages = [{"role": "system", "content": system_parts()},
                    {"role": "user", "content": "please TOOL now"}]
        first = await client.chat.completions.create(model="gpt-sim", messages=messages, tools=TOOLS_OPENAI,
                                                     prompt_cache_key="memory-1")
        second = await client.chat.completions.create(model="gpt-sim", messages=messages, tools=TOOLS_OPENAI,
                                                      prompt_cache_key="memory-1")
        stream = await client.chat.completions.create(
            model="gpt-sim", messages=messages[:1] + [{"role": "user", "content": "hello"}], stream=True,
            tools=TOOLS_OPENAI, stream_options={"include_usage": True}, prompt_cache_key="memory-1")
        chunks = [chunk async for chunk in stream]
        tool_stream = await client.chat.completions.create(model="gpt-sim", messages=messages, stream=True)
        tool_chunks = [chunk async for chunk in tool_stream]
        return first, second, chunks, tool_chunks

    first, second, chunks, tool_chunks = clock.run(main())

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    calls = choice.message.tool_calls
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_zoom_1", "zoom", {"id": 42, "depth": 2}), ("call_date_2", "date", {"when": "2026-11-29"})]
    breakpoint = min(cache.calls[0]["marks"])
    assert cache.calls[0]["marks"] == {breakpoint: "breakpoint"}
    assert cache.calls[0]["key"] == "memory-1"
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert first.usage.prompt_tokens_details.cache_write_tokens == breakpoint
    assert second.usage.prompt_tokens_details.cached_tokens == breakpoint
    assert second.usage.prompt_tokens == len(cache.calls[1]["tokens"])
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens > 0

    # Streamed text: a role delta, content in pieces, a finish chunk, usage in the last chunk.
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == LONG_TEXT
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens_details.cached_tokens == breakpoint
    assert chunks[-1].usage.completion_tokens == len(WordTokenizer().encode(LONG_TEXT))

    # Streamed tool calls: index, id and name first, then the arguments in pieces.
    pieces: dict[int, dict] = {}
    for chunk in tool_chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = pieces.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
            entry["id"] = delta.id or entry["id"]
            entry["name"] = (delta.function.name if delta.function else None) or entry["name"]
            entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
    assert [(p["id"], p["name"], json.loads(p["arguments"])) for p in pieces.values()] == [
        ("call_zoom_1", "zoom", {"id": 42, "depth": 2}), ("call_date_2", "date", {"when": "2026-11-29"})]
    assert tool_chunks[-1].choices[0].finish_reason == "tool_calls"
    assert tool_chunks[-1].usage is None  # no include_usage: no usage chunk

    # What the scripted model was shown.
    request = responder.seen[0]
    assert request.api == "openai" and request.cache_key == "memory-1"
    assert request.messages[0].role == "system" and "line two" in request.messages[0].text
    assert request.tools == TOOLS_OPENAI


def test_openai_tool_round_trip_and_deepseek_usage_extras():
    sim, responder, cache = make_sim(flavour="deepseek")

    async def main():
        client = openai_client(sim, max_retries=0)
        return await client.chat.completions.create(
            model="deepseek-flash", user="user-7",
            messages=[{"role": "system", "content": "sys"},
                      {"role": "user", "content": "TOOL please"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "call_1", "type": "function",
                           "function": {"name": "zoom", "arguments": "{\"id\": 3}"}}]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "3: the third line"},
                      {"role": "user", "content": [{"type": "text", "text": "and now?"}]}])

    reply = clock.run(main())
    usage = reply.usage
    assert usage.prompt_cache_hit_tokens == 0
    assert usage.prompt_cache_miss_tokens == usage.prompt_tokens == len(cache.calls[0]["tokens"])
    assert usage.prompt_tokens_details.cached_tokens == 0
    request = responder.seen[0]
    assert request.cache_key == "user-7"
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool", "user"]
    assert request.messages[2].tool_calls == [ToolCall("call_1", "zoom", "{\"id\": 3}")]
    assert request.messages[3].tool_call_id == "call_1" and request.messages[3].text == "3: the third line"
    assert "3: the third line" in request.prompt_text()


def test_anthropic_whole_and_streamed_with_tool_use_and_cache_fields(tmp_path):
    sim, responder, cache = make_sim(tmp_path, flavour="anthropic")
    system = [{"type": "text", "text": "You are the endless agent.", "cache_control": {"type": "ephemeral",
                                                                                      "ttl": "1h"}},
              {"type": "text", "text": "view line 1\nview line 2", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "TOOL: zoom into 42"}]}]

    async def main():
        client = anthropic_client(sim, max_retries=0)
        first = await client.messages.create(model="claude-sim", max_tokens=512, system=system,
                                             messages=messages, tools=TOOLS_ANTHROPIC)
        second = await client.messages.create(model="claude-sim", max_tokens=512, system=system,
                                              messages=messages, tools=TOOLS_ANTHROPIC)
        async with client.messages.stream(model="claude-sim", max_tokens=512, system=system,
                                          messages=messages, tools=TOOLS_ANTHROPIC) as stream:
            events = [event async for event in stream]
            streamed = await stream.get_final_message()
        async with client.messages.stream(model="claude-sim", max_tokens=512, system=system,
                                          messages=[{"role": "user", "content": "hi"}]) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            plain = await stream.get_final_message()
        follow_up = messages + [
            {"role": "assistant", "content": [c.model_dump(exclude_none=True) for c in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_zoom_1",
                                          "content": "42: the line"},
                                         {"type": "text", "text": "thanks"}]}]
        await client.messages.create(model="claude-sim", max_tokens=512, system=system, messages=follow_up,
                                     cache_control={"type": "ephemeral"})
        return first, second, events, streamed, text, plain

    first, second, events, streamed, text, plain = clock.run(main())

    assert first.stop_reason == "tool_use"
    assert first.content[0].type == "text" and first.content[0].text == "Let me look."
    uses = [(b.id, b.name, b.input) for b in first.content if b.type == "tool_use"]
    assert uses == [("call_zoom_1", "zoom", {"id": 42, "depth": 2}), ("call_date_2", "date",
                                                                      {"when": "2026-11-29"})]
    marks = cache.calls[0]["marks"]
    one_hour, five_minutes = sorted(marks)
    assert marks == {one_hour: "1h", five_minutes: "5m"}
    # Every block (each tool, each system block, each message block) ends a block.
    assert one_hour in cache.calls[0]["block_ends"] and five_minutes in cache.calls[0]["block_ends"]
    assert len(cache.calls[0]["block_ends"]) == 4
    usage = first.usage
    total = len(cache.calls[0]["tokens"])
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, five_minutes)
    assert usage.cache_creation.ephemeral_1h_input_tokens == one_hour
    assert usage.cache_creation.ephemeral_5m_input_tokens == five_minutes - one_hour
    assert usage.input_tokens == total - five_minutes
    assert second.usage.cache_read_input_tokens == five_minutes
    assert second.usage.cache_creation_input_tokens == 0 and second.usage.input_tokens == total - five_minutes

    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and "message_stop" in kinds and "content_block_delta" in kinds
    assert streamed.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in streamed.content if b.type == "tool_use"] == [
        ("zoom", {"id": 42, "depth": 2}), ("date", {"when": "2026-11-29"})]
    assert streamed.usage.cache_read_input_tokens == five_minutes
    assert streamed.usage.output_tokens == first.usage.output_tokens > 1
    assert text == LONG_TEXT and plain.stop_reason == "end_turn"
    assert plain.usage.output_tokens == len(WordTokenizer().encode(LONG_TEXT))

    # The tool result went back as a "tool" message; the top-level cache_control marked the last block.
    last = responder.seen[-1]
    assert [m.role for m in last.messages] == ["system", "user", "assistant", "tool", "user"]
    assert last.messages[2].tool_calls[0] == ToolCall("call_zoom_1", "zoom", '{"depth":2,"id":42}')
    assert last.messages[3].tool_call_id == "call_zoom_1" and last.messages[3].text == "42: the line"
    final_marks = cache.calls[-1]["marks"]
    assert final_marks[len(cache.calls[-1]["tokens"])] == "5m" and len(final_marks) == 3


def test_sync_clients_through_the_transport():
    sim, _, _ = make_sim()
    oai = openai_client(sim, sync=True, max_retries=0)
    reply = oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "SLOW"}])
    assert reply.choices[0].message.content == LONG_TEXT
    pieces = [c.choices[0].delta.content or "" for c in oai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "SLOW"}], stream=True) if c.choices]
    assert "".join(pieces) == LONG_TEXT
    claude = anthropic_client(sim, sync=True, max_retries=0)
    with claude.messages.stream(model="c", max_tokens=64, messages=[{"role": "user", "content": "TOOL"}]) as s:
        message = s.get_final_message()
    assert message.stop_reason == "tool_use"
    with pytest.raises(OverloadedError):
        claude.messages.create(model="c", max_tokens=64, messages=[{"role": "user", "content": "OVERLOAD"}])


def test_errors_surface_as_the_sdks_typed_errors():
    sim, _, cache = make_sim(context_length=40)

    async def main():
        oai = openai_client(sim, max_retries=0)
        claude = anthropic_client(sim, max_retries=0)
        with pytest.raises(openai.RateLimitError) as rate:
            await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "RATE"}])
        with pytest.raises(openai.InternalServerError) as unavailable:
            await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "UNAVAILABLE"}])
        with pytest.raises(openai.BadRequestError) as too_long:
            await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x " * 100}])
        with pytest.raises(OverloadedError) as overloaded:
            await claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user",
                                                                             "content": "OVERLOAD"}])
        with pytest.raises(anthropic.RateLimitError) as claude_rate:
            await claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": "RATE"}])
        mark = {"type": "ephemeral"}
        with pytest.raises(anthropic.BadRequestError) as too_many_marks:
            await claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
                {"type": "text", "text": str(i), "cache_control": mark} for i in range(5)]}])
        with pytest.raises(anthropic.BadRequestError) as ttl_order:
            await claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": [
                {"type": "text", "text": "a", "cache_control": mark},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}])
        return rate, unavailable, too_long, overloaded, claude_rate, too_many_marks, ttl_order

    rate, unavailable, too_long, overloaded, claude_rate, too_many_marks, ttl_order = clock.run(main())
    assert rate.value.status_code == 429 and rate.value.response.headers["retry-after"] == "3"
    assert rate.value.body["code"] == "rate_limit_exceeded"
    assert "Rate limit reached" in rate.value.message
    assert unavailable.value.status_code == 503
    assert too_long.value.body["code"] == "context_length_exceeded"
    assert overloaded.value.status_code == 529
    assert overloaded.value.body == {"type": "error", "error": {"type": "overloaded_error",
                                                                "message": "Overloaded"},
                                     "request_id": overloaded.value.body["request_id"]}
    assert claude_rate.value.body["error"]["type"] == "rate_limit_error"
    assert "maximum of 4 blocks" in too_many_marks.value.message
    assert "1h" in ttl_order.value.message
    # Failed requests reach the cache model as failed (they write nothing).
    assert [c["failed"] for c in cache.calls] == [True, True, True, True]


def test_retry_after_and_timeouts_run_on_simulated_time():
    sim, _, cache = make_sim()

    async def main():
        loop = asyncio.get_running_loop()
        client = openai_client(sim, max_retries=2)
        start = loop.time()
        reply = await client.chat.completions.create(model="m", messages=[{"role": "user",
                                                                           "content": "RATE_ONCE"}])
        waited = loop.time() - start
        with pytest.raises(openai.APITimeoutError):
            await client.with_options(timeout=20.0, max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "STALL"}])
        claude = anthropic_client(sim, max_retries=0, timeout=20.0)
        start_stall = loop.time()
        with pytest.raises(anthropic.APITimeoutError):
            await claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": "STALL"}])
        return reply, waited, loop.time() - start_stall

    started = time.perf_counter()
    reply, waited, stalled_for = clock.run(main())
    assert time.perf_counter() - started < 5.0
    assert reply.choices[0].message.content == "after the wait"
    assert 0.2 + 7 + 1.0 <= waited < 9.0  # the 429's first byte, the retry-after, the second reply
    assert 20.0 <= stalled_for < 21.0
    assert [c["failed"] for c in cache.calls] == [True, False, True, True]


def test_thirty_simulated_seconds_take_no_real_time():
    sim, _, _ = make_sim()

    async def warm_up():  # the SDKs import their modules lazily: pay for that before timing
        await openai_client(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        stream = await openai_client(sim).chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "x"}])
        [chunk async for chunk in stream]
        await anthropic_client(sim).messages.create(model="c", max_tokens=8,
                                                    messages=[{"role": "user", "content": "x"}])

    clock.run(warm_up())

    async def main():
        loop = asyncio.get_running_loop()
        oai, claude = openai_client(sim, max_retries=0), anthropic_client(sim, max_retries=0)
        begin = loop.time()
        await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "SLOW"}])
        whole = loop.time() - begin
        stream = await oai.chat.completions.create(model="m", stream=True,
                                                   messages=[{"role": "user", "content": "SLOW"}])
        first_chunk_at = None
        async for _ in stream:
            first_chunk_at = first_chunk_at or loop.time() - begin - whole
        streamed = loop.time() - begin - whole
        mark = loop.time()
        await claude.messages.create(model="c", max_tokens=64, messages=[{"role": "user", "content": "SLOW"}])
        return whole, first_chunk_at, streamed, loop.time() - mark

    started = time.perf_counter()
    whole, first_chunk_at, streamed, claude_whole = clock.run(main())
    real = time.perf_counter() - started
    assert whole == pytest.approx(30.0) and claude_whole == pytest.approx(30.0)
    assert first_chunk_at == pytest.approx(2.0) and streamed == pytest.approx(30.0)
    assert real < 1.0, f"90 simulated seconds took {real:.2f} s of real time"


def test_models_list_reports_the_context_length():
    sim = Simulator({"*": Route(ScriptedResponder(), context_length=65_536),
                     "deepseek-flash": Route(ScriptedResponder(), context_length=1_000_000,
                                             flavour="deepseek")},
                    tokenizer=WordTokenizer(), advertise=["gpt-sim"])

    async def main():
        oai, claude = openai_client(sim), anthropic_client(sim)
        return (await oai.models.list()).data, (await claude.models.list()).data, \
            await oai.models.retrieve("anything-at-all")

    models, claude_models, one = clock.run(main())
    assert {(m.id, m.context_length, m.max_model_len) for m in models} == {
        ("deepseek-flash", 1_000_000, 1_000_000), ("gpt-sim", 65_536, 65_536)}
    assert {(m.id, m.max_input_tokens) for m in claude_models} == {("deepseek-flash", 1_000_000),
                                                                   ("gpt-sim", 65_536)}
    assert one.id == "anything-at-all" and one.context_length == 65_536


def test_anthropic_count_tokens():
    sim, _, _ = make_sim()

    async def main():
        return await anthropic_client(sim).messages.count_tokens(
            model="c", system="System prompt.", messages=[{"role": "user", "content": "hello there"}])

    counted = clock.run(main())
    assert counted.input_tokens == len(WordTokenizer().encode("<|system|>\nSystem prompt.\n<|user|>\nhello there\n"))


def test_request_log_records_marks_and_usage(tmp_path):
    sim, _, cache = make_sim(tmp_path)
    system = [{"type": "text", "text": "System prompt.", "cache_control": {"type": "ephemeral"}}]

    async def main():
        claude = anthropic_client(sim, max_retries=0)
        for _ in range(2):
            await claude.messages.create(model="c", max_tokens=8, system=system,
                                         messages=[{"role": "user", "content": "hello"}])
        oai = openai_client(sim, max_retries=0)
        await oai.chat.completions.create(model="m", messages=[{"role": "system", "content": system_parts()},
                                                               {"role": "user", "content": "TOOL"}],
                                          stream=True)
        with pytest.raises(openai.RateLimitError):
            await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "RATE"}])

    clock.run(main())
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert lines == json.loads(json.dumps(sim.records))
    assert [(r["api"], r["stream"], r["status"]) for r in lines] == [
        ("anthropic", False, 200), ("anthropic", False, 200), ("openai", True, 200), ("openai", False, 429)]
    first, second, streamed, failed = lines
    assert first["prompt"] == "<|system|>\nSystem prompt.\n<|user|>\nhello\n"
    assert "cache_control" not in first["prompt"]
    position = min(cache.calls[0]["marks"])
    assert first["marks"] == [{"char": len("<|system|>\nSystem prompt.\n"), "token": position, "mark": "5m"}]
    assert first["usage"]["write"] == position and first["usage"]["read"] == 0
    assert second["usage"]["read"] == position and second["usage"]["uncached"] == second["tokens"] - position
    assert second["time"] > first["time"] and second["latency"] == pytest.approx(1.2)
    assert streamed["marks"][0]["mark"] == "breakpoint"
    assert streamed["prompt"][:streamed["marks"][0]["char"]].endswith("You are the endless agent.\n\n")
    assert streamed["reply"]["tool_calls"] == ["zoom", "date"]
    assert failed["usage"]["output"] == 0 and failed["error"].startswith("Rate limit")


def test_wire_parsing_details():
    body = {"model": "gpt-6.2-sol", "prompt_cache_key": "k",
            "messages": [{"role": "developer", "content": [
                {"type": "text", "text": "a", "prompt_cache_breakpoint": {"mode": "explicit"}},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "c"}]}, {"role": "user", "content": "hi"}]}
    request = wire_openai.parse_request(body)
    assert [s.mark for s in request.segments] == ["breakpoint", "breakpoint", None, None]
    assert request.messages[0].role == "system" and request.messages[0].text == "abc"
    assert request.cache_key == "k"
    assert wire_openai.parse_request({**body, "prompt_cache_key": None, "user_id": "u"}).cache_key == "u"
    with pytest.raises(WireError):
        wire_openai.parse_request({"model": "m", "messages": []})

    request = wire_anthropic.parse_request({
        "model": "c", "max_tokens": 5, "system": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "tools": [dict(TOOLS_ANTHROPIC[0], cache_control={"type": "ephemeral", "ttl": "1h"})],
        "messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                     {"role": "user", "content": [{"type": "text", "text": "three"}]}]})
    assert [s.mark for s in request.segments] == ["1h", None, None, None, "1h"]
    assert all(s.block_end for s in request.segments)
    assert "cache_control" not in request.prompt_text()
    assert request.last_user_text() == "three"


# -- the loopback server: real HTTP, real time ---------------------------------------------------


class QuickResponder(ScriptedResponder):
    """The same script with latencies cut to milliseconds (the server runs in real time)."""

    def reply(self, request: SimRequest, now: float) -> SimReply:
        reply = super().reply(request, now)
        reply.first_byte, reply.duration = min(reply.first_byte, 0.01), min(reply.duration, 0.05)
        if reply.retry_after is not None:
            reply.retry_after = 0.01
        return reply


@pytest.fixture(scope="module")
def server():
    cache = MarkCache()
    sim = Simulator({"*": Route(QuickResponder(), cache, context_length=32_768, flavour="deepseek"),
                     "claude-sim": Route(QuickResponder(), cache, flavour="anthropic")},
                    tokenizer=WordTokenizer(), advertise=["deepseek-flash"])
    with running(sim) as url:
        yield url, sim, cache


def test_server_openai_sdk(server):
    url, sim, cache = server
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    messages = [{"role": "system", "content": system_parts()}, {"role": "user", "content": "TOOL"}]
    first = client.chat.completions.create(model="deepseek-flash", messages=messages, tools=TOOLS_OPENAI)
    again = client.chat.completions.create(model="deepseek-flash", messages=messages, tools=TOOLS_OPENAI)
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.tool_calls[0].function.name == "zoom"
    assert again.usage.prompt_cache_hit_tokens == again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.usage.prompt_cache_miss_tokens == again.usage.prompt_tokens - again.usage.prompt_cache_hit_tokens
    chunks = list(client.chat.completions.create(model="deepseek-flash", stream=True,
                                                 stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": "hi"}]))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == LONG_TEXT
    assert chunks[-1].usage.prompt_cache_miss_tokens == chunks[-1].usage.prompt_tokens
    with pytest.raises(openai.RateLimitError) as rate:
        client.chat.completions.create(model="deepseek-flash", messages=[{"role": "user", "content": "RATE"}])
    assert rate.value.response.headers["retry-after"] == "1"
    assert {(m.id, m.context_length) for m in client.models.list().data} == {
        ("deepseek-flash", 32_768), ("claude-sim", 131_072)}
    # The same routes without /v1, as some harnesses call them.
    plain = httpx.get(url + "/models").json()
    assert {m["id"] for m in plain["data"]} == {"deepseek-flash", "claude-sim"}


def test_server_anthropic_sdk_async(server):
    url, sim, cache = server

    async def main():
        client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
        system = [{"type": "text", "text": "You are the agent.", "cache_control": {"type": "ephemeral"}}]
        first = await client.messages.create(model="claude-sim", max_tokens=64, system=system,
                                             messages=[{"role": "user", "content": "TOOL"}], tools=TOOLS_ANTHROPIC)
        async with client.messages.stream(model="claude-sim", max_tokens=64, system=system,
                                          messages=[{"role": "user", "content": "TOOL"}],
                                          tools=TOOLS_ANTHROPIC) as stream:
            streamed = await stream.get_final_message()
        with pytest.raises(OverloadedError):
            await client.messages.create(model="claude-sim", max_tokens=8,
                                         messages=[{"role": "user", "content": "OVERLOAD"}])
        oai = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        stream = await oai.chat.completions.create(model="deepseek-flash", stream=True,
                                                   messages=[{"role": "user", "content": "TOOL"}])
        tool_chunks = [chunk async for chunk in stream]
        return first, streamed, tool_chunks

    first, streamed, tool_chunks = asyncio.run(main())
    assert first.stop_reason == "tool_use" and first.content[1].input == {"id": 42, "depth": 2}
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert streamed.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert [b.name for b in streamed.content if b.type == "tool_use"] == ["zoom", "date"]
    assert tool_chunks[-1].choices[0].finish_reason == "tool_calls"


def test_server_stall_ends_with_the_client_timeout(server):
    url, sim, _ = server
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="deepseek-flash", messages=[{"role": "user", "content": "STALL"}])
    assert time.perf_counter() - started < 5
    assert sim.records[-1]["stall"] is True and sim.records[-1]["status"] is None


def test_cli_sim_serve(tmp_path):
    port = free_port()
    log = tmp_path / "serve.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "endless.cli", "sim", "serve", "--port", str(port),
                                "--cache", "none", "--context-length", "4096", "--model", "sim-a", "--latency", "0.01",
                                "--log", str(log)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "endless sim serve did not start"
                time.sleep(0.05)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        assert [(m.id, m.max_model_len) for m in client.models.list().data] == [("sim-a", 4096)]
        reply = client.chat.completions.create(model="sim-a", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content and reply.usage.prompt_tokens > 0
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
    assert f"[endless.sim] serving on http://127.0.0.1:{port}" in stderr
    assert "[endless.sim] " in stderr.split("serving on", 1)[1]  # the request was logged too
    assert json.loads(log.read_text().splitlines()[0])["model"] == "sim-a"


# -- through the real tokenizer and cache models -------------------------------------------------


def test_real_tokenizer_and_cache_models():
    tokens = pytest.importorskip("endless.sim.tokens")
    cache_module = pytest.importorskip("endless.sim.cache")
    tokenizer = tokens.default_tokenizer()
    sim = Simulator({"deepseek-flash": Route(ScriptedResponder(), cache_module.make_cache("deepseek"),
                                             flavour="deepseek"),
                     "claude-sim": Route(ScriptedResponder(), cache_module.make_cache("anthropic"),
                                         flavour="anthropic")},
                    tokenizer=tokenizer)
    view = "".join(f"{i}: line number {i} of the view, with a few facts about day {i}.\n" for i in range(200))

    async def main():
        oai, claude = openai_client(sim, max_retries=0), anthropic_client(sim, max_retries=0)
        results = []
        for turn in ("first question", "second question"):
            reply = await oai.chat.completions.create(
                model="deepseek-flash",
                messages=[{"role": "system", "content": "You are the agent.\n" + view},
                          {"role": "user", "content": turn}])
            results.append(reply.usage)
        for turn in ("first question", "second question"):
            reply = await claude.messages.create(
                model="claude-sim", max_tokens=64,
                system=[{"type": "text", "text": "You are the agent.\n" + view,
                         "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": turn}])
            results.append(reply.usage)
        return results

    first, second, claude_first, claude_second = clock.run(main())
    assert first.prompt_cache_hit_tokens == 0
    hit = second.prompt_cache_hit_tokens
    assert hit > 2000 and hit % 128 == 0 and second.prompt_tokens_details.cached_tokens == hit
    assert hit + second.prompt_cache_miss_tokens == second.prompt_tokens
    assert claude_first.cache_read_input_tokens == 0 and claude_first.cache_creation_input_tokens > 2000
    assert claude_second.cache_read_input_tokens == claude_first.cache_creation_input_tokens
    assert claude_second.cache_creation_input_tokens == 0
    record = sim.records[-1]
    assert record["marks"][0]["mark"] == "5m" and record["marks"][0]["token"] == record["usage"]["read"]


def test_real_scripted_models_through_the_sdks():
    pytest.importorskip("endless.sim.responder")
    from endless.sim.agent_model import ScriptedAgent
    from endless.sim.responder import route_responder
    from endless.sim.writer_model import ScriptedWriter

    responder = route_responder(ScriptedWriter(seed=3), ScriptedAgent(seed=3, tool_weights={0: 1.0}))
    sim = Simulator(Route(responder, flavour="deepseek"), tokenizer=WordTokenizer())

    async def main():
        loop = asyncio.get_running_loop()
        oai, claude = openai_client(sim, max_retries=0), anthropic_client(sim, max_retries=0)
        turn = [{"role": "user", "content": "Look at line 7 please [[zoom:7:2]]"}]
        call = await oai.chat.completions.create(model="m", messages=turn, tools=TOOLS_OPENAI)
        tool_call = call.choices[0].message.tool_calls[0]
        turn += [call.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": tool_call.id, "content": "7+2|the seventh line: 1,234 apples"}]
        final = await oai.chat.completions.create(model="m", messages=turn, tools=TOOLS_OPENAI, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in final if c.choices])
        with pytest.raises(OverloadedError):
            await claude.messages.create(model="c", max_tokens=64,
                                         messages=[{"role": "user", "content": "hello [[fail:529]]"}])
        begin = loop.time()
        slow = await claude.messages.create(model="c", max_tokens=64,
                                            messages=[{"role": "user", "content": "hello [[slow:30]]"}])
        return call, tool_call, text, slow, loop.time() - begin

    started = time.perf_counter()
    call, tool_call, text, slow, slow_took = clock.run(main())
    assert call.choices[0].finish_reason == "tool_calls"
    assert tool_call.function.name == "zoom" and json.loads(tool_call.function.arguments)["id"] == 7
    assert "1,234 apples" in text
    assert slow.stop_reason == "end_turn" and slow.content[0].text
    assert slow_took == pytest.approx(30.0)
    assert time.perf_counter() - started < 5.0
