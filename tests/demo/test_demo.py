"""``endless demo --no-serve`` in a clean environment: no key, no network, its own folder, a table."""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_replays_offline_and_prints_the_table(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ENDLESS_", "OPENAI", "ANTHROPIC", "XDG_")) and not k.endswith("_PROXY")}
    env.update(HOME=str(home), NO_PROXY="*", HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    folder = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "endless.cli", "demo", "--no-serve", "--turns", "40",
                           "--dir", str(folder)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "The memory after the replay" in out and "turns / messages" in out
    assert "> zoom(" in out and "> date(" in out and "> recall_search(" in out
    assert "[[" not in out, "the scripted agent's steering words stay out of the memory"
    memories = list((folder / "memories").iterdir())
    assert len(memories) == 1, "one demo memory, in the folder the demo named"
    assert not (home / ".local" / "share" / "endless").exists(), "the user's own memories are untouched"
    assert "writer model calls" in out and "0 (offline writer" in out
