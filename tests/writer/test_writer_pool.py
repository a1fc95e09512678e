"""The writer pool through the real SDK clients and the simulator, on simulated time."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from endless.sim.clock import SimClock, run
from endless.sim.model import SimReply
from endless.sim.writer_model import ScriptedWriter
from writer_fixtures import CLAUDE, DEEPSEEK, fill, open_memory, providers, simulator
from endless.writer.checks import judge
from endless.writer.pool import WriterPool
from endless.writer.spend import lift_pause
from endless.writer.usage import UsageLog
from endless.writer.queue import ready_work
from endless.writer.task import job_sources

FIT = {"fit": 1.0}


def _pool(memory, sim, **kwargs) -> WriterPool:
    return WriterPool(memory, providers(sim), **kwargs)


def _all_written(memory) -> bool:
    return all(memory.is_built(0, i) for i in range(memory.total))


def _writer_requests(sim):
    return [r for r in sim.records if "Compaction:" in r["prompt"]]


def test_every_line_gets_written_and_checked(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=1, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 20)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory)
    for i in range(memory.total):
        text = memory.node_text(0, i)
        assert len(text.encode()) <= 512, f"line {i} is {len(text.encode())} bytes"
        assert not text.startswith(f"{i}+1|")
    assert stats.model_lines + stats.trimmed + stats.offline_fallbacks >= memory.total
    assert stats.calls >= 1 and clock.now > 0


def test_overshooting_tries_accepted_retried_and_trimmed(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=2, mix={"over": 1.0}, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1)
    fill(memory, 1)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    # "over" tries are between the limit and 1.25x: accepted as they are
    assert stats.trimmed == 0 and stats.rejected["too_long"] == 0
    assert all(512 < len(memory.node_text(0, i).encode()) <= 640 for i in range(2))

    memory2 = open_memory(tmp_path / "b", clock.wall, lines_per_call=1)
    writer2 = ScriptedWriter(seed=3, mix={"too_long": 1.0}, retry_mix={"too_long": 1.0}, invented_rate=0.0)
    sim2 = simulator(writer2)
    fill(memory2, 1)
    stats2 = run(_pool(memory2, sim2).run(until_idle=True), clock)
    # the two messages and their merge: 3 tries each, then the shortest trimmed
    assert stats2.trimmed == 3 and stats2.rejected["too_long"] >= 6
    for i in range(2):
        text = memory2.node_text(0, i)
        assert text.endswith("…") and len(text.encode()) <= 512
    feedback = [r for r in sim2.records if "the limit is 512" in r["prompt"]]
    assert feedback and "384 bytes" in feedback[0]["prompt"]


def test_bad_tries_get_feedback_and_the_next_try_is_kept(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=4, mix=FIT, retry_mix=FIT, invented_rate=0.0, head_rate=1.0)
    writer.force("wrong_script", "malformed")
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1, writer_calls=1)
    fill(memory, 1)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory)
    assert stats.rejected["wrong_script"] == 1
    assert sum(stats.rejected[p] for p in ("malformed", "echo", "empty", "refusal")) == 1
    assert any("which the input does not use" in r["prompt"] for r in sim.records)
    for i in range(2):
        assert not memory.node_text(0, i).startswith(f"{i}+1|"), "copied heads are stripped"


def test_an_invented_number_is_rejected_with_feedback(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=5, mix=FIT, retry_mix=FIT, invented_rate=1.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1, writer_calls=1)
    fill(memory, 1)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert stats.rejected["invented"] >= 2
    assert any("which the input does not contain" in r["prompt"] for r in sim.records)
    # every stored line passes the checks against its sources (offline fallback included)
    for i in range(memory.total):
        sources = job_sources(memory, memory_job(i))
        assert judge(memory.node_text(0, i), sources).ok


def memory_job(i):
    from endless.writer.queue import Job
    return Job(0, i)


def test_three_failed_rounds_fall_back_to_the_offline_writer(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=6, mix={"malformed": 1.0}, retry_mix={"malformed": 1.0})
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1)
    fill(memory, 1)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert stats.offline_fallbacks == 3 and stats.failed_rounds == 9  # two messages and their merge
    assert _all_written(memory)
    assert clock.now >= 20, "failed rounds are retried after 10 s"


@pytest.mark.parametrize("status,kind", [(429, "rate_limit"), (500, "server"), (529, "overloaded")])
def test_provider_errors_are_retried_and_never_count_as_rounds(tmp_path, status, kind):
    clock = SimClock()
    writer = ScriptedWriter(seed=7, mix=FIT, invented_rate=0.0)
    retry_after = 30.0 if status == 429 else None
    for _ in range(4):  # the SDK retries once, then the pool retries later
        writer.force(SimReply(status=status, error="busy", retry_after=retry_after, first_byte=0.1, duration=0.1))
    sim = simulator(writer, cache="anthropic", flavour="anthropic") if status == 529 else simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=6)
    fill(memory, 2, route=CLAUDE if status == 529 else DEEPSEEK)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory)
    assert stats.failed_calls == 2 and stats.failed_rounds == 0 and stats.offline_fallbacks == 0
    outcomes = [orjson.loads(line)["outcome"] for line in (memory.folder / "usage.jsonl").read_bytes().splitlines()]
    assert outcomes.count(kind) == 2
    assert clock.now >= (30 if status == 429 else 10) * 2


def test_a_hung_call_times_out_and_frees_its_slot(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=8, mix=FIT, invented_rate=0.0)
    writer.force(SimReply(stall=True), SimReply(stall=True))
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, call_timeout_seconds=60.0)
    fill(memory, 1)
    real = time.perf_counter()
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert time.perf_counter() - real < 20
    assert _all_written(memory) and stats.failed_calls >= 1
    assert clock.now >= 60


def test_build_order_window_and_merges(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=9, mix=FIT, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1, writer_calls=8)
    fill(memory, 10)
    run(_pool(memory, sim).run(until_idle=True), clock)
    compress = [int(r["prompt"].split("compress message ")[1].split(".")[0].split()[0])
                for r in _writer_requests(sim) if "Compaction: compress message" in r["prompt"]]
    # message k's line starts only once fewer than 8 lines before it are unwritten
    assert sorted(compress)[:8] == list(range(8))
    merges = [r for r in _writer_requests(sim) if "Compaction: merge lines" in r["prompt"]]
    assert merges, "merges are written once both halves exist"
    for record in merges:
        name = record["prompt"].split("Compaction: merge lines ")[1].split()[0]
        ident, n = (int(x) for x in name.split("+"))
        assert record["time"] >= 0
        assert memory.is_built(0, ident) or n > 1


def test_the_writer_view_stops_at_the_first_unwritten_line(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=10, mix=FIT, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1, writer_calls=8)
    fill(memory, 6)
    run(_pool(memory, sim).run(until_idle=True), clock)
    for record in _writer_requests(sim):
        prompt = record["prompt"]
        if "<chat>" not in prompt:
            continue
        chat = prompt.split("<chat>\n", 1)[1].split("</chat>", 1)[0]
        if "compress message " in prompt:
            target = int(prompt.split("compress message ")[1].split()[0].rstrip("."))
            for line in chat.splitlines():
                ident, n = (int(x) for x in line.split("|", 1)[0].split("+"))
                assert ident + n <= target, f"context of message {target} shows {line[:20]}"


def test_cache_gate_first_call_goes_alone(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=11, mix=FIT, invented_rate=0.0, latency_median=5.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1, writer_calls=8)
    fill(memory, 4)
    run(_pool(memory, sim).run(until_idle=True), clock)
    calls = _writer_requests(sim)
    first = calls[0]
    first_answered = first["time"] + first["first_byte"]
    later = [r for r in calls[1:] if r["time"] < first_answered]
    assert not later, "calls on an uncached prefix wait until the first one is answered"
    assert len(calls) >= 8


def test_batches_of_six_with_one_bad_job_retried_alone(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=12, mix=FIT, retry_mix=FIT, invented_rate=0.0)
    writer.force("fit", "fit", "malformed", "fit", "fit", "fit")
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=6, writer_calls=1)
    fill(memory, 3)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    calls = _writer_requests(sim)
    assert "Compaction: compress or merge 6 lines" in calls[0]["prompt"]
    retry = calls[1]["prompt"]
    assert 'Job 3 only' in retry and retry.count("Compaction: compress or merge 6 lines") == 1
    assert _all_written(memory)
    assert stats.rejected.total() == 1 and stats.model_lines >= 6
    leaf_calls = [r for r in calls if "compress message" in r["prompt"]]
    assert len(leaf_calls) == 2, "six lines in one call, and the bad one retried alone"


def test_anthropic_calls_carry_at_most_four_marks(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=13, mix=FIT, invented_rate=0.0)
    sim = simulator(writer, cache="anthropic", flavour="anthropic")
    memory = open_memory(tmp_path, clock.wall, lines_per_call=2)
    fill(memory, 40, route=CLAUDE)
    run(_pool(memory, sim).run(until_idle=True), clock)
    calls = _writer_requests(sim)
    assert calls and all(1 <= len(r["marks"]) <= 4 for r in calls)
    assert any(r["usage"]["read"] > 0 for r in calls[1:]), "later calls read the cached prefix"


def test_spend_cap_pauses_and_resume_lifts(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=14, mix=FIT, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, spend_cap_per_day=1e-9)
    fill(memory, 10)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert stats.calls >= 1 and not _all_written(memory), "the pool pauses once the cap is reached"
    lift_pause(memory, clock.wall())
    run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory)


def test_cancellation_mid_call_loses_nothing(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=15, mix=FIT, invented_rate=0.0, latency_median=20.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1)
    fill(memory, 8)

    async def stop_midway():
        stop = asyncio.Event()
        pool = _pool(memory, sim)
        task = asyncio.ensure_future(pool.run(stop))
        await memory.settle(lambda m: sum(m.is_built(0, i) for i in range(m.total)) >= 3, 3600)
        stop.set()
        await task

    run(stop_midway(), clock)
    written = {i: memory.node_text(0, i) for i in range(memory.total) if memory.is_built(0, i)}
    assert 3 <= len(written) < memory.total
    run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory)
    for i, text in written.items():
        assert memory.node_text(0, i) == text, "a stored line is never rewritten"


def test_lease_handover_the_new_holder_finishes(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=16, mix=FIT, invented_rate=0.0, latency_median=10.0)
    sim = simulator(writer)
    first = open_memory(tmp_path, clock.wall, lines_per_call=1)
    fill(first, 8)
    second = open_memory(tmp_path, clock.wall, lines_per_call=1)

    async def handover():
        stop = asyncio.Event()
        task = asyncio.ensure_future(_pool(first, sim).run(stop))
        await first.settle(lambda m: sum(m.is_built(0, i) for i in range(m.total)) >= 2, 3600)
        assert not second.take_lease(), "one lease holder at a time"
        stop.set()
        await task
        first.lease.release()
        return await _pool(second, sim).run(until_idle=True)

    run(handover(), clock)
    second.catch_up()
    assert _all_written(second)
    built = [r for r in second.tree.catch_up(False)]
    lines = second.tree.path.read_text().splitlines()
    keys = [(l.split('"l":')[1].split(",")[0], l.split('"i":')[1].split(",")[0]) for l in lines]
    assert len(keys) == len(set(keys)), "nothing is written twice"
    del built


def test_usage_lines_and_totals_across_a_restart(tmp_path):
    clock = SimClock()
    writer = ScriptedWriter(seed=17, mix=FIT, invented_rate=0.0)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 5)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    totals = UsageLog(memory.folder).totals()
    assert totals["calls"] == stats.calls
    assert totals["cacheRead"] + totals["miss"] > 0
    again = UsageLog(memory.folder).totals()
    assert again == totals


def test_no_route_means_the_offline_writer(tmp_path, capfd):
    clock = SimClock()
    writer = ScriptedWriter(seed=18)
    sim = simulator(writer)
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 4, route=None)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory) and stats.calls == 0 and stats.offline_lines >= 8
    assert "offline writer" in capfd.readouterr().err
    assert not sim.records



def test_the_offline_writer_stores_a_long_backlog_a_few_hundred_lines_at_a_time(tmp_path, monkeypatch):
    """After an import thousands of lines are ready at once: each store (which holds the memory's lock, and
    after which the loop renews the lease) takes at most OFFLINE_STORE_LINES of them, and all get written."""
    from endless.writer import pool

    monkeypatch.setattr(pool, "OFFLINE_STORE_LINES", 16)
    clock = SimClock()
    sim = simulator(ScriptedWriter(seed=19))
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 60, route=None)
    stored: list[int] = []
    real = memory.store_lines

    def counting(lines, sync=True):
        stored.append(len(lines))
        return real(lines, sync)

    memory.store_lines = counting
    run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory) and not sim.records
    assert max(stored) == 16 and sum(stored) > 16 * 8, stored


def test_the_writer_route_setting_writes_for_chats_without_a_route(tmp_path, capfd):
    clock = SimClock()
    sim = simulator(ScriptedWriter(seed=19, mix=FIT))
    memory = open_memory(tmp_path, clock.wall, writer_route=orjson.dumps(DEEPSEEK.to_json()).decode())
    fill(memory, 3, route=None)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory) and stats.calls > 0 and stats.offline_lines == 0
    assert {r["model"] for r in sim.records} == {"deepseek-v4-pro"}


def test_an_unusable_writer_route_setting_is_named_and_ignored(tmp_path, capfd):
    clock = SimClock()
    sim = simulator(ScriptedWriter(seed=20))
    memory = open_memory(tmp_path, clock.wall, writer_route='{"provider": "openai"}')
    fill(memory, 2, route=None)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    assert _all_written(memory) and stats.calls == 0 and stats.offline_lines > 0
    assert "writer_route setting is unusable" in capfd.readouterr().err


def test_every_task_the_pool_sends_is_a_writer_task(tmp_path):
    from endless.writer.checks import is_writer_task
    from endless.writer.task import describe, task_text
    clock = SimClock()
    memory = open_memory(tmp_path, clock.wall)
    fill(memory, 4)
    jobs = ready_work(memory)
    assert len(jobs) >= 6
    for size in (1, 6):
        text = task_text(describe(memory, jobs[:size]), 512)
        assert is_writer_task(text), text[:80]
        assert "-" * 512 in text and "<input>" in text
    assert not is_writer_task("compress message 3 please")
    assert not is_writer_task("Compaction: hello")


def test_a_model_that_parrots_its_prompt_stores_no_junk(tmp_path):
    """Issue 15 item 5: the echoed retry message ("… with no tags, no task words and no comment.") was
    accepted as a message's line and a merge's.  Now every parroted try is rejected, and after the
    content rounds the offline writer writes the line."""
    from endless.sim.simulator import ParrotResponder, Route as SimRoute, Simulator
    from endless.sim.cache import make_cache
    from endless.writer.offline import offline_leaf, offline_merge
    from endless.writer.task import job_input

    clock = SimClock()
    parrot = ParrotResponder()
    sim = Simulator(SimRoute(parrot, make_cache("deepseek"), context_length=1_000_000, flavour="deepseek"))
    memory = open_memory(tmp_path, clock.wall, lines_per_call=1)
    fill(memory, 1)
    stats = run(_pool(memory, sim).run(until_idle=True), clock)
    retries = [text for text in parrot.replies if not text.startswith("Compaction:")]
    assert retries and all(text.startswith("That reply is not a usable memory line (") for text in retries)
    assert not any("<input>" in text or "Compaction:" in text for text in retries), \
        "the junk holds no task tag: only the instructions check catches it"
    assert stats.model_lines == 0 and stats.rejected["echo"] == 27  # 3 lines × 3 rounds × 3 tries
    assert stats.offline_fallbacks == 3 and _all_written(memory)
    budget = memory.settings.line_budget
    for i in range(memory.total):
        assert memory.node_text(0, i) == offline_leaf(job_input(memory, memory_job(i)), budget)
    assert memory.node_text(1, 0) == offline_merge(memory.node_text(0, 0), memory.node_text(0, 1), budget)
    for level, index in ((0, 0), (0, 1), (1, 0)):
        assert "no task words" not in memory.node_text(level, index)

