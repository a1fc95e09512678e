"""A folder's memory found by the folder's identity, and nothing a user had lost or split (issue 31 item 3).

The ``endless`` command line in real processes from a fresh ``ENDLESS_HOME``; the
memories "made before" are made by the old code itself, run from this
repository's history (tests/old_endless.py), or under the path key it used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from commands import endless_command, fresh_home
from git_repos import repo
from old_endless import old_code, run_old
from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.core.store import Message
from endless.core.store.keys import path_key, workspace_key

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git makes the repositories here")

REMOTE = "git@github.com:ana/shop.git"


def endless(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*endless_command(), *args], capture_output=True, text=True, env=env, timeout=120,
                          cwd=cwd)


def source(path: Path, *questions: str) -> Path:
    with open(path, "wb") as handle:
        for k, words in enumerate(questions):
            handle.write(orjson.dumps({"role": "user", "content": words, "at": 1.76e9 + 60 * k, "session": "s"}) + b"\n")
            handle.write(orjson.dumps({"role": "assistant", "content": f"about {words}", "at": 1.76e9 + 60 * k + 1,
                                       "session": "s"}) + b"\n")
    return path


def memories(env: dict) -> list[dict]:
    done = endless(env, "memories", "--json")
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)["memories"]


def texts(env: dict, workspace: Path) -> list[str]:
    done = endless(env, "history", "--workspace", str(workspace), "--json")
    assert done.returncode == 0, done.stderr
    return [e["text"] for turn in orjson.loads(done.stdout)["turns"] for e in turn["entries"]]


@pytest.fixture
def env(tmp_path, monkeypatch):
    home, _, env = fresh_home(tmp_path)
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    return env


def machine(tmp_path: Path, name: str, url: str) -> dict:
    """A machine's environment: an ENDLESS_HOME of its own, the one database."""
    (tmp_path / name).mkdir()
    return {**fresh_home(tmp_path / name)[2], "ENDLESS_STORE": url, "GIT_CONFIG_GLOBAL": os.devnull}


def _commit(settings: Settings, key, words: str) -> str:
    with Memory.open(key, settings=settings) as memory:
        memory.commit_turn("s", "Chat", [Message("user", words, 1.76e9), Message("reply", "ok", 1.76e9)])
        return memory.memory_id


def test_a_memory_the_old_code_made_at_the_path_stays_the_folders_and_gains_its_identity(tmp_path, env):
    code = old_code(tmp_path / "old-code")
    if code is None:
        pytest.skip("this checkout has no history to run the old code from")
    work = repo(tmp_path / "laptop" / "shop", REMOTE)
    old = run_old(code, env, str(work), "the invoice bug is in tax.py")
    assert old == path_key(None, work).memory_id != workspace_key(None, work).memory_id

    seen = endless(env, "view", "--workspace", str(work))
    assert seen.returncode == 0, seen.stderr
    assert "the invoice bug is in tax.py" in seen.stdout  # found by its path: nothing lost
    (listed,) = memories(env)
    assert listed["memoryId"] == old and listed["keyedBy"] == {"kind": "path", "value": str(work), "folder": None}
    assert listed["alsoBy"] == [{"kind": "repo", "value": "github.com/ana/shop", "folder": None, "agent": "endless"}]
    shown = endless(env, "memories")
    assert f"path {work}  (also repo github.com/ana/shop)" in shown.stdout, shown.stdout

    done = endless(env, "import", "--workspace", str(work), str(source(tmp_path / "more.jsonl", "the refund flow")))
    assert done.returncode == 0, done.stderr
    assert [m["memoryId"] for m in memories(env)] == [old]  # not split: the new turns went to the old memory
    assert texts(env, work)[:2] == ["the invoice bug is in tax.py", "noted: the invoice bug is in tax.py"]
    assert "the refund flow" in texts(env, work)

    # Another clone of the remote, at another path and spelled another way, finds it by the identity.
    other = repo(tmp_path / "elsewhere" / "Shop", "https://github.com/ana/shop")
    assert "the invoice bug is in tax.py" in texts(env, other)


