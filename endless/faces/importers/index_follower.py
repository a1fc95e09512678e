"""The search index of a long import, kept current by a second process on the second core.

A commit indexes its messages itself when it can (``index_upkeep.after_commit``).
In an import of a hundred thousand messages that is about a tenth of the
time, and a thread does not help: binding the rows holds the interpreter's
lock, and the two threads convoy (measured slower).  So a long import
leaves the index to this helper: it follows the memory's files and catches
the index up from them, as any search may, until the import closes its
standard input, and then once more to the end.  The import waits for it, so
when ``endless import`` returns the index is current.  If the helper fails,
or the import is killed, nothing is lost: the next search catches up.

Run as ``python -m endless.faces.importers.index_follower ROOT MEMORY_ID``.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import threading
from pathlib import Path

from endless.core import durable
from endless.core.settings import FOLLOWER_POLL_SECONDS, FOLLOWER_WAIT_SECONDS


def start(root: Path, memory_id: str) -> subprocess.Popen:
    """The helper for this memory, started; :func:`finish` ends it."""
    from endless.faces.signals import children_ignore_ctrl_c

    with children_ignore_ctrl_c():  # a Ctrl-C reaches the import, which stops this helper
        return subprocess.Popen([sys.executable, "-m", __name__, str(root), memory_id], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)


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


def _follow(root: Path, memory_id: str) -> int:
    from endless.core import index_upkeep
    from endless.core.memory import Memory

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (ignored from the start already: see start)
    ended = threading.Event()

    def watch_input() -> None:
        sys.stdin.buffer.read()  # until the import closes it (or ends)
        ended.set()

    threading.Thread(target=watch_input, daemon=True).start()
    try:
        memory = Memory.open(memory_id=memory_id, root=root, readonly=True, create=False)
        try:
            while True:
                last = ended.wait(FOLLOWER_POLL_SECONDS)
                memory.catch_up()
                index_upkeep.catch_up(memory.search_index, memory.index_sources(), math.inf)
                if last:
                    return 0
        finally:
            memory.close()
    except Exception as exc:  # said through the log, never on the import's screen; the next search catches up
        durable.log("import", f"the import's index helper stopped: {exc!r}")
        return 1


if __name__ == "__main__":
    sys.exit(_follow(Path(sys.argv[1]), sys.argv[2]))
