"""The neutral request and its wire forms: view blocks, cache marks, stable prefixes."""

from __future__ import annotations

from endless.llm.anthropic_api import anthropic_mark_positions, to_anthropic
from endless.llm.openai_api import to_openai
from endless.llm.request import Msg, Request, view_message_blocks

TOOLS = [{"name": "zoom", "description": "open a line", "parameters": {"type": "object", "properties": {}}}]


def _request(lines: list[str], tail: str = "new question") -> Request:
    blocks, whole = view_message_blocks(lines, ["recent\n", tail])
    return Request("SYSTEM", TOOLS, [Msg("user", blocks)], view_message=0, view_blocks=whole,
                   cache_key="0123456789abcdef")


def _marks(kwargs: dict) -> list[str]:
    found = []
    for block in kwargs["system"]:
        if "cache_control" in block:
            found.append("system")
    for m in kwargs["messages"]:
        for k, block in enumerate(m["content"]):
            if "cache_control" in block:
                found.append(block["text"])
    return found


def test_view_blocks_keep_whole_blocks_stable_when_lines_are_appended():
    lines = [f"{i}+1|line {i}" for i in range(10)]
    before, whole_before = view_message_blocks(lines)
    after, whole_after = view_message_blocks(lines + ["10+1|line 10", "11+1|line 11"])
    assert whole_before == 2 and whole_after == 3
    assert after[:whole_before] == before[:whole_before]
    assert before[0].startswith("<chat>\n0+1|") and before[-1] == "</chat>\n"
    assert "".join(before) == "<chat>\n" + "".join(l + "\n" for l in lines) + "</chat>\n"


def test_anthropic_marks_at_most_four_in_the_right_places():
    lines = [f"{i}+1|line {i}" for i in range(100)]  # 25 whole blocks
    request = _request(lines)
    positions = anthropic_mark_positions(request)
    assert len(positions) == 4
    assert positions == [(-1, 0), (0, 4), (0, 24), (0, 27)]
    kwargs = to_anthropic(request, "claude-x")
    marks = _marks(kwargs)
    assert len(marks) == 4
    assert marks[0] == "system"
    assert marks[1].startswith("16+1|") and marks[2].startswith("96+1|") and marks[3] == "new question"
    assert kwargs["tools"][0]["input_schema"] == {"type": "object", "properties": {}}


def test_short_view_gets_fewer_marks():
    request = _request([f"{i}+1|x" for i in range(6)])
    assert anthropic_mark_positions(request) == [(-1, 0), (0, 0), (0, 4)]
    empty = _request([])
    assert anthropic_mark_positions(empty) == [(-1, 0), (0, 3)]


def test_openai_forms():
    request = _request([f"{i}+1|x" for i in range(8)])
    plain = to_openai(request, "deepseek-chat")
    assert plain["messages"][1]["content"].startswith("<chat>\n0+1|x\n")
    assert "prompt_cache_key" not in plain and plain["tools"][0]["type"] == "function"
    marked = to_openai(request, "gpt-6.2-sol", "openai-breakpoints")
    assert marked["prompt_cache_key"] == "0123456789abcdef"
    parts = marked["messages"][1]["content"]
    flagged = [p["text"] for p in parts if "prompt_cache_breakpoint" in p]
    assert flagged == ["<chat>\n0+1|x\n1+1|x\n2+1|x\n3+1|x\n", "4+1|x\n5+1|x\n6+1|x\n7+1|x\n"]
    assert "prompt_cache_breakpoint" in marked["messages"][0]["content"][0]


def test_tool_calls_and_results_in_both_forms():
    from endless.llm.request import ToolCallOut
    request = Request("S", TOOLS, [Msg("user", ["hi"]),
                                   Msg("assistant", [], [ToolCallOut("c1", "zoom", '{"id": 0, "n": 1}'),
                                                         ToolCallOut("c2", "zoom", '{"id": 1, "n": 1}')]),
                                   Msg("tool", ["0+0|you: hi"], tool_call_id="c1"),
                                   Msg("tool", ["1+0|you: yo"], tool_call_id="c2")], tool_choice="none")
    openai = to_openai(request, "m")
    assert openai["messages"][2]["tool_calls"][1]["function"]["arguments"] == '{"id": 1, "n": 1}'
    assert openai["messages"][2]["content"] is None and openai["tool_choice"] == "none"
    anthropic = to_anthropic(request, "m", style="none")
    assert anthropic["messages"][1]["content"][0] == {"type": "tool_use", "id": "c1", "name": "zoom",
                                                      "input": {"id": 0, "n": 1}}
    results = anthropic["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["c1", "c2"]
    assert anthropic["tool_choice"] == {"type": "none"}
    marked = to_anthropic(request, "m")
    last = marked["messages"][2]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral"}, "a tool step's request is marked at its end"
    assert all("cache_control" not in block for block in last["content"]), "on the result, not inside it"


def test_openai_breakpoints_mark_every_whole_view_block_up_to_the_read_limit():
    from endless.llm.openai_api import OPENAI_READ_BREAKPOINTS, openai_breakpoint_positions
    request = _request([f"{i}+1|x" for i in range(4 * 100 + 2)])
    marks = openai_breakpoint_positions(request)
    assert len(marks) == OPENAI_READ_BREAKPOINTS and marks[0] == (-1, 0)
    assert marks[1:] == [(0, k) for k in range(100 - 79, 100)]


def test_anthropic_keeps_system_and_view_marks_for_an_hour_and_the_end_for_five_minutes():
    request = _request([f"{i}+1|x" for i in range(100)])
    kwargs = to_anthropic(request, "claude-sonnet-5")
    controls = [b["cache_control"] for b in kwargs["system"] if "cache_control" in b]
    controls += [b["cache_control"] for m in kwargs["messages"] for b in m["content"] if "cache_control" in b]
    assert controls[:-1] and all(c == {"type": "ephemeral", "ttl": "1h"} for c in controls[:-1])
    assert controls[-1] == {"type": "ephemeral"}, "the end changes every turn: five minutes"
    assert to_anthropic(request, "m", ttl="5m")["system"][0]["cache_control"]["ttl"] == "5m"
