"""End to end through the real Hermes Agent 0.19.0: ``/endless …`` before a chat's first message,
``hermes endless …`` exit codes, the History page on a taken port, and a turn at Hermes's iteration limit.

The slash commands are typed into a real ``HermesCLI`` (``hermes_driver.py``,
``"cli": true``), so the plugin finds the chat the way it does in a terminal.
Skipped when the Hermes venv (with Endless installed in it) is missing.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from commands import endless_command
from endless.core.store.keys import workspace_key
from endless.turn import head as turn_head
from hermes_env import Env, HERMES_PYTHON, hermes_ready, segments, user_texts

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

SECTION_START = turn_head.system_prompt("").split("\n", 1)[0]
SUMMARY_ASK = "You've reached the maximum number of tool-calling iterations allowed."


@pytest.fixture
def env(tmp_path: Path):
    environment = Env(tmp_path)
    yield environment
    environment.close()


def test_commands_before_the_first_message_and_off_from_the_start(env: Env) -> None:
    """A new CLI chat: /endless status before any message names the folder's memory (none yet, then the
    one an earlier chat filled); /endless off before the first message makes it a plain Hermes chat."""
    first = env.drive({"agents": {"a": {"cli": True}}, "turns": [
        {"command": "endless", "args": "status", "in": "a"},
        {"command": "endless", "args": "off", "in": "a"},
        {"agent": "a", "text": "Off from the start, grebe-211. [[tools:0]] [[reply:100]]"},
        {"command": "endless", "args": "on", "in": "a"},
        {"agent": "a", "text": "Now remember plover-201, please. [[tools:0]] [[reply:100]]"}]})
    assert "no memory for this folder yet" in first[0]["answer"], first[0]
    assert "Endless is off for this chat" in first[1]["answer"], first[1]
    off = [r["prompt"] for r in env.chat_requests() if "grebe-211" in user_texts(r["prompt"])[-1]][0]
    assert not user_texts(off)[0].lstrip().startswith("<chat>") and SECTION_START not in off  # Hermes's own request
    on = [r["prompt"] for r in env.chat_requests() if "plover-201" in user_texts(r["prompt"])[-1]][0]
    assert user_texts(on)[0].lstrip().startswith("<chat>")
    with env.memory() as memory:
        people = [m.text for t in range(memory.turns) for m in memory.turn_messages(t) if m.kind == "user"]
    assert people == ["Now remember plover-201, please. [[tools:0]] [[reply:100]]"], people

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:  # a second chat in the folder: its commands, before its first message, read the memory the first filled
        second = env.drive({"agents": {"b": {"cli": True}}, "turns": [
            {"command": "endless", "args": "status", "in": "b"},
            {"command": "endless", "args": "view", "in": "b"},
            {"command": "endless", "args": "search plover", "in": "b"},
            {"command": "endless", "args": "history", "fetch": True, "in": "b"}]},
            env={"ENDLESS_RPC_PORT": str(port)})
    finally:
        taken.close()
    status, view, search, history = second
    assert f"Endless memory {workspace_key(None, env.workspace).memory_id} " in status["answer"], status
    assert "1 turn, 2 messages" in status["answer"], status
    assert view["answer"].lstrip().startswith(("<chat>", "(the memory is empty)")), view  # its lines, as written so far
    assert "0+0 ·" in search["answer"] and "plover" in search["answer"], search
    # the configured port is taken: the page is served on a free one, and says so
    assert history["status"] == 200 and "<html" in history["page"].lower(), history
    assert f"port {port} is in use" in history["answer"], history


def test_hermes_endless_exits_with_the_codes_of_endless(env: Env) -> None:
    env.chat("Remember dunlin-231, please. [[tools:0]] [[reply:100]]")
    cases = [(["zoom", "999", "1"], 1), (["zoom", "nonsense"], 2), (["view"], 0), (["search", "dunlin"], 0)]
    for args, code in cases:
        hermes = env.hermes_cli(["endless", *args])
        endless = subprocess.run(endless_command() + args, env=env.env(), cwd=env.workspace,
                                 capture_output=True, text=True, timeout=60)
        assert (hermes.returncode, endless.returncode) == (code, code), (args, hermes.stderr[-1500:],
                                                                        endless.stderr[-1500:])
    found = env.hermes_cli(["endless", "search", "dunlin"])
    assert re.match(r"^\d+\+0 · ", found.stdout), found.stdout  # a hit named as the recall_search tool names it


@pytest.mark.parametrize("mode", ["chat_completions", "anthropic_messages"])
def test_a_turn_at_the_iteration_limit_asks_for_its_summary_through_the_head(mode: str, tmp_path: Path) -> None:
    """Hermes's summary call at max_turns builds its own request past the middleware: it still carries
    the view and the turn's steps, never the raw transcript, and the turn is remembered."""
    env = Env(tmp_path, mode=mode, config={"agent": {"max_turns": 2}})
    try:
        earlier = "An earlier fact, avocet-241. [[tools:0]] [[reply:100]]"
        first = env.chat(earlier, toolsets="endless")
        run = env.chat("Look around a lot, sanderling-251. [[tools:6]] [[reply:120]]", resume=first.session,
                       toolsets="endless")
        asked = [r["prompt"] for r in env.requests() if SUMMARY_ASK in r["prompt"]]
        assert len(asked) == 1, run.diagnostics()
        summary = asked[0]
        roles = [role for role, _ in segments(summary)]
        assert roles[0] == "system" and "tools" not in roles, roles  # no tools: Hermes asks for words only
        system = segments(summary)[0][1]
        assert SECTION_START in system
        head = user_texts(summary)[0]
        assert head.lstrip().startswith("<chat>") and "sanderling-251" in head
        assert earlier not in [text.strip() for text in user_texts(summary)], "the earlier message sent raw"
        # the turn's two steps (on the Anthropic wire a tool result is a user message, the question joins the last)
        steps = roles.count("tool") if mode == "chat_completions" else len(user_texts(summary)) - 1
        assert roles.count("assistant") == 2 and steps == 2, roles
        assert SUMMARY_ASK in user_texts(summary)[-1]
        with env.memory() as memory:
            assert memory.turns == 2 and memory.turn(1).status == "completed"
            kinds = [m.kind for m in memory.turn_messages(1)]
        assert kinds[0] == "user" and kinds[-1] == "reply", kinds
    finally:
        env.close()


