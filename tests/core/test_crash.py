"""Crash safety (DESIGN §2.2, §2.5): real processes SIGKILLed at random moments, and damaged files.

The crash test keeps one memory across 200 kills.  A child (procs/crash_child.py)
logs turns through the journal, commits them and stores ready lines, printing
a progress line after every durable step.  The parent kills it after a random
number of progress lines, reopens the memory and checks that everything that
was acknowledged is there exactly once, that the turn in flight was closed as
``interrupted`` (or had committed), that ids chain without gaps and that the
views still tile the history, never splitting a merged part.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from endless.core.view import tiling as views
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.writer.queue import ready_work

import harness  # noqa: E402
from crash_child import line_text  # noqa: E402

KILLS = 200
SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}
TEXT = re.compile(r"^r(\d+)-t(\d+)-m(\d+)\|")


coarser_or_equal = views.covers  # nothing merged is split again


def check_view(memory: Memory) -> None:
    for state in (memory.views.chat, memory.views.wview):
        views.validate(state, memory.total, memory.tree.built)
        assert views.check_tiling(state.parts, memory.total) == memory.total == state.total
    # The writer view is the chat view merged further.
    assert coarser_or_equal(memory.views.wview.parts, memory.views.chat.parts)


def check_chain(memory: Memory) -> None:
    at = 0
    for t in range(memory.turns):
        info = memory.turn(t)
        assert info is not None, f"turn {t} is unreadable"
        assert info.turn == t and info.first == at, f"turn {t} starts at {info.first}, expected {at}"
        at += info.count
    assert at == memory.total


class Ledger:
    """What the children acknowledged, and the checks after each kill."""

    def __init__(self) -> None:
        self.planned: dict[tuple[int, int], int] = {}
        self.tids: dict[tuple[int, int], str] = {}
        self.journaled: dict[tuple[int, int], int] = {}
        self.committed: dict[tuple[int, int], tuple[int, int, int]] = {}
        self.lines: dict[tuple[int, int], bool] = {}
        self.in_flight: set[tuple[int, int]] = set()
        self.last_chat: list = []
        self.interrupted = 0
        self.unacked_commits = 0

    def take(self, line: bytes) -> None:
        fields = line.decode().split()
        kind, rest = fields[0], fields[1:]
        if kind == "O":
            return
        if kind == "L":
            level, index, stored = map(int, rest)
            self.lines[(level, index)] = self.lines.get((level, index), False) or bool(stored)
            return
        key = (int(rest[0]), int(rest[1]))
        if kind == "B":
            assert key not in self.planned
            self.tids[key], self.planned[key] = rest[2], int(rest[3])
            self.journaled[key] = 0
        elif kind == "J":
            assert int(rest[2]) == self.journaled[key]
            self.journaled[key] += 1
        elif kind == "C":
            self.committed[key] = (int(rest[2]), int(rest[3]), int(rest[4]))
        else:
            raise AssertionError(f"unknown progress line {line!r}")

    def end_run(self, run: int) -> tuple[int, int] | None:
        open_turns = [k for k in self.planned if k[0] == run and k not in self.committed]
        assert len(open_turns) <= 1, open_turns
        if open_turns:
            self.in_flight.add(open_turns[0])
            return open_turns[0]
        return None

    def verify(self, memory: Memory, run: int, flight: tuple[int, int] | None) -> None:
        assert memory.damage == [], memory.damage
        for report in memory.reports:
            assert "invalid" not in report and "disagree" not in report, memory.reports
        check_chain(memory)
        found: dict[tuple[int, int], list[tuple[int, list]]] = {}
        for t in range(memory.turns):
            messages = memory.turn_messages(t)
            info = memory.turn(t)
            body = [m for m in messages if m.kind != "status"]
            keys = set()
            for k, m in enumerate(body):
                match = TEXT.match(m.text)
                assert match, f"turn {t} holds a message nobody wrote: {m.text[:60]!r}"
                keys.add((int(match[1]), int(match[2])))
                assert int(match[3]) == k, f"turn {t}: message {k} is {m.text[:30]!r}"
            assert len(keys) == 1, f"turn {t} mixes turns {keys}"
            key = keys.pop()
            assert info.tid == self.tids[key], f"turn {t} has tid {info.tid}, not {self.tids[key]}"
            found.setdefault(key, []).append((t, messages))
        for key, places in found.items():
            assert len(places) == 1, f"turn {key} is logged {len(places)} times (turns {[p[0] for p in places]})"
            assert key in self.committed or key in self.in_flight, f"turn {key} was never begun here"
        for key, (first, count, number) in self.committed.items():
            assert key in found, f"acknowledged turn {key} is missing"
            t, messages = found[key][0]
            info = memory.turn(t)
            assert (info.first, info.count, info.turn, info.status) == (first, count, number, "completed"), \
                f"acknowledged turn {key} moved: {info}"
            assert count == self.planned[key]
        for key in self.in_flight:
            acked, planned = self.journaled[key], self.planned[key]
            if key not in found:
                assert acked == 0, f"turn {key} had {acked} journalled messages and vanished"
                continue
            t, messages = found[key][0]
            info = memory.turn(t)
            body = [m for m in messages if m.kind != "status"]
            if info.status == "completed":
                # Committed, but killed before it said so.
                assert acked == planned == len(body) == info.count, (key, acked, planned, info)
            else:
                assert info.status == "interrupted", info
                assert messages[-1].kind == "status" and messages[-1].text, messages[-1]
                assert [m.kind for m in messages].count("status") == 1
                assert acked <= len(body) <= min(acked + 1, planned), (key, acked, len(body), planned)
                assert len(body) >= 1
        if flight is not None and flight in found:
            t, _ = found[flight][0]
            if memory.turn(t).status == "interrupted":
                self.interrupted += 1
                assert any("closed an unfinished turn" in r for r in memory.reports), memory.reports
            elif flight not in self.committed:
                self.unacked_commits += 1
        assert not list((memory.folder / "journal").glob("*.jsonl")), "an orphaned journal was left open"
        for (level, index), stored in self.lines.items():
            assert memory.is_built(level, index), f"acknowledged line {level}/{index} is missing"
            if stored:
                assert memory.node_text(level, index) == line_text(level, index)
        check_view(memory)
        assert coarser_or_equal(memory.views.chat.parts, self.last_chat), "a merged part of the view was split"
        self.last_chat = list(memory.views.chat.parts)


def _spin(seconds: float) -> None:
    """A busy pause that moves the kill to a random point of the child's next step."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    root, workspace = tmp_path / "root", tmp_path / "ws"
    workspace.mkdir()
    settings = Settings(**SMALL)
    key = workspace_key(None, workspace)
    Memory.open(key, settings=settings, root=root).close()
    rng = random.Random(20261129)
    ledger = Ledger()
    settings_json = json.dumps(SMALL)

    def start(run: int):
        proc = harness.spawn("crash_child.py", str(root), str(workspace), str(run), str(rng.randrange(1 << 30)),
                             settings_json, stderr_path=tmp_path / f"child-{run % 2}.stderr")
        return proc, harness.LineReader(proc.stdout.fileno())

    warm = start(0)
    kinds_seen = set()
    try:
        for run in range(KILLS):
            proc, reader = warm
            warm = start(run + 1) if run + 1 < KILLS else None  # imports while this one runs
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            wanted = 0 if rng.random() < 0.05 else rng.randint(1, 14)
            for _ in range(wanted):
                line = reader.readline(timeout=60)
                assert line is not None, (f"child {run} exited early ({proc.wait()}):\n"
                                          + (tmp_path / f"child-{run % 2}.stderr").read_text()[-3000:])
                ledger.take(line)
                kinds_seen.add(line[:1])
            _spin(rng.random() * 0.004)
            os.kill(proc.pid, signal.SIGKILL)
            for line in reader.drain():
                ledger.take(line)
                kinds_seen.add(line[:1])
            assert proc.wait(timeout=30) == -signal.SIGKILL, \
                (tmp_path / f"child-{run % 2}.stderr").read_text()[-3000:]
            proc.stdin.close()
            proc.stdout.close()
            flight = ledger.end_run(run)
            with Memory.open(key, settings=settings, root=root) as memory:
                ledger.verify(memory, run, flight)
    finally:
        if warm is not None:
            warm[0].kill()
            warm[0].wait()
            warm[0].stdin.close()
            warm[0].stdout.close()
    # The run must have exercised what it claims to.
    assert {b"B", b"J", b"C", b"L"} <= kinds_seen
    assert len(ledger.committed) > 100, len(ledger.committed)
    assert ledger.interrupted > 20, ledger.interrupted
    assert sum(ledger.lines.values()) > 100
    with Memory.open(key, settings=settings, root=root) as memory:
        assert any(p[0] > 0 for p in memory.views.chat.parts), "the view never batched"
        assert memory.reports == []


