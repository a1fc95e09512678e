"""End to end through the real Hermes Agent 0.19.0: a refused message outlives its chat (issue 15 item 2).

Every ``hermes`` launch is a new session, so a message kept per session was
never delivered.  Here the first launch's own system prompt leaves no room for
a bounded head (the one case a turn is refused); the message is searchable at
once, and the next launch, a new session on the same memory, is shown it once.
Skipped when the Hermes venv (with Endless installed in it) is missing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from endless.turn import protocol as turn_protocol
from hermes_env import Env, HERMES_PYTHON, hermes_ready, user_texts

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

REFUSED = "Where did we park the skiff, puffin-261? [[tools:0]] [[reply:100]]"


def test_a_refused_message_is_kept_in_the_memory_and_shown_once_to_the_next_chat(tmp_path: Path) -> None:
    env = Env(tmp_path, config={"model": {"context_length": 65536}})
    try:
        env.set_system_prompt("Follow the house rules. " + "rule " * 62_000)  # no room left for the memory
        refused = env.chat(REFUSED)
        assert turn_protocol.REFUSAL in refused.stdout, refused.diagnostics()
        # Endless answered it itself: no chat request went out (its own would overflow this window), and
        # Hermes stored the sentence as the reply, not a model's answer to an internal prompt
        assert env.chat_requests() == [], [r["prompt"][-300:] for r in env.chat_requests()]
        with sqlite3.connect(env.home / "state.db") as db:
            replies = [row[0] for row in db.execute("SELECT content FROM messages WHERE session_id = ? AND "
                                                    "role = 'assistant'", (refused.session,))]
        assert replies == [turn_protocol.REFUSAL], replies
        found = env.hermes_cli(["endless", "search", "puffin-261"])
        assert found.returncode == 0 and found.stdout.startswith("0+0 · "), found.stderr[-2000:]
        history = env.hermes_cli(["endless", "history"])
        assert "kept" in history.stdout and "puffin-261" in history.stdout, history.stdout

        env.set_system_prompt("Follow the house rules.")
        before = len(env.chat_requests())
        second = env.chat("A new launch, a new session: hello, tern-271. [[tools:0]] [[reply:100]]")
        assert second.session != refused.session
        shown = [user_texts(r["prompt"])[-1] for r in env.chat_requests()[before:] if "tern-271" in user_texts(r["prompt"])[-1]]
        assert shown and all("Kept message 0, sent in" in s and "puffin-261" in s for s in shown), shown
        before = len(env.chat_requests())
        env.chat("And once more, dunlin-281. [[tools:0]] [[reply:100]]", resume=second.session)
        again = [user_texts(r["prompt"])[-1] for r in env.chat_requests()[before:] if "dunlin-281" in user_texts(r["prompt"])[-1]]
        assert again and not any("Kept message" in s for s in again), again  # delivered once
        with env.memory() as memory:
            statuses = [memory.turn(t).status for t in range(memory.turns)]
            people = [m.text for t in range(memory.turns) for m in memory.turn_messages(t) if m.kind == "user"]
        assert statuses == ["kept", "completed", "completed"], statuses
        assert sum(REFUSED in p for p in people) == 1, people  # in the log once, as the kept turn
    finally:
        env.close()
