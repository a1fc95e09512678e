"""End to end: the real Hermes Agent (PyPI ``hermes-agent==0.19.0``) accepts the simulator's answers.

Hermes lives in its own venv (it is not a dependency of this project); the
test finds its interpreter through ``ENDLESS_HERMES_PYTHON`` (default
``.venv-hermes/bin/python`` in the repository) and is skipped when it is missing.

For each wire mode Hermes speaks to a custom endpoint (``chat_completions``,
``anthropic_messages`` and ``codex_responses``, the Responses API, which a
plain ``provider: custom`` never uses for a non-OpenAI URL, so that mode is a
named ``custom_providers`` entry with ``api_mode``; all streamed as Hermes
always does) the test
starts ``endless sim serve`` on a free loopback port, runs one headless
Hermes turn (``hermes chat -Q -t todo -q ...``, isolated ``HERMES_HOME`` and
``HOME``) whose prompt carries ``[[tools:1]]``: the scripted agent calls
Hermes's own ``todo`` tool once, Hermes runs it and sends the result back,
the agent answers.  Checks: Hermes exits 0 and prints the final reply (the
assistant row it stored in ``state.db``), and the simulator's request log
holds both requests, streamed, answered 200, with usage.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from commands import endless_command
from endless.sim.server import free_port

HERMES_PYTHON = Path(os.environ.get("ENDLESS_HERMES_PYTHON",
                                    Path(__file__).resolve().parents[2] / ".venv-hermes" / "bin" / "python"))
PROMPT = "Please plan my week around the 14:30 review. [[tools:1]] [[reply:240]]"
HERMES_TIMEOUT = 90.0
SERVER_START_TIMEOUT = 20.0

pytestmark = pytest.mark.skipif(
    not HERMES_PYTHON.is_file(),
    reason=f"no Hermes venv: {HERMES_PYTHON} missing (set ENDLESS_HERMES_PYTHON, or create it with "
           f"`python3 -m venv .venv-hermes && .venv-hermes/bin/pip install 'hermes-agent[anthropic]==0.19.0'`)")


def _hermes_has_anthropic() -> bool:
    probe = subprocess.run([str(HERMES_PYTHON), "-c", "import anthropic"], capture_output=True, timeout=60)
    return probe.returncode == 0


def _wait_for_port(port: int, proc: subprocess.Popen, deadline: float, err: Path) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"endless sim serve exited with {proc.returncode}: "
                                     f"{err.read_text(errors='replace')}") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"endless sim serve did not listen on {port} within "
                                     f"{SERVER_START_TIMEOUT} s") from None
            time.sleep(0.05)  # polling interval, not synchronisation: the port decides


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _clean_env(tmp: Path, hermes_home: Path) -> dict[str, str]:
    """Only what Hermes needs: no provider keys, no proxies, loopback only, a throwaway home."""
    env = {key: value for key, value in os.environ.items()
           if key in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")}
    env.update(HOME=str(tmp / "home"), HERMES_HOME=str(hermes_home), NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1", TERM="dumb")
    (tmp / "home").mkdir(exist_ok=True)
    return env


MODES = {
    # mode: (cache model of the server, config of the custom provider (base URL from the port))
    "chat_completions": ("deepseek", "http://127.0.0.1:{port}/v1", "sim-model", "openai"),
    "anthropic_messages": ("anthropic", "http://127.0.0.1:{port}", "claude-sim", "anthropic"),
    "codex_responses": ("openai-auto", "http://127.0.0.1:{port}/v1", "sim-model", "responses"),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_hermes_turn_with_a_tool_call_against_the_simulator(mode: str, tmp_path: Path) -> None:
    cache, base_url, model, api = MODES[mode]
    if mode == "anthropic_messages" and not _hermes_has_anthropic():
        pytest.skip("the Hermes venv has no `anthropic` SDK (install hermes-agent[anthropic]==0.19.0)")

    port = free_port()
    log_path = tmp_path / "requests.jsonl"
    server_err = tmp_path / "server.err"
    hermes_home = tmp_path / "hermes_home"
    hermes_home.mkdir()
    config = {
        "model": {"provider": "custom", "base_url": base_url.format(port=port), "default": model,
                  "api_key": "sk-sim-test", "context_length": 131072},
        "memory": {"nudge_interval": 0},
        "skills": {"creation_nudge_interval": 0},
    }
    if mode == "anthropic_messages":
        config["model"]["api_mode"] = "anthropic_messages"
    if mode == "codex_responses":  # Hermes honours this api_mode only on a named custom provider
        config["model"] = {"provider": "simresp", "default": model, "context_length": 131072}
        config["custom_providers"] = [{"name": "simresp", "base_url": base_url.format(port=port),
                                       "api_key": "sk-sim-test", "api_mode": mode, "model": model}]
    # JSON is YAML: no need for a YAML writer here.
    (hermes_home / "config.yaml").write_text(json.dumps(config, indent=2))

    with open(server_err, "wb") as err:
        server = subprocess.Popen(
            endless_command() + ["sim", "serve", "--port", str(port), "--cache", cache,
                                  "--log", str(log_path), "--latency", "0.05"],
            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    try:
        _wait_for_port(port, server, time.monotonic() + SERVER_START_TIMEOUT, server_err)
        started = time.monotonic()
        hermes = subprocess.run(
            [str(HERMES_PYTHON), "-c", "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; "
                                       "sys.exit(main())",
             "chat", "-Q", "-t", "todo", "-q", PROMPT],
            env=_clean_env(tmp_path, hermes_home), cwd=tmp_path, capture_output=True, text=True,
            timeout=HERMES_TIMEOUT, stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
    finally:
        _stop(server)

    diagnostics = (f"hermes rc={hermes.returncode} in {elapsed:.1f} s\n--- stdout\n{hermes.stdout}\n"
                   f"--- stderr\n{hermes.stderr[-4000:]}\n--- server\n{server_err.read_text(errors='replace')}")
    assert hermes.returncode == 0, diagnostics
    assert "session_id:" in hermes.stderr, diagnostics

    # The turn Hermes stored: user, assistant tool call (todo), tool result, final assistant reply.
    with sqlite3.connect(hermes_home / "state.db") as db:
        rows = db.execute("SELECT role, content, tool_calls FROM messages ORDER BY id").fetchall()
    roles = [role for role, _, _ in rows]
    assert roles == ["user", "assistant", "tool", "assistant"], (rows, diagnostics)
    assert json.loads(rows[1][2])[0]["function"]["name"] == "todo", rows
    assert '"summary"' in rows[2][1], rows  # the todo tool really ran
    final = rows[3][1].strip()
    assert "I made 1 tool call (todo)" in final, rows
    assert final in hermes.stdout, diagnostics  # the agent's final reply is what Hermes printed

    # The simulator's log: the tool-call step and the final step, both streamed, with usage.
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    turn = [r for r in records if r["api"] == api]
    assert len(turn) == 2, records
    for record in turn:
        assert record["status"] == 200 and record["stream"] is True and record["error"] is None, record
        assert record["model"] == model, record
        usage = record["usage"]
        assert usage["input"] > 1000 and usage["output"] > 0, record  # Hermes's system prompt is big
        assert usage["input"] == record["tokens"], record
    assert turn[0]["reply"] == {"text_chars": 0, "tool_calls": ["todo"]}, turn[0]
    assert turn[1]["reply"]["tool_calls"] == [] and turn[1]["reply"]["text_chars"] == len(final), turn[1]
    assert "[[tools:1]]" in turn[0]["prompt"] and '"summary"' in turn[1]["prompt"], turn
    assert turn[1]["tokens"] > turn[0]["tokens"]
    if cache in ("deepseek", "openai-auto"):
        assert turn[1]["usage"]["read"] > 0, turn[1]  # the second step reuses the first one's prefix
