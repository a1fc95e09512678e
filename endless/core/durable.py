"""Writes that survive a crash, and reads that never see half a line.

Every line that matters goes out in one ``write`` and is fsynced before the
caller is told it is stored; small files are replaced through a sibling file
and a rename.  Readers stop at the last newline, so a line another process is
still writing is simply not there yet.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import orjson

FILE_MODE = 0o600
DIR_MODE = 0o700


DIAGNOSTICS = "endless"  # the logger every part speaks under, as endless.<part>
DIAGNOSTIC_FORMAT = "[%(name)s] %(message)s"


class StderrHandler(logging.Handler):
    """Writes each record on one line of whatever ``sys.stderr`` is when it comes (tests swap it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(DIAGNOSTIC_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def _diagnostics() -> logging.Logger:
    """The ``endless`` logger, with a stderr handler unless someone gave it a handler already.

    Endless runs inside hosts (Hermes) that may never configure logging; its diagnostics still
    reach the person, on stderr, as they always did.
    """
    logger = logging.getLogger(DIAGNOSTICS)
    if not logger.handlers:
        logger.addHandler(StderrHandler())
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
    return logger


def log(part: str, message: str) -> None:
    """Diagnostics go through ``logging`` as ``endless.<part>``: by default one line on stderr."""
    _diagnostics()
    logging.getLogger(f"{DIAGNOSTICS}.{part}").info(message)


@contextlib.contextmanager
def diagnostics_to(handler: logging.Handler) -> Iterator[logging.Handler]:
    """Send every diagnostic to ``handler`` instead of the usual ones while the block runs."""
    logger = _diagnostics()
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


def make_dir(path: Path) -> Path:
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_append(path: Path) -> int:
    """An O_APPEND descriptor, so lines from several processes never interleave."""
    existed = path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    if not existed:
        fsync_dir(path.parent)
    return fd


def write_all(fd: int, data: bytes, sync: bool = True) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if sync:
        os.fsync(fd)


def append_lines(path: Path, records: list[bytes], sync: bool = True) -> int:
    """Append already-encoded lines in one write; returns the offset of the first."""
    fd = open_append(path)
    try:
        offset = os.lseek(fd, 0, os.SEEK_END)
        write_all(fd, b"".join(records), sync)
        return offset
    finally:
        os.close(fd)


def dumps_line(record: object) -> bytes:
    return orjson.dumps(record) + b"\n"


def replace_file(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a sibling, fsync it, rename it over ``path``, fsync the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        write_all(fd, data, sync)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_json(path: Path, value: object, sync: bool = True) -> None:
    replace_file(path, orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n", sync)


def read_json(path: Path) -> object:
    return orjson.loads(path.read_bytes())


@dataclass
class Tail:
    """What a scan of a JSONL file found after its last complete line."""

    complete_end: int  # offset just past the last newline
    size: int  # file size when read
    partial: bytes  # bytes after the last newline (a line still being written, or torn)


def read_complete(path: Path, start: int) -> tuple[bytes, Tail]:
    """Bytes from ``start`` up to the last newline, and what follows it."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return b"", Tail(start, start, b"")
    cut = data.rfind(b"\n") + 1
    return data[:cut], Tail(start + cut, start + len(data), data[cut:])


def iter_lines(data: bytes, base: int):
    """(offset, line bytes without newline) for each complete line in ``data``."""
    pos = 0
    end = len(data)
    while pos < end:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return
        yield base + pos, data[pos:nl]
        pos = nl + 1


def repair_tail(path: Path, start: int, quarantine: Path, complete: Callable[[bytes], bool]) -> str | None:
    """Under the lock: make ``path`` end with a newline; says what it did, or None.

    A last line that is whole but lacks its newline gets one.  A torn one is
    copied to ``quarantine`` (durably) before it is cut off, so nothing is lost
    and the next append does not glue onto it.
    """
    _, tail = read_complete(path, start)
    if not tail.partial:
        return None
    if complete(tail.partial):
        append_lines(path, [b"\n"])
        return f"added the missing final newline to {path.name}"
    append_lines(quarantine, [dumps_line({"file": path.name, "offset": tail.complete_end,
                                          "bytes": tail.partial.decode("utf-8", "replace")})])
    with open(path, "r+b") as handle:
        handle.truncate(tail.complete_end)
        os.fsync(handle.fileno())
    return f"moved a torn last line ({len(tail.partial)} bytes) of {path.name} to {quarantine.name}"
