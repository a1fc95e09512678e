"""``endless doctor`` as a person runs it: a subprocess, on real memories, with real other processes.

A healthy memory is all ok (exit 0); a torn last line and a dead process's
unfinished turn are warnings that ``--repair`` mends; a real process holding
the change lock is named by its pid; a memory of a newer format is an error
(exit 1).  Child processes are started with ``python -c`` and report on
stdout when they hold what the test needs; the test waits for that line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from commands import endless_command

CHILD_TIMEOUT = 30.0



@pytest.fixture
def env(tmp_path: Path) -> dict:
    home = tmp_path / "endless-home"
    hermes = tmp_path / "hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("model: {provider: custom}\nplugins:\n  enabled:\n    - endless\n")
    (tmp_path / "xdg").mkdir()
    return {**os.environ, "ENDLESS_HOME": str(home), "HERMES_HOME": str(hermes),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def memory(env, tmp_path: Path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=env["ENDLESS_HOME"]))
    for k in range(5):
        memory.commit_turn("s1", "Chat", [Message("user", f"question {k}", 1000.0 + k),
                                          Message("reply", f"answer {k}", 1000.5 + k)])
    yield memory
    memory.close()


def doctor(env: dict, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([*endless_command(), "doctor", "--json", *args], capture_output=True, timeout=60,
                          env=env)
    return proc.returncode, orjson.loads(proc.stdout)


def findings(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def child(env: dict, code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)


def wait_for(proc: subprocess.Popen, word: bytes) -> None:
    line = proc.stdout.readline()  # blocks until the child says it holds what we need (or dies)
    assert line.strip() == word, f"child said {line!r}, exit {proc.poll()}"


OPEN = """
import sys
from endless.core.memory import Memory
from endless.core.settings import load_settings
memory = Memory.open(memory_id=sys.argv[1] if len(sys.argv) > 1 else {mid!r}, settings=load_settings())
"""


def test_a_healthy_memory_is_all_ok(env, memory) -> None:
    code, report = doctor(env)
    assert code == 0
    assert report["status"] == "ok", [f for f in report["findings"] if f["status"] != "ok"]
    assert any(memory.memory_id in f["message"] and "5 turns, 10 messages" in f["message"]
               and "format 1" in f["message"] for f in findings(report, "memory"))
    assert findings(report, "hermes.plugin")[0]["status"] == "ok"
    assert "offline writer" in findings(report, "writer.route")[0]["message"]
    human = subprocess.run([*endless_command(), "doctor"], capture_output=True, timeout=60, env=env)
    assert human.returncode == 0 and b"ok: " in human.stdout and b"0 errors" in human.stdout


def test_hermes_without_the_plugin_is_a_warning(env, memory, tmp_path) -> None:
    (Path(env["HERMES_HOME"]) / "config.yaml").write_text("plugins:\n  enabled: [other]\n")
    code, report = doctor(env)
    assert code == 0 and report["status"] == "warning"
    plugin = findings(report, "hermes.plugin")[0]
    assert plugin["status"] == "warning" and "hermes plugins enable endless" in plugin["fix"]
    code, report = doctor({**env, "HERMES_HOME": str(tmp_path / "nowhere")})
    assert findings(report, "hermes.home")[0]["status"] == "warning"


def test_a_torn_line_is_a_warning_and_repair_moves_it_aside(env, memory) -> None:
    with open(memory.log.path, "ab") as handle:
        handle.write(b'{"turn": 5, "id": 10, "tid": "ab')
    code, report = doctor(env)
    assert code == 0
    torn = findings(report, "memory.torn")
    assert len(torn) == 1 and torn[0]["status"] == "warning" and "turn log" in torn[0]["message"]
    assert "32 bytes" in torn[0]["message"]
    code, report = doctor(env, "--repair")
    assert code == 0 and not findings(report, "memory.torn")
    assert "1 torn line was moved aside" in findings(report, "memory.quarantine")[0]["message"]
    assert memory.quarantine.read_bytes().count(b"\n") == 1


def test_an_unfinished_turn_in_flight_then_of_a_dead_process(env, memory) -> None:
    proc = child(env, OPEN.format(mid=memory.memory_id) + """
