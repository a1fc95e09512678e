"""`endless writer status|resume` as a real command."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import orjson

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.writer.spend import lifted_today, write_pause
from endless.writer.usage import UsageLog


def _run(args, env):
    return subprocess.run([sys.executable, "-m", "endless.cli", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_status_and_resume(tmp_path):
    home = tmp_path / "home"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)))
    UsageLog(memory.folder).record(time.time(), {"provider": "openai", "model": "gpt-4o"}, ["0+1"], None,
                                   1.0, "ok", cost=0.25)
    write_pause(memory, time.time(), 0.25, 0.1)
    env = {**os.environ, "ENDLESS_HOME": str(home), "ENDLESS_SPEND_CAP_PER_DAY": "0.1",
           "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    status = _run(["writer", "status", "--workspace", str(workspace), "--json"], env)
    assert status.returncode == 0, status.stderr
    state = orjson.loads(status.stdout)
    assert state["memoryId"] == memory.memory_id and state["paused"] is True
    assert state["writerUsage"]["calls"] == 1 and state["spentToday"] >= 0.25
    resumed = _run(["writer", "resume", "--memory", memory.memory_id], env)
    assert resumed.returncode == 0 and "rest of today" in resumed.stderr
    assert "paused" not in resumed.stdout.splitlines()[-1]
    assert lifted_today(memory, time.time())
    missing = _run(["writer", "status", "--workspace", str(tmp_path)], env)
    assert missing.returncode == 1 and "no memory" in missing.stderr
