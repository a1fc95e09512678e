"""Messages as the log keeps them: caps, splitting, kinds and tags (DESIGN §2.2)."""

from __future__ import annotations

import random
import re

import pytest

from endless.core.store import messages as msgs
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import (
    KINDS, Message, MessageError, Stored, TraceBuilder, cap_middle, check_kind, prepare, render, split_long,
    tag)
from endless.core.settings import Settings, SettingsError
from endless.writer.queue import ready_work
from endless.writer.task import job_input
from endless.writer.task import job_sources

AT = 1_700_000_000.0
S = Settings()
MARKER = re.compile(r"\n\[… ([\d,]+) characters? cut …\]\n")


def distinct(n: int, seed: int = 1) -> str:
    """``n`` characters that make every position recognisable (words, lines, umlauts, CJK)."""
    rng = random.Random(seed)
    words = ["alpha", "Ärger", "日本語", "x" * 40, "\n", "tab\tbed", "😀", "end."]
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(words) + " "
        out.append(w)
        size += len(w)
    return "".join(out)[:n]


def parts_of_cap(capped: str) -> tuple[str, int, str]:
    m = MARKER.search(capped)
    assert m, "no marker"
    return capped[:m.start()], int(m[1].replace(",", "")), capped[m.end():]


# -- caps ---------------------------------------------------------------------------------


def test_cap_middle_leaves_short_text_alone():
    assert cap_middle("", 5) == ""
    assert cap_middle("abcdefghij", 5) == "abcdefghij"


def test_cap_middle_keeps_head_and_tail_and_says_how_much():
    text = "a" * 5 + "MIDDLE" + "b" * 5
    assert cap_middle(text, 5) == "aaaaa\n[… 6 characters cut …]\nbbbbb"


@pytest.mark.parametrize("kind", ["result", "call"])
def test_tool_result_cap(kind):
    text = distinct(40_000)
    [m] = prepare(kind, text, AT, S)
    head, cut, tail = parts_of_cap(m.text)
    assert head == text[:15_000] and tail == text[-15_000:]
    assert cut == 10_000 and "10,000 characters cut" in m.text
    assert m.kind == kind and m.at == AT


def test_tool_result_at_the_cap_is_whole():
    text = distinct(30_000)
    assert prepare("result", text, AT, S) == [Message("result", text, AT)]
    [m] = prepare("result", text + "!", AT, S)
    head, cut, tail = parts_of_cap(m.text)
    assert (head, cut, tail) == (text[:15_000], 1, text[15_001:] + "!")


def test_trace_cap():
    whole = distinct(60_000, seed=2)
    assert prepare("trace", whole, AT, S) == [Message("trace", whole, AT)]
    text = distinct(95_000, seed=3)
    [m] = prepare("trace", text, AT, S)
    head, cut, tail = parts_of_cap(m.text)
    assert head == text[:30_000] and tail == text[-30_000:] and cut == 35_000
    assert "35,000 characters cut" in m.text


def test_caps_follow_the_settings():
    s = Settings(result_cap_chars=3, trace_cap_chars=4)
    assert prepare("result", "abcdefgh", AT, s)[0].text == "abc\n[… 2 characters cut …]\nfgh"
    assert prepare("trace", "0123456789", AT, s)[0].text == "0123\n[… 2 characters cut …]\n6789"


def test_writer_text_is_capped_too():
    [m] = prepare("trace", "short", AT, S, writer_text="w" * 70_000)
    assert m.text == "short"
    head, cut, tail = parts_of_cap(m.writer_text)
    assert len(head) == len(tail) == 30_000 and cut == 10_000
    [r] = prepare("result", "r", AT, S, writer_text="v" * 31_000)
    assert parts_of_cap(r.writer_text)[1] == 1_000


def test_trace_builder_caps_each_result_then_the_trace():
    trace = TraceBuilder(S)
    big = distinct(50_000, seed=4)
    trace.add("did", "cat big.txt")
    trace.add("result", big)
    trace.add("said", "that was long")
    text = trace.text()
    assert text.startswith("did: cat big.txt\nresult: " + big[:15_000] + "\n[… 20,000 characters cut …]\n")
    assert text.endswith(big[-15_000:] + "\nsaid: that was long")
    # many results: the trace as a whole keeps its first and last 30,000
    for k in range(4):
        trace.add("result", distinct(30_000, seed=10 + k))
    whole = trace.text()
    [m] = prepare("trace", whole, AT, S)
    assert len(whole) > 60_000
    assert m.text == f"{whole[:30_000]}\n[… {len(whole) - 60_000:,} characters cut …]\n{whole[-30_000:]}"


# -- what people and the agent say: split, never cut -------------------------------------


@pytest.mark.parametrize("kind", ["user", "reply", "said", "work", "note", "status"])
def test_never_cut_below_the_split(kind):
    text = distinct(30_000, seed=5)
    assert prepare(kind, text, AT, S) == [Message(kind, text, AT)]