turn = memory.journal("sess-A", "Half")
turn.add("user", "a question whose answer never came")
print("J", flush=True)
sys.stdin.readline()
""")
    try:
        wait_for(proc, b"J")
        code, report = doctor(env)
        journal = findings(report, "memory.journal")
        assert code == 0 and len(journal) == 1
        assert journal[0]["status"] == "ok" and f"in flight in pid {proc.pid}" in journal[0]["message"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(CHILD_TIMEOUT)
        code, report = doctor(env)
        journal = findings(report, "memory.journal")
        assert code == 0 and journal[0]["status"] == "warning"
        assert f"pid {proc.pid}" in journal[0]["message"] and "'sess-A' (1 message)" in journal[0]["message"]
        code, report = doctor(env, "--repair")
        assert not findings(report, "memory.journal")
        with Memory.open(memory_id=memory.memory_id, settings=memory.settings, readonly=True) as ro:
            last = ro.turn(ro.turns - 1)
            assert (last.session, last.status) == ("sess-A", "interrupted")
            assert ro.message(last.first).text == "a question whose answer never came"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(CHILD_TIMEOUT)


def test_a_process_holding_the_lock_is_named(env, memory) -> None:
    proc = child(env, OPEN.format(mid=memory.memory_id) + """
with memory.lock:
    print("L", flush=True)
    sys.stdin.readline()
