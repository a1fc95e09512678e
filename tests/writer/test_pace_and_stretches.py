"""The catch-up's numbers (lines left, measured pace, time to done) and the offline stretches an import records."""

from __future__ import annotations

import random
from array import array

import pytest

from endless.sim.clock import SimClock, run
from endless.sim.writer_model import ScriptedWriter
from endless.writer.pace import lines_left, measured_pace, progress, say_duration, time_to_done
from endless.writer.pool import WriterPool
from endless.writer.stretches import offline_stretches
from endless.writer.usage import UsageLog
from writer_fixtures import DEEPSEEK, fill, open_memory, providers, simulator


def _brute_left(slots: list, total: int) -> int:
    left = 0
    for level in range(total.bit_length()):
        for index in range(total >> level):
            row = slots[level] if level < len(slots) else array("Q")
            if not (index < len(row) and row[index]):
                left += 1
    return left


@pytest.mark.parametrize("seed", range(8))
def test_lines_left_counts_every_missing_node_of_the_full_tree(seed):
    rng = random.Random(seed)
    total = rng.randint(0, 300)
    slots = []
    for level in range(max(total, 1).bit_length() + 1):
        length = rng.randint(0, (total >> level) + 3)  # slot rows may run past what can exist
        slots.append(array("Q", [rng.choice((0, 0, 7)) for _ in range(length)]))
    assert lines_left(slots, total) == _brute_left(slots, total)


def test_the_pace_is_read_from_the_memorys_own_calls(tmp_path):
    assert measured_pace(tmp_path, 1000.0) is None
    usage = UsageLog(tmp_path)
    for k in range(10):
        usage.record(900.0 + k, DEEPSEEK, [f"{k}+1"] * 6, {"cached": 100, "uncached": 10, "output": 50},
                     duration=2.0)
    usage.record(905.0, DEEPSEEK, ["1+1"], None, duration=9.0, outcome="rate_limit")  # failed: not a pace
    usage.close()
    pace = measured_pace(tmp_path, 1000.0)
    assert pace.measured_calls == 10 and pace.lines_per_call == 6 and pace.seconds_per_call == 2.0
    assert pace.calls_per_minute == pytest.approx(1.0)  # 10 calls in the last ten minutes
    idle = measured_pace(tmp_path, 10_000.0)
    assert idle.calls_per_minute == 0
    settings = open_memory(tmp_path / "m", SimClock().wall).settings
    # Idle: what the configured parallel calls would reach (8 calls of 2 s, 6 lines each).
    assert idle.lines_per_minute(settings) == pytest.approx(settings.writer_calls * 30 * 6)
    assert time_to_done(0, 0.0) == 0.0 and time_to_done(5, 0.0) is None
    assert time_to_done(600, 60.0) == 600
    assert say_duration(None).startswith("unknown") and say_duration(600) == "about 10 min"


def test_progress_after_a_fill_names_what_is_left(tmp_path):
    memory = open_memory(tmp_path, SimClock().wall)
    fill(memory, 4)
    state = progress(memory, 0.0)  # the chat recorded a route, and no call was made yet: pace unknown
    assert state.seconds_left is None and state.calls_per_minute == 0
    offline_stretches(memory).add(0, memory.total)  # the person chose the offline writer for it all
    state = progress(memory, 0.0)
    assert state.lines_left == lines_left(memory.built_slots(), memory.total) > 0
    assert state.messages_without_line == 8 and state.seconds_left > 0
    assert "lines left to write" in state.sentence()


def test_a_stretch_chosen_offline_is_written_offline_and_the_rest_by_the_model(tmp_path):
    """With a route configured, lines inside the stretch never reach the model; lines after it do."""
    clock = SimClock()
    sim = simulator(ScriptedWriter(seed=3, invented_rate=0.0))
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 8)  # 16 long messages: "imported"
    stretch_end = memory.total
    offline_stretches(memory).add(0, stretch_end)
    fill(memory, 4)  # 8 more: a live chat after the import
    stats = run(WriterPool(memory, providers(sim), route=DEEPSEEK).run(until_idle=True), clock)
    assert all(memory.is_built(0, i) for i in range(memory.total))
    asked = [job for line in UsageLog(memory.folder, readonly=True).lines() for job in line["jobs"]]
    assert asked, "the lines after the stretch go to the model"
    for job in asked:
        first, n = (int(x) for x in job.split("+"))
        assert first + n > stretch_end, f"line {job} lies in the offline stretch but was sent to the model"
    assert stats.offline_lines >= 16
    stretches = offline_stretches(memory)
    assert stretches.covers((0, 3)) and stretches.covers((3, 1)) and not stretches.covers((4, 1))
    assert stretches.covers((4, 0)) and not stretches.covers((5, 0))  # 0..31 crosses the stretch's end


def test_a_failing_writer_is_read_from_its_calls_since_the_last_answered_one(tmp_path):
    """Issue 33 item 5: since when and why, from the usage log any process wrote."""
    from endless.writer.pace import failure

    assert failure(tmp_path) is None
    usage = UsageLog(tmp_path)
    usage.record(900.0, DEEPSEEK, ["1+1"], {"cached": 1, "uncached": 1, "output": 1}, duration=1.0)
    assert failure(tmp_path) is None
    usage.record(910.0, DEEPSEEK, ["2+1"], None, outcome="connection", error="connection: refused")
    usage.record(970.0, DEEPSEEK, ["2+1"], None, outcome="rate_limit", error="rate_limit (429): slow down")
    found = failure(tmp_path)
    assert (found.since, found.calls) == (910.0, 2) and found.cause == "rate limit (rate_limit (429): slow down)"
    sentence = found.sentence(1030.0)
    assert "failing" in sentence and "1970-01-01 00:15 UTC" in sentence and "2 failed calls" in sentence
    usage.record(980.0, DEEPSEEK, ["2+1"], {"cached": 1, "uncached": 1, "output": 1}, outcome="too_long")
    assert failure(tmp_path) is None  # answered (its text failed a check): the provider works
    usage.record(990.0, DEEPSEEK, ["3+1"], None, outcome="timeout")
    assert failure(tmp_path).cause == "timeout"
    usage.close()
