"""The turn protocol's head: layout, marks, the prefix between batches, zero-wait and refusal."""

from __future__ import annotations

from endless.core import lookback
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.llm.anthropic_api import anthropic_mark_positions, to_anthropic
from endless.llm.request import ToolCallOut
from endless.core.settings import Settings
from endless.faces.kit import answers
from endless.sim.clock import SimClock, run
from endless.turn.head import build_request, recent_bytes, system_prompt, turn_tools
from endless.turn.pending import waiting
from endless.turn.protocol import Turn, wait_before_turn
from endless.writer.queue import ready_work

HARNESS_TOOLS = [{"name": "terminal", "description": "run a command",
                  "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def _memory(root, clock, **settings):
    return Memory.open(workspace_key(None, root / "ws"), settings=Settings(**settings), root=root, clock=clock)


def _turn(memory, session="s1"):
    return Turn(memory, session, "Chat", system_prompt("HARNESS"), turn_tools(HARNESS_TOOLS), ["AGENTS.md: be brief"])


def _write_all(memory):
    while jobs := ready_work(memory):
        memory.store_lines([(j.level, j.index, f"line {j.name} " + "w" * 200) for j in jobs], sync=False)


def test_layout_tools_and_marks(tmp_path):
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    for t in range(120):
        memory.commit_turn("s1", "Chat", [Message("user", f"q{t} " + "x" * 300, 1.0),
                                          Message("reply", f"a{t} " + "y" * 400, 1.0)], sync=False)
    _write_all(memory)
    request = run(_turn(memory).begin("what did we decide?", state="time: 10:00"), clock)
    assert request.system.startswith("HARNESS\n\n# How this conversation remembers")
    assert [t["name"] for t in request.tools] == ["terminal", "zoom", "date", "recall_search"]
    assert request.messages[0].blocks == ["AGENTS.md: be brief"]
    view = request.messages[1]
    assert view.blocks[0].startswith("<chat>\n0+") and view.blocks[-1] == "what did we decide?"
    assert view.blocks[-2] == "time: 10:00\n"
    marks = anthropic_mark_positions(request)
    assert len(marks) <= 4 and marks[0] == (-1, 0) and marks[-1] == (1, len(view.blocks) - 1)
    kwargs = to_anthropic(request, "claude-sonnet-5")
    count = sum("cache_control" in b for m in kwargs["messages"] for b in m["content"])
    assert count + sum("cache_control" in b for b in kwargs["system"]) <= 4


def test_recent_block_holds_exactly_p_to_t(tmp_path):
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    memory.commit_turn("s1", "Chat", [Message("user", "u" * 700, 1.0), Message("reply", "r" * 700, 1.0)])
    memory.store_line(0, 0, "first line written")
    memory.commit_turn("s1", "Chat", [Message("user", "second question " + "v" * 600, 1.0)])
    head = build_request(memory, "S", [], [], "", "new")
    blocks = head.messages[0].blocks
    text = "".join(blocks)
    assert "0+1|first line written" in text
    assert "1+0|Assistant: " + "r" * 700 in text and "2+0|you: second question" in text
    assert "0+0|" not in text, "nothing from before p"


def test_between_batches_the_head_is_a_prefix_of_the_next(tmp_path):
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall, view_ceiling=40_000, view_floor=20_000)
    previous = None
    misses = 0
    for t in range(60):
        memory.commit_turn("s1", "Chat", [Message("user", f"q{t} " + "x" * 300, 1.0),
                                          Message("reply", f"a{t} " + "y" * 500, 1.0)], sync=False)
        _write_all(memory)
        head = build_request(memory, "S", [], [], "", f"message {t}")
        blocks = head.messages[0].blocks
        view_text = "".join(blocks[:head.view_blocks])
        if previous is not None and not view_text.startswith(previous):
            misses += 1
        previous = view_text
    assert misses <= 3, f"the view changed before its end {misses} times (batches only)"


def test_a_long_tail_with_a_stalled_writer_waits_briefly_then_goes_on_bounded(tmp_path):
    """Nothing writes lines: the turn waits one stall period, not the wait limit, and shows the newest
    messages word for word with one note for the stretch before them; the next head has no note once
    the writer caught up."""
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    for t in range(30):
        memory.commit_turn("s1", "Chat", [Message("user", f"{t} " + "z" * 700, 1.0)], sync=False)
    assert recent_bytes(memory) > 16_384
    turn = _turn(memory)
    head = run(turn.begin("please answer", timeout=180), clock)
    assert head is not None and not turn.refused
    assert 5 <= clock.now < 6, "one stall period without a new line, not the 180 s limit"
    recent = "".join(head.messages[1].blocks)
    assert recent.count("not summarised yet") == 1
    note = next(line for line in recent.split("\n") if "note:" in line)
    shown = [int(line.split("+", 1)[0]) for line in recent.split("\n") if "+0|you: " in line]
    assert note.startswith("0+0|note: (messages 0 to ") and shown and shown[-1] == 29
    assert note.startswith(f"0+0|note: (messages 0 to {shown[0] - 1} are not summarised yet")
    assert "zoom(id, 1)" in note and "recall_search" in note
    assert sum(len(line.encode()) + 1 for line in recent.split("\n") if "+0|" in line) <= 16_384
    assert all(f"{i} " + "z" * 700 in recent for i in shown), "the newest messages stay word for word"
    turn.finish("done")
    _write_all(memory)
    again = _turn(memory)
    request = run(again.begin("and this too"), clock)
    assert "not summarised yet" not in "".join(request.messages[1].blocks)


def test_the_wait_before_a_turn_ends_when_the_person_stops_it_and_is_not_waited_twice(tmp_path):
    """One decision to wait, in the protocol: a harness's stop ends it at the next look, and a turn
    handed that wait builds its head at once (Hermes waits at pre_llm_call, then begins)."""
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    for t in range(30):
        memory.commit_turn("s1", "Chat", [Message("user", f"{t} " + "z" * 700, 1.0)], sync=False)
    assert recent_bytes(memory) > 16_384
    looks: list[float] = []

    def stopped() -> bool:
        looks.append(clock.now)
        return clock.now >= 1.0  # the person stops the turn a second into its wait

    waited = run(wait_before_turn(memory, stopped, 180), clock)
    assert waited.interrupted and not waited.fits
    assert 1.0 <= clock.now < 1.5, "ended at the next look after the stop, not at the stall period"
    before = clock.now
    turn = _turn(memory)
    head = run(turn.begin("please answer", waited=waited), clock)
    assert head is not None and clock.now == before, "a wait already done is not done again"
    alone = run(wait_before_turn(memory, None, 180), clock)
    assert not alone.interrupted and 5 <= clock.now - before < 6, "without a stop: one stall period"


def test_a_head_that_cannot_fit_is_refused_and_the_message_kept(tmp_path):
    """The harness's own prompt alone fills the window: no bounded head, the one refusal left.  The message
    is in the memory at once (history, search), and the next turn of another chat shows it once."""
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    memory.set_window(32_768)
    memory.commit_turn("s1", "Chat", [Message("user", "the port is 5433", 1.0)], sync=False)
    huge = Turn(memory, "s1", "Chat", system_prompt("HARNESS " + "rules " * 40_000), turn_tools(HARNESS_TOOLS))
    assert run(huge.begin("please answer about the kittiwake"), clock) is None and huge.refused
    kept = waiting(memory)
    assert [(k.ident, k.session, k.title, k.text) for k in kept] == [(1, "s1", "Chat", "please answer about the kittiwake")]
    assert memory.turn(1).status == "kept" and memory.message(1).text == "please answer about the kittiwake"
    assert memory.message(2).kind == "status" and "kept" in memory.message(2).text
    found = lookback.recall_search(memory, "kittiwake")
    assert "1+0 · " in found and "«Chat»" in found, found  # searchable as soon as it is kept
    page = answers.answer(memory, "history", {}, memory.settings)
    assert [t["status"] for t in page["turns"]] == ["completed", "kept"]

    other = _turn(memory, "s2")  # another chat of the memory (a new Hermes launch is a new session)
    request = run(other.begin("and this too"), clock)
    said = request.messages[1].blocks[-1]
    assert said.endswith("\n\nand this too") and said.count("please answer about the kittiwake") == 1, said
    assert "Kept message 1, sent in «Chat»" in said
    other.finish("done")
    assert waiting(memory) == []
    assert memory.message(memory.total - 2).text == "and this too"  # the kept one is logged once, as kept
    again = _turn(memory, "s1")
    request = run(again.begin("and again"), clock)
    assert request.messages[1].blocks[-1] == "and again", "delivered once, not with every later turn"


def test_a_paste_too_long_for_the_window_is_kept_and_never_blocks_later_turns(tmp_path):
    """A message that alone fills a small window is refused and kept; the next turns are answered, the
    kept paste reaching them cut to a share that names zoom, and each head fits the window."""
    from endless.core.settings import KEPT_SHARE_BYTES
    from endless.llm import tokens
    from endless.turn.head import head_room

    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    memory.set_window(32_768)
    memory.commit_turn("s1", "Chat", [Message("user", "the port is 5433", 1.0)], sync=False)
    paste = "access log: " + " ".join(f"GET /book/{k} 200 {k % 97}ms" for k in range(9_000))
    first = _turn(memory, "s1")
    assert run(first.begin(paste), clock) is None and first.refused
    ident = waiting(memory)[0].ident
    assert memory.message(ident).text == paste  # whole in the memory
    for n, text in enumerate(["did the log show errors?", "and the slowest request?"]):
        turn = _turn(memory, "s2")
        request = run(turn.begin(text), clock)
        assert request is not None and not turn.refused, n
        said = request.messages[-1].blocks[-1]
        if n == 0:  # shown once, cut: its head, the cut named for zoom, its tail
            assert said.endswith(text) and f"zoom({ident}, 1)" in said and paste not in said, said[:300]
            assert paste[:200] in said and len(said.encode()) < KEPT_SHARE_BYTES + 1_000 + len(text)
        else:
            assert said == text
        assert paste not in "".join(b for m in request.messages for b in m.blocks)
        assert tokens.fits(request, head_room(memory, None))
        turn.finish("answered")
    assert waiting(memory) == []


def test_messages_an_older_endless_kept_per_session_are_adopted_once(tmp_path):
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    folder = memory.folder / "pending"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "old-session.jsonl").write_bytes(b'{"s": "old-session", "x": "an old kept question", "at": 1.0}\n')
    request = run(_turn(memory, "s2").begin("hello"), clock)
    assert "an old kept question" in request.messages[-1].blocks[-1]
    assert memory.turn(0).status == "kept" and memory.turn(0).session == "old-session"
    assert not (folder / "old-session.jsonl").exists()


