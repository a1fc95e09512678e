"""The forget registry of a memory kept in files: ``forgotten.jsonl`` in its folder (one line per forget).

What was forgotten and when (ids, byte addresses, line names; never a text)
is read by every process that opens the memory, so it lives with the store:
this file for the file store, the ``endless_forgets`` table for a memory kept
in PostgreSQL (:class:`endless.core.store.postgres.PgRegistry`), shared by
every machine.  :mod:`endless.core.privacy.forget` says what the entries hold
and when they are written.
"""

from __future__ import annotations

from pathlib import Path

from endless.core.store import durable

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