# -- damaged files, one process ---------------------------------------------------------


def _fill(root: Path, workspace: Path, turns: int, settings: Settings | None = None) -> tuple[Memory, list]:
    settings = settings or Settings(**SMALL)
    memory = Memory.open(workspace_key(None, workspace), settings=settings, root=root)
    infos = []
    for i in range(turns):
        infos.append(memory.commit_turn("s", "damage", [
            Message("user", f"question {i}", float(i)),
            Message("reply", f"answer {i} " + "w" * (i % 5 * 30), float(i))]))
        for job in ready_work(memory):
            memory.store_line(job.level, job.index, line_text(job.level, job.index))
    return memory, infos


def _texts(memory: Memory) -> list:
    return [None if memory.message(i) is None else memory.message(i).text for i in range(memory.total)]


def _reopen(memory: Memory) -> Memory:
    memory.close()
    return Memory.open(memory.key, settings=memory.settings, root=memory.root)


@pytest.mark.parametrize("keep_index", [True, False])
def test_torn_last_line_of_the_order_log(tmp_path: Path, keep_index: bool) -> None:
    memory, infos = _fill(tmp_path, tmp_path, 6)
    before, total = _texts(memory), memory.total
    torn = b'{"turn":6,"id":' + str(total).encode() + b',"tid":"abcd","m":[{"k":"user","x":"half'
    with open(memory.log.path, "ab") as handle:
        handle.write(torn)
    if not keep_index:
        memory.log.index_path.unlink()
    memory = _reopen(memory)
    assert any("torn last line" in r and memory.log.path.name in r for r in memory.reports), memory.reports
    quarantined = [orjson.loads(line) for line in memory.quarantine.read_bytes().splitlines()]
    assert quarantined[-1]["bytes"].encode() == torn and quarantined[-1]["file"] == memory.log.path.name
    assert memory.log.path.read_bytes().endswith(b"}\n")
    assert (memory.turns, memory.total, _texts(memory)) == (6, total, before)
    assert [memory.turn(t) for t in range(6)] == infos
    check_chain(memory)
    check_view(memory)
    # The next turn lands cleanly after the repaired end, and nothing is reported again.
    info = memory.commit_turn("s", "after", [Message("user", "after the tear", 1.0)])
    assert (info.turn, info.first) == (6, total)
    memory = _reopen(memory)
    assert memory.reports == [] and memory.damage == []
    assert memory.message(total).text == "after the tear"
    memory.close()


