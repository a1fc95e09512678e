"""``endless catch-up`` and the import's own catch-up: the lines of imported messages get written without a chat.

Run as a person runs them, from a fresh home with the settings' defaults (the
import writes its own lines: the suite's ``ENDLESS_IMPORT_CATCH_UP=false`` is
removed here), a detached catch-up watched, frozen, killed and resumed.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from commands import endless_command, fresh_home

DEADLINE = 60.0  # seconds a detached catch-up may take to start (a loaded machine)


@pytest.fixture()
def place(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    env.pop("ENDLESS_IMPORT_CATCH_UP", None)  # the default: an import writes its own lines
    source = tmp_path / "chat.jsonl"
    with open(source, "w") as handle:
        for k in range(300):
            handle.write(json.dumps({"role": "user", "content": f"question {k}: how do refunds change the ledger "
                                     f"totals of region {k % 7}?", "at": 1_700_000_000 + 60 * k}) + "\n")
            handle.write(json.dumps({"role": "assistant", "content": f"answer {k}: a refund is a negative row, so "
                                     "the totals drop by its amount"}) + "\n")
    return workspace, env, source


def run(place, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    workspace, base_env, _ = place
    return subprocess.run(endless_command() + list(args), capture_output=True, text=True, cwd=workspace,
                          env={**base_env, **(env or {})}, timeout=300)


def lines_left(place) -> bool:
    """Whether ``endless doctor`` says lines are left to write (its own count, not the command's)."""
    findings = json.loads(run(place, "doctor", "--json").stdout)["findings"]
    return any("lines left to write" in f["message"] or "line left to write" in f["message"] for f in findings)


def test_by_default_an_import_writes_its_own_lines(place) -> None:
    imported = run(place, "import", str(place[2]))
    assert imported.returncode == 0 and imported.stderr == "", imported.stderr
    assert "imported 300 turns (600 messages)" in imported.stdout
    assert "by the offline writer in" in imported.stdout
    assert not lines_left(place)
    done = json.loads(run(place, "catch-up", "--json").stdout)
    assert done["written"] == 0 and done["left"] == 0  # the import wrote them all


def test_catch_up_writes_every_line_an_import_left_and_then_has_nothing_to_do(place) -> None:
    imported = run(place, "import", str(place[2]), "--json", "--no-catch-up")
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout)
    left = summary["writer"]["lines"]
    assert left > 0 and summary["catchUp"] == {"how": "left", "lines": left}
    assert lines_left(place)
    done = run(place, "catch-up", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["writer"] == "offline" and result["left"] == 0 and result["written"] > 0
    assert result["calls"] == 0  # no model
    assert not lines_left(place)
    again = run(place, "catch-up")
    assert again.returncode == 0 and "wrote 0 lines" in again.stdout and "nothing left to write" in again.stdout


def test_catch_up_says_what_is_wrong_in_the_persons_words(place) -> None:
    nothing = run(place, "catch-up")
    assert nothing.returncode == 2 and "has no memory yet" in nothing.stderr
    assert run(place, "import", str(place[2]), "--no-catch-up").returncode == 0
    model = run(place, "catch-up", "--writer", "model")
    assert model.returncode == 2 and "--writer model needs the writer_route setting" in model.stderr
    assert json.loads(run(place, "catch-up", "--json").stdout)["written"] > 0  # the refused run wrote nothing


def _finding(place, check: str) -> dict:
    report = json.loads(run(place, "doctor", "--json").stdout)
    return next(f for f in report["findings"] if f["check"] == check)


def _wait_for_run(place, pid: int) -> Path:
    """Until the detached catch-up has taken the lease and said so in its record (or the deadline); the
    memory's folder."""
    home = Path(place[1]["ENDLESS_HOME"])
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        marks = list(home.glob("memories/*/marks/catch-up"))
        if marks and json.loads(marks[0].read_bytes()).get("pid") == pid:
            return marks[0].parent.parent
        time.sleep(0.02)  # (polling the record the child writes; bounded by the deadline)
    raise AssertionError("the detached catch-up did not start")


def test_a_long_import_leaves_a_detached_catch_up_that_doctor_sees_and_catch_up_resumes(place, tmp_path) -> None:
    """Too long to wait for (here: any), the import starts a detached catch-up and returns. While it runs
    (frozen, so the test does not race it) search answers, doctor names it, a second catch-up leaves the
    work to it; killed, doctor says it ended before it finished; `endless catch-up` goes on to the end."""
    source = tmp_path / "long.jsonl"
    with open(source, "w") as handle:
        for k in range(1000):
            handle.write(json.dumps({"role": "user", "content": f"question {k} about ledger region {k % 7}: "
                                     + "the rows " * 60, "at": 1_700_000_000 + 60 * k}) + "\n")
            handle.write(json.dumps({"role": "assistant", "content": f"answer {k}: the totals drop"}) + "\n")
    later = {"ENDLESS_IMPORT_CATCH_UP_WAIT_SECONDS": "0"}
    imported = run(place, "import", str(source), env=later)
    assert imported.returncode == 0 and imported.stderr == "", imported.stderr
    said = imported.stdout
    assert "started a detached `endless catch-up` (pid " in said and "`endless doctor` shows its progress" in said
    pid = int(said.split("catch-up` (pid ", 1)[1].split(")", 1)[0])
    try:
        folder = _wait_for_run(place, pid)
        with open(folder / "lock", "rb") as lock:  # frozen while it does not hold the memory's short lock
            fcntl.flock(lock, fcntl.LOCK_EX)
            os.kill(pid, signal.SIGSTOP)  # it holds the writer's lease, renewed moments ago
            fcntl.flock(lock, fcntl.LOCK_UN)
        found = run(place, "search", "ledger", "region", "--limit", "3")
        assert found.returncode == 0 and "question" in found.stdout
        writer = _finding(place, "memory.writer")
        assert f"a detached `endless catch-up` (started by `endless import`) (pid {pid}" in writer["message"]
        assert "is writing them" in writer["message"] and "nothing is writing" not in writer["message"]
        second = run(place, "catch-up")
        assert second.returncode == 0 and f"being written by a detached `endless catch-up`" in second.stdout
        assert f"(pid {pid})" in second.stdout
        os.kill(pid, signal.SIGKILL)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:  # (gone once its lease's beacon is released by the kernel)
        writer = _finding(place, "memory.writer")
        if "nothing is writing them" in writer["message"]:
            break
        time.sleep(0.05)
    assert "ended before it finished" in writer["message"] and writer["status"] == "warning", writer
    assert "`endless catch-up`" in writer["fix"]
    resumed = run(place, "catch-up")
    assert resumed.returncode == 0 and "nothing left to write" in resumed.stdout, resumed.stderr
    assert _finding(place, "memory.writer")["message"].endswith("every line is written")


def test_the_model_writer_says_its_price_and_the_spend_cap_before_it_spends(place) -> None:
    """With a writer route (here one nobody answers), catch-up first prints what the lines will cost and the
    spend cap, then writes; stopped, it says what was kept and exits 143."""
    assert run(place, "import", str(place[2]), "--no-catch-up").returncode == 0
    workspace, env, _ = place
    routed = {**env, "ENDLESS_WRITER_ROUTE": '{"provider": "openai", "model": "deepseek-v4-flash", '
                                             '"base_url": "http://127.0.0.1:9/v1"}',
              "ENDLESS_SPEND_CAP_PER_DAY": "0.5", "OPENAI_API_KEY": "sk-none"}
    # (the import chose the offline writer, no route being set then: asked by name, the model writes them)
    proc = subprocess.Popen(endless_command() + ["catch-up", "--no-progress", "--writer", "model"], cwd=workspace,
                            env=routed,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert "by the model on" in first and "USD" in first and "about" in first
        assert "the spend cap (0.50 USD per memory and day) pauses it" in first
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143 and "the lines written so far are kept" in err and "Traceback" not in err


def test_doctor_says_a_catch_up_stopped_at_the_spend_cap_and_how_to_go_on(place) -> None:
    """The record a catch-up leaves when the spend cap paused it (as its pool reports) is read back by doctor."""
    from endless.core.memory import Memory
    from endless.faces.kit.catching_up import MARK, Run

    assert run(place, "import", str(place[2]), "--no-catch-up").returncode == 0
    workspace, env, _ = place
    home = Path(env["ENDLESS_HOME"])
    (folder,) = (home / "memories").iterdir()
    with Memory.open(memory_id=folder.name, root=home) as memory:
        memory.store.durable_mark(MARK, Run(os.getpid() + 10_000, 1.0, "model", 400, 120, 2.0, "paused").to_json())
    writer = _finding(place, "memory.writer")
    assert "stopped at the spend cap after writing 120 lines of 400" in writer["message"]
    assert writer["status"] == "warning" and "`endless writer resume`" in writer["fix"]


def test_a_background_catch_up_steps_aside_for_a_chat_that_wants_the_writer(place, tmp_path) -> None:
    """A chat's writer pool writes every chat's lines with each chat's own route: when one waits for the
    lease (here this process, as a pool does), the catch-up an import left in the background hands it over
    and ends; its record says to whom."""
    from endless.core.memory import Memory

    # About 18,000 lines: the catch-up looks for a waiting pool every MARK_SECONDS, and the offline writer
    # writes about a thousand lines a second, so it is asked long before it could be done.
    source = tmp_path / "long.jsonl"
    with open(source, "w") as handle:
        for k in range(6000):
            handle.write(json.dumps({"role": "user", "content": f"question {k}: " + "the rows " * 60,
                                     "at": 1_700_000_000 + 60 * k}) + "\n")
            handle.write(json.dumps({"role": "assistant", "content": f"answer {k}"}) + "\n")
    imported = run(place, "import", str(source), env={"ENDLESS_IMPORT_CATCH_UP_WAIT_SECONDS": "0"})
    pid = int(imported.stdout.split("catch-up` (pid ", 1)[1].split(")", 1)[0])
    home = Path(place[1]["ENDLESS_HOME"])
    try:
        folder = _wait_for_run(place, pid)
        with Memory.open(memory_id=folder.name, root=home) as chat:
            os.kill(pid, signal.SIGSTOP)  # (frozen while this process says it waits: it has written little)
            try:
                assert not chat.take_lease(want=True)  # held by the catch-up: this process says it waits
            finally:
                os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + DEADLINE
            while not chat.take_lease(want=True) and time.monotonic() < deadline:
                time.sleep(0.05)  # (a pool looks again every writer_poll_seconds; bounded by the deadline)
            assert chat.holds_lease
            record = json.loads((folder / "marks" / "catch-up").read_bytes())
            assert record["state"] == "handed" and record["error"] == f"pid {os.getpid()} took over"
            assert record["written"] < record["lines_at_start"]
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_check_while_a_catch_up_writes_finds_no_damage(place, tmp_path: Path) -> None:
    """A full check (``endless doctor``'s) made while ``endless catch-up`` stores lines reads every line a
    slot names: the lines and slots a store wrote after the check read the tree file are not damage (it
    said so of a store's 512 slots, and offered a repair)."""
    from endless.core import integrity
    from endless.core.memory import Memory

    workspace, env, _ = place
    source = tmp_path / "long.jsonl"
    with open(source, "w") as handle:
        for k in range(3000):
            handle.write(json.dumps({"role": "user", "content": f"question {k} about the ledger of region "
                                     f"{k % 7} " + "and its refunds " * (k % 40)}) + "\n")
            handle.write(json.dumps({"role": "assistant", "content": f"answer {k}: " + "a negative row " * (k % 30)})
                         + "\n")
    assert run(place, "import", str(source), "--no-catch-up").returncode == 0
    home = Path(env["ENDLESS_HOME"])
    memory_id = next((home / "memories").iterdir()).name
    writer = subprocess.Popen(endless_command() + ["catch-up", "--no-progress"], cwd=workspace, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    problems, counts = [], []
    try:
        while writer.poll() is None:
            memory = Memory.open(memory_id=memory_id, root=home, readonly=True)
            try:
                found = integrity.scan(memory)
                counts.append(memory.tree.count)
            finally:
                memory.close()
            problems += [f"slot {part}" for part in found.bad_slots] + [f"line at {at}" for at, _ in found.damaged_lines]
    finally:
        writer.wait(timeout=300)
    assert writer.returncode == 0, writer.stderr.read()
    assert problems == []
    assert len(set(counts)) >= 3, counts  # (checks made while lines were being stored)
