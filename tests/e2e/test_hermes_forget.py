"""End to end through the real Hermes Agent 0.19.0: ``endless forget … --hermes`` reaches Hermes's own copy.

One real ``hermes chat -Q -q`` turn against the simulator, with Hermes's
per-session JSON snapshots on, then ``endless forget --turn 0 --hermes``:
no 12-byte piece of the forgotten texts is left in ``state.db``, its
write-ahead file or the ``sessions/`` folder, the rows keep their place as
tombstones, and ``hermes --resume`` still loads the session.  Skipped when the
Hermes venv (with Endless installed in it) is missing.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from commands import endless_command
from endless.core.words import count
from hermes_env import Env, HERMES_PYTHON, hermes_ready

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

SECRET = "My locker code is kittiwake-4417-lärkspür, keep it safe [[tools:0]] [[reply:60]]"
PIECE = 12


def pieces(text: str) -> set[bytes]:
    """Every 12-byte piece of ``text`` outside the simulator's ``[[…]]`` marks (a later message has them too)."""
    found = set()
    for part in re.split(r"\s*\[\[[^\]]*\]\]\s*", text):
        data = part.encode("utf-8")
        found |= {data[k:k + PIECE] for k in range(len(data) - PIECE + 1)}
    return found


def copies(home: Path, wanted: set[bytes]) -> list[str]:
    """Each file of state.db, its -wal and sessions/ holding one of the pieces."""
    files = [home / "state.db", home / "state.db-wal", *sorted((home / "sessions").rglob("*"))]
    return [str(p) for p in files if p.is_file() and any(w in p.read_bytes() for w in wanted)]


