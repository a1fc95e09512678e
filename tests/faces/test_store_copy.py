"""``endless store copy`` (issue 31 item 4): into a PostgreSQL database and back, resumable and verified.

Real processes from a fresh ENDLESS_HOME against a real server: a copy killed
mid-way (SIGKILL) and run again finishes without a duplicate; a different
history at the target is refused and left alone; a person tries the database and
leaves it with every turn.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from commands import endless_command, fresh_home

psycopg = pytest.importorskip("psycopg")

PASSWORD = "Pa55-w0rd-never-shown"


def endless(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*endless_command(), *args], capture_output=True, text=True, env=env, timeout=timeout)


def source(path: Path, turns: int, words: str = "question", size: int = 40) -> Path:
    with open(path, "wb") as handle:
        for k in range(turns):
            at = 1.76e9 + 60 * k
            handle.write(orjson.dumps({"role": "user", "content": f"{words} {k} " + "x" * size, "at": at,
                                       "session": f"s{k % 3}"}) + b"\n")
            handle.write(orjson.dumps({"role": "assistant", "content": f"answer {k}", "at": at + 1,
                                       "session": f"s{k % 3}"}) + b"\n")
    return path


def history(env: dict, workspace: Path) -> list[str]:
    done = endless(env, "history", "--workspace", str(workspace), "--limit", "200", "--json")
    assert done.returncode == 0, done.stderr
    return [e["text"] for t in orjson.loads(done.stdout)["turns"] for e in t["entries"]]


def with_password(url: str) -> str:
    """The test server trusts loopback, so any password connects; it must still never be shown."""
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


@pytest.fixture
def home(tmp_path):
    home, workspace, env = fresh_home(tmp_path)
    return home, workspace, env


def _imported(env: dict, workspace: Path, tmp_path: Path, turns: int, words: str = "question", size: int = 40):
    done = endless(env, "import", "--workspace", str(workspace), str(source(tmp_path / f"{words}.jsonl", turns, words,
                                                                              size)))
    assert done.returncode == 0, done.stderr


def _stream(url: str, stream: str = "log") -> tuple[int, bytes]:
    """The stream as the database holds it, read from the one memory's schema (nothing: none there yet)."""
    with psycopg.connect(url, autocommit=True) as conn:
        prefix = conn.execute("SELECT current_schema()").fetchone()[0]
        schemas = [name for (name,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname ~ %s",
                                                    (f"^{prefix}_[0-9a-f]{{16}}$",))]
        if not schemas or not conn.execute("SELECT to_regclass(%s)", (f"{schemas[0]}.endless_streams",)).fetchone()[0]:
            return 0, b""
        (schema,) = schemas
        end = conn.execute(f"SELECT coalesce(max(end_offset), 0) FROM {schema}.endless_streams WHERE stream = %s",
                           (stream,)).fetchone()[0]
        data = b"".join(bytes(r[0]) for r in conn.execute(
            f"SELECT data FROM {schema}.endless_bytes WHERE stream = %s ORDER BY at", (stream,)))
    return end, data


