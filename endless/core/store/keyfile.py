"""A memory folder's ``key.json``: which key it belongs to, its format and granularity (DESIGN §2.1, §2.5).

Written once when the folder is made, read at every open: a folder that was
moved, edited by hand or written by a newer Endless is refused here, before
any other file of it is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from endless.core.store import durable
from endless.core.errors import MemoryUseError
from endless.core.store.keys import Key

FORMAT = 1


# The folders inside a memory's own (closed to others like the memory's folder itself).
SUBFOLDERS = ("index", "journal", "pending", "marks")


def record(key: Key, granularity: str, agent_name: str | None, clock: Callable[[], float]) -> dict:
    """A new memory's key record, as ``key.json`` holds it (and a database store beside its rows)."""
    return {"format": FORMAT, "memoryId": key.memory_id, "agent": key.agent, "project": key.project,
            "granularity": granularity, "agentName": agent_name, "created": clock()}


def create(path: Path, value: dict) -> None:
    """Write ``key.json`` for a memory folder from its key record."""
    durable.refuse_link(path)  # a dangling link where key.json belongs: refused, never replaced
    durable.make_dir(path.parent)
    durable.write_json(path, value)


def read(path: Path, memory_id: str) -> dict:
    """The key file's fields, checked against the folder's id and this Endless's format.

    Before reading, the root, ``memories/``, ``sessions/``, the memory's folder
    and its subfolders are closed to other users if they were open (an older
    Endless made the root and ``memories/`` 0755).
    """
    folder, root = path.parent, path.parent.parent.parent
    for loose in (root, root / "memories", root / "sessions", folder, *(folder / sub for sub in SUBFOLDERS)):
        durable.tighten(loose)
    try:
        meta = durable.read_json(path)
    except durable.LinkRefused as exc:
        raise MemoryUseError(str(exc)) from None
    except PermissionError:
        raise MemoryUseError(f"cannot read {path}: permission denied; it belongs to another user or its "
                             f"mode forbids reading (see `ls -l {path}`); run endless as the memory's "
                             "owner") from None
    except (OSError, ValueError) as exc:
        raise MemoryUseError(f"cannot read {path}: {exc}; restore it from a backup") from exc
    if not isinstance(meta, dict) or "agent" not in meta or "project" not in meta:
        raise MemoryUseError(f"{path} lacks its agent and project; restore it from a backup")
    version = meta.get("format")
    if version != FORMAT:
        if isinstance(version, int) and version > FORMAT:
            raise MemoryUseError(f"memory {path.parent.name} has format {version}, newer than this "
                                 f"Endless understands ({FORMAT}); upgrade endless-memory to open it")
        raise MemoryUseError(f"memory {path.parent.name} has format {version!r}, which this Endless "
                             f"cannot migrate to {FORMAT}; open it with the version that wrote it "
                             "and export it with `endless export`")
    stored = Key(meta["agent"], meta["project"])
    if stored.memory_id != memory_id:
        raise MemoryUseError(f"{path} names the key of memory {stored.memory_id}, "
                             f"not {memory_id}; the folder was moved or edited by hand")
    return meta
