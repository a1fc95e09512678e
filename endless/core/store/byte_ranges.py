"""Reading and patching the file store's JSONL files by byte address.

The order log and the tree are sequences of stored lines, each at a byte
address (its offset in the address space the store gives them: for this
backend, the file itself).  The floors above read ranges of that space (the
index catching up, a pattern scan going backwards, a forget finding a span)
and a forget patches same-length bytes in it; they do it through the log's
and the tree's methods, which call these.  Nothing above the store floor opens
the files.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Callable, Iterator

import orjson

from endless.core.settings import INDEX_PARSE_GROUP, RECORDS_READ_WINDOW
from endless.core.store import durable

READ_WINDOW = 8 << 20  # bytes read at once going forward
BACK_WINDOW = 4 << 20  # bytes read at once going backward (grows for a longer line)

Shape = Callable[[object, "bool | None", "int | None"], str]


def read(path: Path, start: int, stop: int) -> bytes:
    """The bytes of ``[start, stop)`` (shorter where the file ends first; empty if it is missing)."""
    if stop <= start:
        return b""
    try:
        fd = durable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return _read_fd(fd, start, stop)
    finally:
        os.close(fd)


def _read_fd(fd: int, start: int, stop: int) -> bytes:
    parts, pos = [], start
    while pos < stop:
        data = os.pread(fd, min(stop - pos, READ_WINDOW), pos)
        if not data:
            break
        parts.append(data)
        pos += len(data)
    return b"".join(parts)


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def complete_end(path: Path) -> int:
    """Just past the file's last newline now (what another process appended included)."""
    length = size(path)
    if length == 0:
        return 0
    try:
        fd = durable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        pos = length
        while pos > 0:
            start = max(0, pos - BACK_WINDOW)
            data = os.pread(fd, pos - start, start)
            nl = data.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            pos = start
        return 0
    finally:
        os.close(fd)


def ends_line(path: Path, offset: int) -> bool:
    """Whether ``offset`` is just past a newline of the file (0 always is)."""
    if offset == 0:
        return True
    try:
        with durable.open_read(path) as handle:
            handle.seek(offset - 1)
            return handle.read(1) == b"\n"
    except (FileNotFoundError, OSError):
        return False


def first_tid(path: Path) -> str:
    """The tid of the log's first record (it names the log: a replaced log has another)."""
    head = read(path, 0, 512)
    at = head.find(b'"tid":"')
    if at < 0:
        return ""
    end = head.find(b'"', at + 7)
    return head[at + 7:end].decode("ascii", "replace") if end > 0 else ""


def _windows(path: Path, start: int, stop: int, window: int = READ_WINDOW) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of ``[start, stop)`` ``window`` bytes at a time, each ending with a whole line (a
    line longer than the window is read whole; a torn last line ends the reading)."""
    try:
        fd = durable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        pos = start
        while pos < stop:
            data = os.pread(fd, min(stop - pos, window), pos)
            if not data:
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than the window: read it whole
                nl = _find_newline(fd, pos + len(data), stop)
                data, cut = os.pread(fd, nl + 1 - pos, pos), nl + 1 - pos
                if not data.endswith(b"\n"):
                    return
            yield pos, data[:cut]
            pos += cut
    finally:
        os.close(fd)


def lines(path: Path, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line without its newline)`` of each complete line in ``[start, stop)``, a window at a time."""
    for pos, data in _windows(path, start, stop):
        yield from durable.iter_lines(data, pos)


def records(path: Path, start: int, stop: int, first_turn: int, shape: Shape
            ) -> Iterator[tuple[int, int, dict]]:
    """``(turn, byte end, record)`` of the log's lines in ``[start, stop)``; damaged lines are skipped.

    A record is whole as the log reads it (``shape``: its checksum, every
    field), and its ids come after the last one yielded (a record moved or
    copied from elsewhere would give two messages one id).
    """
    crc32 = zlib.crc32
    expected = 0
    pos, turn = start, first_turn
    for _, data in _windows(path, start, stop, RECORDS_READ_WINDOW):
        group_lines = data.split(b"\n")
        group_lines.pop()
        for at in range(0, len(group_lines), INDEX_PARSE_GROUP):  # parsed a group at a time
            group = group_lines[at:at + INDEX_PARSE_GROUP]
            try:
                parsed = list(map(orjson.loads, group))
            except orjson.JSONDecodeError:  # a damaged line among them: each alone
                parsed = list(map(_loaded, group))
            for line, record in zip(group, parsed):
                pos += len(line) + 1
                if line[-16:-10] == b',"c":"' and line[-2:] == b'"}':  # sealed, checked inline (a million lines)
                    # As Endless wrote it if its checksum holds: only its place is checked (moved, copied).
                    whole = (b"%08x" % crc32(line[:-16]) == line[-10:-2] and type(record) is dict
                             and record.get("turn") == turn and type(record.get("id")) is int
                             and type(record.get("m")) is list)
                else:
                    whole = not shape(record, None, turn)
                if whole and record["id"] >= expected:
                    expected = record["id"] + len(record["m"])
                    yield turn, pos, record
                turn += 1


def backward(path: Path, end: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of whole lines, from ``end`` (a line end) back to the file's start.

    A window's last byte is a newline, so the line start looked for is a
    newline before it.  A window holding only part of one line grows until it
    reaches one (or the file's start), so every step moves back, whatever a
    record's size.
    """
    try:
        fd = durable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        pos, window = end, BACK_WINDOW
        while pos > 0:
            start = max(0, pos - window)
            data = os.pread(fd, pos - start, start)
            if start > 0:
                nl = data.find(b"\n", 0, len(data) - 1)
                if nl < 0:
                    window *= 2
                    continue
                data = data[nl + 1:]
                start += nl + 1
            yield start, data
            pos, window = start, BACK_WINDOW
    finally:
        os.close(fd)


Write = tuple[int, "bytes | list[tuple[int, bytes]]"]


def patch(path: Path, writes: list[Write], step: Callable[[str], None] = lambda name: None) -> None:
    """Same-length writes in place, then one fsync (each write is a point a crash may cut: ``step``).

    A write given as ``(start, [(offset, bytes), ...])`` is one span read,
    patched and written whole (a record's blanked texts with its new
    checksum: a reader never meets one without the other).
    """
    if not writes:
        return
    fd = durable.open_fd(path, os.O_RDWR)
    try:
        for offset, data in writes:
            if isinstance(data, list):
                span = bytearray(os.pread(fd, data[-1][0] + len(data[-1][1]) - offset, offset))
                for at, piece in data:
                    span[at - offset:at - offset + len(piece)] = piece
                data = bytes(span)
            os.pwrite(fd, data, offset)
            step("patch")
        os.fsync(fd)
    finally:
        os.close(fd)


def _find_newline(fd: int, pos: int, stop: int) -> int:
    while pos < stop:
        data = os.pread(fd, min(stop - pos, READ_WINDOW), pos)
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl
        pos += len(data)
    return stop - 1


def _loaded(line: bytes) -> object:
    """The line's value, or None for a line that is not JSON (a record is checked where it is read)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
