"""Ctrl-C and SIGTERM stop every long-running command cleanly (issue 14).

Each command runs in its own process group, as in a terminal.  Ctrl-C is a
SIGINT to the whole group (what a terminal sends); SIGTERM goes to the
command alone (what ``kill`` sends).  The command must end with 130 or 143,
print no traceback, and leave none of its child processes behind (the RPC's
search workers, multiprocessing's resource tracker).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import rpc_fixtures as F
from commands import endless_command
from endless.core.store.keys import workspace_key

BOUND = 60.0


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (read from /proc; zombies count as gone)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found and alive(child):
                    found.add(child)
                    todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def place(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    memory = F.build(tmp_path, key=workspace_key(None, ws))
    memory.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env.update(ENDLESS_HOME=str(tmp_path), ENDLESS_CONFIG=str(tmp_path / "none.toml"), PYTHONUNBUFFERED="1",
               ENDLESS_RPC_SEARCH_WORKERS="2")
    return tmp_path, ws, env


@pytest.fixture(autouse=True)
def ctrl_c_as_in_a_terminal():
    """The commands start as a terminal's foreground job does: SIGINT at its default.

    A test run started with SIGINT ignored (a script's background job, some CI
    runners) hands that on to every child, and Python in it then never raises
    KeyboardInterrupt: each Ctrl-C test failed there (``serve`` ended 0).
    What a command does when it *was* started so is tested on its own below.
    """
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def start(place, *argv: str, ready: str, stdin: bool = False,
          ctrl_c_ignored: bool = False) -> tuple[subprocess.Popen, Path]:
    """``ctrl_c_ignored``: start it with SIGINT ignored, as ``nohup`` or a script's ``&`` does."""
    root, ws, env = place
    err = root / f"stderr-{argv[0]}-{time.monotonic_ns()}.txt"
    out = err.with_name(err.name.replace("stderr-", "stdout-"))
    kept = signal.signal(signal.SIGINT, signal.SIG_IGN) if ctrl_c_ignored else None  # inherited at exec
    try:
        proc = subprocess.Popen([*endless_command(), *argv], cwd=ws, env=env, start_new_session=True,
                                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=out.open("wb"),
                                stderr=err.open("wb"))
    finally:
        if ctrl_c_ignored:
            signal.signal(signal.SIGINT, kept)

    def said() -> str:  # the demo tells its story on stdout, the servers their address on stderr
        return err.read_text(errors="replace") + out.read_text(errors="replace")

    wait_for(lambda: ready in said() or proc.poll() is not None, f"{argv[0]} to start")
    assert proc.poll() is None, err.read_text()
    return proc, err


def stop(proc: subprocess.Popen, err: Path, how: str, expected: int, at_least: int = 0) -> None:
    wait_for(lambda: len(descendants(proc.pid)) >= at_least, f"{at_least} child processes")
    children = descendants(proc.pid)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(BOUND) == expected, err.read_text()
    wait_for(lambda: not any(alive(c) for c in children), "the child processes to end")
    text = err.read_text(errors="replace")
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text


@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_serve_stops_with_its_workers(place, how, code):
    proc, err = start(place, "serve", "--port", "0", ready="Ctrl-C stops")
    stop(proc, err, how, code, at_least=2)


def test_serve_started_with_ctrl_c_ignored_still_ends_as_stopped(place):
    """Under ``nohup`` or a script's ``&``, SIGINT is inherited ignored; uvicorn stops on it anyway and then
    raised it again into the ignored disposition: ``endless serve`` ended with 0, as if it had finished."""
    proc, err = start(place, "serve", "--port", "0", ready="Ctrl-C stops", ctrl_c_ignored=True)
    stop(proc, err, "ctrl-c", 130, at_least=2)


def test_serve_stopped_while_its_workers_start(place):
    """Ctrl-C at once, while the search workers are still importing Python (it printed tracebacks)."""
    proc, err = start(place, "serve", "--port", "0", ready="Ctrl-C stops")
    stop(proc, err, "ctrl-c", 130)


@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_demo_stops_while_serving(place, how, code):
    root, _, _ = place
    proc, err = start(place, "demo", "--port", "0", "--dir", str(root / "demo"), ready="Serving it until Ctrl-C")
    stop(proc, err, how, code, at_least=1)


@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_chat_stops_at_its_prompt(place, how, code):
    proc, err = start(place, "chat", "--base-url", "http://127.0.0.1:1/v1", "--model", "sim",
                      ready="ends the chat", stdin=True)
    stop(proc, err, how, code)


@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_mcp_stops(place, how, code):
    proc, err = start(place, "mcp", ready="read-only over stdio", stdin=True)
    stop(proc, err, how, code)


