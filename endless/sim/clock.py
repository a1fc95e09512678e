"""Simulated time for asyncio: timers fire at once, in order, without waiting.

The event loop's clock is virtual.  Whenever the loop has nothing ready and
would sleep until its next timer, it jumps the clock to that timer instead, so
hours of provider latency, retries and timeouts run in milliseconds.  Work
handed to threads (``run_in_executor``) still takes real time; while any is in
flight the clock stands still and the loop waits for it for real.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")
DEFAULT_START = 1_798_761_600.0  # 2027-01-01 00:00 UTC: wall time at virtual zero


class SimClock:
    """Virtual seconds since the start; ``wall()`` is the matching Unix time."""

    def __init__(self, start_wall: float = DEFAULT_START) -> None:
        self.now = 0.0
        self.start_wall = start_wall

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.start_wall + self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("simulated time cannot go backwards")
        self.now += seconds


class _SimSelector(selectors.BaseSelector):
    """Polls real file descriptors without blocking; a wait for a timer becomes a clock jump."""

    def __init__(self, clock: SimClock, loop: "SimEventLoop") -> None:
        self._inner = selectors.DefaultSelector()
        self._clock = clock
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_map(self):  # type: ignore[override]
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None):  # type: ignore[override]
        events = self._inner.select(0)
        if events or timeout == 0:
            return events
        if self._loop.real_work > 0 or timeout is None:
            # Threads are working, or nothing is scheduled at all: wait for real events.
            return self._inner.select(None if timeout is None else min(timeout, 0.05))
        self._clock.advance(timeout)
        return []


class SimEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is a :class:`SimClock`."""

    def __init__(self, clock: SimClock | None = None) -> None:
        self.clock = clock or SimClock()
        self.real_work = 0
        super().__init__(_SimSelector(self.clock, self))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self.clock.monotonic()

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.real_work += 1

        def done(_: asyncio.Future) -> None:
            self.real_work -= 1

        future.add_done_callback(done)
        return future


def run(main: Awaitable[T], clock: SimClock | None = None) -> T:
    """Run a coroutine to completion on simulated time (like ``asyncio.run``)."""
    with asyncio.Runner(loop_factory=lambda: SimEventLoop(clock)) as runner:
        return runner.run(main)  # type: ignore[arg-type]