print("U", flush=True)
sys.stdin.readline()
""")
    try:
        wait_for(proc, b"L")
        code, report = doctor(env)
        lock = findings(report, "memory.lock")[0]
        assert code == 0 and lock["status"] == "warning" and f"pid {proc.pid}" in lock["message"]
        proc.stdin.write(b"go on\n")
        proc.stdin.flush()
        wait_for(proc, b"U")
        code, report = doctor(env)
        assert findings(report, "memory.lock")[0]["status"] == "ok"
    finally:
        proc.kill()
        proc.wait(CHILD_TIMEOUT)


def test_a_newer_format_is_an_error(env, memory) -> None:
    key = memory.folder / "key.json"
    data = orjson.loads(key.read_bytes())
    data["format"] = 99
    key.write_bytes(orjson.dumps(data))
    code, report = doctor(env)
    assert code == 1 and report["status"] == "error"
    error = [f for f in report["findings"] if f["status"] == "error"][0]
    assert "format 99" in error["message"] and "upgrade endless-memory" in error["message"]


def test_an_unreadable_settings_file_is_an_error(env, memory) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "endless" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("line_budget = [oops\n")
    code, report = doctor(env)
    assert code == 1 and findings(report, "settings")[0]["status"] == "error"


def test_pending_writer_work(env, memory) -> None:
    memory.commit_turn("s2", "Paste", [Message("user", "pasted: " + "x " * 6000, 2000.0)])
    code, report = doctor(env)
    writer = findings(report, "memory.writer")[0]
    assert code == 0 and writer["status"] == "ok"
    assert "catching up: 1 line left to write (1 message without a line of its own)" in writer["message"]
    assert "nothing is writing them now" in writer["message"] and "done in about" not in writer["message"]
    assert "`endless catch-up`" in writer["fix"]
    assert memory.take_lease()  # a writer pool runs for it now (this process holds its lease): a pace is told
    code, report = doctor(env)
    writer = findings(report, "memory.writer")[0]
    assert "done in about" in writer["message"] and "nothing is writing" not in writer["message"]
    memory.commit_turn("s2", "Paste", [Message("user", "another: " + "y " * 6000, 2001.0)])
    code, report = doctor(env)
    writer = findings(report, "memory.writer")[0]
    assert writer["status"] == "warning" and "(2 messages without a line of their own)" in writer["message"]
    assert "turns show a shortened history until the writer catches up" in writer["message"]
    memory.store_line(0, 10, "you: pasted a page of x")
    memory.store_line(0, 11, "you: pasted a page of y")
    code, report = doctor(env)
    assert findings(report, "memory.writer")[0]["message"].endswith("every line is written")


def test_a_failing_writer_is_a_warning_saying_since_when_and_why(env, memory) -> None:
    """Issue 33 item 5: the usage log of a writer whose calls fail (written as the pool writes it)."""
    from endless.writer.usage import UsageLog

    memory.commit_turn("s2", "Paste", [Message("user", "pasted: " + "x " * 6000, 2000.0)])
    usage = UsageLog(memory.folder)
    route = {"provider": "openai", "flavour": "vllm", "model": "w"}
    usage.record(1_796_350_000.0, route, ["1+1"], None, 0.1, "auth", error="auth (401): invalid key")
    usage.record(1_796_350_060.0, route, ["1+1"], None, 0.1, "auth", error="auth (401): invalid key")
    usage.close()
    routed = {**env, "ENDLESS_WRITER_ROUTE": '{"provider": "openai", "model": "w", '
                                             '"base_url": "http://127.0.0.1:9/v1"}'}
    code, report = doctor(routed)
    writer = findings(report, "memory.writer")[0]
    assert code == 0 and writer["status"] == "warning", writer
    assert "the writer is failing: no call answered since 2026-12-04 02:06 UTC" in writer["message"], writer
    assert "2 failed calls; last: auth (auth (401): invalid key)" in writer["message"], writer
    assert "check the writer's route" in writer["fix"], writer


def test_a_writer_model_without_a_price_is_named_once(env, memory) -> None:
    from endless.writer.recorded import recorded_routes

    route = {"provider": "openai", "model": "unlisted-writer-model-x", "base_url": "https://api.example.com/v1"}
    recorded_routes(memory).record("s1", route, "SYSTEM")
    recorded_routes(memory).record("s2", route, "OTHER SYSTEM")
    code, report = doctor(env)
    priced = findings(report, "writer.price")
    assert code == 0 and len(priced) == 1 and priced[0]["status"] == "warning"
    assert "no price for" in priced[0]["message"] and "'unlisted-writer-model-x'" in priced[0]["message"]
    assert "counted at cost 0" in priced[0]["message"]


# -- issue 17: the full scan ------------------------------------------------------------------


def _replace_line(path: Path, k: int, garbage: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[k] = garbage[:len(lines[k])].ljust(len(lines[k]), b" ")
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("garbage", [b"\x00" * 80, b"#garbage, not a turn"], ids=["nul", "garbage"])
def test_mid_log_damage_is_an_error_naming_every_record(env, memory, garbage) -> None:
    code, report = doctor(env)
    assert code == 0
    _replace_line(memory.log.path, 1, garbage)
    _replace_line(memory.log.path, 3, garbage)
    code, report = doctor(env)
    damage = [f for f in findings(report, "memory.damage") if f["status"] == "error"]
    assert code == 1 and len(damage) == 1, report
    assert "turn 1 (messages 2..3)" in damage[0]["message"] and "turn 3 (messages 6..7)" in damage[0]["message"]
    assert "restore the order log from a backup" in damage[0]["fix"]


def test_a_damaged_last_line_stays_an_error_after_a_writer_indexes_past_it(env, memory) -> None:
    with open(memory.log.path, "ab") as handle:
        handle.write(b"{not a turn}\n")
    memory.commit_turn("s1", "Chat", [Message("user", "later", 2000.0)])  # a writer indexes past it
    code, report = doctor(env)
    assert code == 1 and "turn 5 (" in findings(report, "memory.damage")[0]["message"]


def test_a_shortened_log_is_named_and_repair_sets_aside_what_lay_past_it(env, memory) -> None:
    data = memory.log.path.read_bytes()
    memory.log.path.write_bytes(data[:data[:-1].rfind(b"\n") + 1])  # the last turn cut away
    code, report = doctor(env)
    short = findings(report, "memory.shortened")
    assert code == 1 and len(short) == 1 and "holds 8 messages" in short[0]["message"]
    assert "named 10" in short[0]["message"] and "--repair" in short[0]["fix"]
    code, report = doctor(env, "--repair")
    assert code == 0 and not findings(report, "memory.shortened"), report
    assert "past a shortened log's end" in findings(report, "memory.quarantine")[0]["message"]


def test_swapped_index_rows_are_a_warning_that_repair_mends(env, memory) -> None:
    from array import array

    rows = array("Q")
    rows.frombytes(memory.log.index_path.read_bytes())
    rows[5:10], rows[15:20] = rows[15:20], rows[5:10]
    memory.log.index_path.write_bytes(rows.tobytes())
    code, report = doctor(env)
    index = findings(report, "memory.index")
    assert code == 0 and index and index[0]["status"] == "warning" and "turns 1, 3" in index[0]["message"]
    code, report = doctor(env, "--repair")
    assert not findings(report, "memory.index"), report


def test_foreign_files_and_permissions_are_findings_never_crashes(env, memory) -> None:
    view = memory.folder / "view.json"
    view.unlink(missing_ok=True)
    os.mkfifo(view)  # a reader that opened it would hang
    code, report = doctor(env)
    files = findings(report, "memory.files")
    assert code == 1 and "is a fifo" in files[0]["message"] and "move" in files[0]["fix"]
    code, report = doctor(env, "--repair")
    assert code == 1 and findings(report, "memory.files")
    view.unlink()
    memory.tree.path.unlink()  # a missing file: the tree is rebuilt as empty
    code, report = doctor(env)
    assert not [f for f in report["findings"] if f["status"] == "error"], report
    if os.geteuid() != 0:  # root reads whatever the mode says
        key = memory.folder / "key.json"
        key.chmod(0)
        try:
            code, report = doctor(env)
        finally:
            key.chmod(0o600)
        perm = [f for f in report["findings"] if f["check"] == "memory.permissions" and f["status"] == "error"]
        assert code == 1 and perm and "chmod" in perm[0]["fix"]


def test_a_search_index_of_other_files_is_a_warning(env, memory) -> None:
    import sqlite3

    from endless.core.search.finder import corpus_of, search

    search(corpus_of(memory), "question", 0, 5, 5.0)  # builds the index
    code, report = doctor(env)
    assert not findings(report, "memory.index")
    with sqlite3.connect(memory.search_index.path) as db:
        db.execute("UPDATE state SET value = value + 100 WHERE name = 'messages'")
    code, report = doctor(env)
    index = findings(report, "memory.index")
    assert code == 0 and index and "search index" in index[0]["message"] and "builds it again" in index[0]["fix"]


def test_forgotten_messages_are_counted_and_an_unmerged_index_is_named(env, memory) -> None:
    from endless.core.privacy import forget

    mid, folder = memory.memory_id, memory.folder
    code, report = doctor(env)
    assert findings(report, "memory.forget") == []  # nothing forgotten, nothing said
    forget.forget(memory, [1, 2], purge=False)  # the index's merge left to later, as the RPC and /endless do
    forget.forget(memory, [4])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(memory.log.forgotten[4]))
    marker = next(folder.glob("forget.*.purge"), None)
    assert marker is None  # the second forget's merge served the first one's marker too
    (folder / "forget.0123456789abcdef.purge").write_bytes(b"{}\n")  # a merge still waiting
    code, report = doctor(env)
    assert code == 0
    assert findings(report, "memory.forget") == [
        {"check": "memory.forget", "status": "ok", "memory": mid,
         "message": f"memory {mid}: 3 messages forgotten (in 2 forgets, the latest on {when})"},
        {"check": "memory.forget", "status": "warning", "memory": mid,
         "message": f"memory {mid}: the search index's merge after a forget is still pending "
                    "(forget.0123456789abcdef.purge); its old pages may still hold the forgotten words",
         "fix": "`endless doctor --repair` merges them now, unless a search is using the index (then the "
                "memory's next chat turn or forget does)"}]
    memory.close()
    code, report = doctor(env, "--repair")
    assert [f["status"] for f in findings(report, "memory.forget")] == ["ok"]
    assert list(folder.glob("forget.*")) == []


def test_a_linked_folder_inside_a_memory_is_named_with_the_command_that_removes_it(tmp_path):
    """The fix names the real path (it once printed the placeholder ``{here}``)."""
    from endless.faces.cli.doctor import Report
    from endless.faces.cli.doctor_access import access_findings

    folder = tmp_path / "m"
    folder.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (folder / "pending").symlink_to(tmp_path / "elsewhere")
    report = Report()
    assert access_findings(report, folder, "0123456789abcdef") is False
    (found,) = [f for f in report.findings if f.check == "memory.links"]
    assert found.status == "error" and f"{folder / 'pending'} is a symbolic link" in found.message
    assert found.fix == f"replace it with the folder it points to, or remove it (rm {folder / 'pending'})"