def test_two_clones_with_memories_of_their_own_keep_them_and_a_new_clone_joins_the_first(tmp_path, env):
    settings = Settings(home=env["ENDLESS_HOME"])
    one, two = repo(tmp_path / "one", REMOTE), repo(tmp_path / "two", REMOTE)
    first = _commit(settings, path_key(None, one), "made in clone one")  # as the old code keyed them
    second = _commit(settings, path_key(None, two), "made in clone two")
    assert "made in clone one" in texts(env, one)  # each folder's own memory, as before
    assert "made in clone two" in texts(env, two)
    assert "made in clone one" not in texts(env, two)
    # The identity went to the first opened; a clone made now shares that one.
    third = repo(tmp_path / "three", "ssh://git@github.com/ana/shop")
    assert texts(env, third)[0] == "made in clone one"
    listed = {m["memoryId"]: m for m in memories(env)}
    assert set(listed) == {first, second}
    assert [a["value"] for a in listed[first]["alsoBy"]] == ["github.com/ana/shop"] and listed[second]["alsoBy"] == []


def test_an_id_file_written_later_keeps_the_memory_and_a_fork_with_it_finds_it(tmp_path, env):
    work = repo(tmp_path / "shop", REMOTE)
    done = endless(env, "import", "--workspace", str(work), str(source(tmp_path / "a.jsonl", "the tax rules")))
    assert done.returncode == 0, done.stderr
    (made,) = memories(env)
    assert made["keyedBy"]["kind"] == "repo"
    (work / ".endless-id").write_text("shop-billing\n")
    assert texts(env, work)[0] == "the tax rules"
    fork = repo(tmp_path / "fork", "git@github.com:bob/shop.git")  # another remote, the same id file
    (fork / ".endless-id").write_text("shop-billing\n")
    assert texts(env, fork)[0] == "the tax rules"
    (listed,) = memories(env)
    assert listed["memoryId"] == made["memoryId"]
    assert {(a["kind"], a["value"]) for a in listed["alsoBy"]} == {("id", "shop-billing")}


def test_a_subfolder_is_a_memory_of_its_own_found_in_every_clone(tmp_path, env):
    work = repo(tmp_path / "laptop", REMOTE)
    (work / "docs").mkdir()
    done = endless(env, "import", "--workspace", str(work / "docs"), str(source(tmp_path / "a.jsonl", "the docs")))
    assert done.returncode == 0, done.stderr
    other = repo(tmp_path / "desktop", "https://github.com/ana/shop.git")
    (other / "docs").mkdir()
    assert texts(env, other / "docs")[0] == "the docs"
    missing = endless(env, "view", "--workspace", str(other))
    assert missing.returncode == 1 and "has no memory yet" in missing.stderr
    (listed,) = memories(env)
    assert listed["keyedBy"] == {"kind": "repo", "value": "github.com/ana/shop", "folder": "docs"}


