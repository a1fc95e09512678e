"""End to end: Endless as a plugin of the real Hermes Agent 0.19.0, against ``endless sim serve``.

Each test builds a throwaway Hermes home with ``endless hermes install``,
runs Hermes headless (the CLI, or ``hermes_driver.py`` for interrupts and
gateway platforms) and checks what the simulator received and what the
memory holds.  Skipped when the Hermes venv (with Endless installed in it)
is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from endless.turn import head as turn_head
from endless.turn import protocol as turn_protocol
from endless.core.store.keys import gateway_key
from endless.writer.recorded import recorded_routes

from hermes_env import Env, HERMES_PYTHON, hermes_ready, outside_view, segments, user_texts

pytestmark = pytest.mark.skipif(
    not hermes_ready(),
    reason=f"no Hermes venv with Endless: {HERMES_PYTHON} (create it with `python3 -m venv .venv-hermes && "
           ".venv-hermes/bin/pip install 'hermes-agent[anthropic]==0.19.0' && .venv-hermes/bin/pip install -e .`)")

SECTION_START = turn_head.system_prompt("").split("\n", 1)[0]
OUR_TOOLS = ["zoom", "date", "recall_search"]


@pytest.fixture
def env(tmp_path: Path):
    environment = Env(tmp_path)
    yield environment
    environment.close()


def first_requests(env: Env) -> list[dict]:
    """The first request of every turn: a chat request with no step of the turn yet (no assistant message)."""
    return [r for r in env.chat_requests() if "assistant" not in [role for role, _ in segments(r["prompt"])]]


def head_part(prompt: str) -> str:
    """The head's user message (view, recent block, state, message): the first user segment."""
    return [text for role, text in segments(prompt) if role == "user"][0]


def person_part(prompt: str) -> str:
    return user_texts(prompt)[-1]


def tool_names(prompt: str) -> list[str]:
    tools = [text for role, text in segments(prompt) if role == "tools"][0]
    return re.findall(r'"name":"([A-Za-z_]+)"', tools)


def test_six_turns_a_tool_turn_and_a_second_chat(env: Env) -> None:
    words = ["kestrel", "juniper", "obsidian", "tamarind", "quokka", "zeppelin"]
    prompts = [f"Note the codeword {w}-{n}{n}{n} for later, please. [[tools:0]] [[reply:200]]" for n, w in enumerate(words, 1)]
    prompts[3] = "Look back at what I said. [[call:date]] [[call:recall_search]] [[zoom:0:1]] [[reply:300]]"
    first = env.chat(prompts[0])
    session = first.session
    for prompt in prompts[1:]:
        env.chat(prompt, resume=session)

    turns = first_requests(env)
    assert len(turns) == 6, [r["prompt"][-300:] for r in turns]
    for n, record in enumerate(turns, 1):
        prompt = record["prompt"]
        parts = segments(prompt)
        roles = [role for role, _ in parts]
        # system + section, tools with ours last, then one user message: view, recent block, state, message
        assert roles == ["tools", "system", "user"], (n, roles)
        assert SECTION_START in parts[1][1], n
        assert tool_names(prompt)[-3:] == OUR_TOOLS, (n, tool_names(prompt))
        user = parts[2][1].lstrip("\n")
        assert user.startswith("<chat>\n") and "\n</chat>\n" in user, (n, user[:200])
        after_view = user.split("\n</chat>\n", 1)[1]
        assert "[now: " in after_view and after_view.rstrip().endswith(prompts[n - 1]), (n, after_view[-400:])
        # no earlier raw message outside the view and the recent block
        for earlier in prompts[:n - 1]:
            assert earlier not in outside_view(user.rsplit(prompts[n - 1], 1)[0]), (n, earlier)
        if n >= 2:
            assert "0+" in user.split("</chat>")[0] or "0+0|" in after_view, (n, user[:300])
    # from turn 3 on, >= 95 % of each first request is read from the cache
    ratios = [r["usage"]["read"] / r["usage"]["input"] for r in turns]
    assert all(ratio >= 0.95 for ratio in ratios[2:]), ratios

    # the tool turn (turn 4): date, recall_search and zoom answered; every step reuses the frozen head
    steps = [r for r in env.chat_requests() if head_part(r["prompt"]).rstrip().endswith(prompts[3])]
    assert len(steps) == 4, [s["reply"] for s in steps]
    head = steps[0]["prompt"]
    for step in steps[1:]:
        assert step["prompt"].startswith(head.rstrip()), "a later step changed the frozen head"
    results = [text for role, text in segments(steps[-1]["prompt"]) if role == "tool"]
    assert len(results) == 3, results
    assert prompts[0] in results[0], results[0]  # zoom(0, 1) gave message 0 word for word
    assert re.search(r"\d{4}-\d{2}-\d{2}", results[1]), results[1]  # date answered
    assert results[2].strip() and "not available" not in results[2] and "failed" not in results[2], results[2]
    memory = env.memory()
    with memory:
        kinds = [[m.kind for m in memory.turn_messages(t)] for t in range(memory.turns)]
        assert memory.turns == 6, kinds
        assert kinds[3] == ["user", "trace", "reply"], kinds
        trace = memory.turn_messages(3)[1].text
        assert "zoom" in trace and "recall_search" in trace and "date" in trace, trace
        assert all(k[0] == "user" and k[-1] == "reply" for k in kinds), kinds
        users = [memory.turn_messages(t)[0].text for t in range(6)]
        assert users == prompts, users

    # a second chat in the same workspace: its first turn carries the view; it quotes chat 1 word for word
    quote = "Quote my very first message. [[zoom:0:1]] [[reply:300]]"
    second = env.chat(quote)
    assert second.session != session
    request = first_requests(env)[-1]
    view = person_part(request["prompt"]).split("</chat>")[0]
    assert "0+" in view and "kestrel" in view.lower() or "0+0|" in person_part(request["prompt"]), view[:500]
    assert prompts[0] in second.stdout, second.diagnostics()
    with env.memory() as memory:
        assert memory.turns == 7
        sessions = {memory.turn(t).session for t in range(7)}
        assert sessions == {session, second.session}


