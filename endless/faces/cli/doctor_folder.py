"""``endless doctor``'s lines for the folder it runs in: what its memory is keyed by, and which memory it is.

A folder's memory is found by the folder's identity on every machine (an id file,
else the repository's remote, else the path: ``endless.core.store.folder_keys``),
and a memory made under the folder's path before identities stays the folder's
(``endless.core.store.directory``).  Doctor says which of these holds here, so a
person who sees two memories for one project knows why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endless.core.settings import Settings
from endless.core.store import IdFileError, folder_identity, shown_project


def folder_findings(report: Any, settings: Settings, folder: Path) -> None:
    """One ok line naming the folder's identity and memory; a warning when a memory made under the folder's
    path keeps it apart from the memory its identity names elsewhere; an error for a bad id file."""
    from endless.core.store import InvalidKey, find_memory, workspace_key

    try:
        identity = folder_identity(folder)
    except IdFileError as exc:
        report.add("folder.identity", "error", str(exc),
                   "write one id on the file's first line (letters, digits, . _ @ + : -), or remove the file")
        return
    where = f" from {identity.origin}" if identity.origin else ""
    keyed = f"{shown_project(identity.project)}{where}"
    try:
        key = workspace_key(None, folder)
        found = find_memory(key, settings)
    except (InvalidKey, OSError) as exc:
        report.add("folder.identity", "warning", f"{folder} is keyed by {keyed}; its memory cannot be looked "
                                                 f"for: {exc}", "see the store's own finding above")
        return
    if found is None:
        report.add("folder.identity", "ok", f"{folder} is keyed by {keyed}; it has no memory yet (it would be "
                                            f"{key.memory_id})")
        return
    how = ("its identity" if found.name == key.project and not found.via_alias
           else "its identity, through an alias" if found.name == key.project
           else "its path, from before folders had identities" if found.name == identity.path
           else f"the weaker identity {shown_project(found.name)}")
    report.add("folder.identity", "ok", f"{folder} is keyed by {keyed}; its memory is {found.memory_id}, found by "
                                        f"{how}", memory=found.memory_id)
    if found.name != key.project:
        named = find_memory(_own(key), settings)
        if named is not None and named.memory_id != found.memory_id:
            report.add("folder.identity", "warning",
                       f"{folder} keeps memory {found.memory_id} (found by {how}), while its identity "
                       f"{shown_project(key.project)} names memory {named.memory_id} (another clone of it, here "
                       "or on another machine): the two stay apart",
                       "nothing is lost; to use one memory in both places, give this folder an .endless-id naming "
                       "it, or keep working in the clone whose memory you want", found.memory_id)


def _own(key: Any) -> Any:
    """The key under its own name only (the memory the identity names, whatever the path holds)."""
    from endless.core.store import Key

    return Key(key.agent, key.project)

