"""The real Claude Code and Codex CLIs in one folder, against ``endless sim serve``: the story of the
product documents, as issue 30 tells it.  A Claude Code session plants a fact and edits a file; Codex opens
the folder next, its first request carries the hand-over, and its ``recall_search`` over MCP finds the fact
word for word; the file is reverted with git and the next hand-over says so; Claude Code, resumed, finds
Codex's work; another folder sees nothing; uninstalling gives the files back.

What each agent's requests carried is read from the simulator's request log.  Each CLI is skipped with its
reason where it is not installed (CI installs both from npm).
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
FACT = "the PELICAN-42 ledger export must round half-even"
CODEX_CONFIG = ('model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "sim"\n'
                'base_url = "{base}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n')


@pytest.fixture()
def folder(tmp_path: Path):
    home, workspace, env = fresh_home(tmp_path)
    user = tmp_path / "user"
    user.mkdir()
    env.update(HOME=str(user), CODEX_HOME=str(user / ".codex"), SIM_API_KEY="x",
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
    (user / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(base=base))
    try:
        yield workspace, env, log
    finally:
        server.terminate()
        server.communicate(timeout=10)


def endless(folder, *args: str) -> subprocess.CompletedProcess:
    workspace, env, _ = folder
    return subprocess.run(endless_command() + list(args), capture_output=True, text=True, env=env, cwd=workspace,
                          timeout=120)


def claude(folder, prompt: str, *flags: str) -> subprocess.CompletedProcess:
    """``claude -p`` as a person runs it headless: edits accepted; Endless's tools need no flag (install
    allowed them)."""
    workspace, env, _ = folder
    return subprocess.run([CLAUDE, "-p", prompt, "--permission-mode", "acceptEdits", *flags], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def codex(folder, prompt: str, *flags: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    workspace, env, _ = folder
    return subprocess.run([CODEX, "exec", "--skip-git-repo-check", *flags, prompt], cwd=cwd or workspace, env=env,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def wait_for_hooks(env: dict[str, str], seconds: float = 60.0) -> int:
    """Wait until every ``endless hook`` and ``endless capture`` process of this test has exited; returns
    how many ran.

    A hook starts its capture and returns at once (the capture goes on in a process of its own), and
    Codex does not wait for its notify program (``codex exec`` may exit first), so the test waits on
    those processes themselves (a pidfd each), looking again until none is left: a hook may start its
    capture while the test waits for the hook.
    """
    home = f"ENDLESS_HOME={env['ENDLESS_HOME']}".encode()
    waited: set[int] = set()
    while True:
        found = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in waited:
                continue
            try:
                command = (proc / "cmdline").read_bytes().split(b"\0")
                if b"endless" not in command or not {b"hook", b"capture"} & set(command) \
                        or home not in (proc / "environ").read_bytes() and home not in command:
                    continue
                fd = os.pidfd_open(int(proc.name))
            except (OSError, ProcessLookupError):
                continue  # gone already
            try:
                ready, _, _ = select.select([fd], [], [], seconds)
                assert ready, f"the hook or capture {proc.name} still runs after {seconds} s"
                waited.add(int(proc.name))
                found += 1
            finally:
                os.close(fd)
        if not found:
            return len(waited)


def turns(folder) -> list[dict]:
    done = endless(folder, "history", "--json", "--limit", "200")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["turns"]


def requests(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def first_request_of_last_session(log: Path, api: str) -> dict:
    """The first request of the newest session on one wire (Codex: its ``prompt_cache_key`` is the session)."""
    mine = [r for r in requests(log) if r["api"] == api]
    if api == "responses":
        mine = [r for r in mine if r["cache_key"] == mine[-1]["cache_key"]]
    return mine[0]


def test_work_moves_from_claude_code_to_codex_and_back_without_being_lost(folder) -> None:
    workspace, env, log = folder
    config_before = (Path(env["CODEX_HOME"]) / "config.toml").read_bytes()
    for agent in ("claude", "codex"):
        done = endless(folder, agent, "install")
        assert done.returncode == 0, done.stderr
    # 1. Claude Code plants a fact and edits a file; its hooks capture the turn.
    ran = claude(folder, f"Remember: {FACT}. Edit the ledger. [[call:Write]] [[reply:200]]")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert wait_for_hooks(env) >= 1  # its captures run on after the hooks returned
    first = turns(folder)
    assert [t["entries"][0]["text"] for t in first] == [f"Remember: {FACT}. Edit the ledger. [[call:Write]] [[reply:200]]"]
    assert [e["kind"] for e in first[0]["entries"]] == ["user", "trace", "reply"]
    written = json.loads(first[0]["entries"][1]["text"].split("\n")[0].split(" ", 2)[2])["file_path"]
    claude_session = first[0]["sessionId"]
    # 2. Codex opens the folder (hooks trusted for this run, as /hooks would): its first request carries the
    # hand-over; its recall_search over MCP finds the fact word for word.
    ran = codex(folder, "The PELICAN? [[call:recall_search]] [[reply:120]]", "--dangerously-bypass-hook-trust")
    assert ran.returncode == 0, ran.stderr[-2000:]
    wait_for_hooks(env)
    opening = first_request_of_last_session(log, "responses")["prompt"]
    assert "[Endless] This folder's memory holds 1 turn" in opening
    assert f"Last session: Claude Code {claude_session[:8]}" in opening and "how it stopped: ended" in opening
    assert f"{written}: changed, not committed" in opening
    looked = [r for r in requests(log) if r["api"] == "responses" and "<|tool|>" in r["prompt"]]
    assert looked, "Codex never ran recall_search"
    answer = looked[-1]["prompt"].rsplit("<|tool|>", 1)[1]
    assert "Hits 1–" in answer and FACT in answer.replace("**", "")  # the hit, word for word (query in bold)
    # 3. The file is reverted with git: the next hand-over says so (the last session wrote nothing, so it
    # names the one that did).
    subprocess.run(["git", "-C", str(workspace), "checkout", "--", "."], check=True)
    ran = codex(folder, "Where do we stand? [[tools:0]] [[reply:80]]", "--dangerously-bypass-hook-trust")
    assert ran.returncode == 0, ran.stderr[-2000:]
    wait_for_hooks(env)
    opening = first_request_of_last_session(log, "responses")["prompt"]
    assert "how it stopped: ended (other)" in opening  # Codex's SessionEnd hook said so
    assert f"{written}: same as the last commit, so its change is no longer there (reverted)" in opening
    # 4. Without trusted hooks, Codex's notify program still captures each turn.
    ran = codex(folder, "Note the HERON rollback plan for the ledger [[tools:0]] [[reply:80]]")
    assert ran.returncode == 0, ran.stderr[-2000:]
    wait_for_hooks(env)
    texts = [t["entries"][0]["text"] for t in turns(folder)]
    assert texts[1:] == ["The PELICAN? [[call:recall_search]] [[reply:120]]",
                         "Where do we stand? [[tools:0]] [[reply:80]]",
                         "Note the HERON rollback plan for the ledger [[tools:0]] [[reply:80]]"]
    codex_turns = turns(folder)[1:]
    for t in codex_turns:  # each its own session, titled by its first request
        words = " ".join(t["entries"][0]["text"].split())
        assert t["sessionId"] and t["sessionTitle"] == (words if len(words) <= 60 else words[:59].rstrip() + "…")
    assert len({t["sessionId"] for t in codex_turns}) == 3
    # 5. Back in Claude Code, resuming its first session: handed over from Codex, its look-back tool finds
    # what Codex did, and the resumed transcript adds nothing twice.
    ran = claude(folder, "What was the rollback plan? [[call:mcp__endless__recall_search]] [[reply:200]]",
                 "--resume", claude_session)
    assert ran.returncode == 0, ran.stderr[-2000:]
    wait_for_hooks(env)
    resumed = [r for r in requests(log) if r["api"] == "anthropic" and "What was the rollback plan?" in r["prompt"]]
    assert "Last session: Codex" in resumed[0]["prompt"]
    after = turns(folder)
    assert [t["entries"][0]["text"] for t in after].count(first[0]["entries"][0]["text"]) == 1
    last = after[-1]
    trace = next((e["text"] for e in last["entries"] if e["kind"] == "trace"), str(last))
    assert last["sessionId"] == claude_session and "mcp__endless__recall_search" in trace and "result:" in trace
    assert "haven't granted" not in trace  # install allowed Endless's tools
    # 6. A later import of both agents' files finds every turn there already.
    for agent in ("claude", "codex"):
        done = endless(folder, "import", "--agent", agent)
        assert done.returncode == 0 and "imported 0 turns" in done.stdout, done.stdout + done.stderr
    assert len(turns(folder)) == len(after)
    # 7. Another folder's memory knows nothing of this one.
    other = workspace.parent / "other"
    other.mkdir()
    subprocess.run(["git", "-C", str(other), "init", "-q"], check=True)
    before = sum("[Endless]" in r["prompt"] for r in requests(log))
    ran = codex(folder, "Anything here? [[tools:0]] [[reply:40]]", "--dangerously-bypass-hook-trust", cwd=other)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sum("[Endless]" in r["prompt"] for r in requests(log)) == before  # no hand-over: its memory was empty
    found = subprocess.run(endless_command() + ["search", "--workspace", str(other), "PELICAN-42"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert "PELICAN-42" not in found.stdout
    wait_for_hooks(env)
    # 8. Uninstalling gives every file back: config.toml byte for byte; the files install made are gone;
    # ~/.claude.json (which Claude Code rewrites itself) keeps no Endless entry.
    for agent in ("claude", "codex"):
        done = endless(folder, agent, "uninstall")
        assert done.returncode == 0, done.stderr
    assert (Path(env["CODEX_HOME"]) / "config.toml").read_bytes() == config_before
    assert not (Path(env["CODEX_HOME"]) / "hooks.json").exists()
    assert not (workspace / ".claude" / "settings.local.json").exists()
    state = json.loads((Path(env["HOME"]) / ".claude.json").read_bytes())
    assert "endless" not in state.get("projects", {}).get(str(workspace), {}).get("mcpServers", {})
