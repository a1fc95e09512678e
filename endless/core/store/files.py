"""The embedded store: a memory kept as files in one folder (DESIGN §2.5), behind the storage seam.

One object per open memory that holds the order log, the tree's lines, the
change lock and the writer's lease, and makes journals and durable marks.
``Memory`` asks it for these and nothing else of the folder's layout; the
contract it keeps is :class:`endless.core.store.contract.Store`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from endless.core.settings import Settings
from endless.core.store import durable
from endless.core.store.contract import Batch
from endless.core.store.journal import Journal
from endless.core.store.locks import ChangeLock, Lease
from endless.core.store.log import OrderLog
from endless.core.store.messages import Message
from endless.core.store.tree import TreeStore

MARKS = "marks"  # the folder of small named records (durable_mark)


class FileStore:
    """A memory folder's files: the log, the tree, the lock and the lease."""

    def __init__(self, folder: Path, granularity: str, settings: Settings, clock: Callable[[], float]) -> None:
        self.folder = folder
        self.log = OrderLog(folder, granularity)
        self.tree = TreeStore(folder, granularity)
        self.lock = ChangeLock(folder / "lock")
        self.lease = Lease(folder, expiry=settings.lease_expiry_seconds, clock=clock)

    def load(self) -> None:
        """Read the log's and the tree's indexes (not the history: opening stays flat as it grows)."""
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

    def close(self) -> None:
        self.log.close()
        self.tree.close()

    def _mark_path(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"a mark's name is one plain file name, not {name!r}")
        return durable.make_dir(self.folder / MARKS) / name