def test_last_line_without_its_newline(tmp_path: Path) -> None:
    memory, infos = _fill(tmp_path, tmp_path, 5)
    before, total = _texts(memory), memory.total
    data = memory.log.path.read_bytes()
    assert data.endswith(b"\n")
    with open(memory.log.path, "r+b") as handle:
        handle.truncate(len(data) - 1)
    memory = _reopen(memory)
    assert any("missing final newline" in r for r in memory.reports), memory.reports
    assert memory.log.path.read_bytes() == data
    assert not memory.quarantine.exists()
    assert (memory.turns, memory.total, _texts(memory)) == (5, total, before)
    assert memory.turn(4) == infos[4]
    check_chain(memory)
    check_view(memory)
    info = memory.commit_turn("s", "after", [Message("user", "next", 1.0)])
    assert (info.turn, info.first) == (5, total)
    memory = _reopen(memory)
    assert memory.reports == [] and memory.damage == [] and memory.message(total).text == "next"
    memory.close()


@pytest.mark.parametrize("keep_index", [True, False])
def test_garbage_line_in_the_middle_of_the_order_log(tmp_path: Path, keep_index: bool) -> None:
    memory, infos = _fill(tmp_path, tmp_path, 8)
    before, total = _texts(memory), memory.total
    lines = memory.log.path.read_bytes().split(b"\n")
    lines[3] = b"\x00garbage{{ not a turn"
    memory.log.path.write_bytes(b"\n".join(lines))
    if not keep_index:
        memory.log.index_path.unlink()
    memory = _reopen(memory)
    assert len(memory.damage) == 1, memory.damage
    assert memory.damage[0].file == memory.log.path.name
    damaged = range(infos[3].first, infos[3].first + infos[3].count)
    assert memory.turns == 8 and memory.total == total
    for t in (0, 1, 2, 4, 5, 6, 7):
        assert memory.turn(t) == infos[t], f"turn {t} moved"
    assert memory.turn(3) is None
    for i in range(total):
        assert (memory.message(i) is None) == (i in damaged)
        if i not in damaged:
            assert memory.message(i).text == before[i]
    check_view(memory)
    info = memory.commit_turn("s", "after", [Message("user", "after garbage", 1.0)])
    assert (info.turn, info.first) == (8, total)
    memory = _reopen(memory)
    assert memory.message(total).text == "after garbage"
    assert [memory.turn(t) for t in (4, 7)] == [infos[4], infos[7]]
    memory.close()


