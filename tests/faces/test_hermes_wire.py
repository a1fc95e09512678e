"""Reading and rewriting Hermes's provider requests (``endless.hermes.wire``), both wire shapes."""

from __future__ import annotations

import copy

import pytest

from endless.faces.hermes import wire
from endless.llm.request import Msg, Request, view_message_blocks

SYSTEM = "You are Hermes."


def head(lines: int = 10) -> Request:
    rendered = [f"{i}+1|you: line {i}" for i in range(lines)]
    blocks, whole = view_message_blocks(rendered, ["[now: x]\n", "the new message"])
    return Request(SYSTEM + "\n\nSECTION", [{"name": "zoom", "description": "z", "parameters": {"type": "object"}}],
                   [Msg("user", blocks)], view_message=0, view_blocks=whole)


def openai_request() -> dict:
    return {"model": "m", "stream": True, "max_tokens": 99,
            "messages": [{"role": "system", "content": [{"type": "text", "text": SYSTEM,
                                                         "cache_control": {"type": "ephemeral"}}]},
                         {"role": "user", "content": "old question"},
                         {"role": "assistant", "content": "old answer"},
                         {"role": "user", "content": "failed earlier\n\nthe new message"},
                         {"role": "assistant", "content": "", "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": "zoom", "arguments": '{"id":0,"n":1}'}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "0+0|you: line 0"},
                         {"role": "user", "content": "[System: continue]"}],
            "tools": [{"type": "function", "function": {"name": "todo", "description": "t",
                                                        "parameters": {"type": "object"}}}]}


