"""Inside Hermes, Endless's diagnostics go to Hermes's log files, never to its screen (issue 15 item 4).

A headless Hermes chat whose writer cannot reach its model (the writer route
points at a loopback port nobody listens on): the writer's failures are
logged, but neither run prints any ``[endless.`` text on stdout or stderr;
Hermes's ``logs/agent.log`` holds the ``endless.writer`` records and
``logs/errors.log`` the failed calls.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from endless.sim.server import free_port
from hermes_env import Env, hermes_ready

pytestmark = pytest.mark.skipif(not hermes_ready(), reason="no Hermes venv (see tests/e2e/hermes_env.py)")

LONG = "Please remember all of this for later. " + "The staging database moved to port 5433 today. " * 30


def test_a_failing_writer_prints_nothing_into_hermes(tmp_path: Path) -> None:
    dead = free_port()  # nothing listens here: every writer call fails at once
    route = {"provider": "openai", "model": "sim-model", "base_url": f"http://127.0.0.1:{dead}/v1",
             "max_retries": 0}
    env = Env(tmp_path, endless_env={"ENDLESS_WRITER_ROUTE": json.dumps(route)})
    try:
        first = env.chat(LONG + " [[reply:900]]")
        second = env.chat("And one more thing. [[reply:100]]", resume=first.session)
        third = env.chat("Thanks. [[reply:100]]", resume=first.session)
    finally:
        env.close()
    for run in (first, second, third):
        assert "[endless." not in run.proc.stdout and "[endless." not in run.proc.stderr, run.diagnostics()
    logs = env.home / "logs"
    agent_log = (logs / "agent.log").read_text(errors="replace")
    assert "endless.writer" in agent_log and "writer call failed" in agent_log, agent_log[-3000:]
    assert "writer call failed" in (logs / "errors.log").read_text(errors="replace")
