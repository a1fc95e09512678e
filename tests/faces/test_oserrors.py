"""OS errors said in words by both command lines: ``endless …`` and ``hermes endless …``."""

from __future__ import annotations

import argparse
import errno
import io
from contextlib import redirect_stderr

import pytest

from endless.core.store.durable import LinkRefused
from endless.faces.kit.oserrors import os_error_said
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


def test_endless_memories_lists_the_others_when_one_cannot_be_read(tmp_path, monkeypatch, capsys):
    """One memory behind a refused link is named on stderr; the readable ones are still listed (exit 0)."""
    from endless.cli import main
    from endless.core.store.keys import workspace_key

    root = tmp_path / "root"
    good = F.build(root, turns=2, key=workspace_key(None, tmp_path / "a"))
    bad = F.build(root, turns=2, key=workspace_key(None, tmp_path / "b"))
    good.close()
    bad.close()
    log = bad.folder / "turns.turn.v1.jsonl"
    log.rename(tmp_path / "elsewhere.jsonl")
    log.symlink_to(tmp_path / "elsewhere.jsonl")
    monkeypatch.setenv("ENDLESS_HOME", str(root))
    monkeypatch.setenv("ENDLESS_CONFIG", str(tmp_path / "none.toml"))
    code = main(["memories"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith(good.memory_id) and bad.memory_id not in out
    assert err.startswith(f"[endless] memory {bad.memory_id} cannot be read (") and "is a symbolic link" in err, err
    assert "`endless doctor` says what to do" in err and "Traceback" not in err


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_the_search_index_opens_none_of_its_files_through_a_link(tmp_path, suffix):
    """SQLite follows links to the database and to its -wal and -shm files: each is refused first."""
    from endless.core.search.index import SearchIndex

    index = SearchIndex(tmp_path)
    index.path.parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    link = index.path.with_name(index.path.name + suffix)
    link.symlink_to(outside)
    with pytest.raises(LinkRefused):
        index.db()
    assert outside.read_bytes() == b"precious"
