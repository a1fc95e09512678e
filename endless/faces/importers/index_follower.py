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

What it does to the index is the search floor's own
(:mod:`endless.core.search.finder.follow`): this module starts the process, tells it
of free stretches and waits for it; it never writes the index itself.

Run as ``python -m endless.faces.importers.index_follower FOLDER GRANULARITY``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from endless.core.store import durable
from endless.core.view import FreeStretch
from endless.core.settings import FOLLOWER_WAIT_SECONDS


def start(folder: Path, granularity: str) -> subprocess.Popen:
    """The helper for this memory, started; :func:`finish` ends it."""
    from endless.faces.kit.signals import children_ignore_ctrl_c

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
            try:
                helper.stdin.close()
            except OSError:  # the helper died: it is said below, and the next search catches up
                pass
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


def _follow(folder: Path, granularity: str) -> int:
    """The helper process: read what the import tells, and let the search floor catch the index up."""
    from endless.core.search import follow
    from endless.core.settings import load_settings

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
    try:
        follow.follow(folder, granularity, free, ended, settings=load_settings())
        return 0
    except Exception as exc:  # said through the log, never on the import's screen; the next search catches up
        durable.log("import", f"the import's index helper stopped: {exc!r}")
        return 1


if __name__ == "__main__":
    sys.exit(_follow(Path(sys.argv[1]), sys.argv[2]))
