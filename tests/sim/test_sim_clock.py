"""The simulated clock: timers, sleeps and timeouts run in virtual time, in order."""

from __future__ import annotations

import asyncio
import time

import pytest

from endless.sim.clock import SimClock, SimEventLoop, run


def test_ten_thousand_second_scenario_runs_in_under_a_second():
    clock = SimClock()
    events: list[tuple[float, str]] = []

    async def provider_call(name: str, latency: float, calls: int) -> int:
        loop = asyncio.get_running_loop()
        for k in range(calls):
            await asyncio.sleep(latency)
            events.append((loop.time(), f"{name}{k}"))
        return calls

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        done = await asyncio.gather(provider_call("writer", 2.0, 2_500), provider_call("turn", 7.5, 1_000),
                                    provider_call("slow", 1_000.0, 10))
        assert done == [2_500, 1_000, 10]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(3_600), timeout=30)
        return loop.time() - start

    real = time.perf_counter()
    elapsed = run(scenario(), clock)
    real = time.perf_counter() - real
    assert elapsed == pytest.approx(10_030.0)
    assert clock.now == pytest.approx(10_030.0)
    assert real < 1.0, f"took {real:.2f} s of real time"
    times = [t for t, _ in events]
    assert times == sorted(times), "timers must fire in time order"
    assert events[0] == (pytest.approx(2.0), "writer0")


def test_wall_time_follows_the_virtual_clock():
    clock = SimClock(start_wall=1_000_000.0)

    async def main() -> None:
        await asyncio.sleep(90)

    run(main(), clock)
    assert clock.wall() == pytest.approx(1_000_090.0)


def test_threads_take_real_time_and_do_not_fire_timers_early():
    clock = SimClock()

    async def main() -> int:
        loop = asyncio.get_running_loop()
        value = await asyncio.wait_for(loop.run_in_executor(None, lambda: (time.sleep(0.05), 7)[1]), 5)
        return value

    assert run(main(), clock) == 7
    assert clock.now < 5, "a thread's real work must not let a virtual timeout expire"


def test_time_never_goes_backwards():
    clock = SimClock()
    with pytest.raises(ValueError):
        clock.advance(-1)
    loop = SimEventLoop(clock)
    try:
        assert loop.time() == 0.0
    finally:
        loop.close()