def test_steps_keep_the_head_and_the_writer_reads_lookbacks_in_words(tmp_path):
    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    memory.commit_turn("s1", "Chat", [Message("user", "port is 5433", 1.0)])
    turn = _turn(memory)
    head = run(turn.begin("which port?"), clock)
    first = "".join(head.messages[1].blocks)
    call = ToolCallOut("c1", "zoom", '{"id": 0, "n": 1}')
    step = turn.add_step("", [call], {"c1": "0+0|you: port is 5433"})
    assert "".join(step.messages[1].blocks) == first
    assert step.messages[-1].role == "tool" and step.messages[-2].tool_calls == [call]
    info = turn.finish("It is 5433.")
    messages = memory.turn_messages(info.turn)
    assert [m.kind for m in messages] == ["user", "trace", "reply"]
    trace = messages[1]
    assert 'did: zoom {"id": 0, "n": 1}' in trace.text and "result: 0+0|you: port is 5433" in trace.text
    assert "looked back at message 0" in trace.writer_text and "result:" not in trace.writer_text


def test_a_long_turn_refreshes_its_head_and_never_outgrows_the_window(tmp_path):
    import random

    from endless.sim.tokens import load_o200k_base
    from endless.core.lookback import call
    from endless.turn.head import rebuild_bytes
    from endless.turn.protocol import CONTINUED

    encoding = load_o200k_base()
    clock = SimClock()
    window = 32_768
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=Settings(), root=tmp_path,
                         clock=clock.wall, window_tokens=window)
    for t in range(40):
        memory.commit_turn("s1", "Chat", [Message("user", f"q{t} " + "x" * 300, 1.0),
                                          Message("reply", f"a{t} " + "y" * 900, 1.0)], sync=False)
    _write_all(memory)
    turn = _turn(memory)
    request = run(turn.begin("build the whole project"), clock)
    first_head = request.messages[:len(request.messages)]
    rng = random.Random(7)
    largest = 0
    for step in range(50):
        result = f"step {step} output: " + " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "7781"])
                                                     for _ in range(600))
        calls = [ToolCallOut(f"c{step}", "terminal", orjson_dumps({"cmd": f"make part{step}"}))]
        request = turn.add_step(f"running part {step}", calls, {f"c{step}": result})
        tokens = len(encoding.encode(request.rendered()))
        largest = max(largest, tokens)
        assert tokens < window, f"step {step}: {tokens} tokens do not fit a {window}-token window"
    assert turn.rebuilds >= 3, "50 steps of ~3 KB each pass a quarter of a 32k window several times"
    assert rebuild_bytes(memory) == window // 4
    assert request.messages[:1] == first_head[:1], "context messages stay in front after a refresh"
    info = turn.finish("all parts built")
    parts = [memory.turn(n) for n in range(memory.turns - turn.rebuilds - 1, memory.turns)]
    assert [p.status for p in parts] == [CONTINUED] * turn.rebuilds + ["completed"]
    first_part = memory.turn_messages(parts[0].turn)
    assert first_part[0].text == "build the whole project" and first_part[0].kind == "user"
    assert info.turn == parts[-1].turn
    # The refreshed head shows the committed steps in the recent block, and the agent can zoom them.
    trace_id = first_part[-1].id
    assert "did: terminal" in call(memory, "zoom", orjson_dumps({"id": trace_id, "n": 1}))
    assert largest > window // 8, "the steps really grew before each refresh"



