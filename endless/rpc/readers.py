"""Memories a server keeps open read-only, one lock each (DESIGN §6).

A :class:`Memory` is not thread-safe, so every use of one goes through its
reader's lock; the lock is held only for short work (catching up, a view, a
zoom, copying the turn offsets a history page or a search needs).  Reading a
history page or searching the log happens outside it on the caller's thread.
The view's value is kept, serialized, until the memory changes, so a host
polling ``endless.view`` costs a catch-up and a copy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import orjson

from endless import answers
from endless.memory import Memory
from endless.settings import Settings

OPEN_LIMIT = 64  # memories kept open at once; the least recently used is closed beyond this


class Reader:
    """One memory opened read-only, with its lock and caches."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.lock = threading.Lock()
        self.times = answers.TimeCache()
        self._view_key: tuple | None = None
        self._view_json: bytes = b""
        self._usage = None

    def view_json(self) -> bytes:
        """The serialized value of ``endless.view``, recomputed only when the memory changed."""
        with self.lock:
            m = self.memory
            m.refresh()
            key = (m.total, m.tree.count, m._view_stamp, len(m.chat.parts), m.chat.shrinking)
            if key != self._view_key:
                self._view_json = orjson.dumps(answers.view(m, self.times))
                self._view_key = key
            return self._view_json

    def zoom(self, args: dict) -> dict:
        with self.lock:
            return answers.zoom(self.memory, args, self.times)

    def summary(self) -> dict:
        with self.lock:
            if self._usage is None:
                from writer.usage import UsageLog
                self._usage = UsageLog(self.memory.folder, readonly=True)
            return answers.memory_summary(self.memory, self._usage)

    def history(self, args: dict, settings: Settings) -> dict:
        return answers.history(self.memory, args, settings, guard=self.lock)

    def search(self, args: dict, settings: Settings) -> dict:
        return answers.search(self.memory, args, settings, guard=self.lock)

    def close(self) -> None:
        with self.lock:
            self.memory.close()


class Readers:
    """Open readers by memory id, opened on first use."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings = settings
        self.root = root
        self._lock = threading.Lock()
        self._open: OrderedDict[str, Reader] = OrderedDict()

    def get(self, memory_id: object) -> Reader:
        mid = answers.memory_id_arg(memory_id)
        with self._lock:
            reader = self._open.get(mid)
            if reader is not None:
                self._open.move_to_end(mid)
                return reader
        memory = answers.open_memory(self.settings, mid, self.root)  # outside the lock: may read a while
        with self._lock:
            reader = self._open.get(mid)
            if reader is not None:
                memory.close()
                return reader
            reader = self._open[mid] = Reader(memory)
            while len(self._open) > OPEN_LIMIT:
                _, old = self._open.popitem(last=False)
                old.close()
            return reader

    def summary(self, memory_id: str) -> dict:
        return self.get(memory_id).summary()

    def close(self) -> None:
        with self._lock:
            readers, self._open = list(self._open.values()), OrderedDict()
        for reader in readers:
            reader.close()