@pytest.mark.parametrize("which", ["view.json", "writer-view.json"])
def test_truncated_view_is_recomputed(tmp_path: Path, which: str) -> None:
    memory, _ = _fill(tmp_path, tmp_path, 60)
    assert any(p[0] > 0 for p in memory.views.chat.parts), "the fixture should have merged parts"
    total = memory.total
    path = memory.folder / which
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    memory = _reopen(memory)
    label = "view" if which == "view.json" else "writer view"
    assert any(f"stored {label} is invalid" in r for r in memory.reports), memory.reports
    assert memory.total == total
    check_view(memory)
    # The repaired view was saved: the next open accepts it silently.
    stored = views.ViewState.from_json(orjson.loads(path.read_bytes()))
    views.validate(stored, total, memory.tree.built)
    memory = _reopen(memory)
    assert memory.reports == []
    check_view(memory)
    memory.close()


def test_torn_tree_line(tmp_path: Path) -> None:
    memory, _ = _fill(tmp_path, tmp_path, 30)
    built = {(l, i): memory.node_text(l, i) for l, slots in enumerate(memory.tree.slots)
             for i in range(len(slots)) if slots[i]}
    assert any(l > 0 for l, _ in built) and len(built) > 40
    chat = list(memory.views.chat.parts)
    torn = b'{"l":0,"i":999,"text":"half a li'
    with open(memory.tree.path, "ab") as handle:
        handle.write(torn)
    memory = _reopen(memory)
    assert any("torn last line" in r and memory.tree.path.name in r for r in memory.reports), memory.reports
    assert orjson.loads(memory.quarantine.read_bytes().splitlines()[-1])["bytes"].encode() == torn
    assert memory.damage == []
    for (l, i), text in built.items():
        assert memory.node_text(l, i) == text
    assert memory.views.chat.parts == chat
    check_view(memory)
    # A line stored after the repair is readable by the next process.
    memory.commit_turn("s", "after", [Message("user", "q " + "v" * 200, 1.0)])
    job = next(j for j in ready_work(memory) if j.level == 0)
    assert memory.store_line(0, job.index, "after the torn line")
    memory = _reopen(memory)
    assert memory.reports == [] and memory.damage == []
    assert memory.node_text(0, job.index) == "after the torn line"
    memory.close()


def test_torn_line_of_a_journal_keeps_the_whole_messages(tmp_path: Path) -> None:
    """A journal cut mid-line (a crash during a write) closes with its whole messages only."""
    memory, _ = _fill(tmp_path, tmp_path, 2)
    total = memory.total
    turn = memory.journal("crashy", "torn journal")
    turn.add("user", "whole message")
    turn.add("reply", "also whole")
    with open(turn.journal.path, "ab") as handle:
        handle.write(b'{"k":"reply","x":"cut')
    turn.journal._beacon.release()  # the process "dies": its beacon goes
    memory = _reopen(memory)
    assert any("closed an unfinished turn" in r for r in memory.reports), memory.reports
    messages = memory.turn_messages(memory.turns - 1)
    assert [(m.kind, m.text) for m in messages[:2]] == [("user", "whole message"), ("reply", "also whole")]
    assert len(messages) == 3 and messages[2].kind == "status"
    assert memory.turn(memory.turns - 1).status == "interrupted"
    assert memory.total == total + 3
    memory.close()


def test_garbage_line_in_the_middle_of_the_tree(tmp_path: Path) -> None:
    memory, _ = _fill(tmp_path, tmp_path, 30)
    records = [orjson.loads(line) for line in memory.tree.path.read_bytes().splitlines()]
    # A leaf the writer wrote (a free one would be stored again at once, word for word).
    victim = next(k for k, r in enumerate(records[2:], 2) if r["l"] == 0 and r.get("text", "").startswith("line 0/"))
    level, index = records[victim]["l"], records[victim]["i"]
    # every other line reads as before, free ones (read through the log) included
    others = {(r["l"], r["i"]): memory.node_text(r["l"], r["i"]) for k, r in enumerate(records) if k != victim}
    lines = memory.tree.path.read_bytes().split(b"\n")
    lines[victim] = b"{garbage"
    memory.tree.path.write_bytes(b"\n".join(lines))
    total = memory.total
    memory = _reopen(memory)
    assert [d.file for d in memory.damage] == [memory.tree.path.name], memory.damage
    assert memory.total == total
    for (l, i), text in others.items():
        assert memory.node_text(l, i) == text
    check_view(memory)
    # The lost line is written again, like any line not yet written.
    assert not memory.is_built(level, index)
    assert (level, index) in [j.part for j in ready_work(memory)]
    assert memory.store_line(level, index, "written again")
    memory = _reopen(memory)
    assert memory.node_text(level, index) == "written again"
    check_view(memory)
    memory.close()
