"""The real interactive ``hermes`` of Hermes Agent 0.19.0 in a pseudo-terminal, against ``endless sim serve``.

A person's session, typed and read off the screen (``hermes_tui.Screen``):
``/endless status`` and ``/endless off`` before the first message, messages
with a writer that cannot write, a slow reply stopped with Ctrl-C, ``/exit``
and Hermes started again in the same folder; a message refused because
Hermes's own prompt fills the window; ``endless hermes uninstall`` and a
resumed session.  What the screen must never show: Endless's developer lines
(``[endless.``), an answer to a prompt the person did not write, Hermes's
untrue compaction notices.  Skipped when the Hermes venv (with Endless
installed in it) is missing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from commands import endless_command
from endless.sim.server import free_port
from endless.faces.hermes.plugin import REFUSED_PROMPT
from endless.turn import protocol as turn_protocol
from hermes_env import Env, HERMES_PYTHON, hermes_ready, user_texts
from hermes_tui import Screen

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

NEVER_ON_SCREEN = ("[endless.", "Preflight compression", "Compacting context", "Session compressed", "Traceback")
OFF = "Plain Hermes, please, grebe-11. [[tools:0]] [[reply:60]]"
MESSAGES = [f"Note {n} for the log, crane-{n}{n}. [[tools:0]] [[reply:60]]" for n in range(2, 7)]
REFUSED = "Where did we moor the skiff, puffin-66? [[tools:0]] [[reply:60]]"
AFTER = "Back again, a new launch: hello, tern-77. [[tools:0]] [[reply:60]]"
DUNLIN = "And once more, dunlin-88. [[tools:0]] [[reply:60]]"
SLOW = "Take your time with this one, ibis-99. [[tools:0]] [[slow:60]] [[reply:60]]"


def message_part(prompt: str) -> str:
    """What follows the head's ``[now: …]`` line: any kept messages, then the person's message."""
    last = (user_texts(prompt) or [""])[-1]
    return last.split("\n[now: ", 1)[-1].split("\n", 1)[-1].strip()


def clean(screen: Screen) -> None:
    shown = screen.text
    for text in NEVER_ON_SCREEN:
        assert text not in shown, f"{text!r} on the screen:\n{shown[shown.find(text) - 800:][:1600]}"


def test_a_person_s_sessions_in_the_terminal(tmp_path: Path) -> None:
    """Items 1, 2, 4, 7 and 8 of issue 15 as a person meets them in ``hermes``: four launches in one folder."""
    dead_writer = {"ENDLESS_WRITER_ROUTE": f'{{"provider": "openai", "model": "w", "base_url": '
                                           f'"http://127.0.0.1:{free_port()}/v1", "max_retries": 0, "timeout": 2}}',
                   "ENDLESS_HERMES_TRANSCRIPT_MESSAGES": "8", "ENDLESS_TURN_STALL_SECONDS": "1"}
    env = Env(tmp_path, config={"model": {"context_length": 65536}}, endless_env=dead_writer)
    screens: list[Screen] = []
    try:
        # 1. off before the first message: a plain Hermes turn, nothing kept; then on again
        screens.append(first := Screen(env))
        first.command("/endless off", "Endless is off for this chat")
        first.command("/endless status", "no memory for this folder yet: the first message starts it. Endless is off")
        first.ask(OFF)
        plain = [r["prompt"] for r in env.chat_requests() if OFF in (user_texts(r["prompt"]) or [""])[-1]]
        assert plain and not user_texts(plain[0])[0].lstrip().startswith("<chat>"), plain  # Hermes's own request
        assert not (env.endless_home / "memories").exists() or not any((env.endless_home / "memories").iterdir())
        first.command("/endless on", "Endless is on for this chat again")
        # a writer that cannot write; Hermes compacts its transcript at the 11th message (it asks for more than 10)
        for message in MESSAGES:
            reply = first.ask(message)
            assert len(reply.split()) >= 3, reply  # the model's own answer to the message
        session = first.exit()
        clean(first)

        # 2. Hermes's own prompt fills the window: refused, answered by Endless itself, kept
        env.set_system_prompt("Follow the house rules. " + "rule " * 62_000)
        before = len(env.chat_requests())
        screens.append(refused := Screen(env))
        reply = refused.ask(REFUSED)
        assert reply == turn_protocol.REFUSAL, reply  # the whole answer is the sentence
        assert len(env.chat_requests()) == before  # no model was asked
        refused.exit()
        clean(refused)

        # 3. the same folder again: the kept message reaches the next chat once; a slow reply stopped
        env.set_system_prompt("Follow the house rules.")
        before = len(env.chat_requests())
        screens.append(again := Screen(env))
        again.ask(AFTER)
        again.ask(DUNLIN)
        asked = [message_part(r["prompt"]) for r in env.chat_requests()[before:]]
        tern = [text for text in asked if text.endswith(AFTER)]
        assert tern and all("Kept message" in t and "puffin-66" in t for t in tern), tern
        dunlin = [text for text in asked if "dunlin-88" in text]
        assert dunlin and not any("Kept message" in t for t in dunlin), dunlin
        again.type(SLOW)
        again.wait_for("msg=interrupt", after="● Take your time")  # the turn is running: Ctrl-C stops it
        again.interrupt()
        again.wait_for("Interrupting agent", after="● Take your time")
        again.exit()
        clean(again)
        with env.memory() as memory:
            people = [m.text for t in range(memory.turns) for m in memory.turn_messages(t) if m.kind == "user"]
        assert people == MESSAGES + [REFUSED, AFTER, DUNLIN, SLOW], people  # each message typed, once
        # the refused and the stopped message are searchable once the chat ended
        found = subprocess.run(endless_command() + ["search", "--workspace", str(env.workspace), "--kind", "person",
                                                    "puffin-66", "ibis-99"],
                               capture_output=True, text=True, timeout=60, env=env.env())
        assert found.returncode == 0 and "puffin-66" in found.stdout and "ibis-99" in found.stdout, found

        # 4. uninstall: Hermes's transcript of the first session is whole again for --resume
        undo = subprocess.run(endless_command() + ["hermes", "uninstall", "--home", str(env.home)],
                              capture_output=True, text=True, timeout=60, env=env.env())
        assert undo.returncode == 0 and f"session {session}:" in undo.stderr, undo.stderr
        before = len(env.chat_requests())
        env.chat("After uninstall, what did I note? [[tools:0]] [[reply:60]]", resume=session)
        resumed = [r["prompt"] for r in env.chat_requests()[before:]
                   if "After uninstall" in (user_texts(r["prompt"]) or [""])[-1]]
        assert resumed, env.chat_requests()[before:]
        for message in [OFF] + MESSAGES:
            assert message in resumed[0], (message, resumed[0][-3000:])
        assert "kept word for word in Endless's memory" not in resumed[0]
        assert not any(REFUSED_PROMPT in r["prompt"] for r in env.requests())  # no internal prompt ever went out
    finally:
        for screen in screens:
            screen.close()
        env.close()

