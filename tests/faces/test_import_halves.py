"""A long generic source planned in two halves (two processes) makes the plan a single pass makes.

For random sources (several sessions interleaved, the same words said again,
notes, tool results, lines without a time, titles, secrets) cut at every kind
of line, the joined plan must give the same turns, byte for byte and in the
same order, with the same counts, occurrences and skips as one pass; a bad
line in either half is named as one pass names it.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from endless.core.store.identity import Presence, identity, identity_key
from endless.core.store.messages import KINDS
from endless.core.settings import load_settings
from endless.faces.importers import halves, importer
from endless.faces.importers.formats import FormatError, Stretch, read_generic, split_point

SETTINGS = load_settings()

words = st.sampled_from(["hi", "again", "the vault PIN is 4417", "password = \"hunter2hunter2\"", "é ü",
                         "a\nb", "x" * 700])
lines = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "user", "assistant", "assistant", "tool", "note"]),
     "content": words,
     "session": st.sampled_from(["a", "b", "c"])},
    optional={"at": st.one_of(st.floats(1.6e9, 1.7e9), st.just("2024-03-01T10:00:00Z")),
              "title": st.sampled_from(["one", "two"])}), min_size=1, max_size=40)


def _write(path: Path, records: list[dict]) -> list[int]:
    """The source, and where each line starts."""
    starts, at = [], 0
    with open(path, "wb") as handle:
        for record in records:
            raw = orjson.dumps(record) + b"\n"
            starts.append(at)
            at += len(raw)
            handle.write(raw)
    return starts


def _planned(plan: importer.Plan) -> list:
    return [(turn.tail, turn.session, turn.title, turn.at, turn.kinds, turn.sizes, turn.sources, turn.redacted, key,
             occurrence) for turn, key, occurrence in plan.planned()]


def _one_pass(path: Path, have: Presence, tmp: Path) -> tuple[importer.Plan, int]:
    plan = importer.Plan(open(tmp / "one.spill", "w+b"), SETTINGS, have=have)
    counted = importer.Counted(read_generic(path))
    for turn in importer.group(counted, SETTINGS, "turn", path.stat().st_mtime):
        plan.add(turn)
    plan.flush()
    return plan, counted.count


def _summary(plan: importer.Plan) -> tuple:
    return (plan.turns, plan.messages, plan.skipped, plan.long_messages, plan.long_bytes, list(plan.sizes),
            list(plan.long_turns), list(plan.long_counts), list(plan.long_sizes))


@given(lines, st.data())
@hsettings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_two_halves_plan_what_one_pass_plans(tmp_path, records, data) -> None:
    path = tmp_path / "source.jsonl"
    starts = _write(path, records)
    # any line that gives its time (as split_point's choice does), whatever its role
    cut = data.draw(st.sampled_from([0] + [i for i in range(1, len(records)) if "at" in records[i]]))
    _check_halves(tmp_path, path, starts, cut, data.draw(st.lists(words, max_size=3)))


@pytest.mark.parametrize("held", [[], ["hi"], ["hi", "hi", "hi"]])
def test_turns_said_again_in_both_halves_are_counted_and_skipped_in_the_joined_order(tmp_path, held) -> None:
    """The same words in both halves: the second half's turns get the ids one pass gives them, and
    those the memory holds already are skipped as one pass skips them."""
    records = []
    for k in range(6):
        records += [{"role": "user", "content": "hi", "session": "a", "at": 1.6e9 + k},
                    {"role": "assistant", "content": f"answer {k}", "session": "a", "at": 1.6e9 + k}]
    path = tmp_path / "source.jsonl"
    starts = _write(path, records)
    _check_halves(tmp_path, path, starts, 4, held)


def _check_halves(tmp_path: Path, path: Path, starts: list[int], cut: int, held: list[str]) -> None:
    have = Presence()
    for text in held:  # some turns are in the memory already
        have.counts[identity_key(identity("a", "user", text))] += 1
    one, read_once = _one_pass(path, have, tmp_path)
    two = importer.Plan(open(tmp_path / "two.spill", "w+b"), SETTINGS, have=have)
    read = halves.plan_in_halves(path, two, "turn", tmp_path, Stretch(starts[cut], cut + 1))
    two.flush()
    assert read == read_once
    assert _planned(two) == _planned(one)
    assert _summary(two) == _summary(one)
    for turn, _, _ in one.planned():  # what a turn brings besides its tail says what its tail holds
        record = orjson.loads(b"{" + turn.tail)
        assert (turn.session, turn.title, turn.at) == (record["s"], record["t"], record["at"])
        sources = [m.get("w", m["x"]) for m in record["m"]]
        assert [KINDS[k] for k in turn.kinds] == [m["k"] for m in record["m"]]
        assert turn.sizes == [len(x.encode()) for x in sources]
        assert turn.sources == [orjson.dumps(x)[1:-1] if len(x.encode()) <= SETTINGS.line_budget else b""
                                for x in sources]


@pytest.mark.parametrize("bad_half", ["first", "second", "both"])
def test_a_bad_line_is_named_as_one_pass_names_it(tmp_path, bad_half) -> None:
    records = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}", "at": 1.6e9 + i}
               for i in range(40)]
    raw = [orjson.dumps(r) for r in records]
    if bad_half in ("first", "both"):
        raw[5] = b'{"role": "user", "content": 3}'
    if bad_half in ("second", "both"):
        raw[31] = b"not json"
    path = tmp_path / "source.jsonl"
    path.write_bytes(b"\n".join(raw) + b"\n")
    with pytest.raises(FormatError) as one:
        _one_pass(path, Presence(), tmp_path)
    split = Stretch(sum(len(r) + 1 for r in raw[:20]), 21)
    with pytest.raises(FormatError) as two:
        halves.plan_in_halves(path, importer.Plan(open(tmp_path / "s", "w+b"), SETTINGS), "turn", tmp_path, split)
    assert str(two.value) == str(one.value)
    assert (":6:" if bad_half != "second" else ":32:") in str(two.value)


def test_the_cut_is_a_line_past_the_middle_that_opens_a_turn_with_its_time(tmp_path) -> None:
    records = [{"role": "assistant", "content": "x" * 50, "at": 1.6e9}] * 30
    records[20] = {"role": "user", "content": "untimed"}
    records[22] = {"role": "user", "content": "timed", "at": 1.6e9 + 5}
    path = tmp_path / "source.jsonl"
    starts = _write(path, records)
    assert split_point(path) == Stretch(starts[22], 23)
    assert split_point(path, lines_to_try=3) is None  # none soon enough after the middle


def test_a_long_source_is_planned_in_halves_and_the_second_process_is_gone(tmp_path, monkeypatch) -> None:
    records = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}", "at": 1.6e9 + i}
               for i in range(4000)]
    path = tmp_path / "source.jsonl"
    _write(path, records)
    forks: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(halves, "PLAN_HALVES_FROM", 1)
    monkeypatch.setattr(os, "fork", fork)
    sources = importer.open_sources([path], "generic", None, None, False)
    plan = importer.make_plan(sources, SETTINGS, "turn", Presence(), tmp_path)
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)  # waited for already: nothing is left running
    one, _ = _one_pass(path, Presence(), tmp_path)
    assert _planned(plan) == _planned(one)
    assert plan.sources == [(str(path), "generic", 4000)]


@pytest.mark.parametrize("window", [1, 97, 1000, 1 << 20])
@pytest.mark.parametrize("in_time_order", [True, False])
def test_the_commit_reads_the_spill_back_the_same_whatever_its_window(tmp_path, monkeypatch, window,
                                                                     in_time_order) -> None:
    """The spill is read back a window at a time: windows shorter than one entry, cutting entries
    anywhere, or holding all of them give the same turns, for a source in time order (read through,
    both halves' spills) and one out of it (each entry read where it is)."""
    records = []
    for k in range(40):
        at = 1.6e9 + (k if in_time_order else (k * 7) % 40)
        records += [{"role": "user", "content": f"question {k} " + "q" * (k * 13 % 300), "session": "a", "at": at},
                    {"role": "assistant", "content": f"answer {k}", "session": "a", "at": at}]
    path = tmp_path / "source.jsonl"
    starts = _write(path, records)
    one, _ = _one_pass(path, Presence(), tmp_path)
    expected = [(turn.tail, turn.at, turn.sources) for turn, _, _ in one.planned()]
    assert len(expected) == 40 and [at for _, at, _ in expected] == sorted(at for _, at, _ in expected)
    monkeypatch.setattr(importer, "SPILL_READ_WINDOW", window)
    two = importer.Plan(open(tmp_path / "two.spill", "w+b"), SETTINGS, have=Presence())
    halves.plan_in_halves(path, two, "turn", tmp_path, Stretch(starts[30], 31))
    for plan in (one, two):
        assert [(turn.tail, turn.at, turn.sources) for turn, _, _ in plan.planned()] == expected


def test_turns_closed_at_the_join_between_the_second_halfs_are_read_alone(tmp_path, monkeypatch) -> None:
    """Many sessions open at the cut: their turns close at the join, spilled after the second half's, and
    come back between its turns (all at one time, so the plan is in time order).  Each is read alone:
    the commit reads the spill about once, not a window per turn."""
    sessions = [f"s{k}" for k in range(150)]
    at = 1.6e9
    records = [{"role": "user", "content": f"first question of {s}", "session": s, "at": at} for s in sessions]
    records += [{"role": "assistant", "content": f"first answer of {s}", "session": s, "at": at} for s in sessions]
    cut = len(records)
    for s in sessions:  # each session's first line here closes its turn from before the cut; its second
        # question closes its first turn here, before the next session's first line
        records += [{"role": "user", "content": f"second question of {s}", "session": s, "at": at},
                    {"role": "assistant", "content": f"second answer of {s}", "session": s, "at": at},
                    {"role": "user", "content": f"third question of {s}", "session": s, "at": at},
                    {"role": "assistant", "content": f"third answer of {s}", "session": s, "at": at}]
    path = tmp_path / "source.jsonl"
    starts = _write(path, records)
    one, _ = _one_pass(path, Presence(), tmp_path)
    expected = [turn.tail for turn, _, _ in one.planned()]
    two = importer.Plan(open(tmp_path / "two.spill", "w+b"), SETTINGS, have=Presence())
    halves.plan_in_halves(path, two, "turn", tmp_path, Stretch(starts[cut], cut + 1))
    two.flush()
    read = []
    real_pread = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, length, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counted)
    monkeypatch.setattr(importer, "SPILL_READ_WINDOW", 1024)  # windows far shorter than the spill, as at scale
    assert [turn.tail for turn, _, _ in two.planned()] == expected
    assert len(expected) == 450 and two._spilled > 50 * 1024
    assert sum(read) <= 1.5 * two._spilled, (sum(read), two._spilled, len(read))