def test_a_refreshed_head_keeps_the_persons_message_and_the_newest_step_when_the_block_is_too_big(tmp_path):
    """The writer has written nothing: the rebuilt block would hold every message since the start.
    It keeps the person's message and the newest steps (the oldest kept one shortened), names the
    rest for zoom, and stays within a quarter of the window."""
    from endless.core.lookback import call
    from endless.turn.head import rebuild_bytes

    clock = SimClock()
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=Settings(), root=tmp_path,
                         clock=clock.wall, window_tokens=32_768)
    for t in range(5):
        memory.commit_turn("s1", "Chat", [Message("user", f"q{t} " + "x" * 1500, 1.0),
                                          Message("reply", f"a{t} " + "y" * 1500, 1.0)], sync=False)
    limit = rebuild_bytes(memory)
    turn = _turn(memory)
    person = "Build the kestrel-44 release and tell me what broke."
    run(turn.begin(person), clock)
    results = [f"log {k} " + " ".join(f"line{k}-{i}" for i in range(290)) for k in range(3)]
    request = None
    for k, result in enumerate(results):
        request = turn.add_step("", [ToolCallOut(f"c{k}", "terminal", f'{{"cmd": "make part{k}"}}')],
                                {f"c{k}": result})
    assert turn.rebuilds == 1, "three ~3 KB results pass a quarter of a 32k window at the third"
    person_id, trace_id = 10, 11
    assert memory.message(person_id).text == person and memory.message(trace_id).kind == "trace"
    tail = request.messages[-1].blocks[-1]
    assert f"(3 tool calls) was saved to memory as messages {person_id} to {trace_id}" in tail
    view = "".join(request.messages[-1].blocks)
    recent = view[view.index("</chat>") + len("</chat>"):] if "</chat>" in view else view
    recent = recent[:recent.index(tail)]
    assert len(recent.encode()) <= limit + 1, (len(recent.encode()), limit)
    assert f"\n{person_id}+0|you: {person}\n" in recent, "the person's message stays whole"
    assert f"0+0|note: (messages 0 to {person_id - 1} are not summarised yet" in recent
    assert f"{trace_id}+0|did: terminal" in recent, "the newest step shows from its start"
    assert f"zoom({trace_id}, 1) reads it whole" in recent and results[2][-200:] in recent
    assert results[0][:200] in recent and results[1][1450:1550] not in recent, "the cut is in the middle"
    assert results[1][:100] in call(memory, "zoom", orjson_dumps({"id": trace_id, "n": 1}))


