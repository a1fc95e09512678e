"""Chat titles and other derived texts are searched and forgotten like messages (issue #33, item 2).

Driven through the ``endless`` command line as a person runs it: ``search``
finds a title's words (and says it is the title), ``forget --matching``
erases the title from every turn record, the index and the lines, and no file
of the memory, no ``view``, ``zoom`` header, ``history`` or search shows it
after.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message

import rpc_fixtures as F  # noqa: E402
from commands import endless_command, fresh_home  # noqa: E402

AT = 1_790_000_000.0
SECRET = "hunter2-zulu"
TITLE = f"Staging box password {SECRET}"


def _memory(home: Path, workspace: Path) -> tuple[str, Path]:
    """A workspace memory whose second chat is titled from its secret, with a look-back call naming
    the title (as Hermes's titler and Endless's tools make them), and every line written."""
    memory = Memory.open(workspace_key(None, workspace), settings=F.small_settings(home=str(home)),
                         clock=lambda: AT + 100)
    try:
        memory.commit_turn("s0", "Garden notes", [Message("user", "Tomatoes want sun.", AT),
                                                  Message("reply", "Six hours at least.", AT + 1)])
        memory.commit_turn("s1", "", [Message("user", f"My password for the staging box is {SECRET}", AT + 10),
                                      Message("reply", "Noted; I will not repeat it.", AT + 11)])
        memory.commit_turn("s1", TITLE, [
            Message("user", "What did I tell you before?", AT + 20),
            Message("trace", 'did: zoom {"id": 2, "n": 1}\nresult: (the message)', AT + 21,
                    writer_text=f"looked back at message 2 in «{TITLE}»"),
            Message("reply", "You told me about the staging box.", AT + 22)])
        memory.commit_turn("s1", TITLE, [Message("user", "Anything else to do?", AT + 30),
                                         Message("reply", "Rotate it soon.", AT + 31)])
        F.write_all(memory)
        return memory.memory_id, memory.folder
    finally:
        memory.close()


@pytest.fixture
def place(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    mid, folder = _memory(home, workspace)

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(endless_command() + list(args), capture_output=True, text=True, env=env,
                              cwd=workspace, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    return folder, mid, run


def _holding(folder: Path, word: str) -> list[str]:
    needle = word.encode()
    return [str(p) for p in sorted(folder.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def test_search_finds_a_title_and_says_it_is_the_title(place) -> None:
    _, _, run = place
    for query in (SECRET, f'"password {SECRET}"', r"/hunter\d-zulu/"):
        found = run("search", query)
        assert found.returncode == 0, found.stderr
        assert f"the chat's title: «{TITLE}»" in found.stdout, (query, found.stdout)
    value = orjson.loads(run("search", "staging", "--json").stdout)
    titles = [h for h in value["hits"] if h["kind"] == "title"]
    assert [(h["id"], h["sessionTitle"]) for h in titles] == [(4, TITLE)], value["hits"]
    assert run("search", "garden", "--kind", "person").stdout.count("title") == 0  # a kind filter: messages only
    first = orjson.loads(run("search", "staging", "--limit", "1", "--json").stdout)
    assert [h["kind"] for h in first["hits"]][0] == "title" and first["next"] == 1, first  # titles take no offset
    second = orjson.loads(run("search", "staging", "--limit", "1", "--offset", "1", "--json").stdout)
    assert [h["kind"] for h in second["hits"]] == ["user"] and second["hits"] != first["hits"][1:], second


def test_forget_matching_erases_the_title_everywhere(place) -> None:
    folder, mid, run = place
    dry = run("forget", "--matching", SECRET, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"'{TITLE}'" in dry.stdout and "1 chat title" in dry.stdout, dry.stdout
    assert _holding(folder, SECRET)  # the dry run changed nothing

    done = run("forget", "--matching", SECRET, "--json")
    assert done.returncode == 0, done.stderr
    value = orjson.loads(done.stdout)
    assert value["titles"] == 1 and {m["id"] for m in value["messages"]} == {2, 5}, value
    assert _holding(folder, SECRET) == []  # the log's titles, the index's chats, the lines: all of it

    for args in (("view",), ("history",), ("zoom", "4", "1"), ("zoom", "6", "1"), ("search", "staging")):
        shown = run(*args)
        assert shown.returncode == 0, (args, shown.stderr)
        assert SECRET not in shown.stdout, (args, shown.stdout)
    assert "No hits" in run("search", SECRET).stdout or run("search", SECRET).stdout == ""
    assert "nothing to forget" in run("forget", "--matching", SECRET).stderr


def test_a_match_only_in_a_title_is_forgotten_without_a_message(place) -> None:
    folder, _, run = place
    done = run("forget", "--matching", "garden NOTES")
    assert done.returncode == 0, done.stderr
    assert "forgot 0 messages, 1 chat title" in done.stdout, done.stdout
    assert "nothing to forget" not in done.stderr
    history = run("history", "--json")
    assert "Garden notes" not in history.stdout and "Tomatoes want sun." in history.stdout
    assert TITLE in history.stdout  # another chat's title stays
    assert _holding(folder, "Garden notes") == []


def test_an_imported_title_is_redacted_at_capture(tmp_path: Path) -> None:
    """A title is kept as a message is: a key in it is redacted before any file of the memory holds it."""
    home, workspace, env = fresh_home(tmp_path)
    key = "AKIAIOSFODNN7EXAMPLE"
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(orjson.dumps({"role": role, "content": text, "at": AT + k, "session": "old",
                                            "title": f"Deploy with {key}"}).decode() + "\n"
                              for k, (role, text) in enumerate([("user", "How do I deploy?"),
                                                                ("assistant", "With the key you set.")])))
    done = subprocess.run(endless_command() + ["import", str(source)], capture_output=True, text=True, env=env,
                          cwd=workspace, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    history = subprocess.run(endless_command() + ["history", "--json"], capture_output=True, text=True, env=env,
                             cwd=workspace, timeout=120)
    assert "Deploy with [redacted: aws-access-key]" in history.stdout, history.stdout
    assert _holding(home, key) == []