def statuses(memory) -> list[str]:
    return [memory.turn(t).status for t in range(memory.turns)]


def count_in_memory(memory, text: str) -> int:
    """How often the person's messages hold ``text`` (replies may repeat facts)."""
    return sum(m.text.count(text) for t in range(memory.turns) for m in memory.turn_messages(t)
               if m.kind == "user")


def test_an_interrupted_turn_is_stopped_with_the_message_once(env: Env) -> None:
    slow = "Take your time with this one, heron-808. [[slow:8]] [[tools:0]] [[reply:100]]"
    results = env.drive({"agents": {"a": {}}, "turns": [
        {"agent": "a", "text": "Hello there, plover-101. [[tools:0]] [[reply:100]]"},
        {"agent": "a", "text": slow, "interrupt_after": 2.5},
        {"agent": "a", "text": "Are you back? [[tools:0]] [[reply:100]]"}]})
    assert [r["interrupted"] for r in results] == [False, True, False], results
    with env.memory() as memory:
        assert statuses(memory) == ["completed", "stopped", "completed"]
        assert [m.kind for m in memory.turn_messages(1)] == ["user", "status"]
        assert count_in_memory(memory, "heron-808") == 1
    last = first_requests(env)[-1]["prompt"]
    assert person_part(last).count("heron-808") == 1  # in the recent block or the view, once


def test_an_http_500_is_reconciled_as_interrupted_exactly_once(env: Env) -> None:
    first = env.chat("Start of the story, wren-303. [[tools:0]] [[reply:100]]")
    failed = env.chat("This one breaks, ibis-404. [[fail:500]]", resume=first.session, check=False)
    assert "ibis-404" not in failed.stdout  # no answer came back
    env.chat("After the failure, stork-505. [[tools:0]] [[reply:100]]", resume=first.session)
    with env.memory() as memory:
        assert statuses(memory) == ["completed", "interrupted", "completed"], statuses(memory)
        assert count_in_memory(memory, "ibis-404") == 1
        assert memory.turn_messages(1)[0].text.startswith("This one breaks, ibis-404.")
    last = first_requests(env)[-1]["prompt"]
    assert person_part(last).count("ibis-404") == 1, person_part(last)[-800:]