def test_stored_controls_reach_no_terminal_through_hermes(env: Env, tmp_path: Path) -> None:
    """Issue 33 item 4: a reply holding ``ESC [2J`` or ``ESC [31m`` cleared the screen or coloured
    ``/endless view`` and ``hermes endless view``; now every control is shown escaped (``\\x1b``)."""
    source = tmp_path / "hostile.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in [
        {"role": "user", "content": "clear \x1b[2J osprey-17 \x1b]52;c;aGk=\x07 \u202eevil\nnext", "session": "h",
         "at": "2026-03-02T09:00:00Z", "title": "Birds \x1b[31m red"},
        {"role": "assistant", "content": "red \x1b[31m noted \x9b0m", "session": "h", "at": "2026-03-02T09:00:05Z"}]))
    imported = subprocess.run([*endless_command(), "import", "--workspace", str(env.workspace), str(source)],
                              env=env.env(), capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    # (the CLI's prompt_toolkit output ends its own lines with \r\n: a stored \r would be shown as "\\r")
    raw = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    answers = env.drive({"agents": {"a": {"cli": True}}, "turns": [
        {"command": "endless", "args": "view", "in": "a"},
        {"command": "endless", "args": "search osprey", "in": "a"}]})
    for answer in answers:
        assert "osprey" in answer["answer"] and not raw.search(answer["answer"]), repr(answer["answer"])
    assert "clear \\x1b[2J osprey-17" in answers[0]["answer"] and "\\u202eevil" in answers[0]["answer"]
    for args in (["view"], ["history"], ["search", "osprey"], ["zoom", "0", "1"]):
        shown = env.hermes_cli(["endless", *args])
        assert shown.returncode == 0 and "osprey" in shown.stdout, (args, shown.stderr[-1500:])
        assert not raw.search(shown.stdout), (args, repr(shown.stdout))
