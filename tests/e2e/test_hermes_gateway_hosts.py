"""A Hermes gateway on two hosts serving one chat, one memory in PostgreSQL (issue 31 item 3).

Two real ``hermes gateway run`` processes (Hermes 0.19.0's API-server platform,
``gateway/platforms/api_server.py``: an OpenAI-compatible HTTP API), each with its
own HERMES_HOME and ENDLESS_HOME, both on one PostgreSQL memory, the model being
``endless sim serve``.  A client alternates the turns of one conversation between
the hosts, as a load balancer in front of a team's gateway does, naming the chat
with ``X-Hermes-Session-Key`` (the stable per-channel key Hermes hands the plugin
as the conversation: the memory follows it).  The memory must hold each turn once,
in order, and each host's next request must carry the turn the other host served.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.core.store.keys import gateway_key
from endless.faces.hermes.install import install
from endless.sim.server import free_port
from commands import endless_command
from hermes_env import HERMES_PYTHON, hermes_ready, is_writer_call, segments

pytestmark = pytest.mark.skipif(not hermes_ready(), reason=f"no Hermes venv with Endless: {HERMES_PYTHON}")

KEY = "team-gateway-key-0123456789abcdef"  # Hermes refuses an API_SERVER_KEY under 16 characters
CHAT = "agent:main:webui:room:7"
START_SECONDS = 90.0
WORDS = ["kestrel", "juniper", "obsidian", "tamarind"]


def _aiohttp_in_hermes() -> bool:
    probe = subprocess.run([str(HERMES_PYTHON), "-c", "import aiohttp"], capture_output=True, timeout=60)
    return probe.returncode == 0


class Host:
    """One gateway host: its Hermes home (the plugin installed), its own Endless home, the shared store."""

    def __init__(self, tmp: Path, name: str, model_url: str, store: str) -> None:
        self.name = name
        self.folder = tmp / name
        home = self.folder / "hermes"
        for folder in (home, self.folder / "home", self.folder / "endless"):
            folder.mkdir(parents=True)
        config = {"model": {"provider": "custom", "base_url": model_url, "default": f"sim-model-{name}",
                            "api_key": "sk-sim-test", "context_length": 131072},
                  "agent": {"api_max_retries": 1},
                  "platform_toolsets": {"api_server": ["endless"]}}
        (home / "config.yaml").write_text(json.dumps(config))
        install(home)
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
        env.update(HOME=str(self.folder / "home"), HERMES_HOME=str(home), ENDLESS_HOME=str(self.folder / "endless"),
                   ENDLESS_STORE=store, API_SERVER_ENABLED="true", API_SERVER_HOST="127.0.0.1",
                   API_SERVER_PORT=str(self.port), API_SERVER_KEY=KEY, PYTHONUNBUFFERED="1",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        self.log = open(self.folder / "gateway.log", "wb")
        self.proc = subprocess.Popen(
            [str(HERMES_PYTHON), "-c", "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; "
             "sys.exit(main())", "gateway", "run", "-v"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, deadline: float) -> None:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway {self.name} did not start:\n{self.tail()}")
            time.sleep(0.1)  # polling interval; the health answer decides

    def ask(self, messages: list[dict]) -> str:
        body = json.dumps({"model": "hermes-agent", "messages": messages}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/chat/completions", data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}",
                     "X-Hermes-Session-Key": CHAT})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return json.loads(answer.read())["choices"][0]["message"]["content"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"gateway {self.name} answered {exc.code}: {exc.read()[:500]!r}\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.folder / "gateway.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture
def hosts(tmp_path, pg_store_url):
    if not _aiohttp_in_hermes():
        pytest.skip("the Hermes venv lacks aiohttp, which Hermes's API server needs "
                    "(.venv-hermes/bin/pip install 'aiohttp==3.14.1', Hermes's own pin)")
    port = free_port()
    log = tmp_path / "requests.jsonl"
    sim = subprocess.Popen(endless_command() + ["sim", "serve", "--port", str(port), "--cache", "deepseek",
                                                "--log", str(log), "--latency", "0.02"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    started = []
    try:
        for name in ("a", "b"):
            started.append(Host(tmp_path, name, f"http://127.0.0.1:{port}/v1", pg_store_url))
        deadline = time.monotonic() + START_SECONDS
        for host in started:
            host.wait_ready(deadline)
        yield started, log
    finally:
        for host in started:
            host.stop()
        sim.terminate()
        sim.wait(10)


def _first_requests(log: Path) -> list[tuple[str, str]]:
    """``(host, the head's user message)`` of the first request of every turn, in the order they came (each host
    asks for a model of its own name, so the simulator's log says which host sent what)."""
    found = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if is_writer_call(record):
            continue
        parts = segments(record["prompt"])
        if "assistant" in [role for role, _ in parts]:
            continue  # a later step of a turn
        found.append((record["model"].removeprefix("sim-model-"), next(text for role, text in parts if role == "user")))
    return found


def test_two_gateway_hosts_serve_one_chat_with_each_turn_once_in_order(hosts, pg_store_url, tmp_path):
    (a, b), log = hosts
    said = [f"Turn {k}: note the codeword {w}-{k}{k}{k}. [[tools:0]] [[reply:100]]" for k, w in enumerate(WORDS)]
    history: list[dict] = []
    for k, text in enumerate(said):  # a, b, a, b: the client sends the whole conversation, as frontends do
        history.append({"role": "user", "content": text})
        history.append({"role": "assistant", "content": (a, b)[k % 2].ask(history)})
    # A client that sends the new message alone: what came before can only come from the memory.
    alone = "Turn 4: which codewords do you have? [[tools:0]] [[reply:100]]"
    a.ask([{"role": "user", "content": alone}])

    with Memory.open(gateway_key(None, "api_server", CHAT), settings=Settings(store=pg_store_url),
                     root=tmp_path / "reader", create=False, readonly=True) as memory:
        turns = [memory.turn_messages(t) for t in range(memory.turns)]
        statuses = [memory.turn(t).status for t in range(memory.turns)]
    assert [[m.kind for m in turn] for turn in turns] == [["user", "reply"]] * 5
    assert [turn[0].text for turn in turns] == said + [alone]  # each turn once, in the order it was served
    assert [turn[1].text for turn in turns[:4]] == [m["content"] for m in history[1::2]]
    assert statuses == ["completed"] * 5

    firsts = _first_requests(log)
    assert [host for host, _ in firsts] == ["a", "b", "a", "b", "a"]
    for k in range(1, 5):  # the turn the other host served, in this host's view or recent block, once
        head = firsts[k][1]
        assert head.count(f"|you: {said[k - 1]}") == 1, (k, head[-1500:])
    last = firsts[4][1]  # the message sent alone: every earlier turn, from both hosts, once, from the memory
    assert [last.count(f"|you: {text}") for text in said] == [1, 1, 1, 1], last[-2000:]
    assert last.rstrip().endswith(alone)