def test_chat_against_a_refused_connection_says_so_and_fails(place):
    root, ws, env = place
    done = subprocess.run([*endless_command(), "chat", "--base-url", "http://127.0.0.1:1/v1", "--model", "sim"],
                          input="hello there\n", cwd=ws, env=env, capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 1, done.stderr
    assert "the turn failed: cannot reach http://127.0.0.1:1/v1" in done.stderr
    assert "is the server running there? Check --base-url" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_demo_stops_while_replaying(place, how, code):
    root, _, _ = place
    proc, err = start(place, "demo", "--no-serve", "--dir", str(root / "demo"), ready="The demo memory lives in")
    stop(proc, err, how, code)
    assert "endless demo: stopped" in err.read_text()


def other_threads(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    except OSError:
        return []


def signal_a_thread(pid: int, tid: int, signum: int) -> None:
    """What the kernel may do with a signal sent to a process: hand it to one of its other threads."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "tgkill"):
        pytest.skip("this C library has no tgkill")
    assert libc.tgkill(pid, tid, signum) == 0, os.strerror(ctypes.get_errno())


SERVING = {"serve": (("serve", "--port", "0"), "Ctrl-C stops"),
           "demo": (("demo", "--port", "0", "--dir", "{root}/demo"), "Serving it until Ctrl-C"),
           "chat": (("chat", "--base-url", "http://127.0.0.1:1/v1", "--model", "sim"), "ends the chat"),
           "mcp": (("mcp",), "read-only over stdio")}


@pytest.mark.parametrize("command", sorted(SERVING))
@pytest.mark.parametrize("how,signum,code", [("ctrl-c", signal.SIGINT, 130), ("sigterm", signal.SIGTERM, 143)])
def test_a_stop_caught_by_another_thread_still_stops(place, command, how, signum, code):
    """Python runs signal handlers in the main thread only; a main thread asleep on a lock never woke
    for a SIGTERM another thread caught (``endless demo`` served on for good, once in CI)."""
    root, _, _ = place
    argv, ready = SERVING[command]
    proc, err = start(place, *(a.format(root=root) for a in argv), ready=ready, stdin=True)
    wait_for(lambda: other_threads(proc.pid), f"{command} to start a thread")
    children = descendants(proc.pid)
    signal_a_thread(proc.pid, other_threads(proc.pid)[0], signum)
    assert proc.wait(BOUND) == code, err.read_text()
    wait_for(lambda: not any(alive(c) for c in children), "the child processes to end")
    assert "Traceback" not in err.read_text(errors="replace"), err.read_text()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("phase", ["planning", "committing"])
@pytest.mark.parametrize("how,code", [("ctrl-c", 130), ("sigterm", 143)])
def test_import_stops_with_its_helpers(place, how, code, phase):
    """A long import plans its source's second half in a forked process, then commits with a helper that
    keeps its search index; stopping the import in either phase stops it and its helper."""
    root, ws, env = place
    source = root / "long.jsonl"
    with open(source, "wb") as handle:
        # long enough to be stopped in the middle of its commits, or (four times as long) while it plans
        for k in range(150_000 if phase == "committing" else 600_000):
            handle.write(b'{"role": "%s", "content": "message %d", "at": %d}\n'
                         % (b"user" if k % 2 == 0 else b"assistant", k, 1_760_000_000 + k))
    err = root / f"stderr-import-{how}.txt"
    proc = subprocess.Popen([*endless_command(), "import", str(source), "--no-progress"], cwd=ws, env=env,
                            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=err.open("wb"))
    def helping() -> bool:  # the index helper runs its own module; the planning half is a fork of the import
        lines = [cmdline(c) for c in descendants(proc.pid)]
        if phase == "committing":
            return any("index_follower" in line for line in lines)
        return any("import" in line and "index_follower" not in line for line in lines)

    wait_for(lambda: helping() or proc.poll() is not None, f"the import's helper while {phase}")
    assert proc.poll() is None, err.read_text()
    stop(proc, err, how, code, at_least=1)
    assert "stopped. The turns committed so far are kept" in err.read_text()


@pytest.mark.parametrize("how,signum,code", [("ctrl-c", signal.SIGINT, 130), ("sigterm", signal.SIGTERM, 143)])
def test_serve_stopped_as_its_server_starts(place, how, signum, code):
    """A stop the moment ``endless serve`` prints its address lands while uvicorn sets up its loop, before its
    own handlers: raised there, it escaped the loop with the start-up half done (a traceback, once in CI)."""
    root, ws, env = place
    for round_ in range(2):
        err = root / f"stderr-start-{round_}.txt"
        proc = subprocess.Popen([*endless_command(), "serve", "--port", "0"], cwd=ws, env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err.open("wb"))
        address = proc.stdout.readline()  # printed just before the server's loop starts
        assert address.startswith(b"http://"), err.read_text()
        proc.send_signal(signum)
        assert proc.wait(BOUND) == code, err.read_text()
        proc.stdout.close()
        text = err.read_text(errors="replace")
        assert "Traceback" not in text and "was destroyed" not in text, text


def test_a_stop_inside_a_served_loop_is_noted_never_raised():
    """What ``endless serve`` relies on around uvicorn's run: a stop asks the server to end and is kept for
    the exit code; the handlers before the block come back after it."""
    from endless.faces.kit.signals import stopped_code, stops_ask

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    asked = []
    with stops_ask(lambda: asked.append(True)) as seen:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        signal.getsignal(signal.SIGTERM)  # a call: the handlers have run by the next line
    assert seen == [signal.SIGTERM, signal.SIGINT] and asked == [True, True]
    assert stopped_code(seen) == 143 and stopped_code([signal.SIGINT]) == 130 and stopped_code([]) == 0
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
