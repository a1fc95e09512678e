"""Damaged files as a person meets them (issue #33 items 8, 9 and 14), through ``endless`` subprocesses.

A damaged search index never blocks a forget or any write after it, and
doctor reports it; a changed log record is damage, never another message
or a traceback; a tampered index row never lets a filter through what it
excludes; a full disk leaves no temporary file and names the path.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from commands import endless_command, fresh_home

MESSAGES = 40


def run(env: dict, workspace: Path | None, *args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    full = [*endless_command(), *args] + ([] if workspace is None else ["--workspace", str(workspace)])
    proc = subprocess.run(full, capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check is not None:
        assert proc.returncode == check, (args, proc.stdout, proc.stderr)
    return proc


@pytest.fixture
def imported(tmp_path: Path) -> tuple[dict, Path, Path]:
    """(environment, workspace, memory folder): 20 turns imported, the search index built."""
    home, workspace, env = fresh_home(tmp_path)
    env["HERMES_HOME"] = str(tmp_path / "no-hermes")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(orjson.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                            "content": f"message {i} about topic alpha{i}",
                                            "at": 1_700_000_000 + 60 * i}).decode() + "\n"
                              for i in range(MESSAGES)))
    run(env, workspace, "import", str(source), "--no-progress")
    assert "alpha5" in run(env, workspace, "search", "alpha5").stdout
    (folder,) = (home / "memories").iterdir()
    return env, workspace, folder


def _damage_index(path: Path, table: str | None = None) -> None:
    """200 bytes overwritten at the start of ``table``'s first page (its schema still opens: only the words
    table fails, ``vtable constructor failed: words``), or of every page after the first."""
    db = sqlite3.connect(path)
    size = db.execute("PRAGMA page_size").fetchone()[0]
    pages = [root for name, root in db.execute("SELECT name, rootpage FROM sqlite_master") if name == table]
    db.close()
    data = bytearray(path.read_bytes())
    for start in ([(page - 1) * size for page in pages] if table else range(size, len(data), size)):
        data[start:start + 200] = b"\xaa" * 200
    path.write_bytes(bytes(data))


DAMAGE = pytest.mark.parametrize("table", ["words_config", None], ids=["words-table", "every-page"])


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".damaged", ".redo")))


# -- item 8: a damaged search index -------------------------------------------------------------


@DAMAGE
def test_a_damaged_search_index_never_blocks_forget_or_a_later_write(imported, tmp_path, table):
    env, workspace, folder = imported
    index = folder / "index" / "search.v1.sqlite"
    _damage_index(index, table)
    found = run(env, None, "doctor", check=1)
    assert re.search(r"ERROR .*the search index .*search\.v1\.sqlite is damaged", found.stdout), found.stdout
    assert "`endless doctor --repair` builds it again" in found.stdout
    forgot = run(env, workspace, "forget", "3")
    assert "\nforgot 1 message;" in forgot.stdout, forgot.stdout
    assert "search index" in forgot.stderr and "damaged" in forgot.stderr  # said, and carried on
    assert _leftovers(folder) == [] and not list(folder.glob("forget.*.redo"))
    # every write after it goes on: another forget, an import, a repair
    run(env, workspace, "forget", "7")
    more = tmp_path / "more.jsonl"
    more.write_text(orjson.dumps({"role": "user", "content": "a later message about beta", "at": 1_800_000_000}
                                 ).decode() + "\n")
    run(env, workspace, "import", str(more), "--no-progress")
    run(env, None, "doctor", "--repair")
    hits = orjson.loads(run(env, workspace, "search", "alpha5 alpha3 beta", "--json").stdout)["hits"]
    assert sorted(h["id"] for h in hits) == [5, MESSAGES]  # rebuilt from the log: the forgotten one is gone
    assert run(env, None, "doctor").returncode == 0


@DAMAGE
def test_doctor_repair_rebuilds_a_damaged_search_index(imported, table):
    env, workspace, folder = imported
    _damage_index(folder / "index" / "search.v1.sqlite", table)
    repaired = run(env, None, "doctor", "--repair")
    assert "rebuilt the search index from the order log" in repaired.stderr, repaired.stderr
    assert "ERROR" not in repaired.stdout, repaired.stdout
    db = sqlite3.connect(folder / "index" / "search.v1.sqlite")
    assert db.execute("SELECT count(*) FROM msg").fetchone()[0] == MESSAGES  # built now, not at a later search
    db.close()


def test_a_forget_replayed_over_a_damaged_index_finishes(imported):
    """A redo left behind (a crash after it was written) is replayed at the next open, index damaged or not."""
    env, workspace, folder = imported
    # The redo as forget writes it, made by the code under test in a child that stops right after it.
    child = ("import sys, os\n"
             "from endless.core.privacy import forget\n"
             "from endless.core.memory import Memory\n"
             "def stop(name):\n"
             "    if name == 'redo':\n"
             "        os._exit(9)\n"
             "forget.step = stop\n"
             "from endless.cli import main\n"
             f"sys.exit(main(['forget', '9', '--workspace', {str(workspace)!r}]))\n")
    proc = subprocess.run([_python(), "-c", child], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 9, proc.stderr
    assert list(folder.glob("forget.*.redo"))
    _damage_index(folder / "index" / "search.v1.sqlite", "words_config")
    replayed = run(env, workspace, "forget", "11")  # opens the memory: replays the redo first
    assert "finished forgetting 1 message that a crash had interrupted" in replayed.stderr, replayed.stderr
    assert not list(folder.glob("forget.*.redo"))
    texts = {e["id"]: e["text"] for t in orjson.loads(run(env, workspace, "history", "--json").stdout)["turns"]
             for e in t["entries"]}
    assert "alpha9" not in texts[9] and "alpha11" not in texts[11] and texts[10] == "message 10 about topic alpha10"
    assert run(env, None, "doctor").returncode == 0  # the blanked records carry their new checksums


def _python() -> str:
    import sys

    return sys.executable


# -- item 9: a changed log ----------------------------------------------------------------------


def _log(folder: Path) -> Path:
    return folder / "turns.turn.v1.jsonl"


def _unsealed(folder: Path) -> None:
    """The log as Endless 0.1 wrote it: records without a checksum."""
    path = _log(folder)
    path.write_bytes(re.sub(rb',"c":"[0-9a-f]{8}"\}\n', b"}\n", path.read_bytes()))


@pytest.mark.parametrize("sealed", [True, False], ids=["checksummed", "older-records"])
def test_an_edited_message_id_is_damage_not_another_message(imported, sealed):
    env, workspace, folder = imported
    if not sealed:
        _unsealed(folder)
    path = _log(folder)
    data = path.read_bytes()
    assert b'"turn":12,"id":24,' in data
    path.write_bytes(data.replace(b'"turn":12,"id":24,', b'"turn":12,"id":54,'))
    gone = run(env, workspace, "zoom", "54", "1", check=1)
    assert "no message 54" in gone.stderr
    damaged = run(env, workspace, "zoom", "24", "1", check=1)
    assert "message 24 cannot be read: its record in the log is damaged" in damaged.stderr, damaged.stderr
    turns = orjson.loads(run(env, workspace, "history", "--json").stdout)["turns"]
    ids = [e["id"] for t in turns for e in t["entries"]]
    assert len(ids) == len(set(ids)) and 24 not in ids and 25 not in ids and 26 in ids
    assert [t["status"] for t in turns if t["turn"] == 12] == ["damaged"]
    found = run(env, None, "doctor", check=1)
    reason = "its checksum does not match" if sealed else "its messages start at id 54, but the turns before it end at 24"
    assert "turn 12 (messages 24..25)" in found.stdout and reason in found.stdout, found.stdout
    assert ("written before records carried a checksum" in found.stdout) is not sealed


@pytest.mark.parametrize("edit", [(b'"at":1700000300.0}', b'"au":1700000300.0}'),
                                  (b'"x":"message 5 about topic alpha5"', b'"x":5'),
                                  (b'"k":"reply","x":"message 5', b'"k":"reply ","x":"message 5')],
                         ids=["at-renamed", "text-a-number", "kind-unknown"])
@pytest.mark.parametrize("sealed", [True, False], ids=["checksummed", "older-records"])
def test_a_field_missing_or_of_another_type_is_damage_not_a_traceback(imported, edit, sealed):
    env, workspace, folder = imported
    if not sealed:
        _unsealed(folder)
    path = _log(folder)
    data = path.read_bytes()
    assert edit[0] in data
    path.write_bytes(data.replace(edit[0], edit[1]))
    run(env, workspace, "view")
    assert "message 5 about" not in run(env, workspace, "history").stdout
    assert "its record in the log is damaged" in run(env, workspace, "zoom", "5", "1", check=1).stderr
    assert "its record in the log is damaged" in run(env, workspace, "date", "4", check=1).stderr
    hits = orjson.loads(run(env, workspace, "search", "/alpha[0-9]/", "--json", "--limit", "50").stdout)["hits"]
    assert sorted(h["id"] for h in hits) == [i for i in range(MESSAGES) if i not in (4, 5)]
    assert "turn 2 (messages 4..5)" in run(env, None, "doctor", check=1).stdout


def test_a_same_length_edit_of_a_text_is_found(imported):
    """One letter of one message changed in place: the record's length, its JSON and its ids are as they were."""
    env, workspace, folder = imported
    path = _log(folder)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"message 31 about topic alpha31", b"message 31 about topic alphA31"))
    assert "its record in the log is damaged" in run(env, workspace, "zoom", "31", "1", check=1).stderr
    found = run(env, None, "doctor", check=1)
    assert "turn 15 (messages 30..31) at byte" in found.stdout and "its checksum does not match" in found.stdout


