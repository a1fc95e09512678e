"""The host RPC's credential: a token in a file only the memory root's owner can read.

Loopback alone lets every user of the machine in; the token file
(``<root>/rpc-token``, mode 0600, in a 0700 root) narrows the RPC to the
user whose memories they are.  A host sends it on each request as
``Authorization: Bearer <token>``.  It is made once and kept, so a host
started before or after the server reads the same value; a file found
readable by others is treated as known to them and replaced.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from pathlib import Path

from endless.core.store import durable

FILE_NAME = "rpc-token"
HEADER = "authorization"
SCHEME = "Bearer"


def token_path(root: Path) -> Path:
    return Path(root) / FILE_NAME


def ensure_token(root: Path) -> str:
    """The root's RPC token, made (0600) if there is none or the one there is open to others."""
    root = Path(root)
    durable.make_dir(root)
    durable.tighten(root)
    path = token_path(root)
    for _ in range(3):
        try:
            fd = durable.open_fd(path, os.O_RDONLY)
        except FileNotFoundError:
            if _create(path):
                continue
            continue
        try:
            info = os.fstat(fd)
            data = os.read(fd, 256).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file; remove it and start the server again",
                          str(path))
        if info.st_mode & 0o077 or info.st_uid != os.geteuid() or len(data) < 32:
            durable.log("rpc", f"{path} was readable by others or not ours; made a new RPC token",
                        logging.WARNING)
            os.unlink(path)
            continue
        return data
    raise OSError(errno.EAGAIN, f"cannot make the RPC token file {path}; check the folder's owner", str(path))


def _create(path: Path) -> bool:
    """Write a new token with O_EXCL (another process making one at once wins; we read theirs)."""
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    fd = durable.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        durable.write_all(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process made it first
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    durable.fsync_dir(path.parent)
    return True


def read_token(root: Path) -> str:
    """The token a host sends, read from the root (``OSError`` if the server never made one)."""
    with durable.open_read(token_path(root)) as handle:
        return handle.read(256).decode("ascii").strip()


def auth_headers(root: Path) -> dict[str, str]:
    """The header a host adds to each ``POST /api/endless.<method>``."""
    return {HEADER: f"{SCHEME} {read_token(root)}"}


def matches(sent: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value carries ``token`` (compared in constant time)."""
    if not sent:
        return False
    scheme, _, value = sent.strip().partition(" ")
    return scheme.lower() == SCHEME.lower() and secrets.compare_digest(value.strip().encode(), token.encode())
