"""A Ctrl-C that lands while a file's folders are opened one at a time is raised as itself.

Opening a file below a memory's root walks its folders one descriptor at a
time (never through a link).  A Ctrl-C raised right after one folder's
descriptor was closed made the walk close it again: the second close failed
with EBADF, that error replaced the Ctrl-C, and a caller that says a failed
write (the turn index's save) and goes on swallowed it, so an import ran on
to its end after Ctrl-C (found by tests/faces/test_signals.py, about one run
in four).
"""

from __future__ import annotations

import os

import pytest

from endless.core.store import durable


def test_a_ctrl_c_at_a_folder_close_is_raised_and_closes_each_folder_once(tmp_path, monkeypatch) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file").write_bytes(b"x")
    durable.guard_root(root)
    real_close = os.close
    closed: list[int] = []

    def close_then_interrupt(fd: int) -> None:
        real_close(fd)  # the close itself succeeds; the Ctrl-C arrives just after it
        closed.append(fd)
        if len(closed) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(durable.os, "close", close_then_interrupt)
    # (closing one twice raises EBADF from the real close, in place of the Ctrl-C)
    with pytest.raises(KeyboardInterrupt):
        durable.open_fd(root / "a" / "b" / "file", os.O_RDONLY)
    assert len(closed) == 3  # the root's and a's as the walk went on, and b's after the Ctrl-C