def test_a_bad_id_file_is_said_with_its_path_and_changes_nothing(tmp_path, env):
    work = repo(tmp_path / "shop", REMOTE)
    (work / ".endless-id").write_text("two words\n")
    for args in (["view", "--workspace", str(work)], ["import", "--workspace", str(work),
                                                      str(source(tmp_path / "a.jsonl", "x"))]):
        done = endless(env, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert str(work / ".endless-id") in done.stderr and "not an id" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (Path(env["ENDLESS_HOME"]) / "memories").exists() or memories(env) == []


def test_on_a_database_another_machine_finds_the_old_memory_by_the_folders_identity(tmp_path, pg_store_url):
    """The laptop's memory, made under the laptop's path (as every Endless before identities made it); the
    desktop's checkout is elsewhere.  (No released Endless kept memories in a database, and the store's
    tables have changed since the first ones: the memory is made here under the key the old code made.)"""
    laptop, desktop = machine(tmp_path, "laptop", pg_store_url), machine(tmp_path, "desktop", pg_store_url)
    here = repo(tmp_path / "laptop" / "src" / "shop", REMOTE)
    there = repo(tmp_path / "desktop" / "code" / "Shop", "https://github.com/ana/shop.git")
    old = _commit(Settings(home=laptop["ENDLESS_HOME"], store=pg_store_url), path_key(None, here),
                  "the invoice bug is in tax.py")
    assert old == path_key(None, here).memory_id
    # The laptop's first command with this Endless records the identity beside the path, in the database.
    assert "the invoice bug is in tax.py" in endless(laptop, "view", "--workspace", str(here)).stdout
    assert texts(desktop, there)[0] == "the invoice bug is in tax.py"
    done = endless(desktop, "import", "--workspace", str(there), str(source(tmp_path / "d.jsonl", "written on the desktop")))
    assert done.returncode == 0, done.stderr
    assert "written on the desktop" in texts(laptop, here)  # one memory, both machines
    (listed,) = memories(desktop)
    assert listed["memoryId"] == old and listed["keyedBy"]["value"] == str(here)
    assert [(a["kind"], a["value"]) for a in listed["alsoBy"]] == [("repo", "github.com/ana/shop")]


def test_on_a_database_a_folder_opened_first_elsewhere_is_one_memory_everywhere(tmp_path, pg_store_url):
    machines = [machine(tmp_path, name, pg_store_url) for name in ("a", "b")]
    folders = [repo(tmp_path / "a" / "shop", REMOTE), repo(tmp_path / "b" / "x" / "shop", "ssh://git@github.com/ana/shop")]
    for k, (env, folder) in enumerate(zip(machines, folders)):
        done = endless(env, "import", "--workspace", str(folder), str(source(tmp_path / f"{k}.jsonl", f"from {k}")))
        assert done.returncode == 0, done.stderr
        if k == 0:  # the other machine opens it by its id before it ever used the folder
            (made,) = memories(machines[0])
            seen = endless(machines[1], "view", "--memory", made["memoryId"])
            assert seen.returncode == 0 and "from 0" in seen.stdout, seen.stderr
    assert texts(machines[0], folders[0]) == texts(machines[1], folders[1])
    assert {"from 0", "from 1"} <= set(texts(machines[0], folders[0]))
    (listed,) = memories(machines[1])
    assert listed["keyedBy"] == {"kind": "repo", "value": "github.com/ana/shop", "folder": None}


def _claude_turn(path: Path, workspace: Path, session: str, prompt: str, reply: str) -> None:
    """A Claude Code transcript holding one finished turn, as the CLI writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    events = [{"type": "user", "message": {"role": "user", "content": prompt}},
              {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]}}]
    parent = None
    with open(path, "w") as handle:
        for n, event in enumerate(events):
            uid = f"{session[:8]}-0000-4000-8000-{n:012d}"
            handle.write(orjson.dumps({**event, "parentUuid": parent, "uuid": uid, "isSidechain": False,
                                       "timestamp": f"2026-12-04T10:00:0{n}.000Z", "cwd": str(workspace),
                                       "sessionId": session, "version": "2.1.332"}).decode() + "\n")
            parent = uid


def _hook(env: dict, workspace: Path, event: str, session: str, transcript: Path | None = None,
          **fields: object) -> subprocess.CompletedProcess:
    payload = {"session_id": session, "transcript_path": str(transcript or ""), "cwd": str(workspace),
               "hook_event_name": event, **fields}
    return subprocess.run([*endless_command(), "hook", "claude", event], input=orjson.dumps(payload),
                          capture_output=True, env={**env, "ENDLESS_HOOK_WAIT": "60"}, cwd=workspace, timeout=120)


def test_a_claude_code_session_on_one_machine_is_handed_over_in_the_others_checkout(tmp_path, pg_store_url):
    laptop, desktop = machine(tmp_path, "laptop", pg_store_url), machine(tmp_path, "desktop", pg_store_url)
    here = repo(tmp_path / "laptop" / "src" / "shop", REMOTE)
    there = repo(tmp_path / "desktop" / "code" / "shop", "https://github.com/ana/shop")
    laptop["HOME"] = str(tmp_path / "laptop" / "user")  # Claude Code keeps transcripts under ~/.claude/projects
    transcript = tmp_path / "laptop" / "user" / ".claude" / "projects" / "-src-shop" / "s.jsonl"
    session = "5d1e4c2a-1111-4222-8333-944455556666"
    _claude_turn(transcript, here, session, "Make the export handle refunds", "Refund rows are written now.")
    stopped = _hook(laptop, here, "Stop", session, transcript, stop_hook_active=False)
    assert (stopped.returncode, stopped.stderr) == (0, b"")
    start = _hook(desktop, there, "SessionStart", "9" * 36, source="startup")
    assert start.returncode == 0 and start.stderr == b""
    told = orjson.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert told.startswith("[Endless] This folder's memory holds 1 turn")
    assert "Make the export handle refunds" in told and "Refund rows are written now." in told


def test_a_hook_in_a_folder_with_a_bad_id_file_exits_0_and_says_why_in_its_log(tmp_path, env):
    work = repo(tmp_path / "shop", REMOTE)
    (work / ".endless-id").write_text("not one id\n")
    transcript = tmp_path / ".claude" / "projects" / "-shop" / "s.jsonl"
    _claude_turn(transcript, work, "7" * 36, "hello", "hi")
    done = _hook({**env, "HOME": str(tmp_path)}, work, "Stop", "7" * 36, transcript)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    log = (Path(env["ENDLESS_HOME"]) / "logs" / "agents.log").read_text()
    assert ".endless-id" in log and "not an id" in log
    assert memories(env) == []
