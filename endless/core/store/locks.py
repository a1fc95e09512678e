"""Cross-process exclusion for one memory: the short change lock and the writer lease.

The change lock is an OS file lock held for the few milliseconds a change
takes.  The lease says which process runs the writer pool; it is a small JSON
file naming the holder, backed by an OS lock the holder keeps on a file of its
own, so a dead holder is noticed at once and a frozen one after the expiry.

The change lock uses ``filelock``.  Liveness beacons (the lease holder's, an
in-flight turn's) are plain ``flock`` locks on files of their own: they are
held for a long time, probed by other processes and by the holder itself,
and must vanish the moment their process dies.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


from endless.core.settings import STORE_LOCK_RETRY_SECONDS
from endless.core.store import durable


class LockBusy(RuntimeError):
    """Another process holds the memory's lock for longer than we can wait."""


_THREAD_LOCKS: dict[str, threading.RLock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path: Path) -> threading.RLock:
    """One lock per memory and process, held with the file lock: the file lock is shared by every
    thread of the process (``thread_local=False``), so two threads holding two ``Memory`` objects of
    one folder (a Hermes chat committing while its History page forgets) would not exclude each other."""
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(str(path), threading.RLock())


class ChangeLock:
    """The memory's short lock; reentrant within one thread, excluding other threads and processes."""

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = path
        self._file_lock: Any = None
        self.holder_path = path.with_name(path.name + ".holder")
        self.timeout = timeout

    @property
    def _lock(self) -> Any:
        """The file lock, made on first use: a reader never locks, so it never loads ``filelock``
        (a fifth of a read command's start-up)."""
        if self._file_lock is None:
            from filelock import FileLock

            self._file_lock = FileLock(str(self.path), timeout=self.timeout, mode=durable.FILE_MODE,
                                       thread_local=False, is_singleton=True)
        return self._file_lock

    def __enter__(self) -> "ChangeLock":
        from filelock import Timeout

        threads = _thread_lock(self.path)
        if not threads.acquire(timeout=self.timeout):
            raise LockBusy(f"the memory lock {self.path} is held by another thread of this process for more "
                           f"than {self.timeout:.0f} s; if it hangs, stop this process")
        if self._lock.lock_counter == 0:
            try:
                durable.refuse_link(self.path)  # filelock opens it with O_TRUNC: never through a link
                durable.refuse_link(self.holder_path)
            except BaseException:
                threads.release()
                raise
        try:
            self._lock.acquire(poll_interval=STORE_LOCK_RETRY_SECONDS)
        except Timeout as exc:
            threads.release()
            raise LockBusy(f"the memory lock {self.path} is held by pid {holder_pid(self.holder_path)}"
                           f" for more than {self.timeout:.0f} s; if that process hangs, stop it") from exc
        if self._lock.lock_counter == 1:
            _write_pid(self.holder_path)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._lock.release()
        finally:
            _thread_lock(self.path).release()

    @property
    def held(self) -> bool:
        return self._file_lock is not None and self._file_lock.is_locked


def _write_pid(path: Path) -> None:
    # Fixed width, written in place: no truncation on the hot path.
    fd = durable.open_fd(path, os.O_WRONLY | os.O_CREAT)
    try:
        os.pwrite(fd, f"{os.getpid():>12}\n".encode(), 0)
    finally:
        os.close(fd)


def holder_pid(path: Path) -> int | None:
    try:
        with durable.open_read(path) as handle:
            text = handle.read(64).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


