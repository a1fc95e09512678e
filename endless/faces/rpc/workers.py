"""Searches and history pages in worker processes, so they never hold the server's GIL.

A literal search scans the whole order log and a history page parses up to
2 MB of turns; in threads they would take the interpreter lock from the event
loop, and ``view`` and ``zoom`` would wait behind them.  Each worker process
opens the memories it is asked about read-only and cold, like any reader,
and keeps them open.  Workers are started with ``spawn`` (never ``fork``: a
harness process has threads of its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from endless.core.settings import Settings

_state: dict[str, Any] = {}


def start(settings: Settings, root: str) -> None:
    """The initializer of each worker process."""
    import os

    from endless.faces.rpc.readers import Readers
    from endless.faces.kit.signals import quiet_worker

    quiet_worker()

    try:
        # Below the server's own priority: when the machine is busy, the event loop that
        # answers view and zoom runs first, and searches take the time left over.
        os.nice(settings.rpc_search_nice)
    except (AttributeError, OSError):
        pass
    _state["readers"] = Readers(settings, Path(root))


def ready() -> bool:
    """A no-op, to have the pool start its processes before the first search needs them."""
    return True


def run(handler: Callable[[Any, dict], Any], args: dict) -> bytes:
    """The JSON value of a method the app's table runs here (``endless.history``, ``endless.search``).

    ``handler`` is the method's handler from ``endless.faces.rpc.readers`` (it
    crosses the process boundary by name).  Serializing in the worker keeps
    that work off the server, and bytes cross the process boundary as one copy.
    Raises ``AnswerError`` as the app does.
    """
    import orjson

    return orjson.dumps(handler(_state["readers"], args))
