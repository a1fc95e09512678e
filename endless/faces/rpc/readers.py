"""Memories a server keeps open read-only, one lock each (DESIGN §6).

A :class:`Memory` is not thread-safe, so every use of one goes through its
reader's lock; the lock is held only for short work (catching up, a view, a
zoom, copying the turn offsets a history page or a search needs).  Reading a
history page or searching the log happens outside it on the caller's thread.
The view's value is kept, serialized, until the memory changes, so a host
polling ``endless.view`` costs a catch-up and a copy.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

import orjson

from endless.core.privacy import REGISTRY as FORGET_REGISTRY
from endless.faces.kit import answers
from endless.core.memory import Memory
from endless.core.settings import Settings

OPEN_LIMIT = 64  # memories kept open at once; the least recently used is closed beyond this


class Reader:
    """One memory opened read-only, with its lock and caches."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.lock = threading.Lock()
        self.times = answers.TimeCache()
        self._seen: tuple | None = None
        folder = memory.folder
        # The forget registry too: a forget patches the log and the tree in place (their sizes stay) and
        # appends a line here first, so a forget another process made is never missed.
        self._watched = tuple(str(p) for p in (folder / "view.json", folder / "writer-view.json",
                                               folder / FORGET_REGISTRY))
        self._view_key: tuple | None = None
        self._view_json: bytes = b""
        self._usage = None

    def _catch_up(self) -> None:
        """Catch up on other processes' writes, if the files say there are any (under the lock).

        Five ``stat`` calls when nothing changed: the order log, the tree and
        the forget registry only grow (a forget's in-place patches come after
        its registry line), and a view is replaced by a rename, so equal
        inodes, sizes and times mean nothing new.  Sizes are taken before catching up, so a write
        landing meanwhile is caught at the next request.
        """
        seen = (self.memory.store.stamp(), *(_stamp(path) for path in self._watched))
        if seen != self._seen:
            self.memory.catch_up()
            self._seen = seen

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Memory]:
        """The memory, caught up, for the ``with`` block (holding the lock)."""
        with self.lock:
            self._catch_up()
            yield self.memory

    def view_json(self) -> bytes:
        """The serialized value of ``endless.view``, recomputed only when the memory changed."""
        with self.fresh() as m:
            # The count of forgets too: a forget may leave every other count as it was.
            key = (m.total, m.lines_built, m.log.forgets, m.views.stamp, len(m.views.chat.parts),
                   m.views.chat.shrinking)
            if key != self._view_key:
                self._view_json = orjson.dumps(answers.view(m, self.times))
                self._view_key = key
            return self._view_json

    def zoom(self, args: dict) -> dict:
        with self.fresh() as m:
            return answers.zoom(m, args, self.times)

    def summary(self) -> dict:
        with self.fresh() as m:
            if self._usage is None:
                from endless.writer.usage import UsageLog
                self._usage = UsageLog(m.folder, readonly=True)
            return answers.memory_summary(m, self._usage)

    def history(self, args: dict, settings: Settings) -> dict:
        return answers.history(self.memory, args, settings, guard=_Fresh(self))

    def search(self, args: dict, settings: Settings) -> dict:
        return answers.search(self.memory, args, settings, guard=_Fresh(self))

    def close(self) -> None:
        with self.lock:
            self.memory.close()


class _Fresh:
    """A reusable ``with`` guard (search enters it twice): the lock, and a catch-up."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def __enter__(self) -> Memory:
        self.reader.lock.acquire()
        try:
            self.reader._catch_up()
        except BaseException:
            self.reader.lock.release()
            raise
        return self.reader.memory

    def __exit__(self, *exc: object) -> None:
        self.reader.lock.release()


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


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

    def is_open(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and memory_id in self._open

    def summary(self, memory_id: str) -> dict:
        return self.get(memory_id).summary()

    def close(self) -> None:
        with self._lock:
            readers, self._open = list(self._open.values()), OrderedDict()
        for reader in readers:
            reader.close()


# -- the host RPC's methods on open readers: (readers, args) -> value -----------------
# (``endless.faces.rpc.app.METHODS`` names them; the worker processes run them too, so they live here,
# away from Starlette.)


def bind(readers: Readers, args: dict) -> dict:
    return answers.bind(readers.settings, args, readers.root)


def memories(readers: Readers, args: dict) -> dict:
    return answers.memories(readers.settings, args, readers.root, summary_of=readers.summary)


def view(readers: Readers, args: dict) -> bytes:
    """The view's JSON value, serialized once and kept."""
    return readers.get(args.get("memoryId")).view_json()


def zoom(readers: Readers, args: dict) -> dict:
    return readers.get(args.get("memoryId")).zoom(args)


def history(readers: Readers, args: dict) -> dict:
    return readers.get(args.get("memoryId")).history(args, readers.settings)


def search(readers: Readers, args: dict) -> dict:
    return readers.get(args.get("memoryId")).search(args, readers.settings)


def forget(readers: Readers, args: dict) -> dict:
    """The one method that changes a memory: it opens it writable, under its lock."""
    from endless.faces.kit.forgetting import forget_value

    return forget_value(readers.settings, args, readers.root, merge_apart=True)