def test_two_gateway_conversations_have_two_memories(env: Env) -> None:
    keys = {"a": "agent:main:telegram:dm:111", "b": "agent:main:telegram:dm:222"}
    turns = []
    for n in range(2):
        for name in ("a", "b"):
            turns.append({"agent": name, "text": f"Chat {name} says {name}-secret-{n}. [[tools:0]] [[reply:100]]"})
    env.drive({"agents": {name: {"platform": "telegram", "gateway_session_key": key}
                          for name, key in keys.items()}, "turns": turns})
    for name, key in keys.items():
        other = "b" if name == "a" else "a"
        with env.memory(gateway_key(None, "telegram", key)) as memory:
            assert memory.turns == 2
            assert count_in_memory(memory, f"{name}-secret-0") == 1
            assert not any(f"{other}-secret" in m.text for t in range(memory.turns)
                           for m in memory.turn_messages(t))
    requests = first_requests(env)
    assert len(requests) == 4
    for record, turn in zip(requests, turns):
        other = "b" if turn["agent"] == "a" else "a"
        assert f"{other}-secret" not in record["prompt"], turn
    assert "a-secret-0" in requests[2]["prompt"] and "b-secret-0" in requests[3]["prompt"]


def test_subagent_and_background_review_turns_stay_out_of_the_memory(env: Env) -> None:
    """Agents built as Hermes builds them: a subagent (``platform="subagent"``, tools/delegate_tool.py)
    and a background review fork sharing the parent's session id (attributes as agent/background_review.py
    sets them).  In 0.19.0 ``delegate_task`` always runs in the background, after a ``-q`` run has exited,
    so the agents are driven in-process."""
    fork = {"_memory_write_origin": "background_review", "_persist_disabled": True,
            "_memory_nudge_interval": 0, "_skill_nudge_interval": 0}
    env.drive({"agents": {"parent": {}, "child": {"platform": "subagent"},
                          "review": {"session_of": "parent", "attrs": fork}},
               "turns": [{"agent": "parent", "text": "Main chat, falcon-606. [[tools:0]] [[reply:100]]"},
                         {"agent": "child", "text": "Subagent goal, gannet-616. [[tools:0]] [[reply:100]]"},
                         {"agent": "review", "text": "Review the conversation, cormorant-626. [[tools:0]]"},
                         {"agent": "parent", "text": "Main chat again, falcon-707. [[tools:0]] [[reply:100]]"}]})
    with env.memory() as memory:
        users = [m.text for t in range(memory.turns) for m in memory.turn_messages(t) if m.kind == "user"]
        assert len(users) == 2 and "falcon-606" in users[0] and "falcon-707" in users[1], users
    requests = env.chat_requests()
    side = [r for r in requests if "gannet-616" in r["prompt"] or "cormorant-626" in r["prompt"]]
    # left as Hermes built them: no view, no Endless section
    assert len(side) == 2 and not any(person_part(r["prompt"]).lstrip().startswith("<chat>") or
                                      SECTION_START in r["prompt"] for r in side)
    assert "gannet-616" not in requests[-1]["prompt"] and "cormorant-626" not in requests[-1]["prompt"]


def test_a_stalled_writer_goes_on_with_a_bounded_head_and_catches_up_when_it_is_back(tmp_path: Path) -> None:
    """A dead writer route: the turn waits one stall period, then answers with a bounded head (the newest
    messages word for word, the unwritten one past the bound shortened with a zoom hint), nothing refused;
    with the writer back the whole history is in lines again (issue 14, the Hermes path)."""
    dead = free_dead_port()
    env = Env(tmp_path, endless_env={"ENDLESS_RECENT_BLOCK_BYTES": "2000"})
    try:
        stalled = {"ENDLESS_WRITER_ROUTE": f'{{"provider": "openai", "model": "w", "base_url": '
                                           f'"http://127.0.0.1:{dead}/v1", "max_retries": 0, "timeout": 2}}',
                   "ENDLESS_TURN_WAIT_SECONDS": "30", "ENDLESS_TURN_STALL_SECONDS": "2"}
        long_text = "Here is my long note, osprey-707. " + " ".join(f"item{i} details" for i in range(220))
        first = env.chat(long_text + " [[tools:0]] [[reply:100]]", env=stalled)
        second = env.chat("Short question, puffin-909? [[tools:0]] [[reply:100]]", resume=first.session,
                          env=stalled)
        assert turn_protocol.REFUSAL not in second.stdout and second.stdout.strip(), second.diagnostics()
        head = head_part(first_requests(env)[-1]["prompt"])
        # the unwritten long message is shortened with a zoom hint; the newest ones are word for word
        assert "are not shown here; zoom(0, 1) reads it whole" in head, head[-3000:]
        assert "Short question, puffin-909?" in head and "osprey-707" in head
        assert len(head.encode()) < 2000 + 1000, "the recent block kept its bound"
        env.chat("Any news, tern-111? [[tools:0]] [[reply:100]]", resume=first.session)
        assert "are not shown here" not in head_part(first_requests(env)[-1]["prompt"])
        with env.memory() as memory:
            assert memory.turns == 3 and statuses(memory) == ["completed"] * 3, statuses(memory)
            assert count_in_memory(memory, "puffin-909") == 1 and count_in_memory(memory, "tern-111") == 1
        assert any(r["stream"] is False for r in env.requests())  # the chat's own route wrote the lines
    finally:
        env.close()


