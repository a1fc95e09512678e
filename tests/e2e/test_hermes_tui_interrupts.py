"""Issue 33 items 1, 3 and 5 as a person meets them in the real interactive ``hermes`` (Hermes Agent 0.19.0).

A first message Hermes interrupts (a second one typed while "Initializing
agent..." shows) stays in the memory; a first message only Hermes's store
holds is found at the next turn; a real SIGTERM mid-reply leaves no
"received signal 15" turn; the writer-failure notice prints outside the
reply's box, and ``/endless status`` and ``endless doctor`` say the writer is
failing, since when and why.  Each test drives ``hermes`` in a pseudo-terminal
(``hermes_tui.Screen``) or headless against ``endless sim serve``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from commands import endless_command
from endless.faces.hermes.host_texts import is_host_text
from endless.sim.server import free_port
from hermes_env import Env, HERMES_PYTHON, hermes_ready, user_texts
from hermes_tui import COLUMNS, REPLY_LABEL, Screen, folded

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

FIRST = "First message DELTA-4, about the heron's nest. [[tools:0]] [[slow:20]] [[reply:60]]"
SECOND = "Second message ECHO-5, what was the first about? [[tools:0]] [[reply:60]]"


def people(env: Env) -> list[str]:
    with env.memory() as memory:
        return [m.text for t in range(memory.turns) for m in memory.turn_messages(t) if m.kind == "user"]


def test_a_first_message_hermes_interrupts_is_kept(tmp_path: Path) -> None:
    """Item 1: Hermes interrupts a first message when a second comes while it starts; both stay, once."""
    env = Env(tmp_path)
    screen = None
    try:
        screen = Screen(env)
        screen.type(FIRST)
        screen.wait_for("Initializing agent", after=f"● {FIRST[:40]}")
        screen.type(SECOND)  # the agent is starting: Hermes's default busy mode interrupts the first
        screen.wait(lambda: screen.reply_to(SECOND), "the reply to the second message")
        screen.exit()
        # Hermes interrupted the first turn with the second message (its own record, cli.py:12186-12192)
        fired = (env.home / "interrupt_debug.log").read_text()
        assert "interrupt fired: msg='Second message ECHO-5" in fired, fired
        assert people(env) == [FIRST, SECOND]
        asked = [user_texts(r["prompt"])[-1] for r in env.chat_requests() if SECOND in r["prompt"]]
        assert asked and all("DELTA-4" in text for text in asked), asked  # the model is shown the first
    finally:
        if screen is not None:
            screen.close()
        env.close()


HERMES_STORE = """
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
db.create_session(session_id=sys.argv[2], source="cli", model="sim-model", cwd=sys.argv[3])
for text in sys.argv[4:]:
    db.append_message(sys.argv[2], "user", text)
