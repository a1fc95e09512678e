"""Which memory a key names in a store: one made under it, or the one an alias hands it to (DESIGN §2.1).

A workspace's key is its identity (:mod:`endless.core.store.folder_keys`), but a
memory made before identities is under the folder's path, and a memory made
before an ``.endless-id`` was written is under the repository's remote.  Nothing
a person has may be lost or split by the change, so a key is looked for under
every name it may have (``Key.lookups``: the path first, then the identity, then
the identity an id file replaced), and when it is found under another name
than its own, its own is made an **alias** of it: a small record saying "the
memory of (agent, identity) is memory M".  Another machine, whose path differs,
finds M by the identity through the alias.

Aliases are written once and never change (the first one wins, as a memory made
under a key is that key's for good): a key's own memory is never replaced by an
alias, and an alias never moves.  So when two clones on one machine each had a
memory under their paths, each keeps its own, and the identity goes to the first
one opened after the change; `endless memories` shows which.

The files store keeps aliases as ``<root>/aliases/<alias id>.json``; the
PostgreSQL store keeps them, and each memory's key, in the database
(:mod:`endless.core.store.pg_keys`), so every machine sees them.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from endless.core.store import durable
from endless.core.store.keys import MEMORY_ID, Key, memory_id

ALIASES = "aliases"


@dataclass(frozen=True)
class Found:
    """Where a key's memory was found: its id, the name (project) it was found under, and whether
    through an alias."""

    memory_id: str
    name: str
    via_alias: bool


@dataclass(frozen=True)
class Alias:
    """``(agent, project)`` names memory ``target``."""

    agent: str
    project: str
    target: str

    @property
    def alias_id(self) -> str:
        return memory_id(self.agent, self.project)


class Directory(Protocol):
    """What a store says about its memories as a whole (the storage seam's part that is not one memory)."""

    def holds(self, memory_ids: list[str]) -> set[str]:
        """Which of these memories the store holds."""

    def aliases_of(self, memory_ids: list[str]) -> dict[str, str]:
        """The target of each of these ids that is an alias."""

    def add_alias(self, alias: Alias, target_record: dict | None = None) -> str:
        """Record ``alias`` unless its id is taken (a memory, or an alias already); returns the memory its
        id names now.  ``target_record``: the target's key record, so a store that keeps them has it."""

    def claim(self, key: Key, record: dict) -> str:
        """The memory ``key`` names from now on, as it is about to be made: an alias's target if one was
        recorded since it was looked for, else its own id (recorded with ``record``, its key record)."""

    def key_record(self, memory_id: str) -> dict | None:
        """The memory's key record (``key.json``'s fields) when the store knows it and this machine has
        no folder for it yet (another machine made it); None otherwise."""

    def aliases(self) -> list[Alias]:
        """Every alias the store holds."""

    def close(self) -> None: ...


def find(directory: Directory, key: Key) -> Found | None:
    """The memory ``key`` names, looked for under each of its names in order (module doc), or None."""
    ids = [memory_id(key.agent, name) for name in key.lookups]
    held = directory.holds(ids)
    aliased = directory.aliases_of([mid for mid in ids if mid not in held])
    targets = directory.holds(sorted(set(aliased.values()) - held)) if aliased else set()
    for name, mid in zip(key.lookups, ids):
        if mid in held:
            return Found(mid, name, False)
        target = aliased.get(mid)
        if target is not None and (target in held or target in targets):
            return Found(target, name, True)
    return None


def adopt(directory: Directory, key: Key, found: Found, target_record: dict | None = None) -> str | None:
    """Make ``key``'s own name an alias of the memory found under another of its names, unless its
    name is taken; returns the alias's target when one was recorded or already named it.
    ``target_record``: the found memory's key record, for a store that keeps them."""
    if found.name == key.project:
        return None
    target = directory.add_alias(Alias(key.agent, key.project, found.memory_id), target_record)
    return target if target == found.memory_id else None


class FileDirectory:
    """The memories of a files root: ``memories/<id>/key.json`` each, and ``aliases/<id>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def holds(self, memory_ids: list[str]) -> set[str]:
        return {mid for mid in memory_ids if (self.root / "memories" / mid / "key.json").exists()}

    def aliases_of(self, memory_ids: list[str]) -> dict[str, str]:
        found = {}
        for mid in memory_ids:
            alias = self._read(self.root / ALIASES / f"{mid}.json")
            if alias is not None and alias.alias_id == mid:
                found[mid] = alias.target
        return found

    def claim(self, key: Key, record: dict) -> str:
        target = self.aliases_of([key.memory_id]).get(key.memory_id)
        return target if target is not None and self.holds([target]) else key.memory_id

    def add_alias(self, alias: Alias, target_record: dict | None = None) -> str:
        """Written to a sibling, then linked to its name: the first link wins, whole or not at all."""
        mid = alias.alias_id
        if self.holds([mid]):
            return mid
        folder = durable.make_dir(self.root / ALIASES)
        path = folder / f"{mid}.json"
        tmp = folder / f".{mid}.{os.getpid()}.tmp"
        data = orjson.dumps({"alias": mid, "agent": alias.agent, "project": alias.project,
                             "memoryId": alias.target}, option=orjson.OPT_INDENT_2) + b"\n"
        try:
            fd = durable.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                durable.write_all(fd, data)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            durable.fsync_dir(folder)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        stored = self._read(path)
        return stored.target if stored is not None else alias.target

    def key_record(self, memory_id: str) -> dict | None:
        return None  # a memory of the files store is its folder: there is no other record

    def aliases(self) -> list[Alias]:
        folder = self.root / ALIASES
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if name.endswith(".json") and MEMORY_ID.fullmatch(name[:-5]):
                alias = self._read(folder / name)
                if alias is not None and alias.alias_id == name[:-5]:
                    found.append(alias)
        return found

    def close(self) -> None:
        pass

    @staticmethod
    def _read(path: Path) -> Alias | None:
        try:
            value = durable.read_json(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.EISDIR, errno.EACCES, errno.ELOOP):
                raise
            durable.log("directory", f"the alias {path} cannot be read ({exc}); it is left out")
            return None
        if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in
                                                  ("agent", "project", "memoryId")):
            durable.log("directory", f"the alias {path} is not one; it is left out")
            return None
        if not MEMORY_ID.fullmatch(value["memoryId"]):
            return None
        return Alias(value["agent"], value["project"], value["memoryId"])