PAST_SESSION = """
import sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = "20260401_090000_past"
db.create_session(sid, "cli", model="sim-model", cwd=sys.argv[2])
db.set_session_title(sid, "Last month's work")
for k in range(int(sys.argv[3])):
    db.append_message(sid, "user", content=f"Old question {k} about the deploy queue. " + "context " * 150)
    db.append_message(sid, "assistant", content=f"Old answer {k}: we keep eight workers. " + "detail " * 150)
db.close()
"""


def test_a_hermes_chat_right_after_importing_its_own_state_db(tmp_path: Path) -> None:
    """Hermes's own history, imported, with the writer dead: the next Hermes chat is answered with a bounded
    head that names the unwritten stretch for zoom and shows the newest words whole; with the writer back,
    the stretch is written and the placeholder goes (issue 14, the Hermes path after an import)."""
    import subprocess

    from commands import endless_command

    dead = free_dead_port()
    env = Env(tmp_path, endless_env={"ENDLESS_RECENT_BLOCK_BYTES": "4000"})
    try:
        state_db = env.home / "state.db"
        made = subprocess.run([str(HERMES_PYTHON), "-c", PAST_SESSION, str(state_db), str(env.workspace), "40"],
                              capture_output=True, text=True, timeout=120, env=env.env())
        assert made.returncode == 0, made.stderr
        stalled = {"ENDLESS_WRITER_ROUTE": f'{{"provider": "openai", "model": "w", "base_url": '
                                           f'"http://127.0.0.1:{dead}/v1", "max_retries": 0, "timeout": 2}}',
                   "ENDLESS_TURN_WAIT_SECONDS": "20", "ENDLESS_TURN_STALL_SECONDS": "2"}
        imported = subprocess.run([*endless_command(), "import", str(state_db), "--workspace", str(env.workspace),
                                   "--writer", "model"], capture_output=True, text=True, timeout=120,
                                  env=env.env(stalled))
        assert imported.returncode == 0, imported.stderr
        assert "imported 40 turns (80 messages)" in imported.stdout and "catching up:" in imported.stdout
        first = env.chat("New question, heron-313: how many workers? [[tools:0]] [[reply:100]]", env=stalled)
        assert turn_protocol.REFUSAL not in first.stdout and first.stdout.strip(), first.diagnostics()
        head = head_part(first_requests(env)[-1]["prompt"])
        assert re.search(r"\d+\+0\|note: \(messages \d+ to \d+ are not summarised yet", head), head[-3000:]
        assert "zoom(id, 1)" in head and "New question, heron-313: how many workers?" in head
        assert "Old answer 39: we keep eight workers." in head  # the newest imported words, whole
        with env.memory() as memory:
            assert memory.total == 82 and statuses(memory)[-1] == "completed"  # 80 imported, then the turn
            assert not all(memory.is_built(0, i) for i in range(80)), "the dead writer wrote nothing"
        # The writer is back (the imported chat has no route of its own: the offline writer writes it).
        env.chat("And the queue length, ibis-414? [[tools:0]] [[reply:100]]", resume=first.session)
        head = head_part(first_requests(env)[-1]["prompt"])
        assert "+0|note: (" not in head, head[-3000:]
        assert "ibis-414" in head
        with env.memory() as memory:
            assert all(memory.is_built(0, i) for i in range(80))
            assert count_in_memory(memory, "heron-313") == 1 and count_in_memory(memory, "ibis-414") == 1
    finally:
        env.close()


