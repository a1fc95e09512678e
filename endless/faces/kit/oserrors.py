"""OS errors in the person's words, for every command (``endless …`` and ``hermes endless …``).

A permission denied, a folder where a file belongs or a link Endless refuses
ends a command with one line naming the path and what to do, never a
traceback.
"""

from __future__ import annotations

import errno

from endless.core.store import LinkRefused


def os_error_said(exc: OSError) -> str:
    """An OS error in the person's words: what could not be done to which path, and what to do."""
    if isinstance(exc, LinkRefused):
        return str(exc)
    where = exc.filename or "a file"
    if isinstance(exc, PermissionError):
        return (f"permission denied on {where}; it belongs to another user or its mode forbids it "
                f"(see `ls -ld {where}`); run endless as the memory's owner or fix the mode")
    if isinstance(exc, IsADirectoryError):
        return f"{where} is a folder where Endless expects a file; move it away and run `endless doctor`"
    if isinstance(exc, NotADirectoryError):
        return f"a file sits where Endless expects a folder on the way to {where}; move it away"
    if exc.errno == errno.ENOSPC:
        return f"the disk holding {where} is full; free some space and run the command again"
    return f"cannot use {where}: {exc.strerror or exc}; run `endless doctor` to check the memory"
