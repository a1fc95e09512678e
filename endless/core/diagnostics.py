"""Where Endless's diagnostics go: Python logging, under the logger ``endless.<part>``.

Run on its own (the ``endless`` commands, a script, the tests) Endless writes
them to stderr as ``[endless.part] message``, through a handler of ours on
the ``endless`` logger.  Inside a host that keeps its own log files (Hermes
writes ``logs/agent.log``), :func:`into_host_logs` takes that handler away
and lets the records reach the host's handlers, so nothing of ours prints
into the host's screen between replies; what needs the person goes through
the host's own notices instead.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Iterator

LOGGER = "endless"
FORMAT = "[%(name)s] %(message)s"
LOG_FILE_FORMAT = "%(asctime)s [%(name)s] %(message)s"  # a line of a log file says when


class _Stderr(logging.StreamHandler):
    """A stderr handler that looks ``sys.stderr`` up at each record (it may be replaced after import)."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.INFO)  # debug records are for a host's log files only
        self.setFormatter(logging.Formatter(FORMAT))

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


_STDERR = _Stderr()
_QUIET = logging.NullHandler()  # inside a host: records reach its handlers, never Python's last resort


def to_stderr() -> None:
    """Diagnostics on stderr, and only there (the default)."""
    _send_to(_STDERR, instead_of=_QUIET, propagate=False)


def into_host_logs() -> None:
    """Diagnostics into the host's own logging (its files), none of ours on stderr."""
    _send_to(_QUIET, instead_of=_STDERR, propagate=True)


def _send_to(handler: logging.Handler, instead_of: logging.Handler, propagate: bool) -> None:
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.INFO)
    logger.removeHandler(instead_of)
    if handler not in logger.handlers:
        logger.addHandler(handler)
    logger.propagate = propagate


@contextlib.contextmanager
def diverted_to(handler: logging.Handler) -> Iterator[logging.Handler]:
    """Every diagnostic to ``handler`` alone while the block runs (``endless chat`` holds them
    while the person types, and prints them before the next prompt)."""
    logger = logging.getLogger(LOGGER)
    saved = list(logger.handlers)
    for old in saved:
        logger.removeHandler(old)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        for old in saved:
            logger.addHandler(old)


def log(part: str, message: str, level: int = logging.INFO) -> None:
    """One diagnostic, from ``part`` (``writer``, ``hermes``, …)."""
    logging.getLogger(f"{LOGGER}.{part}").log(level, message)


to_stderr()
