"""Writes that survive a crash, and reads that never see half a line.

Every line that matters goes out in one ``write`` and is fsynced before the
caller is told it is stored; small files are replaced through a sibling file
and a rename.  Readers stop at the last newline, so a line another process is
still writing is simply not there yet.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

import orjson

from endless.core import diagnostics

FILE_MODE = 0o600
DIR_MODE = 0o700
# Never through a link: a link planted where a memory file belongs would make our writes land in
# (or our truncations cut) a file elsewhere, with our rights.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class LinkRefused(OSError):
    """A symbolic link sits where a memory's file or folder belongs; it is never followed."""

    def __init__(self, path: Path | str, folder: bool = False) -> None:
        if folder:
            said = (f"{path} is a symbolic link where Endless keeps a folder; Endless never follows links "
                    f"inside its memory root (it could point anywhere, and writes would land there); replace it "
                    f"with the folder it points to, or remove it (rm {path}), then run `endless doctor`")
        else:
            said = (f"{path} is a symbolic link; Endless opens no file of a memory through a link (it could "
                    f"point anywhere); remove it (`rm {path}`) and run `endless doctor`")
        super().__init__(errno.ELOOP, said, str(path))

    def __str__(self) -> str:
        return str(self.strerror)


# The memory roots this process uses (ENDLESS_HOME and the like).  The root itself may be a link (a
# home on another disk); below it no folder is followed through one: a file is opened by a descent
# from the root, one folder at a time with O_NOFOLLOW, so a link planted for memories/, a memory,
# its index/ or journal/ is refused instead of having our writes land where it points.
_ROOTS: set[str] = set()
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def guard_root(root: Path | str) -> None:
    """From now on, no folder below ``root`` is followed if it is a symbolic link (idempotent)."""
    _ROOTS.add(os.path.abspath(root).rstrip(os.sep) or os.sep)


def _below_root(path: Path | str) -> tuple[str, list[str]] | None:
    """(the guarded root holding ``path``, the folders from it down to ``path``'s own), or None."""
    full = os.path.abspath(path)
    best = None
    for root in _ROOTS:
        if full.startswith(root + os.sep) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        return None
    return best, full[len(best) + 1:].split(os.sep)[:-1]


def _open_folders(root: str, folders: list[str], path: Path | str) -> int:
    """A descriptor of the last of ``folders`` below ``root``, opened one at a time, never through a link."""
    fd = os.open(root, _DIR_FLAGS)
    here = root
    try:
        for name in folders:
            here = os.path.join(here, name)
            try:
                inner = os.open(name, _DIR_FLAGS | NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and os.path.islink(here):
                    raise LinkRefused(here, folder=True) from None
                raise type(exc)(exc.errno, exc.strerror, str(path)) from None
            # ``fd`` names the open folder before the old one is closed: a Ctrl-C raised at the close
            # closed it twice (EBADF, which a caller's ``except OSError`` took for a failed write, and the
            # Ctrl-C was lost: an import ran on to the end); in a process with threads the second close
            # could shut another thread's new file.  (Ctrl-C here may leak ``previous``: the process ends.)
            previous, fd = fd, inner
            os.close(previous)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse_linked_folders(path: Path | str) -> None:
    """Refuse ``path`` and every folder above it, up to its guarded root, if one is a link.

    For folders other code walks by name (``glob``, ``sqlite3``, ``filelock``, ``mkdir``):
    ``lstat`` of one folder at a time, from the root down.
    """
    below = _below_root(os.path.join(os.path.abspath(path), "x"))
    if below is None:
        return
    root, folders = below
    here = root
    for name in folders:
        here = os.path.join(here, name)
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):
            raise LinkRefused(here, folder=True)


def refuse_linked_subfolders(folder: Path | str) -> None:
    """:func:`refuse_linked_folders` of ``folder``, then of each folder in it (``index/``, ``journal/``,
    ``pending/``, any other): a memory opens only when none of its folders is a link."""
    refuse_linked_folders(folder)
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_symlink() and os.path.isdir(entry.path):
            raise LinkRefused(entry.path, folder=True)


def open_fd(path: Path | str, flags: int, mode: int = FILE_MODE) -> int:
    """``os.open`` that refuses a symbolic link at ``path``, or at a folder above it below its root,
    with :class:`LinkRefused`."""
    below = _below_root(path)
    if below is None:
        return _open_at(path, path, flags, mode, None)
    folder = _open_folders(below[0], below[1], path)
    try:
        return _open_at(path, os.path.basename(path), flags, mode, folder)
    finally:
        os.close(folder)