def _gone(url: str, application: str) -> None:
    """Wait until the server has let go of a killed client's connection (bounded)."""
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (application,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the killed copy's connection is still there"


def _log_file(home: Path) -> Path:
    (folder,) = (home / "memories").iterdir()
    return folder / "turns.turn.v1.jsonl"


def test_try_the_database_and_leave_it_with_every_turn(tmp_path, home, pg_store_url):
    home, workspace, env = home
    url = with_password(pg_store_url)
    _imported(env, workspace, tmp_path, 40)
    done = endless(env, "store", "copy", "--to", url)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr and "postgres:***@" in done.stdout
    assert "verified: both sides agree" in done.stdout and "40 turns, 80 messages (ids 0 to 79)" in done.stdout
    assert "set ENDLESS_STORE" in done.stderr
    end, data = _stream(pg_store_url)
    assert data == _log_file(home).read_bytes() and end == len(data)

    database = {**env, "ENDLESS_STORE": url}
    assert len(history(database, workspace)) == 80  # the same home, now on the database
    (tmp_path / "desktop").mkdir()
    desktop = {**fresh_home(tmp_path / "desktop")[2], "ENDLESS_STORE": url}
    assert len(history(desktop, workspace)) == 80  # and another machine
    _imported(database, workspace, tmp_path, 5, "on the database")
    assert len(history(desktop, workspace)) == 90

    back = endless(database, "store", "copy", "--to", "files", "--json")
    assert back.returncode == 0, back.stderr
    value = orjson.loads(back.stdout)
    assert value["verified"] and value["to"] == f"files under {home}"
    (memory,) = value["memories"]
    assert memory["copied"]["log"] > 0 and memory["source"]["turns"] == memory["target"]["turns"] == 45
    assert memory["target"]["logSha256"] == hashlib.sha256(_log_file(home).read_bytes()).hexdigest()
    assert "unset ENDLESS_STORE" in back.stderr
    texts = history(env, workspace)  # files again: every turn, from both stores
    assert len(texts) == 90 and texts[-2].startswith("on the database 4")

    # A turn added in files after the copy: the database store refuses the folder, and says how to copy it.
    _imported(env, workspace, tmp_path, 1, "files again")
    refused = endless(database, "history", "--workspace", str(workspace))
    assert refused.returncode == 1 and "endless store copy --from files" in refused.stderr
    assert PASSWORD not in refused.stderr
    again = endless(database, "store", "copy", "--from", "files", "--to", url)
    assert again.returncode == 0, again.stderr
    assert history(database, workspace)[-2].startswith("files again 0")


def test_a_copy_killed_midway_is_finished_by_the_next_without_a_duplicate(tmp_path, home, pg_store_url):
    home, workspace, env = home
    _imported(env, workspace, tmp_path, 3000, size=200)
    total = len(_log_file(home).read_bytes())
    slow = {**env, "ENDLESS_STORE_COPY_CHUNK_BYTES": "2048", "PGAPPNAME": "copy-to-kill"}
    proc = subprocess.Popen([*endless_command(), "store", "copy", "--to", pg_store_url], env=slow,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        end = 0
        while end < 4 * 2048 and proc.poll() is None and time.monotonic() < deadline:
            try:
                end = _stream(pg_store_url)[0]
            except psycopg.Error:  # the tables are being made
                end = 0
        os.kill(proc.pid, signal.SIGSTOP)  # frozen where it is: what it stored is what the next run finds
        end = _stream(pg_store_url)[0]
        assert 0 < end < total, (end, total)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    _gone(pg_store_url, "copy-to-kill")  # a statement it had sent is committed or not by now
    end = _stream(pg_store_url)[0]
    assert 0 < end < total
    done = endless(env, "store", "copy", "--to", pg_store_url, "--json")
    assert done.returncode == 0, done.stderr
    (memory,) = orjson.loads(done.stdout)["memories"]
    assert memory["copied"]["log"] == total - end  # only what was left
    assert memory["target"]["repeatedTurns"] == 0 and memory["target"]["idBreaks"] == 0
    assert memory["target"]["turns"] == 3000 and memory["target"]["messages"] == 6000
    assert _stream(pg_store_url)[1] == _log_file(home).read_bytes()
    assert endless(env, "store", "copy", "--to", pg_store_url).stdout.count("nothing to copy") == 1  # a third: idle


def test_a_copy_to_files_killed_midway_is_finished_by_the_next(tmp_path, home, pg_store_url):
    home, workspace, env = home
    database = {**env, "ENDLESS_STORE": pg_store_url}
    _imported(database, workspace, tmp_path, 3000, size=200)
    total = _stream(pg_store_url)[0]
    other = tmp_path / "elsewhere"
    proc = subprocess.Popen([*endless_command(), "store", "copy", "--to", str(other)],
                            env={**database, "ENDLESS_STORE_COPY_CHUNK_BYTES": "2048"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        size = 0
        while size < 4 * 2048 and proc.poll() is None and time.monotonic() < deadline:
            logs = list(other.glob("memories/*/turns.turn.v1.jsonl")) if other.exists() else []
            size = logs[0].stat().st_size if logs else 0
        os.kill(proc.pid, signal.SIGSTOP)
        (log,) = other.glob("memories/*/turns.turn.v1.jsonl")
        size = log.stat().st_size
        assert 0 < size < total, (size, total)
    finally:
        proc.kill()
        proc.communicate()
    # As if the machine had lost power inside the next write: half a line at the end of the file.
    whole = _stream(pg_store_url)[1]
    size = log.stat().st_size
    torn = whole[size:whole.index(b"\n", size) + 1]
    with open(log, "ab") as handle:
        handle.write(torn[:len(torn) // 2])
    done = endless(database, "store", "copy", "--to", str(other))
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == whole
    moved = {**env, "ENDLESS_HOME": str(other)}
    assert len(endless(moved, "history", "--workspace", str(workspace), "--limit", "200", "--json").stdout) > 0
    assert history(moved, workspace)[-1] == "answer 2999"


def test_another_history_at_the_target_is_refused_and_left_alone(tmp_path, home, pg_store_url):
    home, workspace, env = home
    _imported(env, workspace, tmp_path, 10)
    elsewhere = {**env, "ENDLESS_HOME": str(tmp_path / "other-home"), "ENDLESS_STORE": pg_store_url}
    _imported(elsewhere, workspace, tmp_path, 3, "another life")  # the same folder's key, another history
    before = _stream(pg_store_url)
    before_files = _log_file(home).read_bytes()
    done = endless(env, "store", "copy", "--to", pg_store_url)
    assert done.returncode == 1
    assert "holds another history" in done.stderr and "nothing was copied" in done.stderr
    assert _stream(pg_store_url) == before and _log_file(home).read_bytes() == before_files


def test_bad_usage_is_said_and_the_password_never_shown(tmp_path, home, pg_cluster):
    home, workspace, env = home
    _imported(env, workspace, tmp_path, 2)
    same = endless(env, "store", "copy", "--to", "files")
    assert same.returncode == 2 and "same store" in same.stderr
    other = endless(env, "store", "copy", "--to", f"mysql://root:{PASSWORD}@db/x")
    assert other.returncode == 2 and "is not a store" in other.stderr and PASSWORD not in other.stderr
    unknown = endless(env, "store", "copy", "--to", str(tmp_path / "x"), "--memory", "0123456789abcdef")
    assert unknown.returncode == 1 and "no memory 0123456789abcdef" in unknown.stderr
    refused = endless(env, "store", "copy", "--to", f"postgresql://nobody:{PASSWORD}@127.0.0.1:1/none")
    assert refused.returncode == 1 and "cannot connect" in refused.stderr
    assert PASSWORD not in refused.stderr + refused.stdout and "nobody:***@127.0.0.1:1/none" in refused.stderr
    assert "Traceback" not in refused.stderr
