"""OS errors said in words by both command lines: ``endless …`` and ``hermes endless …``."""

from __future__ import annotations

import argparse
import errno
import io
from contextlib import redirect_stderr

import pytest

from endless.core.durable import LinkRefused
from endless.faces.cli.oserrors import os_error_said
from endless.faces.hermes import commands

import rpc_fixtures as F


@pytest.mark.parametrize("error,words", [
    (PermissionError(errno.EACCES, "Permission denied", "/m/key.json"), ["permission denied on /m/key.json", "ls -ld"]),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "/m/turns"), ["/m/turns is a folder", "endless doctor"]),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/m/x/y"), ["a file sits where"]),
    (OSError(errno.ENOSPC, "No space left on device", "/m/log"), ["disk holding /m/log is full"]),
    (OSError(errno.EIO, "Input/output error", "/m/log"), ["cannot use /m/log: Input/output error", "doctor"]),
    (LinkRefused("/m/lock.holder"), ["/m/lock.holder is a symbolic link", "rm /m/lock.holder"]),
])
def test_each_os_error_names_the_path_and_what_to_do(error, words):
    said = os_error_said(error)
    for word in words:
        assert word in said, said
    assert "Errno" not in said and "Traceback" not in said


def test_hermes_endless_view_says_a_refused_link_in_words(tmp_path, monkeypatch):
    memory = F.build(tmp_path / "root", turns=3)
    mid, log = memory.memory_id, memory.folder / "turns.turn.v1.jsonl"
    memory.close()
    log.rename(tmp_path / "elsewhere.jsonl")
    log.symlink_to(tmp_path / "elsewhere.jsonl")
    monkeypatch.setenv("ENDLESS_HOME", str(tmp_path / "root"))
    monkeypatch.setenv("ENDLESS_CONFIG", str(tmp_path / "none.toml"))
    parser = argparse.ArgumentParser(prog="hermes endless")
    commands.setup_cli(parser)
    err = io.StringIO()
    with redirect_stderr(err):
        code = commands._run_cli(parser.parse_args(["view", "--memory", mid]))
    assert code == 1
    assert "is a symbolic link" in err.getvalue() and "Traceback" not in err.getvalue()
