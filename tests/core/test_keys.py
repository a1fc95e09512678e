"""Which memory a chat belongs to, and binding sessions (DESIGN §2.1)."""

from __future__ import annotations

import hashlib
import itertools
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from endless.core.store import sessions
from endless.core.store.keys import Key, InvalidKey, gateway_key, workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings

import harness  # noqa: E402


def _maybe_key(profile, platform, conversation):
    try:
        key = gateway_key(profile, platform, conversation)
        key.memory_id
        return key
    except InvalidKey:
        return None


# -- gateway conversations ------------------------------------------------------------


def test_the_memory_id_is_the_documented_hash() -> None:
    key = gateway_key(None, "telegram", "12345")
    assert key == Key("endless", "telegram:12345")
    assert key.memory_id == hashlib.sha256(b"endless\ntelegram:12345").hexdigest()[:16]
    assert gateway_key("default", "telegram", "12345") == key
    assert gateway_key("work", "telegram", "12345").agent == "work"


def test_two_gateway_conversations_never_share_a_memory_id() -> None:
    conversations = [("telegram", "1"), ("telegram", "2"), ("discord", "1"), ("telegram", "12"),
                     ("telegram", "1:2"), ("telegram:1", "2"), ("telegram", ":1"), ("telegram:", "1"),
                     ("slack", "T01:C02"), ("slack:T01", "C02"), ("a", "b\nc"), ("a\nb", "c")]
    profiles = [None, "work", "work\ntelegram"]
    made = {}
    for profile, (platform, conversation) in itertools.product(profiles, conversations):
        key = _maybe_key(profile, platform, conversation)
        if key is None:
            continue
        made[(profile or "default", platform, conversation)] = key.memory_id
    # The ordinary ones all exist, and no two conversations share an id.
    assert ("default", "telegram", "1:2") in made and ("default", "slack", "T01:C02") in made
    assert len(set(made.values())) == len(made), "two conversations share a memory"


_PIECE = st.text(alphabet="ab:\n/", min_size=1, max_size=4)


@hsettings(max_examples=300, deadline=None)
@given(_PIECE, _PIECE, _PIECE, st.sampled_from([None, "work"]),
       st.lists(st.tuples(st.sampled_from([None, "work", "x\nab"]), _PIECE, _PIECE), max_size=4))
def test_distinct_conversations_get_distinct_memories(a, b, c, profile, others) -> None:
    # Pieces that join into the same text in different ways, and some random ones.
    conversations = [(profile, a, f"{b}:{c}"), (profile, f"{a}:{b}", c),
                     (f"x\n{a}", b, c), ("x", f"{a}\n{b}", c), *others]
    ids = {}
    for who, platform, conversation in conversations:
        key = _maybe_key(who, platform, conversation)
        if key is not None:
            ids[(who or "default", platform, conversation)] = key.memory_id
    assert len(set(ids.values())) == len(ids), ids
    assert (profile or "default", a, f"{b}:{c}") in ids or a.startswith("/") or ":" in a


@hsettings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab:/.", min_size=1, max_size=6), st.text(alphabet="ab:/.", min_size=1, max_size=6))
def test_a_gateway_conversation_never_shares_a_workspace_memory(platform, conversation) -> None:
    key = _maybe_key(None, platform, conversation)
    if key is None:
        return
    # A folder named like the conversation's project (as far as a path can be).
    for folder in (key.project, "/" + key.project):
        assert workspace_key(None, folder).memory_id != key.memory_id, folder


def test_gateway_conversations_keep_their_own_memories(tmp_path: Path) -> None:
    one, two = gateway_key(None, "telegram", "alice"), gateway_key(None, "telegram", "bob")
    with Memory.open(one, settings=Settings(), root=tmp_path) as memory:
        memory.commit_turn("t-alice", "hi", [Message("user", "alice's secret", 1.0)])
    with Memory.open(two, settings=Settings(), root=tmp_path) as memory:
        assert memory.total == 0 and memory.folder.name == two.memory_id
        memory.commit_turn("t-bob", "hi", [Message("user", "bob's words", 1.0)])
    with Memory.open(one, settings=Settings(), root=tmp_path) as memory:
        assert [memory.message(i).text for i in range(memory.total)] == ["alice's secret"]
    assert len(list((tmp_path / "memories").iterdir())) == 2


def test_an_incomplete_gateway_key_is_refused() -> None:
    for platform, conversation in (("", "1"), ("telegram", "")):
        with pytest.raises(InvalidKey):
            gateway_key(None, platform, conversation)


# -- workspaces -----------------------------------------------------------------------