def free_dead_port() -> int:
    from hermes_env import free_port
    return free_port()  # nothing listens there: the writer's calls fail to connect


def test_two_hermes_processes_in_one_workspace(env: Env) -> None:
    a = env.chat("Chat A begins, lark-1. [[tools:0]] [[reply:100]]")
    b = env.chat("Chat B begins, owl-1. [[tools:0]] [[reply:100]]")
    env.chat("Chat A again, lark-2. [[tools:0]] [[reply:100]]", resume=a.session)
    env.chat("Chat B again, owl-2. [[tools:0]] [[reply:100]]", resume=b.session)
    requests = first_requests(env)
    assert "owl-1" in requests[2]["prompt"] and "lark-2" in requests[3]["prompt"]
    # and two turns at the same time, one per process
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda args: env.chat(*args), [
            ("Chat A third, lark-3. [[tools:0]] [[reply:100]]", a.session),
            ("Chat B third, owl-3. [[tools:0]] [[reply:100]]", b.session)]))
    assert all(run.proc.returncode == 0 for run in runs)
    with env.memory() as memory:
        assert memory.turns == 6
        for word in ("lark-1", "owl-1", "lark-2", "owl-2", "lark-3", "owl-3"):
            assert sum(m.text.count(word) for t in range(6) for m in memory.turn_messages(t)
                       if m.kind == "user") == 1, word


def test_endless_commands_and_switching_off_and_on(env: Env) -> None:
    results = env.drive({"agents": {"a": {}}, "turns": [
        {"agent": "a", "text": "Remember albatross-121, please. [[tools:0]] [[reply:100]]"},
        {"command": "endless", "args": "status"},
        {"command": "endless", "args": "view"},
        {"command": "endless", "args": "search albatross"},
        {"command": "endless", "args": "history", "fetch": True},
        {"command": "endless", "args": "off"},
        {"agent": "a", "text": "Off the record, petrel-131. [[tools:0]] [[reply:100]]"},
        {"command": "endless", "args": "on"},
        {"agent": "a", "text": "Back on, skua-141. [[tools:0]] [[reply:100]]"}]},
        env={"ENDLESS_RPC_PORT": str(free_dead_port())})
    status, view, search, history = (r["answer"] for r in results[1:5])
    assert "1 turn, 2 messages" in status, status
    assert view.startswith("<chat>") and "albatross-121" in view, view
    assert "albatross" in search.lower() and "0" in search, search
    assert results[4]["status"] == 200 and "<html" in results[4]["page"].lower(), results[4]
    requests = env.chat_requests()
    off = [r["prompt"] for r in requests if "petrel-131" in person_part(r["prompt"])][0]
    on = [r["prompt"] for r in requests if "skua-141" in person_part(r["prompt"])][0]
    assert not person_part(off).lstrip().startswith("<chat>") and "albatross-121" in off  # Hermes's own history
    assert person_part(on).lstrip().startswith("<chat>")
    with env.memory() as memory:
        users = [memory.turn_messages(t)[0].text for t in range(memory.turns)]
    assert len(users) == 2 and "petrel-131" not in " ".join(users), users
    cli = env.hermes_cli(["endless", "view"])
    assert cli.returncode == 0 and "albatross-121" in cli.stdout, cli.stderr[-2000:]


def test_when_the_memory_fails_the_turn_goes_out_without_the_history(env: Env) -> None:
    first = env.chat("Keep this private, condor-151. [[tools:0]] [[reply:100]]")
    broken = env.tmp / "not-a-folder"
    broken.write_text("a file where the memory root should be\n")
    second = env.chat("Next question, rhea-161. [[tools:0]] [[reply:100]]", resume=first.session,
                      env={"ENDLESS_HOME": str(broken)})
    assert "rhea-161" in second.stdout
    request = first_requests(env)[-1]["prompt"]
    assert [role for role, _ in segments(request)] == ["tools", "system", "user"]
    assert "condor-151" not in request  # never the full history
    assert "Endless could not load this chat's memory" in person_part(request)
    # once the memory is back, the message Hermes kept but Endless never saw is reconciled, once
    env.chat("Memory is back, emu-171. [[tools:0]] [[reply:100]]", resume=first.session)
    env.chat("And again, emu-181. [[tools:0]] [[reply:100]]", resume=first.session)
    with env.memory() as memory:
        assert statuses(memory) == ["completed", "interrupted", "completed", "completed"], statuses(memory)
        assert [m.kind for m in memory.turn_messages(1)] == ["user", "status"]
        assert memory.turn_messages(1)[0].text == "Next question, rhea-161. [[tools:0]] [[reply:100]]"
        assert count_in_memory(memory, "rhea-161") == 1


