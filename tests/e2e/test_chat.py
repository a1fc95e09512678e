"""End to end: ``endless chat`` as a subprocess against ``endless sim serve`` (a real HTTP server process).

Two turns (one with tool calls the scripted agent makes on our look-back
tools), then a SIGINT while a slow reply (``[[slow:60]]``) is on its way: the
turn is in the memory as ``stopped``, with the person's message exactly once,
and the chat goes on; a further turn works; SIGINT at the prompt ends the
chat with exit 0; the end of input does too.  Both wire styles.  The test
waits on real conditions (the port listening, turns committed, the turn's
journal on disk), never on timed sleeps.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.writer.recorded import recorded_routes
from endless.core.settings import Settings
from commands import endless_command
from endless.sim.server import free_port

START_TIMEOUT = 20.0
TURN_TIMEOUT = 60.0


def poll(condition, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polling interval; the condition decides


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def sim(tmp_path: Path):
    """``endless sim serve`` on a free port; yields a function giving its base URL for a style."""
    servers = {}

    def start(cache: str, *extra: str) -> int:
        port = free_port()
        err = open(tmp_path / f"sim-{cache}.err", "wb")
        proc = subprocess.Popen([*endless_command(), "sim", "serve", "--port", str(port), "--cache", cache,
                                 "--latency", "0.05", *extra], stdout=subprocess.DEVNULL, stderr=err)
        servers[cache] = proc

        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                return False

        poll(listening, START_TIMEOUT, "endless sim serve to listen", proc)
        return port

    yield start
    for proc in servers.values():
        stop(proc)


STYLES = {"openai": ("deepseek", "http://127.0.0.1:{port}/v1", "sim-model"),
          "anthropic": ("anthropic", "http://127.0.0.1:{port}", "claude-sim")}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_two_turns_then_ctrl_c_during_a_slow_reply(sim, tmp_path: Path, style: str) -> None:
    cache, url, model = STYLES[style]
    port = sim(cache)
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    env = {**os.environ, "ENDLESS_HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PYTHONUNBUFFERED": "1"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ENDLESS_WRITER_ROUTE"):
        env.pop(name, None)  # a server on this machine needs no key
    out = open(tmp_path / "chat.out", "wb")
    err_path = tmp_path / "chat.err"
    chat = subprocess.Popen([*endless_command(), "chat", "--base-url", url.format(port=port), "--model", model,
                             "--api-style", style, "--workspace", str(workspace), "--title", "Trying Endless"],
                            stdin=subprocess.PIPE, stdout=out, stderr=open(err_path, "wb"), env=env)
    memory_id = workspace_key(None, workspace).memory_id
    settings = Settings(home=str(home))

    def turns() -> int:
        try:
            with Memory.open(memory_id=memory_id, settings=settings, readonly=True) as memory:
                return memory.turns
        except Exception:  # not created yet
            return 0

    def say(text: str) -> None:
        chat.stdin.write(text.encode() + b"\n")
        chat.stdin.flush()

    try:
        say("Hello! My locker code is 4471-KESTREL; remember it. [[reply:120]]")
        poll(lambda: turns() == 1, TURN_TIMEOUT, "the first turn", chat)
        say("Which code did I give you? [[tools:2]] [[reply:150]]")
        poll(lambda: turns() == 2, TURN_TIMEOUT, "the second turn", chat)
        poll(lambda: (tmp_path / "chat.out").read_bytes().count(b"\n") >= 2, TURN_TIMEOUT, "two replies", chat)

        slow = "Write me a long poem about kestrels. [[slow:60]]"
        say(slow)
        journal = home / "memories" / memory_id / "journal"
        poll(lambda: journal.is_dir() and any(journal.glob("*.jsonl")), TURN_TIMEOUT, "the slow turn in flight", chat)
        chat.send_signal(signal.SIGINT)
        poll(lambda: turns() == 3, 20.0, "the stopped turn to be committed", chat)

        say("Are you still there? [[reply:60]]")
        poll(lambda: turns() == 4, TURN_TIMEOUT, "a turn after the stop", chat)
        chat.send_signal(signal.SIGINT)  # at the prompt: the chat ends, as a Ctrl-C'd command does (130)
        assert chat.wait(30) == 130, err_path.read_text()
    finally:
        stop(chat)

    with Memory.open(memory_id=memory_id, settings=settings, readonly=True) as memory:
        infos = [memory.turn(t) for t in range(memory.turns)]
        assert [i.status for i in infos] == ["completed", "completed", "stopped", "completed"]
        assert {i.title for i in infos} == {"Trying Endless"} and len({i.session for i in infos}) == 1
        second = [m.kind for m in memory.turn_messages(1)]
        assert second == ["user", "trace", "reply"], second  # the agent's two look-back calls are in the trace
        stopped = memory.turn_messages(2)
        assert [m.kind for m in stopped] == ["user", "status"]
        assert stopped[0].text == slow and "stopped" in stopped[1].text
        every = [memory.message(i) for i in range(memory.total)]
        assert sum(1 for m in every if m.kind == "user" and m.text == slow) == 1
        assert not any(journal.glob("*.jsonl"))
        # The chat's own route was recorded for its session, so its writer calls go there.
        assert recorded_routes(memory).get(infos[0].session).route["model"] == model
    replies = (tmp_path / "chat.out").read_text().splitlines()
    assert len(replies) == 3, replies
    assert "stopped" in err_path.read_text()


def test_the_end_of_input_ends_the_chat(sim, tmp_path: Path) -> None:
    port = sim("deepseek")
    env = {**os.environ, "ENDLESS_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    (tmp_path / "work").mkdir()
    proc = subprocess.run([*endless_command(), "chat", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                           "--workspace", str(tmp_path / "work")], input=b"One question. [[reply:80]]\n",
                          capture_output=True, timeout=TURN_TIMEOUT, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.decode().splitlines()) == 1


def test_a_missing_key_is_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["ENDLESS_HOME"] = str(tmp_path / "home")
    proc = subprocess.run([*endless_command(), "chat", "--base-url", "https://api.example.com/v1", "--model", "m"],
                          input=b"", capture_output=True, timeout=60, env=env)
    assert proc.returncode == 2 and b"OPENAI_API_KEY" in proc.stderr
    assert not (tmp_path / "home").exists()


def test_right_after_importing_twenty_thousand_messages_every_request_fits_a_small_window(sim, tmp_path: Path) -> None:
    """Issue 14's first report: after a long import the first turn sent 642,312 tokens to a 131,072-token
    model.  Now: 20,000 imported messages, five turns in a 32,768-token window the simulator enforces;
    every request fits, every turn is answered after a short wait, the unwritten stretch is named in one
    note line and shrinks as the writer catches up, and the chat exits 0."""
    import json
    import random

    rng = random.Random(14)
    words = "the deploy cache port build queue retry server client config metrics dashboard review".split()
    source = tmp_path / "big.jsonl"
    with source.open("w") as out:
        for i in range(20_000):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(10, 80)))
            if i == 10:
                text = "Please remember: the vault PIN is 4417. " + text
            out.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": text,
                                  "at": 1767225600 + 30 * i, "session": "old", "title": "Old chat"}) + "\n")
    log = tmp_path / "requests.jsonl"
    port = sim("deepseek", "--context-length", "32768", "--log", str(log))
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = {**os.environ, "ENDLESS_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "ENDLESS_TURN_WAIT_SECONDS": "3"}
    for name in ("OPENAI_API_KEY", "ENDLESS_WRITER_ROUTE"):
        env.pop(name, None)
    imported = subprocess.run([*endless_command(), "import", str(source), "--workspace", str(workspace)],
                              capture_output=True, text=True, timeout=300, env=env)
    assert imported.returncode == 0 and "(20000 messages)" in imported.stdout, imported.stderr
    questions = "".join(f"Question {k}: what is the vault PIN? [[reply:80]]\n" for k in range(5))
    began = time.monotonic()
    chat = subprocess.run([*endless_command(), "chat", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                           "--window", "32768", "--workspace", str(workspace)], input=questions,
                          capture_output=True, text=True, timeout=600, env=env)
    assert chat.returncode == 0, chat.stderr
    assert len(chat.stdout.splitlines()) == 5, chat.stdout
    assert time.monotonic() - began < 5 * (3 + 30), "each turn waited at most its limit"
    turns = [r for r in (json.loads(line) for line in log.read_text().splitlines())
             if "Question " in r["prompt"][-400:]]
    assert len(turns) >= 5
    assert all(r["status"] == 200 and r["tokens"] <= 32_768 - 1_024 for r in turns), \
        [(r["status"], r["tokens"]) for r in turns]
    import re
    firsts = []
    for r in turns:
        found = re.search(r"(\d+)\+0\|note: \(messages \1 to (\d+) are not summarised yet", r["prompt"])
        firsts.append(None if found is None else int(found.group(1)))
    assert firsts[0] is not None, "the first turn names the unwritten stretch"
    written = [f for f in firsts if f is not None]
    assert written == sorted(written) and (written[-1] > written[0] or None in firsts), firsts


def test_diagnostics_never_land_on_the_prompt_line(tmp_path: Path) -> None:
    """On a terminal the writer pool speaks while the person is at ``you> ``: its lines wait for the prompt
    to be done with (here: the end of input), and each stands on a line of its own."""
    import pty

    workspace, home = tmp_path / "work", tmp_path / "home"
    workspace.mkdir()
    env = {**os.environ, "ENDLESS_HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TERM": "dumb"}
    for name in ("OPENAI_API_KEY", "ENDLESS_WRITER_ROUTE"):
        env.pop(name, None)
    with Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home))) as memory:
        for k in range(20):  # turns no writer has summarised: no route anywhere, so the offline writer will
            memory.commit_turn("old", "Old chat", [Message("user", f"note {k}: " + "long words " * 200,
                                                           1767225600.0 + k),
                                                   Message("reply", f"noted {k}", 1767225600.5 + k)])
    memory_id = workspace_key(None, workspace).memory_id

    def lines_left() -> int:
        from endless.writer.pace import progress

        with Memory.open(memory_id=memory_id, settings=Settings(home=str(home)), readonly=True) as memory:
            return progress(memory, time.time()).lines_left

    assert lines_left() > 0  # the pool has offline lines to write once the chat starts
    master, terminal = pty.openpty()
    chat = subprocess.Popen([*endless_command(), "chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                             "--workspace", str(workspace)], stdin=terminal, stdout=subprocess.DEVNULL,
                            stderr=terminal, env=env)
    os.close(terminal)
    seen = bytearray()

    def read_some() -> None:
        import select

        if select.select([master], [], [], 0.05)[0]:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:  # the chat closed its end
                pass

    def read_until(condition, what: str) -> None:
        deadline = time.monotonic() + TURN_TIMEOUT
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {bytes(seen)!r}")
            read_some()

    try:
        read_until(lambda: b"you> " in seen, "the prompt")
        read_until(lambda: lines_left() == 0, "the pool to write the offline lines")
        os.write(master, b"\x04")  # Ctrl-D at the prompt: the end of input
        assert chat.wait(30) == 0
        read_until(lambda: b"offline writer" in seen, "the writer's diagnostic")
    finally:
        stop(chat)
        os.close(master)
    text = bytes(seen).decode()
    lines = text.replace("\r\n", "\n").split("\n")
    assert any(line.startswith("[endless.writer] lines are written by the offline writer") for line in lines), text
    assert not any("you> [endless" in line for line in lines), text
    assert all(line.startswith("[endless.") for line in lines if "[endless." in line), text