class Beacon:
    """An exclusive ``flock`` held while its owner lives; ``release`` drops it."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def try_lock(path: Path) -> Beacon | None:
    """Take an OS lock on ``path`` without waiting, or None if someone holds it."""
    while True:
        fd = durable.open_fd(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # The file may have been removed (and made anew) between the open and the lock:
        # a lock on the removed file guards nothing, so lock the file that is there now.
        try:
            here = os.stat(path)
            mine = os.fstat(fd)
            if (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
                return Beacon(fd, path)
        except FileNotFoundError:
            pass
        os.close(fd)


def is_held(path: Path) -> bool:
    """Whether some live process holds the beacon at ``path``."""
    if not path.exists():
        return False
    probe = try_lock(path)
    if probe is None:
        return True
    probe.release()
    return False


@dataclass
class LeaseInfo:
    pid: int
    token: str
    renewed: float


@dataclass(frozen=True)
class WantedBy:
    """A process waiting for the writer lease, and when it last said so (the memory's clock)."""

    pid: int
    at: float


WANT_REFRESH_SECONDS = 5.0  # how often a waiting process says again that it waits


class Lease:
    """The writer lease of one memory, as seen and held by this process.

    ``clock`` gives wall-clock seconds; tests inject one.  Taking over requires
    the change lock, which the caller holds.
    """

    def __init__(self, folder: Path, *, expiry: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self.path = folder / "lease.json"
        self.expiry = expiry
        self.clock = clock
        self.token: str | None = None
        self._alive: Beacon | None = None
        self._wanted_at = float("-inf")  # when this process last said it waits for the lease

    def _alive_path(self, token: str) -> Path:
        return self.folder / f"lease.{token}.alive"

    def read(self) -> LeaseInfo | None:
        try:
            data = durable.read_json(self.path)
            return LeaseInfo(int(data["pid"]), str(data["token"]), float(data["renewed"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def holder_alive(self, info: LeaseInfo) -> bool:
        return is_held(self._alive_path(info.token))

    @property
    def held(self) -> bool:
        info = self.read()
        return self.token is not None and info is not None and info.token == self.token

    def try_acquire(self) -> bool:
        """Take the lease if it is free, dead or expired (call under the change lock)."""
        info = self.read()
        if info is not None and info.token == self.token:
            return self.renew()
        if info is not None and self.holder_alive(info) and self.clock() - info.renewed < self.expiry:
            return False
        if info is not None:
            _remove(self._alive_path(info.token))
        token = secrets.token_hex(8)
        alive = try_lock(self._alive_path(token))
        if alive is None:
            return False
        self.release_local()
        self.token, self._alive = token, alive
        durable.write_json(self.path, {"pid": os.getpid(), "token": token, "renewed": self.clock()})
        return True

    def renew(self) -> bool:
        """Refresh the heartbeat; False when another process has taken the lease."""
        info = self.read()
        if self.token is None or info is None or info.token != self.token:
            self.release_local()
            return False
        durable.write_json(self.path, {"pid": os.getpid(), "token": self.token,
                                       "renewed": self.clock()}, sync=False)
        return True

    def release(self) -> None:
        info = self.read()
        if self.token is not None and info is not None and info.token == self.token:
            _remove(self.path)
        self.release_local()

    def want(self) -> None:
        """Say that this process waits for the lease (``lease.wanted``: its pid and when, refreshed at most
        every few seconds).  A holder that only stands in while no chat runs (a catch-up an import
        started in the background) reads it with :meth:`wanted` and steps aside."""
        now = self.clock()
        if now - self._wanted_at < WANT_REFRESH_SECONDS:
            return
        self._wanted_at = now
        try:
            durable.replace_file(self.folder / "lease.wanted", b'{"pid":%d,"at":%r}' % (os.getpid(), now),
                                 sync=False)  # (advisory: a lost one is written again at the next look)
        except OSError:
            pass

    def wanted(self) -> WantedBy | None:
        """The last process that said it waits for the lease, and when (None: none did)."""
        try:
            data = durable.read_json(self.folder / "lease.wanted")
            return WantedBy(int(data["pid"]), float(data["at"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def release_local(self) -> None:
        if self._alive is not None:
            self._alive.release()
            _remove(self._alive_path(self.token or ""))
        self.token, self._alive = None, None


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
