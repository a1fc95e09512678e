"""The embedded store: a memory kept as files in one folder (DESIGN §2.5), behind the storage seam.

One object per open memory that holds the order log, the tree's lines, the
change lock and the writer's lease, and makes journals and durable marks.
``Memory`` asks it for these and nothing else of the folder's layout; the
contract it keeps is :class:`endless.core.store.contract.Store`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from endless.core.settings import Settings
from endless.core.store import checks, durable
from endless.core.store.contract import Batch, check_mark_name
from endless.core.store.journal import Journal
from endless.core.store.locks import ChangeLock, Lease
from endless.core.store.log import OrderLog
from endless.core.store.messages import Message
from endless.core.store.registry import FileRegistry
from endless.core.store.tree import TreeStore

MARKS = "marks"  # the folder of small named records (durable_mark)


class FileStore(checks.LogAndTreeChecks):
    """A memory folder's files: the log, the tree, the lock and the lease."""

    views_synced = True  # (the view files are fsynced like the rest of the memory's files)
    forgets_at_once = False  # (a forget's steps are made crash-atomic by its redo file: module forget)

    def __init__(self, folder: Path, granularity: str, settings: Settings, clock: Callable[[], float]) -> None:
        self.folder = folder
        self.log = OrderLog(folder, granularity)
        self.tree = TreeStore(folder, granularity)
        self.tree.message_source, self.tree.messages_read = self.log.source_text, lambda: self.log.total
        self.lock = ChangeLock(folder / "lock")
        self.lease = Lease(folder, expiry=settings.lease_expiry_seconds, clock=clock)
        self.forgets = FileRegistry(folder)
        self.before_patch: Callable[[list[tuple[bytes, bytes]]], None] = lambda spans: None  # (never called:
        # the one copy of the files is patched by the process that forgets, which scrubs its side copies)

    def load(self) -> None:
        """Read the log's and the tree's indexes (not the history: opening stays flat as it grows), the
        tree's files of an older format renamed first."""
        migrated = self.tree.migrate()
        if migrated:
            durable.log("tree", f"{self.folder.name}: {migrated}")
        self.log.load_index()
        self.tree.load_index()

    def journal(self, session: str, title: str, keep: Callable[[Message], Message] | None = None) -> Journal:
        return Journal(self.folder, session, title, keep)

    def durable_mark(self, name: str, value: bytes) -> None:
        durable.replace_file(self._mark_path(name), value)

    def read_mark(self, name: str) -> bytes | None:
        try:
            return durable.read_all(self._mark_path(name))
        except FileNotFoundError:
            return None

    def bulk_commit(self, batch: Batch, sync: bool = True) -> None:
        self.log.add(batch.lines, batch.infos, sync)

    def durable(self) -> None:
        """(Every append was fsynced before it returned.)"""

    def watch(self, wake: Callable[[], None]) -> bool:
        """Files tell nobody when they grow: a waiter polls them."""
        return False

    def stamp(self) -> tuple:
        """A cheap value that changes whenever any process stored to the log or the tree (a reader that
        sees it unchanged has nothing to catch up): each file's inode, size and time."""
        return tuple(_stat(path) for path in (self.log.path, self.tree.path))

    def scan(self, past_end: list[tuple[int, int]]) -> checks.Scan:
        """The full check of ``endless doctor``: every record and line read, every stored row and slot checked."""
        return checks.scan(self.log, self.tree, past_end)

    def set_aside(self, beyond: Callable[[tuple[int, int]], bool], total: int, stale: list[tuple[int, ...]],
                  quarantine: Path) -> int:
        """Lines describing messages past the log's end leave the tree (kept in ``quarantine``)."""
        return checks.set_aside(self.log, self.tree, beyond, total, stale, quarantine)

    def close(self) -> None:
        self.log.close()
        self.tree.close()

    def _mark_path(self, name: str) -> Path:
        check_mark_name(name)
        return durable.make_dir(self.folder / MARKS) / name


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