db.close()
"""


def test_a_first_message_only_hermes_kept_is_found_at_the_next_turn(tmp_path: Path) -> None:
    """Item 1, the reconcile path: state.db (made by Hermes's own SessionDB) holds a session's first message
    and Hermes's own "received signal 15", the memory nothing of it; the next turn (``--resume``) keeps the
    message as an interrupted turn and leaves Hermes's text out."""
    env = Env(tmp_path)
    try:
        session = "20261204_010203_a1b2c3"
        made = subprocess.run([str(HERMES_PYTHON), "-c", HERMES_STORE, str(env.home / "state.db"), session,
                               str(env.workspace), FIRST, "received signal 15"],
                              capture_output=True, text=True, timeout=60, env=env.env())
        assert made.returncode == 0, made.stderr
        env.chat(SECOND, resume=session)
        with env.memory() as memory:
            turns = [(memory.turn(t).status, [m.text for m in memory.turn_messages(t) if m.kind == "user"])
                     for t in range(memory.turns)]
        assert turns == [("interrupted", [FIRST]), ("completed", [SECOND])], turns
        asked = [user_texts(r["prompt"])[-1] for r in env.chat_requests() if SECOND in r["prompt"]]
        assert asked and all("DELTA-4" in t and "received signal" not in t for t in asked), asked
    finally:
        env.close()


def test_sigterm_mid_reply_leaves_no_phantom_turn(tmp_path: Path) -> None:
    """Item 3: a real SIGTERM to ``hermes`` while a reply streams; Hermes sends "received signal 15" on."""
    env = Env(tmp_path)
    screen = None
    try:
        screen = Screen(env)
        screen.ask("Hello first, kestrel-1. [[tools:0]] [[reply:60]]")
        slow = "Take your time with this one, ibis-99. [[tools:0]] [[slow:30]] [[reply:60]]"
        screen.type(slow)
        screen.wait_for("msg=interrupt", after=f"● {slow[:30]}")  # the turn's request is out
        os.kill(screen.child.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while screen._read(1.0):  # False at the end of its output: Hermes has exited
            assert time.monotonic() < deadline, "hermes did not exit after SIGTERM:\n" + screen.text[-3000:]
        screen.close()
        assert people(env) == ["Hello first, kestrel-1. [[tools:0]] [[reply:60]]", slow]
        with env.memory() as memory:
            stopped = memory.turn_messages(memory.turns - 1)
        note = [m.text for m in stopped if m.kind == "status"]
        assert note and "Hermes stopped this turn itself (received signal 15)" in note[0], note
        # Hermes sent its text on as a message: no model was asked it
        asked = [user_texts(r["prompt"])[-1].strip().rsplit("\n", 1)[-1] for r in env.chat_requests()]
        assert not any(is_host_text(text) for text in asked), asked
        # the next launch, resumed: Hermes's store still has the text; no view and no request shows it
        import sqlite3

        with sqlite3.connect(env.home / "state.db") as db:
            rows = db.execute("SELECT session_id, content FROM messages WHERE role = 'user'").fetchall()
        assert ("received signal 15" in [content for _, content in rows]), rows  # what Hermes did
        env.chat("Back again, tern-77. [[tools:0]] [[reply:60]]", resume=rows[0][0])
        assert "received signal" not in " ".join(people(env))
        view = subprocess.run(endless_command() + ["view", "--workspace", str(env.workspace)],
                              capture_output=True, text=True, timeout=60, env=env.env())
        assert view.returncode == 0 and "ibis-99" in view.stdout, view
        assert "you: received signal" not in view.stdout, view.stdout
        last = [r for r in env.chat_requests() if "tern-77" in r["prompt"]]
        assert last and "you: received signal" not in last[-1]["prompt"]
        assert "|note: Hermes stopped this turn itself (received signal 15)" in last[-1]["prompt"]
    finally:
        if screen is not None:
            screen.close()
        env.close()


def unwrapped(text: str) -> str:
    """Screen text with the terminal's hard wraps undone (a full row goes on in the next), folded."""
    out = ""
    for line in text.splitlines():
        out += line + ("" if len(line) == COLUMNS else " ")
    return folded(out)


def boxes(lines: list[str]) -> list[tuple[int, int]]:
    """The (top, bottom) line numbers of each reply box on the screen."""
    found, top = [], None
    for index, line in enumerate(lines):
        edge = line.strip()
        if REPLY_LABEL in edge and edge.startswith("╭"):
            top = index
        elif top is not None and edge.startswith("╰"):
            found.append((top, index))
            top = None
    return found


def test_the_writer_failure_is_told_outside_the_reply_and_in_status_and_doctor(tmp_path: Path) -> None:
    """Item 5: a writer whose route refuses connections; the notice, status and doctor."""
    dead = {"ENDLESS_WRITER_ROUTE": f'{{"provider": "openai", "model": "w", "base_url": '
                                    f'"http://127.0.0.1:{free_port()}/v1", "max_retries": 0, "timeout": 2}}',
            "ENDLESS_WRITER_FAILING_NOTICE_SECONDS": "0"}
    env = Env(tmp_path, endless_env=dead)
    screen = None
    try:
        screen = Screen(env)
        screen.ask("Message one about owls-1. [[tools:0]] [[reply:900]]")
        # the writer's first call fails (connection refused) once the turn is in the memory
        deadline = time.monotonic() + 60
        while not any(usage.is_file() and '"outcome":"connection"' in usage.read_text()
                      for usage in (env.endless_home / "memories").glob("*/usage.jsonl")):
            assert time.monotonic() < deadline, "the writer made no failed call"
            screen._read(0.2)  # reading the screen is the wait; the file decides
        second = "Message two about owls-2. [[tools:0]] [[reply:900]]"
        screen.ask(second)
        lines = screen.lines()
        notice = [i for i, line in enumerate(lines) if "Endless: the memory's writer has been failing" in line]
        assert len(notice) == 1, "\n".join(lines[-60:])
        assert not any(top < notice[0] < bottom for top, bottom in boxes(lines)), "\n".join(lines[-60:])
        screen.command("/endless status", "writer:")
        screen.wait_for("connection", after="/endless status")
        status = unwrapped(screen.after("/endless status"))
        assert "the writer is failing: no call answered since" in status and "connection" in status, status
        assert "0.0 writer calls a minute" not in status
        screen.exit()
        doctor = subprocess.run(endless_command() + ["doctor"], capture_output=True, text=True, timeout=60,
                                env=env.env())
        assert doctor.returncode == 0, doctor  # a warning: the writer retries by itself
        said = folded(doctor.stdout + doctor.stderr)
        assert "the writer is failing: no call answered since" in said and "connection" in said, said
        assert "check the writer's route" in said, said
    finally:
        if screen is not None:
            screen.close()
        env.close()