def test_two_lines_swapped_are_damage(imported):
    env, workspace, folder = imported
    path = _log(folder)
    lines = path.read_bytes().split(b"\n")
    lines[3], lines[4] = lines[4], lines[3]
    path.write_bytes(b"\n".join(lines))
    turns = orjson.loads(run(env, workspace, "history", "--json").stdout)["turns"]
    ids = [e["id"] for t in turns for e in t["entries"]]
    assert ids == [i for i in range(MESSAGES) if i not in (6, 7, 8, 9)]
    assert "it says it is turn 4" in run(env, None, "doctor", check=1).stdout


def test_tampered_index_rows_never_pass_a_filter(imported):
    """Rows of the search index given another kind or time: the log says otherwise, and wins."""
    env, workspace, folder = imported
    db = sqlite3.connect(folder / "index" / "search.v1.sqlite")
    db.execute("UPDATE msg SET kind = 0 WHERE id = 5")  # a reply said to be the person's
    db.execute("UPDATE msg SET at = 900000000.0 WHERE id = 7")  # a 2023 message said to be of 1998
    db.commit()
    db.close()
    assert "message row" in run(env, None, "doctor", check=1).stdout
    person = orjson.loads(run(env, workspace, "search", "alpha5 alpha7 alpha8", "--kind", "person",
                              "--json").stdout)["hits"]
    assert [h["id"] for h in person] == [8]
    old = orjson.loads(run(env, workspace, "search", "alpha7", "--before", "2000-01-01", "--json").stdout)["hits"]
    assert old == []
    assert [h["id"] for h in orjson.loads(run(env, workspace, "search", "alpha7", "--json").stdout)["hits"]] == [7]
    assert run(env, None, "doctor").returncode == 0  # the search that met the rows rebuilt the index


