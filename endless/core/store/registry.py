"""The forget registry: what was forgotten and when (ids, byte addresses, line names; never a text).

It is read by every process that opens the memory, so it lives with the
store: ``forgotten.jsonl`` in a memory folder kept in files (one line per
forget, :class:`FileRegistry`), the ``endless_forgets`` table for a memory kept
in PostgreSQL (:class:`PgRegistry`), shared by every machine.
:mod:`endless.core.privacy.forget` says what the entries hold and when they
are written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from endless.core.store import durable

if TYPE_CHECKING:  # (the PostgreSQL registry's parts: a file store never loads the driver)
    from endless.core.store.pg_db import Database
    from endless.core.store.pg_replica import Replica

REGISTRY = "forgotten.jsonl"


class FileRegistry:
    """The registry as a file of lines, appended with one write and fsync each."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / REGISTRY

    def read(self, after: int) -> tuple[list[bytes], int]:
        """The entries past position ``after`` (a byte offset here), and the position after them."""
        data, tail = durable.read_complete(self.path, after)
        return [line for _, line in durable.iter_lines(data, 0)], tail.complete_end

    def add(self, op: str, entry: bytes) -> None:
        """Register forget ``op`` (its entry, one JSON line), durable before it returns."""
        durable.append_lines(self.path, [entry if entry.endswith(b"\n") else entry + b"\n"])

    def holds(self, op: str) -> bool:
        """Whether the forget ``op`` is registered (a replayed one is registered once)."""
        return self.path.exists() and f'"op":"{op}"'.encode() in durable.read_all(self.path)


class PgRegistry:
    """The forget registry in the database (``endless_forgets``), shared by every machine; positions are
    the entries' sequence numbers (the file store's is :class:`FileRegistry`).

    A catch-up reads the registry first, then each stream: one query reads the registry's last number
    and both streams' state, which the copies take for their next look (a catch-up costs one round trip
    when no forget is new)."""

    def __init__(self, db: "Database", memory: str, replicas: "dict[str, Replica]") -> None:
        self.db, self.memory, self.replicas = db, memory, replicas

    def read(self, after: int) -> tuple[list[bytes], int]:
        rows = self.db.rows("SELECT stream, end_offset, patches, generation, "
                            "(SELECT coalesce(max(seq), 0) FROM endless_forgets) FROM endless_streams "
                            "WHERE memory = %s", (self.memory,))
        for stream, end, patches, generation, _ in rows:
            if stream in self.replicas:
                self.replicas[stream].stash((int(end), int(patches), str(generation)))
        if not rows or int(rows[0][4]) <= after:
            return [], after
        rows = self.db.rows("SELECT seq, entry FROM endless_forgets WHERE seq > %s ORDER BY seq", (after,))
        return [bytes(entry) for _, entry in rows], (int(rows[-1][0]) if rows else after)

    def add(self, op: str, entry: bytes) -> None:
        self.db.rows(REGISTER, (op, entry), "registering a forget", again=False)

    def holds(self, op: str) -> bool:
        return bool(self.db.rows("SELECT 1 FROM endless_forgets WHERE op = %s", (op,)))


# (a forget runs under the memory's lock: the numbers follow on one at a time)
REGISTER = ("INSERT INTO endless_forgets (seq, op, entry) SELECT coalesce(max(seq), 0) + 1, %s, %s "
            "FROM endless_forgets ON CONFLICT (op) DO NOTHING")
