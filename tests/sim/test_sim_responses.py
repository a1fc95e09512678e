"""The simulator's OpenAI Responses wire (``POST /v1/responses``), through the real ``openai`` SDK.

Runs under both SDK generations, like ``test_sim_wire.py``: ``openai`` 3.x in
``.venv`` and the 2.24.0 Hermes pins in ``.venv-hermes``.  The scripted
models and cache models are the real ones (``ScriptedAgent``, the
``openai-auto``/``openai-breakpoints``/``deepseek`` caches, the bundled
tokenizer), so what is checked is what Codex or Hermes would read back.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import openai
import pytest

from endless.sim import clock
from endless.sim.agent_model import ScriptedAgent
from endless.sim.cache import make_cache
from endless.sim.model import SimReply, SimRequest, ToolCall
from endless.sim.server import free_port, running
from endless.sim.simulator import Route, Simulator
from endless.sim.transport import openai_client

TOOLS = [{"type": "function", "name": "zoom", "description": "Show the lines under a line.",
          "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
          "strict": False}]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]
VIEW = "".join(f"{i}: line number {i} of the view, with a few facts about day {i}.\n" for i in range(200))
ANSWER = "The seventh line says there are 1,234 apples in the shed, and nothing more than that. " * 2


class Scripted:
    """``TOOL`` in the last user text: a zoom and a date call after a short text; else ``ANSWER``."""

    def __init__(self) -> None:
        self.seen: list[SimRequest] = []

    def reply(self, request: SimRequest, now: float) -> SimReply:
        self.seen.append(request)
        if request.messages[-1].role == "user" and "TOOL" in request.last_user_text():
            return SimReply(text="Let me look.", first_byte=0.2, duration=0.5, tool_calls=[
                ToolCall("call_zoom_1", "zoom", '{"id": 42, "depth": 2}'),
                ToolCall("call_date_2", "date", '{"when": "2026-11-29"}')])
        return SimReply(text=ANSWER, first_byte=0.3, duration=1.2)


def sim_with(cache: str | None = "openai-auto", responder=None) -> tuple[Simulator, Scripted]:
    responder = responder or Scripted()
    return Simulator(Route(responder, make_cache(cache) if cache else None)), responder


def test_whole_response_text_usage_and_what_the_model_saw():
    sim, responder = sim_with(None)

    async def main():
        client = openai_client(sim, max_retries=0)
        plain = await client.responses.create(model="gpt-sim", input="hello there")
        listed = await client.responses.create(
            model="gpt-sim", instructions="You are the endless agent.", tools=TOOLS, prompt_cache_key="mem-1",
            input=[{"role": "developer", "content": "Be brief."},
                   {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "TOOL: 42"}]}])
        return plain, listed

    plain, listed = clock.run(main())
    assert plain.object == "response" and plain.status == "completed" and plain.id.startswith("resp_")
    assert plain.output_text == ANSWER
    assert plain.output[0].type == "message" and plain.output[0].role == "assistant"
    assert plain.usage.input_tokens == sim.records[0]["tokens"] > 0
    assert plain.usage.input_tokens_details.cached_tokens == 0
    assert plain.usage.output_tokens == sim.records[0]["usage"]["output"] > 0
    assert plain.usage.total_tokens == plain.usage.input_tokens + plain.usage.output_tokens

    assert [item.type for item in listed.output] == ["message", "function_call", "function_call"]
    assert listed.output_text == "Let me look."
    calls = [(c.call_id, c.name, json.loads(c.arguments)) for c in listed.output[1:]]
    assert calls == [("call_zoom_1", "zoom", {"id": 42, "depth": 2}), ("call_date_2", "date", {"when": "2026-11-29"})]
    assert len({item.id for item in listed.output}) == 3  # every item has its own id
    seen = responder.seen[1]
    assert seen.api == "responses" and seen.cache_key == "mem-1" and seen.tools == TOOLS
    assert [(m.role, m.text) for m in seen.messages] == [
        ("system", "You are the endless agent."), ("system", "Be brief."), ("user", "TOOL: 42")]
    assert sim.records[1]["api"] == "responses"


def test_streamed_events_in_order_with_sequence_numbers_and_item_ids():
    sim, _ = sim_with(None)

    async def main():
        client = openai_client(sim, max_retries=0)
        raw = [event async for event in await client.responses.create(
            model="gpt-sim", input="TOOL now", tools=TOOLS, stream=True)]
        async with client.responses.stream(model="gpt-sim", input="just talk") as stream:
            helper = [event async for event in stream]
            final = await stream.get_final_response()
        return raw, helper, final

    raw, helper, final = clock.run(main())
    assert [e.sequence_number for e in raw] == list(range(len(raw)))
    kinds = [e.type for e in raw]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 3
    assert kinds.count("response.function_call_arguments.done") == 2
    added = [e for e in raw if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1, 2]
    ids = [e.item.id for e in added]
    for event in raw:  # every delta names the item it belongs to
        if event.type in ("response.output_text.delta", "response.function_call_arguments.delta"):
            assert event.item_id == ids[event.output_index]
    arguments = {}
    for event in raw:
        if event.type == "response.function_call_arguments.delta":
            arguments[event.item_id] = arguments.get(event.item_id, "") + event.delta
    assert [json.loads(arguments[i]) for i in ids[1:]] == [{"id": 42, "depth": 2}, {"when": "2026-11-29"}]
    done = {e.item_id: e for e in raw if e.type == "response.function_call_arguments.done"}
    assert [done[i].name for i in ids[1:]] == ["zoom", "date"]
    completed = raw[-1].response
    assert [item.id for item in completed.output] == ids
    assert completed.usage.input_tokens == sim.records[0]["tokens"]

    deltas = [e.delta for e in helper if e.type == "response.output_text.delta"]
    assert len(deltas) > 3 and "".join(deltas) == ANSWER  # streamed in pieces
    assert [e.snapshot for e in helper if e.type == "response.output_text.delta"][-1] == ANSWER
    assert final.output_text == ANSWER and final.usage.output_tokens > 0


def test_function_call_round_trip_with_the_scripted_agent_and_previous_response_id():
    sim = Simulator(Route(ScriptedAgent(seed=3, tool_weights={0: 1.0})))

    async def main():
        client = openai_client(sim, max_retries=0)
        turn = [{"role": "user", "content": "Look at line 7 please [[zoom:7:2]]"}]
        first = await client.responses.create(model="m", input=turn, tools=TOOLS)
        call = next(item for item in first.output if item.type == "function_call")
        result = {"type": "function_call_output", "call_id": call.call_id,
                  "output": "7+2|the seventh line: 1,234 apples"}
        whole = [*turn, *[item.model_dump(exclude_none=True) for item in first.output], result]
        async with client.responses.stream(model="m", input=whole, tools=TOOLS) as stream:
            final = await stream.get_final_response()
        chained = await client.responses.create(model="m", previous_response_id=first.id, input=[result],
                                                tools=TOOLS)
        return first, call, final, chained

    first, call, final, chained = clock.run(main())
    assert call.name == "zoom" and json.loads(call.arguments)["id"] == 7 and call.call_id.startswith("call_")
    assert "1,234 apples" in final.output_text
    # previous_response_id stands for the items it names: the same prompt, the same answer.
    assert chained.output_text == final.output_text
    assert sim.records[2]["tokens"] == sim.records[1]["tokens"]
    assert sim.records[2]["prompt"] == sim.records[1]["prompt"]


@pytest.mark.parametrize("cache", ["openai-auto", "openai-breakpoints", "deepseek"])
def test_cache_accounting_matches_chat_completions(cache):
    """The same two-turn conversation on both wires: the same input tokens and cached tokens, turn by turn."""
    chat_sim, _ = sim_with(cache)
    responses_sim, _ = sim_with(cache)
    mark = {"prompt_cache_breakpoint": {"mode": "explicit"}}

    async def main():
        chat, resp = openai_client(chat_sim, max_retries=0), openai_client(responses_sim, max_retries=0)
        out = []
        for question in ("first question", "second question"):
            c = await chat.chat.completions.create(
                model="gpt-sim", tools=CHAT_TOOLS, prompt_cache_key="mem",
                messages=[{"role": "system", "content": "You are the agent."},
                          {"role": "user", "content": [{"type": "text", "text": VIEW, **mark},
                                                       {"type": "text", "text": question}]}])
            r = await resp.responses.create(
                model="gpt-sim", tools=TOOLS, prompt_cache_key="mem", instructions="You are the agent.",
                input=[{"role": "user", "content": [{"type": "input_text", "text": VIEW, **mark},
                                                    {"type": "input_text", "text": question}]}])
            out.append((c.usage, r.usage))
        return out

    (chat1, resp1), (chat2, resp2) = clock.run(main())
    assert resp1.input_tokens == chat1.prompt_tokens > 2000
    assert resp1.input_tokens_details.cached_tokens == chat1.prompt_tokens_details.cached_tokens == 0
    assert resp2.input_tokens == chat2.prompt_tokens
    assert resp2.input_tokens_details.cached_tokens == chat2.prompt_tokens_details.cached_tokens > 2000
    assert resp2.output_tokens == chat2.completion_tokens > 0
    assert chat_sim.records[1]["prompt"] == responses_sim.records[1]["prompt"]


def test_a_codex_shaped_request_is_answered_and_only_function_tools_are_offered():
    """What Codex CLI 0.169.1 sends: developer messages, no instructions, reasoning items, other tool types."""
    sim, responder = sim_with("openai-auto")
    tools = [*TOOLS, {"type": "namespace", "name": "multi_agent_v1", "tools": []}, {"type": "web_search"},
             {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark",
                                                                 "definition": "start: /.+/"}}]
    items = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be a coder."}]},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
             {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thinking."}],
              "encrypted_content": "gAAAA"},
             {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "zoom", "arguments": '{"id": 1}'},
             {"type": "function_call_output", "call_id": "call_a",
              "output": [{"type": "input_text", "text": "1: first line"}]},
             {"type": "custom_tool_call", "call_id": "call_b", "name": "apply_patch", "input": "*** Begin Patch"},
             {"type": "custom_tool_call_output", "call_id": "call_b", "output": "Done!"},
             {"type": "message", "role": "user", "content": "TOOL again"}]
    client = openai_client(sim, sync=True, max_retries=0)
    events = list(client.responses.create(model="gpt-sim", input=items, tools=tools, stream=True, store=False,
                                          include=["reasoning.encrypted_content"], tool_choice="auto",
                                          parallel_tool_calls=True, prompt_cache_key="thread-1",
                                          reasoning={"summary": "auto"}))
    assert events[-1].type == "response.completed"
    seen = responder.seen[0]
    assert seen.tools == TOOLS  # offered: function tools only
    assert [m.role for m in seen.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    assert seen.messages[2].tool_calls == [ToolCall("call_a", "zoom", '{"id": 1}')]
    assert seen.messages[3].text == "1: first line" and seen.messages[5].tool_call_id == "call_b"
    prompt = sim.records[0]["prompt"]
    for text in ("web_search", "apply_patch", "Thinking.", "*** Begin Patch", "Done!"):
        assert text in prompt  # rendered, so counted as input tokens
    with pytest.raises(openai.BadRequestError):  # store=False: nothing to continue from
        client.responses.create(model="gpt-sim", input="more", previous_response_id=events[-1].response.id)


def test_an_mcp_servers_namespace_is_offered_and_its_calls_name_it():
    """Codex 0.171 offers an MCP server's tools as one ``namespace`` tool (``mcp__<server>``); a call to one
    must name its namespace, or Codex runs no MCP tool."""
    sim = Simulator(Route(ScriptedAgent(seed=5)))
    search = {"type": "function", "name": "recall_search", "description": "Search the history.", "strict": False,
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
    tools = [*TOOLS, {"type": "namespace", "name": "mcp__endless", "description": "Endless's tools.",
                      "tools": [search]}]
    client = openai_client(sim, sync=True, max_retries=0)
    turn = [{"role": "user", "content": "The PELICAN? [[call:recall_search]] [[reply:40]]"}]
    events = list(client.responses.create(model="m", input=turn, tools=tools, stream=True))
    call = next(e.item for e in events if e.type == "response.output_item.done" and e.item.type == "function_call")
    raw = call.model_dump()
    assert (raw["name"], raw.get("namespace")) == ("recall_search", "mcp__endless")
    assert json.loads(raw["arguments"]) == {"query": "PELICAN"}  # the one word of the request long enough
    follow = [*turn, {k: v for k, v in raw.items() if v is not None},
              {"type": "function_call_output", "call_id": call.call_id, "output": "0+0 PELICAN-42 is frozen"}]
    final = client.responses.create(model="m", input=follow, tools=tools)
    assert final.output_text and [item.type for item in final.output] == ["message"]
    assert "mcp__endless" in sim.records[0]["prompt"]  # the namespace is rendered, so counted
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", tools=[{"type": "namespace", "name": "x", "tools": "no"}])
    assert caught.value.body["param"] == "tools[0].tools"


def test_bad_requests_are_clear_400s_and_change_nothing():
    sim, responder = sim_with()

    async def main():
        client = openai_client(sim, max_retries=0)
        errors = []
        for kwargs in ({"input": "hi", "previous_response_id": "resp_nope"},
                       {"input": [{"type": "item_reference", "id": "msg_1"}]},
                       {"input": [{"type": "computer_call", "id": "x"}]},
                       {"input": [{"role": "robot", "content": "hi"}]},
                       {"input": [{"role": "user", "content": "hi"},
                                  {"type": "function_call_output", "output": "orphan"}]},
                       {"input": 7}):
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(model="gpt-sim", **kwargs)
            errors.append(caught.value)
        stored_not = await client.responses.create(model="gpt-sim", input="hi", store=False)
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="gpt-sim", input="again", previous_response_id=stored_not.id)
        errors.append(caught.value)
        return errors

    errors = clock.run(main())
    assert "resp_nope" in errors[0].message and errors[0].body["param"] == "previous_response_id"
    assert "item_reference" in errors[1].message
    assert "computer_call" in errors[2].message and errors[2].body["param"] == "input[0]"
    assert "robot" in errors[3].message
    assert errors[4].body["param"] == "input[1].call_id"
    assert "input" in errors[5].message
    assert stored_not_id_named(errors[6])
    assert len(responder.seen) == 1 and len(sim.records) == 1  # only the good request reached the model


def stored_not_id_named(error: openai.BadRequestError) -> bool:
    return error.body["code"] == "previous_response_not_found" and "resp_" in error.message


def test_input_tokens_count_matches_the_request():
    sim, _ = sim_with()
    client = openai_client(sim, sync=True, max_retries=0)
    counted = client.post("/responses/input_tokens", cast_to=object,
                          body={"model": "gpt-sim", "input": "hello there", "instructions": "Be brief."})
    reply = client.responses.create(model="gpt-sim", input="hello there", instructions="Be brief.")
    assert counted["input_tokens"] == reply.usage.input_tokens > 0


def test_endless_sim_serve_answers_responses_on_the_same_port(tmp_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "endless.cli", "sim", "serve", "--port", str(port),
                                "--cache", "openai-auto", "--latency", "0.01"],
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
        chat = client.chat.completions.create(model="sim", messages=[{"role": "user", "content": "hi"}])
        whole = client.responses.create(model="sim", input="hi")
        with client.responses.stream(model="sim", input=[{"role": "user", "content": "hi again"}]) as stream:
            final = stream.get_final_response()
        assert chat.choices[0].message.content and whole.output_text and final.output_text
        assert whole.usage.input_tokens > 0 and final.usage.input_tokens_details.cached_tokens == 0
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
    assert "responses" in stderr.split("serving on", 1)[1]  # the log line names the wire


def test_loopback_server_streams_to_the_sdk():
    sim, _ = sim_with(None, responder=QuickScripted())
    with running(sim) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        events = list(client.responses.create(model="m", input="TOOL", tools=TOOLS, stream=True))
    assert events[-1].type == "response.completed"
    assert [i.type for i in events[-1].response.output] == ["message", "function_call", "function_call"]


class QuickScripted(Scripted):
    """The same script in milliseconds (the loopback server runs in real time)."""

    def reply(self, request: SimRequest, now: float) -> SimReply:
        reply = super().reply(request, now)
        reply.first_byte, reply.duration = 0.005, 0.02
        return reply
