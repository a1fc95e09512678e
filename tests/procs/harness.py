"""Parent-side helpers for tests that drive real child processes through pipes.

A child speaks one JSON object per line on stdout.  Reading is done with
``select`` and a deadline, so a child that hangs or dies makes the test fail
with its stderr instead of hanging the run.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

PROCS = Path(__file__).resolve().parent
REPO = PROCS.parent.parent


class ChildFailed(AssertionError):
    pass


class LineReader:
    """Whole lines from a pipe, with a deadline; keeps a partial last line aside."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def _fill(self, timeout: float | None) -> bool:
        if self.eof:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def readline(self, timeout: float) -> bytes | None:
        """One line without its newline, or None at EOF; raises TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line from the child within {timeout} s")
            self._fill(remaining)
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def drain(self, timeout: float = 30.0) -> list[bytes]:
        """Every complete line until EOF (the child is dead or closing); a torn tail is dropped."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the child's stdout did not close")
            self._fill(remaining)
        lines = self.buffer.split(b"\n")
        self.buffer = b""
        return lines[:-1]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    for key in list(env):
        if key.startswith("ENDLESS_"):
            del env[key]
    return env


def spawn(script: str, *args: str, stderr_path: Path) -> subprocess.Popen:
    err = open(stderr_path, "wb")
    try:
        return subprocess.Popen([sys.executable, str(PROCS / script), *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=child_env(), cwd=str(REPO))
    finally:
        err.close()


class Agent:
    """A child running ``agent.py``: send it a command, read its JSON answers."""

    def __init__(self, tmp: Path, name: str) -> None:
        self.name = name
        self.stderr_path = tmp / f"{name}.stderr"
        self.proc = spawn("agent.py", stderr_path=self.stderr_path)
        self.reader = LineReader(self.proc.stdout.fileno())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, **command) -> None:
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 60.0) -> dict:
        try:
            line = self.reader.readline(timeout)
        except TimeoutError:
            raise ChildFailed(f"{self.name} gave no answer in {timeout} s; stderr:\n{self.stderr()}")
        if line is None:
            raise ChildFailed(f"{self.name} exited ({self.proc.poll()}); stderr:\n{self.stderr()}")
        answer = json.loads(line)
        if "error" in answer:
            raise ChildFailed(f"{self.name} failed:\n{answer['error']}")
        return answer

    def call(self, timeout: float = 60.0, **command) -> dict:
        self.send(**command)
        return self.recv(timeout)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            try:
                self.send(op="exit")
                self.proc.wait(timeout=20)
            except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                self.kill()
                self.proc.wait(timeout=20)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
