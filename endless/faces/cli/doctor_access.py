"""``endless doctor``'s access checks: links, unreadable folders and lock files of one memory.

Kept apart from the health checks of :mod:`endless.faces.cli.doctor`: these
run before the memory is opened, so a folder the doctor cannot enter or a
link planted inside it is named as what it is, instead of failing the open
(or being followed, which Endless never does: ``durable.open_fd``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

# The folders of a memory that hold its files (the memory's own folder first).
SUBFOLDERS = ("", "index", "journal", "pending", "marks")


def access_findings(report: Any, folder: Path, mid: str) -> bool:
    """Add an error for each link, unreadable folder or unwritable lock file; False if the memory cannot be opened."""
    usable = True
    for sub in SUBFOLDERS:
        here = folder / sub if sub else folder
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            continue
        except OSError as exc:
            report.add("memory.access", "error", f"memory {mid}: cannot look at {here}: {exc.strerror}",
                       "run endless as the memory's owner", mid)
            return False
        if stat.S_ISLNK(info.st_mode):
            report.add("memory.links", "error", f"memory {mid}: {here} is a symbolic link; Endless "
                                                "never follows links inside a memory", "replace it with "
                                                f"the folder it points to, or remove it (rm {here})", mid)
            usable = False
            continue
        try:
            names = os.listdir(here)
        except OSError as exc:
            report.add("memory.access", "error", f"memory {mid}: cannot list {here}: {exc.strerror}",
                       f"run endless as the memory's owner, or give the folder back to them (chmod 700 {here})",
                       mid)
            return False
        for name in sorted(names):
            path = here / name
            if not sub and name in SUBFOLDERS:
                continue  # a subfolder is looked at (and named) as itself
            if os.path.islink(path):
                report.add("memory.links", "error",
                           f"memory {mid}: {path} is a symbolic link; Endless refuses to open it",
                           f"remove it (rm {path}); if it pointed at a real memory file, move that file here", mid)
                usable = False
    for name in ("lock", "lock.holder"):
        path = folder / name
        if os.path.lexists(path) and not os.path.islink(path) and not _writable(path):
            report.add("memory.lock", "error", f"memory {mid}: this user cannot write {path}, so the next "
                                               "change to the memory (a turn, an import) fails",
                       f"run endless as the memory's owner, or fix the file (chmod 600 {path})", mid)
            usable = False
    return usable


def _writable(path: Path) -> bool:
    """Whether this process can open ``path`` for writing (tried, so root and ACLs answer truly)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    os.close(fd)
    return True
