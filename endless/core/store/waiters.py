"""Waiting until something holds in a memory, across processes (DESIGN §2.5, "settle").

A waiter wakes at once when this process stores something (``notify``), and
when another process does if the store tells it (a PostgreSQL store's
``LISTEN`` thread calls ``notify`` too); otherwise it polls, since another
process's writes to files reach us only by looking.  Waiters may sit on any
event loop: they are woken thread-safely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Union

if TYPE_CHECKING:  # asyncio is imported where a wait runs: a read command never loads it
    import asyncio


class Waiters:
    def __init__(self) -> None:
        self._futures: list[asyncio.Future] = []
        self._told = 0  # notifications so far: one between a look and the wait is not slept through

    def notify(self) -> None:
        self._told += 1
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                try:
                    future.get_loop().call_soon_threadsafe(_resolve, future)
                except RuntimeError:
                    pass

    async def wait(self, holds: Callable[[], bool], timeout: float, poll: Union[float, Callable[[], float]]) -> bool:
        """Until ``holds()`` is true (checked after each wake and at least every ``poll`` s, or every ``poll()``
        s as it says after each look: a store that tells of changes may stop telling); False on timeout."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            told = self._told
            if holds():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            future = loop.create_future()
            self._futures.append(future)
            if self._told != told:  # told while looking (another thread): look again at once
                if future in self._futures:
                    self._futures.remove(future)
                continue
            try:
                await asyncio.wait_for(future, min(remaining, poll() if callable(poll) else poll))
            except (asyncio.TimeoutError, TimeoutError):
                pass
            finally:
                if future in self._futures:
                    self._futures.remove(future)


    async def settle(self, catch_up: Callable[[], object], holds: Callable[[], bool], timeout: float,
                     every: float, told: Callable[[], bool], poll: float | None = None) -> bool:
        """``Memory.settle``: until ``holds()`` after catching up; False on timeout.

        ``told()``: whether the store tells this process of other processes' writes (starting it
        listening the first time); while it does, a look comes only at a wake, and with ``poll``
        given (a predicate that also reads a person's stop button, every ``poll`` s) the memory is
        caught up only when something was told since the last look.  While it does not, every
        look catches up, at least every ``every`` s (``settle_poll_seconds``).
        """
        seen = [-1]

        def look() -> bool:
            if poll is None or not told() or self._told != seen[0]:
                seen[0] = self._told
                catch_up()
            return holds()

        quiet, busy = (timeout, every) if poll is None else (poll, poll)
        return await self.wait(look, timeout, lambda: quiet if told() else min(busy, every))


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
