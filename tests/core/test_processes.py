"""Several processes on one memory (DESIGN §2.5): commits, the lease, readers and settle.

Every process here is a real child (procs/agent.py) driven through pipes; the
parent knows where a child is from what it prints, never from sleeping.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from endless.core.view import tiling as views
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings

import harness  # noqa: E402

SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}


@pytest.fixture
def place(tmp_path: Path):
    root, workspace = tmp_path / "root", tmp_path / "ws"
    workspace.mkdir()
    Memory.open(workspace_key(None, workspace), settings=Settings(**SMALL), root=root).close()
    agents: list[harness.Agent] = []

    def agent(name: str, **open_args) -> harness.Agent:
        a = harness.Agent(tmp_path, name)
        agents.append(a)
        answer = a.call(op="open", root=str(root), ws=str(workspace), settings=SMALL, **open_args)
        assert answer["ok"]
        return a

    yield root, workspace, agent
    for a in agents:
        a.close()


coarser_or_equal = views.covers  # nothing merged is split again


def _open(root: Path, workspace: Path) -> Memory:
    return Memory.open(workspace_key(None, workspace), settings=Settings(**SMALL), root=root)


def _state_stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def _wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"


# -- concurrent commits and readers --------------------------------------------------


def test_two_writers_and_a_reader(place, tmp_path: Path) -> None:
    root, workspace, agent = place
    count = 250
    a, b = agent("writer-a"), agent("writer-b")
    reader = agent("reader", readonly=True)
    stop = tmp_path / "stop-reading"
    reader.send(op="read_loop", stop=str(stop))
    a.send(op="commit", name="a", count=count, store=True, refresh=True)
    b.send(op="commit", name="b", count=count, store=True, refresh=True)
    done_a, done_b = a.recv(timeout=240), b.recv(timeout=240)
    stop.touch()
    read = reader.recv(timeout=60)
    expected = {f"{name}-{i}-{k}" for name in "ab" for i in range(count) for k in range((i % 3) + 1)}
    assert read["reads"] > 50 and read["rounds"] > 10, read
    for done in (done_a, done_b):
        assert done["splits"] == [], f"a process saw a merged part split: {done['splits']}"
        assert not any("invalid" in r for r in done["reports"]), done["reports"]
    assert done_a["stored"] + done_b["stored"] > 50
    # Each writer, after its last commit, sees every turn of the other, and its views cover them.
    for who in (a, b, reader):
        state = who.call(op="state")
        assert state["problems"] == [], state["problems"]
        assert state["total"] == len(expected) == state["chain"]
        assert state["chat_total"] == state["wview_total"] == state["total"], who.name
        assert Counter(state["texts"]) == Counter(expected), who.name
        assert state["damage"] == []
    with _open(root, workspace) as memory:
        assert memory.reports == [] and memory.damage == []
        assert memory.turns == 2 * count
        statuses = {memory.turn(t).status for t in range(memory.turns)}
        assert statuses == {"completed"}
        # Both writers stored lines; the first one for each node won and no node was stored twice.
        nodes = Counter((r["l"], r["i"]) for r in map(orjson.loads, memory.tree.path.read_bytes().splitlines()))
        assert max(nodes.values()) == 1, [n for n, c in nodes.items() if c > 1][:5]
        views.validate(memory.views.chat, memory.total, memory.tree.built)
        assert any(p[0] > 0 for p in memory.views.chat.parts), "the view never merged"


def test_a_reader_never_waits_for_the_lock(place) -> None:
    root, workspace, agent = place
    with _open(root, workspace) as memory:
        memory.commit_turn("s", "t", [Message("user", "q-0-0|hello", 1.0)])
        with memory.lock:
            reader = agent("reader", readonly=True)  # opening must not take the lock either
            state = reader.call(op="state", timeout=20)
            assert state["total"] == 1 and state["texts"] == ["q-0-0"]
            assert reader.call(op="message", id=0, timeout=20)["text"] == "q-0-0|hello"


def test_a_refresh_racing_a_commit_still_catches_up(place) -> None:
    """A refresh reads the log, another process commits (and batches), then the refresh reads the view."""
    root, workspace, agent = place
    a, b = agent("a"), agent("b")
    assert b.call(op="commit", name="b", count=40, store=True)["ok"]
    a.call(op="refresh")
    a.send(op="refresh_paused")
    assert a.recv()["event"] == "paused"
    # While a is between the order log and the view, b commits until its view merges again.
    before = b.call(op="refresh")["parts"]
    for round_ in range(100):  # 31 with these texts and settings
        b.call(op="commit", name=f"c{round_}", count=1, store=True)
        if b.call(op="refresh")["parts"][: len(before)] != before:
            break
    else:
        pytest.fail("b's view never batched")
    a.send(op="go")
    assert a.recv()["ok"]
    after = a.call(op="refresh")
    mine = b.call(op="refresh")
    assert after["total"] == mine["total"]
    assert after["chat_total"] == after["total"], "the refreshing process kept a stale view"
    assert after["parts"] == mine["parts"]
    # Its next commit builds on the current view: nothing b merged is split again.
    a.call(op="commit", name="a", count=1)
    final = b.call(op="refresh")["parts"]
    assert coarser_or_equal([tuple(p) for p in final], [tuple(p) for p in mine["parts"]])


def test_opening_while_another_process_stores_lines(place, tmp_path: Path) -> None:
    """A process opening the memory reads the tree index while another stores a line."""
    root, workspace, agent = place
    b = agent("b")
    b.call(op="commit", name="short", count=6)  # free lines: the slot files exist
    b.call(op="commit", name="b", count=6, pad=200)
    jobs = [tuple(j) for j in b.call(op="ready")["jobs"] if j[0] == 0]
    assert len(jobs) >= 2
    a = harness.Agent(tmp_path, "a-paused")
    try:
        a.send(op="open", root=str(root), ws=str(workspace), settings=SMALL, pause_tree_index=True)
        assert a.recv()["event"] == "paused"
        for level, index in jobs[:2]:
            assert b.call(op="store", level=level, index=index, text=f"written {index}")["ok"]
        a.send(op="go")
        assert a.recv()["ok"]
        for level, index in jobs[:2]:
            assert a.call(op="built", level=level, index=index)["ok"], f"a lost line {level}/{index}"
        a.call(op="refresh")
        for level, index in jobs[:2]:
            assert a.call(op="built", level=level, index=index)["ok"]
        assert not {tuple(j) for j in a.call(op="ready")["jobs"]} & set(jobs[:2])
    finally:
        a.close()


# -- the writer lease ---------------------------------------------------------------


def test_exactly_one_process_wins_the_lease(place) -> None:
    root, workspace, agent = place
    a, b = agent("a"), agent("b")
    winners = Counter()
    for round_ in range(12):
        a.send(op="take")
        b.send(op="take")
        got = {"a": a.recv()["ok"], "b": b.recv()["ok"]}
        assert sorted(got.values()) == [False, True], f"round {round_}: {got}"
        winner, loser = (a, b) if got["a"] else (b, a)
        winners[winner.name] += 1
        assert winner.call(op="held")["ok"] and not loser.call(op="held")["ok"]
        assert winner.call(op="renew")["ok"] and not loser.call(op="renew")["ok"]
        assert not loser.call(op="take")["ok"], "a live, fresh lease was taken over"
        winner.call(op="release")
    assert sum(winners.values()) == 12


def test_a_stopped_holder_loses_the_lease_after_30_seconds(place) -> None:
    root, workspace, agent = place
    holder, contender = agent("holder"), agent("contender")
    assert holder.call(op="take")["ok"]
    assert not contender.call(op="take")["ok"]
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        _wait_for(lambda: _state_stopped(holder.pid))
        contender.call(op="clock", offset=29.0)
        assert not contender.call(op="take")["ok"], "taken before 30 s had passed"
        contender.call(op="clock", offset=31.0)
        assert contender.call(op="take")["ok"], "a holder silent for 31 s kept the lease"
        assert contender.call(op="held")["ok"]
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    # Woken up, the old holder finds it lost the lease and cannot take it back.
    assert not holder.call(op="renew")["ok"]
    assert not holder.call(op="held")["ok"]
    assert not holder.call(op="take")["ok"]
    assert contender.call(op="renew")["ok"] and contender.call(op="held")["ok"]


def test_a_killed_holder_loses_the_lease_at_once(place) -> None:
    root, workspace, agent = place
    holder, contender = agent("holder"), agent("contender")
    assert holder.call(op="take")["ok"]
    assert not contender.call(op="take")["ok"]
    holder.kill(signal.SIGKILL)
    assert holder.proc.wait(timeout=20) == -signal.SIGKILL
    assert contender.call(op="take")["ok"], "a dead holder's lease was not taken over at once"
    assert contender.call(op="held")["ok"]


# -- settle -------------------------------------------------------------------------


def test_settle_wakes_when_another_process_stores_the_line(place) -> None:
    root, workspace, agent = place
    waiter, writer = agent("waiter"), agent("writer")
    writer.call(op="commit", name="w", count=3, pad=200)
    with _open(root, workspace) as memory:
        unbuilt = [i for i in range(memory.total) if not memory.is_built(0, i)]
    assert len(unbuilt) >= 2, "the fixture needs lines the writer has not stored"
    k = unbuilt[0]
    started = time.monotonic()
    waiter.send(op="settle", level=0, index=k, timeout=60)
    assert waiter.recv()["event"] == "waiting"
    assert writer.call(op="store", level=0, index=k, text="the line at last")["ok"]
    answer = waiter.recv(timeout=70)
    assert answer["ok"] is True and answer["announced"]
    assert answer["waited"] < 10 and time.monotonic() - started < 20, answer
    # And a line nobody stores: settle gives up at its timeout and says so.
    waiter.send(op="settle", level=0, index=unbuilt[1], timeout=0.5)
    assert waiter.recv()["event"] == "waiting"
    answer = waiter.recv(timeout=20)
    assert answer["ok"] is False and answer["waited"] >= 0.4


# -- races at exact points (the parent pauses a child where the race would bite) ----------


def test_a_renewal_cannot_undo_a_takeover(place) -> None:
    """The holder reads the lease to renew it; a contender takes over; the renewal must not undo that."""
    root, workspace, agent = place
    holder, contender = agent("holder"), agent("contender")
    assert holder.call(op="take")["ok"]
    contender.call(op="clock", offset=31.0)  # to the contender the holder looks silent for 31 s
    holder.send(op="renew_paused")
    assert holder.recv()["event"] == "paused"
    contender.send(op="take")
    try:
        took = contender.recv(timeout=2)["ok"]  # answers now unless the holder's renewal excludes it
    except harness.ChildFailed:
        took = None
    holder.send(op="go")
    renewed = holder.recv()["ok"]
    if took is None:
        took = contender.recv()["ok"]
    assert took, "an expired lease was not taken over"
    # The takeover happened after the renewal (or the renewal failed): the contender holds the lease.
    assert contender.call(op="held")["ok"], f"the renewal (returned {renewed}) undid a takeover"
    assert not holder.call(op="held")["ok"]
    assert not holder.call(op="renew")["ok"]
    assert contender.call(op="renew")["ok"]


def test_probing_for_orphans_never_steals_a_live_turn(place) -> None:
    """A process opening the memory probes a journal just as its owner ends one turn and starts the next."""
    root, workspace, agent = place
    owner = agent("owner")
    owner.call(op="turn_begin", session="shared", text="first-0-0|the first turn")
    owner.send(op="turn_commit", session="shared", pause_before_finish=True)
    assert owner.recv()["event"] == "paused"  # committed; its journal is still there
    prober = harness.Agent(root.parent, "prober")
    try:
        prober.send(op="open", root=str(root), ws=str(workspace), settings=SMALL, pause_at_journal_beacon=True)
        assert prober.recv()["event"] == "paused"  # has the beacon file open, not locked yet
        owner.send(op="go")
        assert owner.recv()["ok"]  # journal and beacon removed
        owner.call(op="turn_begin", session="shared", text="second-0-0|the next turn")
        prober.send(op="go")
        opened = prober.recv()
        assert not any("unfinished" in r for r in opened["reports"]), opened["reports"]
        owner.call(op="turn_add", session="shared", text="second-0-1|still going")
        owner.call(op="turn_commit", session="shared")
    finally:
        prober.close()
    with _open(root, workspace) as memory:
        texts = [memory.message(i).text for i in range(memory.total)]
        assert texts == ["first-0-0|the first turn", "second-0-0|the next turn", "second-0-1|still going"]
        assert [memory.turn(t).status for t in range(memory.turns)] == ["completed", "completed"]