def test_anthropic_messages_chat_shape_marks_and_cache(tmp_path: Path) -> None:
    env = Env(tmp_path, mode="anthropic_messages", cache="anthropic")
    try:
        prompts = [f"Anthropic wire turn {n}, marker puma-{n}{n}. [[tools:0]] [[reply:150]]" for n in range(1, 5)]
        prompts[2] = "Quote my first message. [[zoom:0:1]] [[reply:200]]"
        first = env.chat(prompts[0])
        for prompt in prompts[1:]:
            env.chat(prompt, resume=first.session)
        turns = first_requests(env)
        assert len(turns) == 4
        for n, record in enumerate(turns, 1):
            assert record["api"] == "anthropic"
            parts = segments(record["prompt"])
            assert [role for role, _ in parts] == ["tools", "system", "user"], n
            assert SECTION_START in parts[1][1] and tool_names(record["prompt"])[-3:] == OUR_TOOLS
            user = parts[2][1].lstrip("\n")
            assert user.startswith("<chat>\n") and user.rstrip().endswith(prompts[n - 1])
            assert 1 <= len(record["marks"]) <= 4, record["marks"]
        ratios = [r["usage"]["read"] / r["usage"]["input"] for r in turns]
        assert all(ratio >= 0.95 for ratio in ratios[2:]), ratios
        steps = [r for r in env.chat_requests() if head_part(r["prompt"]).rstrip().endswith(prompts[2])]
        # The tool step, and any retry Hermes makes when a slow machine times a request out, reuse the head.
        assert len(steps) >= 2 and all(s["prompt"].startswith(steps[0]["prompt"].rstrip()) for s in steps[1:])
        tool_step = max(steps, key=lambda s: len(s["prompt"]))
        assert len(tool_step["prompt"]) > len(steps[0]["prompt"]), "the turn's tool step appended to its head"
        assert tool_step["usage"]["read"] / tool_step["usage"]["input"] >= 0.9, tool_step["usage"]
        with env.memory() as memory:
            assert memory.turns == 4 and [m.kind for m in memory.turn_messages(2)] == ["user", "trace", "reply"]
            assert prompts[0] in memory.turn_messages(2)[2].text  # the zoomed message quoted word for word
    finally:
        env.close()


def test_hermes_own_transcript_is_compacted_in_place(env: Env) -> None:
    import sqlite3

    turns = [{"agent": "a", "text": f"Turn {n} of a long chat, crane-{n}. [[tools:0]] [[reply:80]]"}
             for n in range(1, 7)]
    turns[3]["title"] = "Crane planning"  # Hermes names the session after a few turns
    results = env.drive({"agents": {"a": {}}, "turns": turns}, env={"ENDLESS_HERMES_TRANSCRIPT_MESSAGES": "8"})
    assert len({r["session_id"] for r in results}) == 1  # compaction kept the session id
    with sqlite3.connect(env.home / "state.db") as db:
        active = db.execute("SELECT count(*) FROM messages WHERE active = 1").fetchone()[0]
        compacted = db.execute("SELECT count(*) FROM messages WHERE compacted = 1").fetchone()[0]
    assert compacted > 0 and active <= 8 + 2, (active, compacted)
    with env.memory() as memory:
        assert memory.turns == 6 and count_in_memory(memory, "crane-") == 6
        assert [memory.turn(t).title for t in range(6)] == [""] * 3 + ["Crane planning"] * 3
        # the writer route is the chat's own model, recorded for this session (no key)
        recorded = recorded_routes(memory).get(results[0]["session_id"])
        route = {k: recorded.route.get(k) for k in ("provider", "model", "base_url")}
        assert route == {"provider": "openai", "model": "sim-model",
                         "base_url": f"http://127.0.0.1:{env.port}/v1"}, recorded.route
        assert "sk-sim-test" not in (memory.folder / "routes.jsonl").read_text()
    last = first_requests(env)[-1]["prompt"]
    assert head_part(last).lstrip().startswith("<chat>") and "crane-1" in head_part(last)
    assert "kept word for word in Endless's memory" not in last  # Hermes's note never reaches the model