# -- item 14: a full disk -----------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MB file system of its own (tmpfs; needs the right to mount, else the test is skipped)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small file system here ({made.stderr.decode().strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_leaves_no_temporary_file_and_names_the_path(small_disk, tmp_path):
    home, workspace, env = fresh_home(tmp_path)
    env["ENDLESS_HOME"] = str(small_disk / "home")
    env["HERMES_HOME"] = str(tmp_path / "no-hermes")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(orjson.dumps({"role": "user", "content": f"note {i} gamma{i}",
                                            "at": 1_700_000_000 + i}).decode() + "\n" for i in range(10)))
    run(env, workspace, "import", str(source), "--no-progress")
    run(env, workspace, "search", "gamma3")
    (folder,) = (small_disk / "home" / "memories").iterdir()
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # the rest of the disk, to its last byte
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    failed = run(env, workspace, "forget", "3", check=1)
    assert "is full; free some space and run the command again" in failed.stderr, failed.stderr
    assert re.search(r"the disk holding /\S+ is full", failed.stderr) and "Errno" not in failed.stderr
    assert _leftovers(folder) == [] and not [p for p in folder.rglob(".*") if p.is_file()]
    filler.unlink()
    run(env, workspace, "forget", "3")
    assert "gamma3" not in run(env, workspace, "history").stdout
    assert _leftovers(folder) == []


@pytest.mark.parametrize("name", ["index/turns.v1.bin", "index/tree-pos.v2.bin", "index/tree-L00.v2.bin",
                                  "view.json", "writer-view.json"])
def test_a_derived_file_that_cannot_be_read_or_written_never_blocks_a_write(imported, tmp_path, name):
    """A folder where an index or view file belongs: the import goes on (the file is rebuilt from the log
    as it is needed), its turns are read and found, and doctor names the file."""
    env, workspace, folder = imported
    run(env, workspace, "view")
    path = folder / name
    path.unlink(missing_ok=True)
    path.mkdir()
    more = tmp_path / "more.jsonl"
    more.write_text(orjson.dumps({"role": "user", "content": "a later message about delta", "at": 1_800_000_000}
                                 ).decode() + "\n")
    added = run(env, workspace, "import", str(more), "--no-progress")
    assert added.stdout.startswith("imported 1 turn (1 message)"), added.stdout
    assert "a later message about delta" in run(env, workspace, "history").stdout
    assert [h["id"] for h in orjson.loads(run(env, workspace, "search", "delta", "--json").stdout)["hits"]] \
        == [MESSAGES]
    assert name.split("/")[-1] in run(env, None, "doctor", check=1).stdout


@pytest.mark.parametrize("sealed", [True, False], ids=["checksummed", "older-records"])
def test_a_forget_keeps_its_records_whole(imported, sealed):
    """A forget blanks texts in place: the record's checksum is written anew with them (one write), so the
    forgotten turn reads as forgotten, not as damage, and doctor stays quiet."""
    env, workspace, folder = imported
    if not sealed:
        _unsealed(folder)
    run(env, workspace, "forget", "--turn", "4")
    run(env, workspace, "forget", "17")
    entries = {e["id"]: e for t in orjson.loads(run(env, workspace, "history", "--json").stdout)["turns"]
               for e in t["entries"]}
    assert all("forgottenAt" in entries[i] for i in (8, 9, 17)) and "forgottenAt" not in entries[16]
    assert entries[16]["text"] == "message 16 about topic alpha16"
    assert run(env, None, "doctor").returncode == 0
    assert b"alpha17" not in _log(folder).read_bytes() and b"alpha8" not in _log(folder).read_bytes()