def _open_at(path: Path | str, name: Path | str, flags: int, mode: int, folder: int | None) -> int:
    try:
        return os.open(name, flags | NOFOLLOW, mode, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise LinkRefused(path) from None
        if folder is not None:  # name the whole path, as an open by path would
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        raise


def inode(path: Path | str) -> int | None:
    """Which file is at ``path`` now (None if none): a file replaced by a rename has another."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def open_read(path: Path | str) -> BinaryIO:
    """A binary reader of ``path`` that never follows a link."""
    return os.fdopen(open_fd(path, os.O_RDONLY), "rb")


def read_all(path: Path | str) -> bytes:
    """The whole of ``path``, never through a link."""
    with open_read(path) as handle:
        try:
            return handle.read()
        except OSError as exc:  # (a read names the descriptor, "3 is a folder…")
            raise named(exc, path) from None


def refuse_link(path: Path | str) -> None:
    """Refuse ``path`` if it, or a folder above it below its root, is a link (for files other
    libraries open by name: the lock, the index)."""
    refuse_linked_folders(os.path.dirname(os.path.abspath(path)))
    if os.path.islink(path):
        raise LinkRefused(path)


def log(part: str, message: str, level: int = logging.INFO) -> None:
    """A diagnostic through :mod:`endless.core.diagnostics` (stderr on its own, a host's log files inside one)."""
    diagnostics.log(part, message, level)


def make_dir(path: Path) -> Path:
    """``path`` and any missing parents, each made 0700 (``Path.mkdir`` makes parents 0777 - umask).

    Below a guarded root a link among them is refused (:func:`refuse_linked_folders`), before and
    after: ``exists`` follows a link planted there, and ``mkdir`` leaves one in place."""
    refuse_linked_folders(path)
    missing = []
    here = Path(path)
    while not here.exists():
        missing.append(here)
        if here.parent == here:
            break
        here = here.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
    if missing:
        refuse_linked_folders(path)
    return path


def tighten(folder: Path) -> str | None:
    """Make a folder of ours 0700 if others may read or enter it; says what it did, or None.

    Others listing ``memories/`` learn every memory id; a loose folder made by
    an older Endless (or by hand) is closed when a memory under it opens.
    """
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not info.st_mode & 0o077 or info.st_uid != os.geteuid():
        return None
    try:
        os.chmod(folder, DIR_MODE)
    except OSError:
        return None
    note = f"{folder} was open to other users (mode {stat.S_IMODE(info.st_mode):o}); made it 0700"
    log("durable", note, logging.WARNING)
    return note


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_append(path: Path) -> int:
    """An O_APPEND descriptor, so lines from several processes never interleave."""
    existed = path.exists()
    fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
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


def named(exc: OSError, path: Path | str) -> OSError:
    """The error with the path it happened to (``os.write`` and ``fsync`` name none: "[Errno 28]" alone
    tells a person nothing of which disk is full)."""
    if isinstance(exc.filename, str):
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def append_lines(path: Path, records: list[bytes], sync: bool = True) -> int:
    """Append already-encoded lines in one write; returns the offset of the first."""
    try:
        fd = open_append(path)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, b"".join(records), sync)
            return offset
        finally:
            os.close(fd)
    except OSError as exc:
        raise named(exc, path) from None


def dumps_line(record: object) -> bytes:
    return orjson.dumps(record) + b"\n"


def replace_file(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a sibling, fsync it, rename it over ``path``, fsync the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_all(fd, data, sync)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)  # never left behind (a full disk used to leave empty ones)
        except OSError:
            pass
        if exc.filename == str(tmp) and exc.filename2 is not None:
            exc = OSError(exc.errno, exc.strerror, str(path))  # the rename: the file it replaces is the one to name
        raise named(exc, path) from None
    if sync:
        fsync_dir(path.parent)


def write_json(path: Path, value: object, sync: bool = True, compact: bool = False) -> None:
    """A JSON file replaced whole; indented for the small files a person may open, compact for the
    large derived ones (a view of a long unwritten import lists a million parts: a third of the bytes)."""
    replace_file(path, orjson.dumps(value, option=0 if compact else orjson.OPT_INDENT_2) + b"\n", sync)


def read_json(path: Path) -> object:
    return orjson.loads(read_all(path))


@dataclass
class Tail:
    """What a scan of a JSONL file found after its last complete line."""

    complete_end: int  # offset just past the last newline
    size: int  # file size when read
    partial: bytes  # bytes after the last newline (a line still being written, or torn)


def read_complete(path: Path, start: int) -> tuple[bytes, Tail]:
    """Bytes from ``start`` up to the last newline, and what follows it."""
    try:
        with open_read(path) as handle:
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
    with os.fdopen(open_fd(path, os.O_RDWR), "r+b") as handle:
        handle.truncate(tail.complete_end)
        os.fsync(handle.fileno())
    return f"moved a torn last line ({len(tail.partial)} bytes) of {path.name} to {quarantine.name}"