def test_a_symlinked_workspace_maps_to_its_target(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "real" / "project"
    target.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    chain = tmp_path / "chain"
    chain.symlink_to(link)
    parent_link = tmp_path / "realdir"
    parent_link.symlink_to(tmp_path / "real")
    key = workspace_key(None, target)
    assert key.project == str(target.resolve())
    monkeypatch.chdir(tmp_path)
    for way in (link, chain, parent_link / "project", str(link) + "/", "link", "./real/../link",
                target / "." / "sub" / ".."):
        assert workspace_key(None, way) == key, way
    assert workspace_key(None, tmp_path / "real").memory_id != key.memory_id
    assert workspace_key("work", link).memory_id != key.memory_id
    root = tmp_path / "root"
    with Memory.open(workspace_key(None, link), settings=Settings(), root=root) as memory:
        memory.commit_turn("cli-1", "through the link", [Message("user", "written via the link", 1.0)])
    with Memory.open(workspace_key(None, target), settings=Settings(), root=root) as memory:
        assert memory.total == 1 and memory.message(0).text == "written via the link"
        assert memory.key == key
    assert [p.name for p in (root / "memories").iterdir()] == [key.memory_id]


# -- binding sessions -----------------------------------------------------------------


@pytest.fixture
def two_keys(tmp_path: Path):
    return tmp_path / "root", workspace_key(None, tmp_path / "a"), gateway_key(None, "telegram", "b")


def test_a_session_binds_freely_before_its_first_turn(two_keys) -> None:
    root, a, b = two_keys
    first = sessions.bind(root, "s1", a, agent_name="Ada")
    assert (first.memory_id, first.bound, first.has_turns) == (a.memory_id, True, False)
    again = sessions.bind(root, "s1", b)
    assert again.memory_id == b.memory_id
    assert sessions.key_for_session(root, "s1", a) == (b, None)


def test_bind_refuses_a_session_whose_turns_are_in_another_memory(two_keys) -> None:
    root, a, b = two_keys
    sessions.bind(root, "s1", a)
    with Memory.open(a, settings=Settings(), root=root) as memory:
        memory.commit_turn("s1", "first", [Message("user", "hello", 1.0)])
    with pytest.raises(sessions.AlreadyBound):
        sessions.bind(root, "s1", b)
    # Rebinding to the memory that holds the turns is allowed, and keeps knowing the turns.
    record = sessions.bind(root, "s1", a, agent_name="Ada")
    assert (record.memory_id, record.has_turns, record.agent_name) == (a.memory_id, True, "Ada")
    with pytest.raises(sessions.AlreadyBound):
        sessions.bind(root, "s1", b)
    assert sessions.lookup(root, "s1").memory_id == a.memory_id


def test_bind_refuses_an_unbound_session_with_turns(two_keys) -> None:
    root, a, b = two_keys
    with Memory.open(a, settings=Settings(), root=root) as memory:
        turn = memory.journal("cli-chat", "unbound")
        turn.add("user", "no host bound me")
        turn.commit()
    with pytest.raises(sessions.AlreadyBound):
        sessions.bind(root, "cli-chat", b)
    assert sessions.bind(root, "cli-chat", a).has_turns
    # Another session is unaffected.
    assert sessions.bind(root, "other", b).memory_id == b.memory_id


@pytest.mark.parametrize("moment", ["die_after_log_append", "die_in_turn"])
def test_bind_refuses_after_a_crash_left_the_turn_in_a_memory(two_keys, tmp_path: Path, moment: str) -> None:
    """A process dies the moment its turn is in the order log, or with the turn journalled."""
    root, a, b = two_keys
    Memory.open(a, settings=Settings(), root=root).close()
    child = harness.Agent(tmp_path, moment)
    try:
        assert child.call(op="open", root=str(root), ws=str(tmp_path / "a"))["ok"]
        child.send(op=moment, session="doomed", text="the last words")
        assert child.reader.readline(timeout=60) is None, child.stderr()
        assert child.proc.wait(timeout=20) == -signal.SIGKILL, child.stderr()
    finally:
        child.close()
    with pytest.raises(sessions.AlreadyBound):
        sessions.bind(root, "doomed", b)
    with Memory.open(a, settings=Settings(), root=root) as memory:
        assert memory.message(0).text == "the last words" and memory.message(0).session == "doomed"
        expected = "completed" if moment == "die_after_log_append" else "interrupted"
        assert memory.turn(0).status == expected
    with pytest.raises(sessions.AlreadyBound):
        sessions.bind(root, "doomed", b)
    assert sessions.bind(root, "doomed", a).has_turns


def test_a_memory_id_is_exactly_sixteen_hex_digits() -> None:
    from endless.core.store.keys import InvalidKey, check_memory_id

    assert check_memory_id("0123456789abcdef") == "0123456789abcdef"
    for bad in ("0123456789abcdef\n", "0123456789ABCDEF", "../0123456789abc", "0123456789abcde", 16):
        with pytest.raises(InvalidKey):
            check_memory_id(bad)
