"""Real git repositories for the tests of folders' identities (made with the real ``git``, no personal config)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def repo(path: Path, remote: str | None = None) -> Path:
    """A repository at ``path`` with one commit, and ``remote`` as its origin."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", cwd=path)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=path)
    if remote is not None:
        git("remote", "add", "origin", remote, cwd=path)
    return path