def test_an_interrupt_while_waiting_for_the_writer_stops_the_turn(tmp_path: Path) -> None:
    env = Env(tmp_path, endless_env={"ENDLESS_RECENT_BLOCK_BYTES": "2000"})
    try:
        dead = free_dead_port()
        stalled = {"ENDLESS_WRITER_ROUTE": f'{{"provider": "openai", "model": "w", "base_url": '
                                           f'"http://127.0.0.1:{dead}/v1", "max_retries": 0, "timeout": 2}}',
                   "ENDLESS_TURN_WAIT_SECONDS": "60"}
        long_text = "A long note, shrike-171. " + " ".join(f"entry{i} more words" for i in range(220))
        results = env.drive({"agents": {"a": {}}, "turns": [
            {"agent": "a", "text": long_text + " [[tools:0]] [[reply:100]]"},
            {"agent": "a", "text": "Quick one, vireo-181. [[tools:0]] [[reply:100]]", "interrupt_after": 3}]},
            env=stalled)
        assert results[1]["interrupted"] is True, results
        assert results[1]["seconds"] < 30, results  # the wait ended with the interrupt, not at its 60 s limit
        assert not any("vireo-181" in r["prompt"] and "<chat>" in head_part(r["prompt"])
                       for r in env.chat_requests())  # it never went out with the view
        with env.memory() as memory:
            assert statuses(memory) == ["completed", "stopped"]
            assert [m.kind for m in memory.turn_messages(1)] == ["user", "status"]
            assert count_in_memory(memory, "vireo-181") == 1
    finally:
        env.close()


def test_a_long_turn_rebuilds_its_head_and_keeps_going(tmp_path: Path) -> None:
    """The turn protocol's long-turn refresh (a quarter of the window) through Hermes: a 64K window, a zoom
    answer of 18 KB.  The steps so far are committed as a ``continued`` part and the head is rebuilt."""
    env = Env(tmp_path, config={"model": {"context_length": 65536}})
    try:
        big = "A big note, tanager-191. " + " ".join(f"paragraph{i} holds some detail" for i in range(600))
        first = env.chat(big + " [[tools:0]] [[reply:100]]", toolsets="endless")
        env.chat("Read my big note back, then tell me the date. [[zoom:0:1]] [[call:date]] [[reply:150]]",
                 resume=first.session, toolsets="endless")
        # The turn's own requests carry the view; Hermes's side calls (a title, say) quote the message too.
        steps = [r for r in env.chat_requests() if "<chat>" in head_part(r["prompt"])
                 and ("Read my big note back" in head_part(r["prompt"])
                      or "This turn is still going" in head_part(r["prompt"]))]
        assert len(steps) >= 2, [head_part(r["prompt"])[-200:] for r in steps]
        assert "This turn is still going" not in head_part(steps[0]["prompt"])
        rebuilt = steps[1]["prompt"]
        assert "This turn is still going" in head_part(rebuilt)
        assert [role for role, _ in segments(rebuilt)] == ["tools", "system", "user"]  # the steps moved into it
        # The scripted agent reads the rebuilt head as its turn carried on: the person's message is kept
        # in it, the note counts the zoom as made, so it calls date and then replies.
        assert "Read my big note back" in head_part(rebuilt) and "(1 tool call)" in head_part(rebuilt)
        assert len(steps) == 3, [head_part(r["prompt"])[-200:] for r in steps]
        for later in steps[2:]:
            assert later["prompt"].startswith(rebuilt.rstrip())  # the rebuilt head is frozen in turn
        with env.memory() as memory:
            statuses_ = statuses(memory)
            assert statuses_[0] == "completed" and statuses_[1] == "continued" and statuses_[-1] == "completed"
            assert [m.kind for m in memory.turn_messages(1)] == ["user", "trace"]
            assert "tanager-191" in memory.turn_messages(1)[1].text  # the zoom result is in the trace
            last_part = memory.turn_messages(len(statuses_) - 1)
            assert [m.kind for m in last_part] == ["trace", "reply"] and "did: date" in last_part[0].text
    finally:
        env.close()
