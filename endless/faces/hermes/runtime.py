"""The plugin's process-wide state: one event loop thread, the open memories and their writer pools.

Hermes calls hooks, middleware and tools from its own threads (the CLI's
agent thread, the gateway's executor threads).  A :class:`Memory` is used
from one thread only, so every memory operation runs on one background
asyncio loop owned by this module; callers wait for the result.  The writer
pool of each memory opened here runs on that loop too, as the lease allows
(another process may hold the lease; its pool then writes).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from endless.core.store import durable
from endless.core.store import Key
from endless.core.memory import Memory
from endless.core.settings import Settings, load_settings


def log(message: str) -> None:
    durable.log("hermes", message)


class Loop:
    """A daemon thread running one asyncio loop; ``run``/``call`` wait for results."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="endless-loop", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro, timeout: float | None = None) -> Any:
        return self.submit(coro).result(timeout)

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run a plain function on the loop thread and return its result (or raise its error)."""
        if threading.current_thread() is self.thread:
            return fn(*args, **kwargs)

        async def wrapper():
            return fn(*args, **kwargs)
        return self.run(wrapper())


@dataclass
class Open:
    memory: Memory
    stop: asyncio.Event
    pool: asyncio.Task | None = None
    writer: Any = None  # the WriterPool, whose stats say when the person should hear of it


@dataclass
class Runtime:
    """Everything the plugin keeps for the life of the Hermes process."""

    settings: Settings
    loop: Loop = field(default_factory=Loop)
    memories: dict[str, Open] = field(default_factory=dict)
    opened: dict[str, str] = field(default_factory=dict)  # a key's own memory id -> the memory it opened
    api_keys: dict[str, str] = field(default_factory=dict)  # base URL -> key Hermes uses (never stored)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def memory(self, key: Key, window_tokens: int | None = None, for_turn: bool = True) -> Memory:
        """The memory of ``key``, opened once per process and caught up at each use; a turn's also
        starts its writer pool.

        A slash command (``for_turn=False``) only reads: it raises ``NoMemory``
        rather than create a memory, and leaves the pool to the first turn,
        which brings the model's window and hands over the key Hermes uses
        for the writer's route (``remember_key``; the pool keeps each route's
        client once made).
        """
        with self.lock:
            # (a key's memory may be under another of its names: a folder's path from before identities)
            entry = self.memories.get(self.opened.get(key.memory_id, key.memory_id))
            if entry is None:
                memory = self.loop.call(Memory.open, key, settings=self.settings, window_tokens=window_tokens,
                                        create=for_turn)
                entry = Open(memory, self.loop.call(asyncio.Event))
                self.memories[memory.memory_id] = entry
                self.opened[key.memory_id] = memory.memory_id
            else:
                # Kept open for the life of Hermes: before it serves a turn or a command, it reads what
                # other processes did meanwhile (a forget above all: its lines' cached texts go).
                self.loop.call(entry.memory.catch_up)
                if window_tokens is not None and entry.memory.window_tokens is None:
                    self.loop.call(entry.memory.set_window, window_tokens)
            if for_turn and entry.pool is None:
                entry.pool = self.loop.call(self._start_pool, entry)
            return entry.memory

    def _start_pool(self, entry: Open) -> asyncio.Task:
        from endless.writer.pool import WriterPool

        pool = WriterPool(entry.memory, self._provider)  # the writer_route setting, else each chat's own
        entry.writer = pool
        task = asyncio.ensure_future(pool.run(entry.stop))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or log(
            f"the writer pool of {entry.memory.memory_id} stopped: {t.exception()!r}"))
        return task

    def writer_stats(self, memory_id: str) -> Any:
        """The ``PoolStats`` of this process's writer pool for a memory, or None."""
        entry = self.memories.get(memory_id)
        return None if entry is None or entry.writer is None else entry.writer.stats

    def _provider(self, route):
        from endless.llm.connect import make_provider

        key = self.api_keys.get((route.base_url or "").rstrip("/"))
        return make_provider(route, api_key=key)

    def remember_key(self, base_url: str | None, api_key: str | None) -> None:
        if base_url and api_key:
            self.api_keys[base_url.rstrip("/")] = api_key

    def close(self) -> None:
        """Stop the pools (their unwritten lines wait for the next lease holder) and close memories."""
        with self.lock:
            entries, self.memories = list(self.memories.values()), {}

        async def stop_all():
            for entry in entries:
                entry.stop.set()
            tasks = [e.pool for e in entries if e.pool is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            for entry in entries:
                entry.memory.close()
        try:
            self.loop.run(stop_all(), timeout=10)
        except Exception as exc:  # at exit: say so, never raise
            log(f"closing memories at exit: {exc!r}")


_RUNTIME: Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> Runtime:
    """The process-wide runtime, created on first use (never at import: Hermes probes plugins)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = Runtime(load_settings())
            atexit.register(_RUNTIME.close)
        return _RUNTIME


def memory_root() -> Path:
    return runtime().settings.memory_root()
