"""A throwaway Hermes home with Endless installed, talking to ``endless sim serve``: the e2e tests' harness.

Hermes runs from its own venv (``ENDLESS_HERMES_PYTHON``, default
``.venv-hermes/bin/python``), headless: ``hermes chat -Q -q ...`` for CLI
turns, or ``tests/e2e/hermes_driver.py`` for what the CLI cannot do from a
script (interrupts, gateway platforms).  Endless must be installed into that
venv (``pip install -e .``) so Hermes finds its entry point.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

from endless.faces.hermes.install import install
from endless.core.store.keys import Key, workspace_key
from endless.core.memory import Memory
from endless.core.settings import load_settings
from commands import endless_command
from endless.sim.server import free_port

ROOT = Path(__file__).resolve().parents[2]
HERMES_PYTHON = Path(os.environ.get("ENDLESS_HERMES_PYTHON", ROOT / ".venv-hermes" / "bin" / "python"))
DRIVER = Path(__file__).resolve().parent / "hermes_driver.py"
HERMES_TIMEOUT = 120.0
SERVER_START_TIMEOUT = 20.0
ROLE = re.compile(r"<\|(system|user|assistant|tool|tools)\|>")
VIEW_LINE = re.compile(r"^\d+\+\d+\|")


# Loads the plugin the way Hermes does (its entry point), so a moved module cannot pass unnoticed.
_PROBE = ("import run_agent; from importlib.metadata import entry_points; "
          "(p,) = [e for e in entry_points(group='hermes_agent.plugins') if e.name == 'endless']; "
          "assert callable(p.load().register)")


def hermes_ready() -> bool:
    """False when there is no Hermes venv (the tests skip); a venv that cannot load the plugin is an error."""
    if not HERMES_PYTHON.is_file():
        return False
    probe = subprocess.run([str(HERMES_PYTHON), "-c", _PROBE], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise RuntimeError(f"{HERMES_PYTHON} cannot load the Endless plugin through Hermes's entry point "
                           f"(reinstall with `.venv-hermes/bin/pip install -e .`):\n{probe.stderr[-2000:]}")
    return True


class Env:
    """One sim server, one Hermes home with Endless installed, one workspace, one Endless home."""

    def __init__(self, tmp: Path, mode: str = "chat_completions", cache: str = "deepseek",
                 config: dict | None = None, endless_env: dict | None = None) -> None:
        self.tmp = tmp
        self.mode = mode
        self.port = free_port()
        self.log = tmp / "requests.jsonl"
        self.home = tmp / "hermes_home"
        self.workspace = tmp / "workspace"
        self.endless_home = tmp / "endless_home"
        for folder in (self.home, self.workspace, self.endless_home, tmp / "home"):
            folder.mkdir(exist_ok=True)
        base = f"http://127.0.0.1:{self.port}" + ("/v1" if mode == "chat_completions" else "")
        model = "sim-model" if mode == "chat_completions" else "claude-sim"
        self.model = model
        settings = {
            "model": {"provider": "custom", "base_url": base, "default": model, "api_key": "sk-sim-test",
                      "context_length": 131072},
            "agent": {"api_max_retries": 1},
        }
        if mode == "anthropic_messages":
            settings["model"]["api_mode"] = "anthropic_messages"
        for key, value in (config or {}).items():
            settings.setdefault(key, {}).update(value)
        (self.home / "config.yaml").write_text(json.dumps(settings, indent=2))
        install(self.home)
        self.endless_env = dict(endless_env or {})
        self.err = open(tmp / "server.err", "wb")
        self.server = subprocess.Popen(
            endless_command() + ["sim", "serve", "--port", str(self.port), "--cache", cache,
                                 "--log", str(self.log), "--latency", "0.02"],
            stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL)
        self._wait_for_port()

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"endless sim serve did not start: "
                                         f"{(self.tmp / 'server.err').read_text(errors='replace')}") from None
                time.sleep(0.05)  # polling interval; the port decides

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(5)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait(5)
        self.err.close()

    def env(self, extra: dict | None = None) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if key in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")}
        env.update(HOME=str(self.tmp / "home"), HERMES_HOME=str(self.home), NO_PROXY="127.0.0.1,localhost",
                   no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1", TERM="dumb",
                   ENDLESS_HOME=str(self.endless_home), ENDLESS_TURN_WAIT_SECONDS="60")
        env.update(self.endless_env)
        env.update(extra or {})
        return env

    def chat(self, prompt: str, resume: str | None = None, toolsets: str | None = None,
             env: dict | None = None, check: bool = True) -> "Run":
        """One headless CLI turn; returns its output and session id."""
        args = [str(HERMES_PYTHON), "-c", "import sys; from hermes_cli.main import main; "
                "sys.argv[0] = 'hermes'; sys.exit(main())", "chat", "-Q"]
        if toolsets:
            args += ["-t", toolsets]
        if resume:
            args += ["--resume", resume]
        args += ["-q", prompt]
        started = time.monotonic()
        proc = subprocess.run(args, env=self.env(env), cwd=self.workspace, capture_output=True, text=True,
                              timeout=HERMES_TIMEOUT, stdin=subprocess.DEVNULL)
        run = Run(proc, time.monotonic() - started)
        if check:
            assert proc.returncode == 0, run.diagnostics()
            assert run.session, run.diagnostics()
        return run

    def hermes_cli(self, args: list[str]) -> subprocess.CompletedProcess:
        """``hermes <args>`` in the workspace (e.g. ``hermes endless view``)."""
        return subprocess.run([str(HERMES_PYTHON), "-c", "import sys; from hermes_cli.main import main; "
                               "sys.argv[0] = 'hermes'; sys.exit(main())", *args], env=self.env(),
                              cwd=self.workspace, capture_output=True, text=True, timeout=HERMES_TIMEOUT,
                              stdin=subprocess.DEVNULL)

    def drive(self, script: dict, env: dict | None = None) -> dict:
        """Run ``hermes_driver.py`` (in-process Hermes agents) with a JSON script; returns its JSON."""
        proc = subprocess.run([str(HERMES_PYTHON), str(DRIVER), json.dumps(script)], env=self.env(env),
                              cwd=self.workspace, capture_output=True, text=True, timeout=HERMES_TIMEOUT * 2,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"driver rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-6000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def chat_requests(self) -> list[dict]:
        """The chat's requests (writer calls left out: their first user block is a writer task)."""
        return [r for r in self.requests() if not is_writer_call(r)]

    def set_system_prompt(self, text: str) -> None:
        """The home's ``agent.system_prompt`` (Hermes adds it to its own system prompt)."""
        import yaml

        path = self.home / "config.yaml"
        config = yaml.safe_load(path.read_text())
        config.setdefault("agent", {})["system_prompt"] = text
        path.write_text(yaml.safe_dump(config))

    def settings(self):
        return load_settings(environ={"ENDLESS_HOME": str(self.endless_home)})

    def memory(self, key: Key | None = None) -> Memory:
        key = key or workspace_key(None, self.workspace)
        return Memory.open(key, settings=self.settings(), create=False, readonly=True)


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, elapsed: float) -> None:
        self.proc = proc
        self.elapsed = elapsed
        found = re.search(r"session_id:\s*(\S+)", proc.stderr + proc.stdout)
        self.session = found.group(1) if found else None

    @property
    def stdout(self) -> str:
        return self.proc.stdout

    def diagnostics(self) -> str:
        return (f"hermes rc={self.proc.returncode} in {self.elapsed:.1f} s\n--- stdout\n{self.proc.stdout}\n"
                f"--- stderr\n{self.proc.stderr[-6000:]}")


def is_writer_call(record: dict) -> bool:
    """Writer calls go through the SDK unstreamed; Hermes always streams its chat requests."""
    return record.get("stream") is not True


def segments(prompt: str) -> list[tuple[str, str]]:
    """The prompt text of a logged request as (role, text) pairs, in order."""
    parts = ROLE.split(prompt)
    out = []
    for index in range(1, len(parts), 2):
        out.append((parts[index], parts[index + 1]))
    return out


def user_texts(prompt: str) -> list[str]:
    """The texts of a logged request's user messages, in order."""
    return [text for role, text in segments(prompt) if role == "user"]


def outside_view(text: str) -> str:
    """``text`` without its view and recent-block lines (``id+n|...``)."""
    return "\n".join(line for line in text.splitlines() if not VIEW_LINE.match(line))