def test_forget_with_hermes_replaces_hermes_s_copy_and_the_session_still_resumes(tmp_path: Path) -> None:
    env = Env(tmp_path, config={"sessions": {"write_json_snapshots": True}})
    try:
        first = env.chat(SECRET)
        with env.memory() as memory:
            said = [m.text for m in memory.turn_messages(0)]
        assert said[0] == SECRET and len(said) == 2, said
        wanted = set().union(*(pieces(text) for text in said))
        held = copies(env.home, wanted)
        assert any("/state.db" in p for p in held) and any("/sessions/" in p for p in held), held  # else it proves nothing

        run = lambda *a: subprocess.run(endless_command() + list(a), capture_output=True, text=True,  # noqa: E731
                                        env=env.env(), cwd=env.workspace, timeout=120)
        dry = run("forget", "--turn", "0", "--hermes", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "would replace the text of 2 rows of state.db and 1 session file" in dry.stdout, dry.stdout
        assert copies(env.home, wanted)  # the dry run changed nothing

        done = run("forget", "--turn", "0", "--hermes")
        assert done.returncode == 0, done.stderr
        assert "replaced the text of 2 rows of state.db and 1 session file" in done.stdout, done.stdout
        assert "provider" in done.stderr and "backups" in done.stderr, done.stderr  # still said what is not reached
        assert copies(env.home, wanted) == []
        with sqlite3.connect(env.home / "state.db") as db:
            rows = db.execute("SELECT role, content FROM messages WHERE session_id = ? ORDER BY id",
                              (first.session,)).fetchall()
        assert [role for role, _ in rows] == ["user", "assistant"], rows  # the transcript keeps its shape
        assert all(content.startswith("(forgotten on ") for _, content in rows), rows

        again = env.chat("Still there? wagtail-5123 [[tools:0]] [[reply:40]]", resume=first.session)
        assert again.session == first.session, again.diagnostics()
        later = [w for r in env.chat_requests() if "wagtail" in r["prompt"] for w in wanted if w in r["prompt"].encode()]
        assert later == [], later  # the resumed chat's requests show the tombstones
    finally:
        env.close()


def test_forget_with_hermes_refuses_without_the_plugin(tmp_path: Path) -> None:
    env = Env(tmp_path)
    try:
        env.chat("A short hello, dipper-3391 [[tools:0]] [[reply:30]]")
        (env.home / "endless-install.json").unlink()
        (env.home / "config.yaml").write_text("model: {}\n")
        refused = subprocess.run(endless_command() + ["forget", "0", "--hermes"], capture_output=True, text=True,
                                 env=env.env(), cwd=env.workspace, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr == (f"[endless] --hermes: the Endless plugin is not installed in the Hermes home "
                                  f"{env.home} (set HERMES_HOME to the right one, or run `endless hermes install`); "
                                  "nothing was forgotten\n")
        with env.memory() as memory:
            assert memory.message(0).text.startswith("A short hello")
    finally:
        env.close()


def test_the_slash_command_in_a_running_hermes_replaces_hermes_s_copy_too(tmp_path: Path) -> None:
    """``/endless forget … confirm`` typed into a real CLI, its own SessionDB connection open meanwhile."""
    env = Env(tmp_path)
    try:
        text = "The alarm code is shearwater-8803-bracken [[tools:0]] [[reply:40]]"
        out = env.drive({"agents": {"a": {"cli": True}}, "turns": [
            {"agent": "a", "text": text},
            {"command": "endless", "args": "forget 0", "in": "a"},
            {"command": "endless", "args": "forget 0 confirm", "in": "a"},
            {"agent": "a", "text": "And now? pipit-7712 [[tools:0]] [[reply:40]]"}]})
        turn, asked, done, after = out
        assert "Hermes's own copy goes too: 1 row of its state.db and 0 session files" in asked["answer"], asked
        assert "Forgot 1 message" in done["answer"] and "Hermes's copy: 1 row of state.db" in done["answer"], done
        assert "provider" in done["answer"] and "backups" in done["answer"], done
        assert after["completed"], after
        assert copies(env.home, pieces(text)) == []
        with sqlite3.connect(env.home / "state.db") as db:
            rows = db.execute("SELECT role, content FROM messages WHERE session_id = ? ORDER BY id",
                              (turn["session_id"],)).fetchall()
        assert rows[0][0] == "user" and rows[0][1].startswith("(forgotten on "), rows
        assert [role for role, _ in rows] == ["user", "assistant", "user", "assistant"], rows
    finally:
        env.close()


PASSWORD = "hunter2-zulu"


def test_forget_matching_in_a_chat_reaches_its_title_everywhere_and_off_keeps_it_out(tmp_path: Path) -> None:
    """Issue #33, item 2: a chat titled from a secret; ``/endless forget matching … confirm`` erases the
    title from the memory, Hermes's ``sessions.title`` and every later request; search finds the title
    first; ``/endless off`` afterwards is refused, since Hermes's running transcript holds the words."""
    env = Env(tmp_path)
    try:
        title = f"Staging box {PASSWORD}"
        out = env.drive({"agents": {"a": {"cli": True}, "b": {"cli": True}}, "turns": [
            {"agent": "a", "text": f"My password for the staging box is {PASSWORD} [[tools:0]] [[reply:40]]"},
            # as Hermes's titler names the chat from its first message, after the first exchange
            {"agent": "a", "title": title, "text": "What else is on the list? [[tools:0]] [[reply:40]]"},
            {"command": "endless", "args": "search staging", "in": "a"},
            {"command": "endless", "args": f"forget matching {PASSWORD}", "in": "a"},
            {"command": "endless", "args": f"forget matching {PASSWORD} confirm", "in": "a"},
            {"command": "endless", "args": "view", "in": "a"},
            {"command": "endless", "args": f"search {PASSWORD}", "in": "a"},
            {"agent": "a", "text": "And what now, sandpiper-90? [[tools:0]] [[reply:40]]"},
            {"command": "endless", "args": "off", "in": "a"},
            {"agent": "a", "text": "Still with me, dunlin-31? [[tools:0]] [[reply:40]]"},
            {"agent": "b", "text": "A second chat, godwit-12. [[tools:0]] [[reply:40]]"},
            {"agent": "b", "title": "Deploy key AKIAIOSFODNN7EXAMPLE", "text": "More, godwit-13. [[tools:0]] [[reply:40]]"},
        ]})
        search, asked, done, view, after, _, off, _, _, _ = [item for item in out if "answer" in item or "agent" in item][2:]
        assert f"the chat's title: «**Staging** box {PASSWORD}»" in search["answer"], search
        assert "1 chat title" in asked["answer"] and title in asked["answer"], asked
        # The person's message holds the password; a reply may too (the scripted model names facts of the
        # conversation, as the writer's timing lets it see them): the forget takes what its dry run listed.
        listed = re.search(r"This would forget (\d+) messages? and 1 chat title", asked["answer"])
        assert listed and int(listed.group(1)) >= 1 and "  0 (user): " in asked["answer"], asked
        assert f"Forgot {count(int(listed.group(1)), 'message')} and 1 chat title" in done["answer"], done
        assert "1 session title cleared" in done["answer"], done
        assert PASSWORD not in view["answer"], view
        assert "No hits" in after["answer"], after
        assert "Endless stays on for this chat" in off["answer"] and "hermes --resume" in off["answer"], off

        later = [r["prompt"] for r in env.chat_requests() if "sandpiper-90" in r["prompt"] or "dunlin-31" in r["prompt"]]
        assert len(later) >= 2 and not [p for p in later if PASSWORD in p], later  # no request after sends it
        with sqlite3.connect(env.home / "state.db") as db:
            titles = [t for (t,) in db.execute("SELECT title FROM sessions WHERE title IS NOT NULL")]
        assert not [t for t in titles if PASSWORD in t], titles
        with env.memory() as memory:
            folder = memory.folder
            turn_titles = [memory.turn(t).title for t in range(memory.turns)]
        assert "Deploy key [redacted: aws-access-key]" in turn_titles, turn_titles  # redacted at capture
        holding = [str(p) for p in folder.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
        assert holding == [], holding
        zoomed = subprocess.run(endless_command() + ["zoom", "2", "1"], capture_output=True, text=True,
                                env=env.env(), cwd=env.workspace, timeout=120)
        assert zoomed.returncode == 0 and PASSWORD not in zoomed.stdout, zoomed.stdout + zoomed.stderr
    finally:
        env.close()