def anthropic_request() -> dict:
    return {"model": "claude", "max_tokens": 99, "system": [{"type": "text", "text": SYSTEM}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "old"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                         {"role": "user", "content": [{"type": "text", "text": "the new message",
                                                       "cache_control": {"type": "ephemeral"}}]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "zoom",
                                                            "input": {"id": 0, "n": 1}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": "0+0|you: line 0"}]}],
            "tools": [{"name": "todo", "description": "t", "input_schema": {"type": "object"}}]}


def test_the_anchor_is_the_message_pre_llm_call_reported_even_merged_and_before_nudges() -> None:
    conv = wire.conversation(openai_request(), "chat_completions")
    assert wire.find_anchor(conv, "chat_completions", "the new message") == 2
    # unknown text: the last message of the person (here the nudge)
    assert wire.find_anchor(conv, "chat_completions", "something else") == 5
    anth = wire.conversation(anthropic_request(), "anthropic_messages")
    assert wire.find_anchor(anth, "anthropic_messages", "the new message") == 2  # tool results are not the person
    with pytest.raises(wire.WireError):
        wire.find_anchor([{"role": "assistant", "content": "x"}], "chat_completions", "x")


@pytest.mark.parametrize("mode,build", [("chat_completions", openai_request), ("anthropic_messages", anthropic_request)])
def test_own_steps_are_the_complete_tool_steps(mode: str, build) -> None:
    conv = wire.conversation(build(), mode)
    anchor = wire.find_anchor(conv, mode, "the new message")
    steps = wire.own_steps(conv[anchor + 1:], mode)
    assert len(steps) == 1
    assert [c.name for c in steps[0].calls] == ["zoom"]
    assert list(steps[0].results.values()) == ["0+0|you: line 0"]
    # a step whose result has not come back yet is not complete
    assert wire.own_steps(conv[anchor + 1:anchor + 2], mode) == []


def test_system_and_tools_are_read_without_marks() -> None:
    request = openai_request()
    assert wire.system_text(request, "chat_completions") == SYSTEM
    assert wire.neutral_tools(request, "chat_completions") == [{"name": "todo", "description": "t",
                                                                "parameters": {"type": "object"}}]
    assert wire.system_text(anthropic_request(), "anthropic_messages") == SYSTEM
    assert not wire.has_marks(wire.strip_marks(request)) and wire.has_marks(request)


@pytest.mark.parametrize("mode,build", [("chat_completions", openai_request), ("anthropic_messages", anthropic_request)])
def test_assemble_keeps_the_frozen_head_and_appends_the_own_part(mode: str, build) -> None:
    request = build()
    style = wire.mark_style(request, mode, "none")
    assert style == "anthropic"  # Hermes marked it (or Anthropic wire): we mark too
    frozen = wire.render_head(head(30), request, mode, style)
    before = copy.deepcopy(frozen)
    conv = wire.conversation(request, mode)
    own = conv[wire.find_anchor(conv, mode, "the new message") + 1:]
    out = wire.assemble(request, mode, frozen, own, style)
    assert frozen == before  # the frozen head is never changed by a step
    assert out["stream" if mode == "chat_completions" else "max_tokens"] == request.get("stream", 99)
    assert out["messages"][:len(frozen["messages"])] == frozen["messages"]
    appended = out["messages"][len(frozen["messages"]):]
    assert [(m["role"], wire.content_text(m.get("content"))) for m in appended] == \
        [(m["role"], wire.content_text(m.get("content"))) for m in own]
    assert appended[:-1] == wire.strip_marks(own[:-1])  # only the last may carry our end mark
    assert wire.count_marks(out) <= 4
    assert "old question" not in str(out) and "old answer" not in str(out)
    assert [t.get("name") or t["function"]["name"] for t in out["tools"]] == ["zoom"]


def test_without_marks_nothing_is_marked_and_the_safe_request_is_minimal() -> None:
    request = wire.strip_marks(openai_request())
    style = wire.mark_style(request, "chat_completions", "none")
    assert style == "none"
    out = wire.assemble(request, "chat_completions", wire.render_head(head(), request, "chat_completions", style),
                        [], style)
    assert wire.count_marks(out) == 0 and out["messages"][0]["role"] == "system"
    safe = wire.safe_request(openai_request(), "chat_completions", SYSTEM, "the new message", "notice")
    assert [m["role"] for m in safe["messages"]] == ["system", "user"]
    assert safe["messages"][1]["content"] == "the new message\n\n[notice]" and not wire.has_marks(safe)


def test_an_answer_endless_gives_itself_has_each_sdk_s_own_shape() -> None:
    """What the ``llm_execution`` middleware hands Hermes for a refused turn: the SDK's answer object."""
    text = "One sentence for the person."
    completion = wire.own_answer("chat_completions", "sim-model", text)
    assert type(completion).__name__ == "ChatCompletion" and completion.model == "sim-model"
    assert completion.choices[0].message.content == text and completion.choices[0].finish_reason == "stop"
    assert completion.usage.prompt_tokens == 0 and not completion.choices[0].message.tool_calls
    message = wire.own_answer("anthropic_messages", "claude-sim", text)
    assert type(message).__name__ == "Message" and message.stop_reason == "end_turn"
    assert [block.text for block in message.content] == [text] and message.usage.input_tokens == 0
    with pytest.raises(wire.WireError):
        wire.own_answer("codex_responses", "m", text)


def test_llm_execution_answers_only_refused_and_stopped_turns() -> None:
    from endless.faces.hermes.plugin import PLUGIN, Phase, TurnState
    from endless.turn.protocol import REFUSAL, STOPPED_WAITING

    sent = []

    def next_call(request):
        sent.append(request)
        return "the model's answer"

    cases = [(Phase.RUNNING, None), (Phase.BYPASSED, None), (Phase.FAILED, None),
             (Phase.REFUSED, REFUSAL), (Phase.REFUSED_FAILED, REFUSAL), (Phase.INTERRUPTED_WAITING, STOPPED_WAITING)]
    for n, (phase, sentence) in enumerate(cases):
        state = TurnState(f"s-exec-{n}", "t1", "hello", phase=phase)
        PLUGIN.turns[(state.session, state.turn_id)] = state
        try:
            before = len(sent)
            answer = PLUGIN.llm_execution(request={"messages": []}, next_call=next_call, session_id=state.session,
                                          turn_id="t1", api_mode="chat_completions", model="m")
        finally:
            PLUGIN.turns.pop((state.session, state.turn_id), None)
        if sentence is None:
            assert answer == "the model's answer" and len(sent) == before + 1, phase
        else:
            assert answer.choices[0].message.content == sentence and len(sent) == before, phase
