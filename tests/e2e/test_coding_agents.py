"""The real Claude Code and Codex CLIs in one folder, against ``endless sim serve``: the story of the
product documents.  Work done in Claude Code is captured by Endless's hooks; a Codex session started
next in the same folder is handed over where it stopped, and its own work is captured too; Claude Code
then finds Codex's work through the MCP server's ``recall_search``.

Each CLI is skipped with its reason where it is not installed (CI installs both from npm).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
from pathlib import Path

import pytest

from commands import endless_command, fresh_home

CLAUDE = os.environ.get("ENDLESS_CLAUDE") or shutil.which("claude")
CODEX = os.environ.get("ENDLESS_CODEX") or shutil.which("codex")
pytestmark = pytest.mark.skipif(CLAUDE is None or CODEX is None, reason=(
    "needs the real CLIs: npm install -g @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 "
    "(or ENDLESS_CLAUDE / ENDLESS_CODEX naming them)"))


@pytest.fixture()
def folder(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    user = tmp_path / "user"
    user.mkdir()
    env.update(HOME=str(user), CODEX_HOME=str(user / ".codex"), ENDLESS_HOOK_WAIT="60", SIM_API_KEY="x",
               ANTHROPIC_API_KEY="sk-sim", ENABLE_TOOL_SEARCH="false", DISABLE_AUTOUPDATER="1",
               MCP_CONNECTION_NONBLOCKING="false")  # a headless run waits for its MCP servers (2.1.332 does not by default)
    (user / ".codex").mkdir()
    git = ["git", "-C", str(workspace), "-c", "user.email=t@example.com", "-c", "user.name=T"]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    (workspace / "ledger.py").write_text("TOTAL = 0\n")
    for name in ("README.md", "src/main.py", "notes/todo.txt", "pyproject.toml"):  # what the scripted Write picks
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"{name}, as committed\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "the ledger"], check=True)
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen([*endless_command(), "sim", "serve", "--port", "0", "--cache", "anthropic",
                               "--latency", "0.01", "--log", str(log)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env)
    said = server.stderr.readline()  # "[endless.sim] serving on http://127.0.0.1:PORT (…": it listens
    assert "serving on http://" in said, said
    base = said.split("serving on ", 1)[1].split(" ", 1)[0]
    env["ANTHROPIC_BASE_URL"] = base
    (user / ".codex" / "config.toml").write_text(
        'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "sim"\n'
        f'base_url = "{base}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n')
    try:
        yield workspace, env, log
    finally:
        server.terminate()
        server.communicate(timeout=10)


def endless(folder, *args: str) -> subprocess.CompletedProcess:
    workspace, env, _ = folder
    return subprocess.run(endless_command() + list(args), capture_output=True, text=True, env=env, cwd=workspace,
                          timeout=120)


def claude(folder, prompt: str) -> subprocess.CompletedProcess:
    workspace, env, _ = folder
    return subprocess.run([CLAUDE, "-p", prompt, "--allowedTools", "Read Edit Write mcp__endless"], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def codex(folder, prompt: str, *flags: str) -> subprocess.CompletedProcess:
    workspace, env, _ = folder
    return subprocess.run([CODEX, "exec", *flags, prompt], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def wait_for_notify(env: dict[str, str], seconds: float = 60.0) -> int:
    """Wait until every ``endless hook codex notify`` process of this test has exited; returns how many ran.

    Codex starts its notify program and does not wait for it (``codex exec`` may exit first), so
    the test waits on those processes themselves (a pidfd each), which wait for their capture.
    """
    home = f"ENDLESS_HOME={env['ENDLESS_HOME']}".encode()
    waited = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            if b"notify" not in command or b"hook" not in command or home not in (proc / "environ").read_bytes():
                continue
            fd = os.pidfd_open(int(proc.name))
        except (OSError, ProcessLookupError):
            continue  # gone already
        try:
            ready, _, _ = select.select([fd], [], [], seconds)
            assert ready, f"the notify hook {proc.name} still runs after {seconds} s"
            waited += 1
        finally:
            os.close(fd)
    return waited


def turns(folder) -> list[dict]:
    done = endless(folder, "history", "--json", "--limit", "200")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["turns"]


def requests_holding(log: Path, text: str) -> int:
    return sum(text in line for line in log.read_text().splitlines()) if log.exists() else 0


def test_work_moves_from_claude_code_to_codex_and_back_without_being_lost(folder) -> None:
    workspace, env, log = folder
    for agent in ("claude", "codex"):
        done = endless(folder, agent, "install")
        assert done.returncode == 0, done.stderr
    ran = claude(folder, "We are fixing the PELICAN-42 ledger totals. [[call:Write]] [[reply:200]]")
    assert ran.returncode == 0, ran.stderr[-2000:]
    first = turns(folder)
    assert [t["entries"][0]["text"] for t in first] == [
        "We are fixing the PELICAN-42 ledger totals. [[call:Write]] [[reply:200]]"]
    assert [e["kind"] for e in first[0]["entries"]] == ["user", "trace", "reply"]
    written = json.loads(first[0]["entries"][1]["text"].split("\n")[0].split(" ", 2)[2])["file_path"]
    # Someone takes Claude's change back before Codex starts: the hand-over must not call it done.
    subprocess.run(["git", "-C", str(workspace), "checkout", "--", "."], check=True)
    # Codex, next, in the same folder: its SessionStart hook hands over (hooks must be trusted in Codex's
    # /hooks first; a headless run says so with its own flag), and its turn is captured.
    ran = codex(folder, "Where did the last session stop? [[tools:0]] [[reply:120]]", "--skip-git-repo-check",
                "--dangerously-bypass-hook-trust")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert requests_holding(log, "This folder's memory holds 1 turn") >= 1  # the hand-over reached Codex's model
    assert requests_holding(log, f"{written}: same as the last commit, so its change is no longer there (reverted)") >= 1
    assert requests_holding(log, "PELICAN-42 ledger totals") >= 2
    second = turns(folder)
    assert [t["entries"][0]["text"] for t in second][1:] == ["Where did the last session stop? [[tools:0]] [[reply:120]]"]
    # Without trusted hooks, Codex's notify program still captures each turn.
    ran = codex(folder, "Note the HERON rollback plan for the ledger [[tools:0]] [[reply:80]]",
                "--skip-git-repo-check")
    assert ran.returncode == 0, ran.stderr[-2000:]
    wait_for_notify(env)
    assert [t["entries"][0]["text"] for t in turns(folder)][2:] == [
        "Note the HERON rollback plan for the ledger [[tools:0]] [[reply:80]]"]
    # Back in Claude Code: its look-back tool finds what Codex did.
    ran = claude(folder, "What was the rollback plan? [[call:mcp__endless__recall_search]] [[reply:200]]")
    assert ran.returncode == 0, ran.stderr[-2000:]
    last = turns(folder)[-1]
    trace = next((e["text"] for e in last["entries"] if e["kind"] == "trace"), str(last))
    assert "mcp__endless__recall_search" in trace and "result:" in trace
    # Another folder's memory knows nothing of this one.
    other = workspace.parent / "other"
    other.mkdir()
    subprocess.run(["git", "-C", str(other), "init", "-q"], check=True)
    before = requests_holding(log, "[Endless]")
    ran = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                          "Anything here? [[tools:0]] [[reply:40]]"], cwd=other, env=env, capture_output=True,
                         text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert requests_holding(log, "[Endless]") == before  # no hand-over: its memory was empty
    found = subprocess.run(endless_command() + ["search", "--workspace", str(other), "PELICAN-42"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert "PELICAN-42" not in found.stdout
    # Uninstalling gives every file back.
    for agent in ("claude", "codex"):
        assert endless(folder, agent, "uninstall").returncode == 0
    assert not (workspace / ".claude" / "settings.local.json").exists()
    config = (Path(env["CODEX_HOME"]) / "config.toml").read_text()
    assert "endless" not in config and 'wire_api = "responses"' in config
