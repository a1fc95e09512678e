"""The search index of a long import, kept current by a second process on the second core.

A commit indexes its messages itself when it can (``index_upkeep.after_commit``).
In an import of a hundred thousand messages that is about a tenth of the
time, and a thread does not help: binding the rows holds the interpreter's
lock, and the two threads convoy (measured slower).  So a long import
leaves the index to this helper: it follows the memory's files and catches
the index up from them, as any search may, until the import closes its
standard input, and then once more to the end.  Through that input the
import also names each stretch of the tree file it filled with free lines
alone, which the index leaves out anyway: the helper steps over them
unread.  The import waits for the helper, so when ``endless import``
returns the index is current.  If the helper fails,
or the import is killed, nothing is lost: the next search catches up.

It reads only what the index needs: the files' complete ends and, now and
then, one stored line's size.  (A whole read-only memory would hold every
part of the views and read each new tail of the tree at once: 520 MB at a
million messages, measured.)

Run as ``python -m endless.faces.importers.index_follower FOLDER GRANULARITY``.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from endless.core import durable
from endless.core.free_nodes import FreeStretch
from endless.core.settings import FOLLOWER_POLL_SECONDS, FOLLOWER_WAIT_SECONDS


def start(folder: Path, granularity: str) -> subprocess.Popen:
    """The helper for this memory, started; :func:`finish` ends it."""
    from endless.faces.signals import children_ignore_ctrl_c

    with children_ignore_ctrl_c():  # a Ctrl-C reaches the import, which stops this helper
        return subprocess.Popen([sys.executable, "-m", __name__, str(folder), granularity], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)


def tell_free(helper: subprocess.Popen) -> Callable[[FreeStretch], None]:
    """What tells the helper of each stretch of free lines the import stored (it need not read them)."""
    def tell(stretch: FreeStretch) -> None:
        try:
            helper.stdin.write(b"%d %d %d\n" % stretch)
            helper.stdin.flush()
        except (OSError, ValueError):  # the helper is gone: the next search catches the index up
            pass

    return tell


def finish(helper: subprocess.Popen, completed: bool) -> None:
    """Let the helper index the rest and wait for it (``completed``), or stop it at once."""
    try:
        if completed:
            helper.stdin.close()
            try:
                code = helper.wait(FOLLOWER_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                durable.log("import", "the search index was not brought up to date by the import's helper "
                                      f"({'it took too long' if code is None else f'exit {code}'}); "
                                      "the next search catches it up")
    finally:
        if helper.poll() is None:
            helper.terminate()
            helper.wait()


def _complete_end(path: Path) -> int:
    """Where the file's last whole line ends (the writer may be in the middle of the next)."""
    try:
        fd = durable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        pos = os.fstat(fd).st_size
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            pos = start
        return 0
    finally:
        os.close(fd)


def _follow(folder: Path, granularity: str) -> int:
    from endless.core import index_upkeep
    from endless.core.log import OrderLog
    from endless.core.search_index import SearchIndex
    from endless.core.tree import TreeStore

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (ignored from the start already: see start)
    ended = threading.Event()

    free: dict[int, FreeStretch] = {}  # the import's stretches of free lines, by where they start

    def watch_input() -> None:
        for line in sys.stdin.buffer:  # until the import closes it (or ends)
            try:
                stretch = FreeStretch(*(int(word) for word in line.split()))
            except (TypeError, ValueError):
                continue
            free[stretch.start] = stretch
        ended.set()

    threading.Thread(target=watch_input, daemon=True).start()
    index = SearchIndex(folder)
    log_path, tree = OrderLog(folder, granularity).path, TreeStore(folder, granularity)
    loaded = False
    stored_size = index_upkeep.node_size(tree)

    def size_of(level: int, ix: int) -> int | None:  # a line before this pass: its slot, as last saved
        nonlocal loaded
        if not loaded:
            tree.load_index()
            loaded = True
        return stored_size(level, ix)

    read_to = (-1, -1)
    try:
        while True:
            ends = (_complete_end(log_path), _complete_end(tree.path))
            # Files that grew since the last pass are read again at once: the import commits faster than
            # the index keeps up, and a pause here would leave the helper's core idle.
            last = ended.wait(0 if ends != read_to else FOLLOWER_POLL_SECONDS)
            if last or ends == read_to:
                ends = (_complete_end(log_path), _complete_end(tree.path))
            read_to = ends
            loaded = False
            inode = durable.inode(tree.path)

            def free_until(offset: int) -> int | None:
                stretch = free.get(offset)
                return stretch.end if stretch is not None and stretch.inode == inode else None

            sources = index_upkeep.Sources(log_path, ends[0], tree.path, ends[1], size_of, free_until)
            index_upkeep.catch_up(index, sources, math.inf)
            if last:
                return 0
    except Exception as exc:  # said through the log, never on the import's screen; the next search catches up
        durable.log("import", f"the import's index helper stopped: {exc!r}")
        return 1
    finally:
        tree.close()
        index.close()


if __name__ == "__main__":
    sys.exit(_follow(Path(sys.argv[1]), sys.argv[2]))