def orjson_dumps(value) -> str:
    import orjson

    return orjson.dumps(value).decode()


def test_two_chats_starting_at_once_show_a_kept_message_once(tmp_path):
    """A turn claims the kept messages it shows: a second memory object of the folder (as a second process
    opens it) does not show them while that turn runs; a refused turn gives them back; a claim whose
    process died lapses."""
    import subprocess
    import sys

    from endless.turn import pending

    clock = SimClock()
    memory = _memory(tmp_path, clock.wall)
    kept = pending.keep(memory, "s0", "Old chat", "what about the heron?")
    other = _memory(tmp_path, clock.wall)
    first, second = _turn(memory, "s1"), _turn(other, "s2")
    shown_first = run(first.begin("hello"), clock).messages[-1].blocks[-1]
    shown_second = run(second.begin("hi"), clock).messages[-1].blocks[-1]
    assert "what about the heron?" in shown_first and shown_second == "hi"
    first.finish("answered both")
    second.finish("answered")
    assert pending.waiting(memory) == []

    again = pending.keep(memory, "s0", "Old chat", "and the egret?")
    huge = Turn(memory, "s3", "Chat", system_prompt("HARNESS " + "rules " * 40_000), turn_tools(HARNESS_TOOLS))
    memory.set_window(32_768)
    assert run(huge.begin("too big a frame"), clock) is None and huge.refused
    later = _turn(other, "s4")  # the refused turn released its claim: the next turn shows both kept ones
    said = run(later.begin("next"), clock).messages[-1].blocks[-1]
    assert "and the egret?" in said and "too big a frame" in said
    later.finish("ok")

    last = pending.keep(memory, "s0", "Old chat", "and the bittern?")
    code = (f"import sys; sys.path[:0] = {sys.path!r}\n"
            "from pathlib import Path\n"
            "from endless.core.store.keys import workspace_key\nfrom endless.core.memory import Memory\n"
            "from endless.core.settings import Settings\nfrom endless.turn import pending\n"
            f"m = Memory.open(workspace_key(None, Path({str(tmp_path / 'ws')!r})), settings=Settings(), "
            f"root=Path({str(tmp_path)!r}))\n"
            "print([k.ident for k in pending.claim(m, 'gone-turn')])\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert child.stdout.strip() == f"[{last.ident}]", child.stderr  # claimed by a process that is now gone
    said = run(_turn(memory, "s5").begin("one more"), clock).messages[-1].blocks[-1]
    assert "and the bittern?" in said and kept.ident != last.ident and again.ident != last.ident