@pytest.mark.parametrize("kind", ["user", "reply"])
@pytest.mark.parametrize("size", [30_001, 45_000, 60_000, 60_001, 123_457])
def test_long_messages_split_and_join_back(kind, size):
    text = distinct(size, seed=size)
    parts = prepare(kind, text, AT, S)
    assert len(parts) >= -(-size // 30_000)
    assert "".join(p.text for p in parts) == text
    assert all(0 < len(p.text) <= 30_000 for p in parts)
    assert all(p.kind == kind and p.at == AT for p in parts)
    assert not any(MARKER.search(p.text) for p in parts)


def test_split_prefers_a_line_or_word_break():
    text = "a" * 20_000 + "\n" + "b" * 12_000 + " " + "c" * 100
    parts = split_long(text, 30_000)
    assert parts == ["a" * 20_000 + "\n", "b" * 12_000 + " " + "c" * 100]
    words = ("word " * 7_000)
    assert all(p.endswith(" ") for p in split_long(words, 30_000)[:-1])


def test_split_without_breaks_cuts_at_the_limit():
    text = "日" * 65_000
    parts = split_long(text, 30_000)
    assert [len(p) for p in parts] == [30_000, 30_000, 5_000]
    assert "".join(parts) == text


def test_split_with_a_small_limit():
    s = Settings(message_split_chars=10)
    parts = prepare("user", "one two three four five six", AT, s)
    assert "".join(p.text for p in parts) == "one two three four five six"
    assert all(len(p.text) <= 10 for p in parts)


def test_long_person_message_is_logged_as_consecutive_messages(tmp_path):
    memory = Memory.open(workspace_key(None, tmp_path), settings=Settings(), root=tmp_path)
    text = distinct(70_000, seed=7)
    turn = memory.journal("s1", "Long")
    parts = turn.add("user", text, at=AT)
    turn.add("reply", "ok", at=AT + 1)
    info = turn.commit()
    assert len(parts) == 3
    assert info.first == 0 and info.count == 4 and memory.total == 4
    stored = [memory.message(i) for i in range(4)]
    assert [m.kind for m in stored] == ["user", "user", "user", "reply"]
    assert "".join(m.text for m in stored[:3]) == text
    memory.close()


# -- kinds ----------------------------------------------------------------------------------


def test_kinds_per_granularity():
    for kind in ("user", "reply", "trace", "work", "status", "note"):
        check_kind(kind, "turn")
    for kind in ("user", "reply", "call", "result", "said", "work", "status", "note"):
        check_kind(kind, "step")
    assert set(KINDS) == msgs.TURN_KINDS | msgs.STEP_KINDS


@pytest.mark.parametrize("kind, granularity", [
    ("call", "turn"), ("result", "turn"), ("said", "turn"), ("trace", "step"),
    ("thinking", "turn"), ("", "step"), ("USER", "turn"),
])
def test_wrong_kind_for_granularity(kind, granularity):
    with pytest.raises(MessageError) as caught:
        check_kind(kind, granularity)
    message = str(caught.value)
    assert repr(kind) in message and repr(granularity) in message
    assert "user" in message                       # lists what is allowed


def test_memory_rejects_a_wrong_kind_and_logs_nothing(tmp_path):
    memory = Memory.open(workspace_key(None, tmp_path), settings=Settings(), root=tmp_path)
    with pytest.raises(MessageError, match="'call'"):
        memory.commit_turn("s1", "T", [Message("user", "hi", AT), Message("call", "ls", AT)])
    assert memory.total == 0
    with pytest.raises(MessageError):
        memory.journal("s1", "T").add("result", "x", at=AT)
    memory.close()
    step = Memory.open(workspace_key(None, tmp_path / "step"), settings=Settings(granularity="step"),
                       root=tmp_path / "step")
    with pytest.raises(MessageError, match="'trace'"):
        step.commit_turn("s1", "T", [Message("trace", "did: x", AT)])
    step.commit_turn("s1", "T", [Message("call", "ls", AT), Message("result", "a", AT)])
    assert step.total == 2
    step.close()


def test_prepare_rejects_unknown_kinds_and_non_text():
    with pytest.raises(MessageError, match="unknown message kind 'thinking'"):
        prepare("thinking", "hm", AT, S)
    with pytest.raises(MessageError, match="string"):
        prepare("user", None, AT, S)                 # type: ignore[arg-type]
    with pytest.raises(MessageError, match="string"):
        prepare("user", b"bytes", AT, S)             # type: ignore[arg-type]


# -- tags -----------------------------------------------------------------------------------


def test_tags():
    expected = {"user": "you", "reply": "Assistant", "trace": None, "call": "did",
                "result": "result", "said": "said", "work": "colleague", "status": "note",
                "note": "note"}
    assert {k: tag(k, S) for k in KINDS} == expected
    assert tag("reply", S, "Hermes") == "Hermes"
    custom = Settings(person_tag="Du", agent_name="Bot")
    assert tag("user", custom) == "Du" and tag("reply", custom) == "Bot"
    with pytest.raises(MessageError, match="unknown message kind 'x'"):
        tag("x", S)


def test_render_and_stored_source():
    assert render("user", "hi", S) == "you: hi"
    assert render("trace", "did: ls\nresult: a", S) == "did: ls\nresult: a"
    assert render("work", "done", S) == "colleague: done"
    stored = Stored(7, "reply", "sure", AT, "s1", "T", 0, writer_text="sure (short)")
    assert stored.source_text(S) == "Assistant: sure"
    assert stored.source_text(S, "Hermes") == "Hermes: sure"
    assert stored.writer_source(S) == "Assistant: sure (short)"
    plain = Stored(8, "user", "hi", AT, "s1", "T", 0)
    assert plain.writer_source(S) == plain.source_text(S) == "you: hi"


def test_record_keeps_writer_text_only_when_different():
    assert Message("user", "hi", AT).to_record() == {"k": "user", "x": "hi", "at": AT}
    assert Message("user", "hi", AT, "hi").to_record() == {"k": "user", "x": "hi", "at": AT}
    assert Message("trace", "a", AT, "b").to_record() == {"k": "trace", "x": "a", "at": AT, "w": "b"}


def test_trace_builder_steps_and_tags():
    trace = TraceBuilder(S)
    assert trace.empty and trace.text() == "" and trace.writer_text() is None
    trace.add("said", "looking")
    trace.add("did", "ls")
    trace.add("result", "a b")
    assert not trace.empty
    assert trace.text() == "said: looking\ndid: ls\nresult: a b"
    assert trace.writer_text() is None                # the writer reads the same words
    with pytest.raises(MessageError, match="'thought'"):
        trace.add("thought", "hmm")
    with pytest.raises(MessageError):
        trace.add("you", "hi")


# -- what one writer call reads of a message ---------------------------------------------------

SMALL = Settings(writer_result_keep_chars=50, writer_input_keep_chars=400)


def test_writer_input_leaves_person_and_reply_whole():
    long_text = distinct(5_000)
    for kind in ("user", "reply", "said", "work"):
        assert msgs.writer_input(kind, long_text, SMALL) == long_text


def test_writer_input_trims_a_result_to_head_and_tail():
    body = distinct(1_000, seed=3)
    got = msgs.writer_input("result", body, SMALL)
    head, cut, tail = MARKER.split(got)
    assert head == body[:50] and tail == body[-50:]
    assert int(cut.replace(",", "")) == 900
    short = distinct(100, seed=4)
    assert msgs.writer_input("result", short, SMALL) == short


def test_writer_input_keeps_every_step_of_a_trace_and_trims_its_results():
    builder = TraceBuilder(Settings())
    results = [distinct(600, seed=10 + k).replace("\n", " ") for k in range(3)]
    for k, result in enumerate(results):
        builder.add("did", f"ran check_{k} in src/part{k}")
        builder.add("result", result)
    builder.add("said", "all three ran")
    got = msgs.writer_input("trace", builder.text(), SMALL)
    for k, result in enumerate(results):
        assert f"did: ran check_{k} in src/part{k}\n" in got
        assert "result: " + result[:42] in got and result[-50:] + "\n" in got
        assert result[100:200] not in got
    assert got.endswith("said: all three ran")
    assert len(got) < len(builder.text()) // 3


def test_writer_input_caps_the_whole_trace_last():
    builder = TraceBuilder(Settings())
    for k in range(40):
        builder.add("did", f"step {k} " + "x" * 30)
    got = msgs.writer_input("trace", builder.text(), SMALL)
    head, _, tail = MARKER.split(got)
    assert head == builder.text()[:400] and tail == builder.text()[-400:]


def test_memory_writer_task_reads_the_trimmed_trace_and_checks_against_the_whole(tmp_path):
    settings = Settings(writer_result_keep_chars=200, writer_input_keep_chars=2_000)
    memory = Memory.open(workspace_key(None, tmp_path), settings=settings, root=tmp_path)
    builder = TraceBuilder(settings)
    builder.add("did", "cat build.log")
    builder.add("result", "start " + "y" * 3_000 + " middle code E4242 " + "z" * 3_000 + " done")
    with memory:
        memory.commit_turn("chat-a", "Build", [Message("user", "show me the log", AT),
                                               Message("trace", builder.text(), AT + 1),
                                               Message("reply", "the build finished " * 40, AT + 2)])
        jobs = {job.index: job for job in ready_work(memory) if job.level == 0}
        trace_job = jobs[1]
        task_input = job_input(memory, trace_job)
        assert task_input.startswith("did: cat build.log\nresult: start ")
        assert "E4242" not in task_input and task_input.endswith(" done")
        assert len(task_input) < 1_000
        (source,) = job_sources(memory, trace_job)
        assert "E4242" in source  # the log and the fact check keep every character
        assert job_input(memory, jobs[2]) == job_sources(memory, jobs[2])[0]


@pytest.mark.parametrize("name", ["writer_result_keep_chars", "writer_input_keep_chars"])
def test_writer_input_settings_must_be_positive(name):
    with pytest.raises(SettingsError, match=f"{name} must be positive"):
        Settings().replace(**{name: 0})
