"""Claude Code and Codex: live capture by their hooks, the hand-over at a session start, install and uninstall.

The hooks are run as Claude Code runs them: ``endless hook claude EVENT`` as a
process, the hook's JSON on stdin.  Transcripts are written in the shape the
real CLI (2.1.332) writes (see tests/e2e/test_claude_code.py for the CLI itself).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from commands import endless_command, fresh_home

SESSION = "3ccf8fa8-9185-44fd-9a32-2abbf795e4f6"


class Transcript:
    """A Claude Code transcript being written, event by event, as the CLI appends them."""

    def __init__(self, path: Path, workspace: Path, session: str = SESSION) -> None:
        self.path, self.workspace, self.session = path, workspace, session
        self.parent: str | None = None
        self.clock = time.time()  # events happen now, after the repository's first commit
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _event(self, kind: str, message: dict, **extra: object) -> dict:
        self.clock += 0.5
        stamp = datetime.fromtimestamp(self.clock, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        event = {"parentUuid": self.parent, "isSidechain": False, "type": kind, "message": message,
                 "uuid": str(uuid.uuid4()), "timestamp": stamp, "cwd": str(self.workspace), "sessionId": self.session,
                 "version": "2.1.332", "gitBranch": "main", **extra}
        self.parent = event["uuid"]
        return event

    def write(self, *events: dict, torn: bytes = b"") -> None:
        with open(self.path, "ab") as handle:
            for event in events:
                handle.write(json.dumps(event).encode() + b"\n")
            handle.write(torn)

    def prompt(self, text: str) -> dict:
        return self._event("user", {"role": "user", "content": text}, promptId=str(uuid.uuid4()))

    def call(self, name: str, args: dict) -> tuple[dict, str]:
        call_id = f"toolu_{uuid.uuid4().hex[:16]}"
        return self._event("assistant", {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}]}), call_id

    def result(self, call_id: str, text: str, error: bool = False) -> dict:
        return self._event("user", {"role": "user", "content": [
            {"tool_use_id": call_id, "type": "tool_result", "content": text, "is_error": error}]})

    def reply(self, text: str) -> dict:
        return self._event("assistant", {"role": "assistant", "content": [{"type": "text", "text": text}]})

    def noise(self) -> dict:
        return {"type": "attachment", "uuid": str(uuid.uuid4()), "sessionId": self.session,
                "attachment": {"type": "date", "date": "2026-12-04"}}


@pytest.fixture()
def env(tmp_path: Path) -> dict:
    home, workspace, environ = fresh_home(tmp_path)
    environ["HOME"] = str(tmp_path / "user")
    environ["ENDLESS_HOOK_WAIT"] = "60"  # the hook waits for its capture to end (the tests read what landed)
    (tmp_path / "user").mkdir()
    return {"home": home, "workspace": workspace, "env": environ, "tmp": tmp_path}


def hook(env: dict, event: str, transcript: Transcript | None, stdin: bytes | None = None,
         **fields: object) -> subprocess.CompletedProcess:
    payload = {"session_id": transcript.session if transcript else SESSION,
               "transcript_path": str(transcript.path) if transcript else "", "cwd": str(env["workspace"]),
               "hook_event_name": event, **fields}
    return subprocess.run(endless_command() + ["hook", "claude", event],
                          input=json.dumps(payload).encode() if stdin is None else stdin,
                          capture_output=True, env=env["env"], cwd=env["workspace"], timeout=120)


def endless(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(endless_command() + list(args), capture_output=True, text=True, env=env["env"],
                          cwd=env["workspace"], timeout=120)


def history(env: dict) -> list[dict]:
    done = endless(env, "history", "--json", "--limit", "200")
    if done.returncode:
        return []
    return json.loads(done.stdout)["turns"]


def test_hooks_capture_each_finished_turn_once_and_leave_the_one_going(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    t.write(t.noise(), t.prompt("Fix the PELICAN-42 billing export, the totals are off by one"))
    done = hook(env, "UserPromptSubmit", t, prompt="Fix the PELICAN-42 billing export")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert history(env) == []  # the turn is still going: nothing of it is logged yet
    call, call_id = t.call("Edit", {"file_path": str(env["workspace"] / "export.py"), "old_string": "a",
                                    "new_string": "b"})
    t.write(call, t.result(call_id, "The file export.py has been updated."),
            t.reply("Fixed: the totals loop started at 1; it starts at 0 now."))
    assert hook(env, "Stop", t, stop_hook_active=False).returncode == 0
    turns = history(env)
    assert [[e["kind"] for e in turn["entries"]] for turn in turns] == [["user", "trace", "reply"]]
    assert "export.py" in turns[0]["entries"][1]["text"] and turns[0]["sessionId"] == SESSION
    assert hook(env, "Stop", t).returncode == 0  # fired again: nothing new
    t.write(t.prompt("Now add a test for the export totals"), t.reply("Added test_export_totals."))
    assert hook(env, "SessionEnd", t, reason="prompt_input_exit").returncode == 0
    turns = history(env)
    assert [turn["entries"][0]["text"] for turn in turns] == [
        "Fix the PELICAN-42 billing export, the totals are off by one", "Now add a test for the export totals"]
    # A later import of the same transcript finds every turn there already.
    done = endless(env, "import", str(t.path))
    assert done.returncode == 0 and "imported 0 turns" in done.stdout and "2 turns were there" in done.stdout
    found = endless(env, "search", "--json", "PELICAN-42")
    assert found.returncode == 0 and len(json.loads(found.stdout)["hits"]) == 1


def test_a_resumed_session_that_copies_its_events_adds_nothing_twice(env: dict) -> None:
    first = Transcript(env["tmp"] / "user/.claude/projects/-w/a.jsonl", env["workspace"])
    events = [first.prompt("Plan the migration of the ledger tables"), first.reply("Three steps: copy, check, swap.")]
    first.write(*events)
    assert hook(env, "SessionEnd", first, reason="other").returncode == 0
    # A resumed session is a new file and a new session id, holding the earlier events again.
    second = Transcript(env["tmp"] / "user/.claude/projects/-w/b.jsonl", env["workspace"], session="b" * 36)
    second.write(*[{**e, "sessionId": second.session} for e in events],
                 second.prompt("Go on with step two"), second.reply("Checked: the row counts agree."))
    assert hook(env, "SessionEnd", second, reason="other").returncode == 0
    texts = [turn["entries"][0]["text"] for turn in history(env)]
    assert texts == ["Plan the migration of the ledger tables", "Go on with step two"]


def test_a_torn_last_line_waits_for_the_rest_of_it(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    last = json.dumps(t.reply("The deploy finished at 14:02.")).encode()
    t.write(t.prompt("Did the deploy finish?"), torn=last[:30])
    assert hook(env, "Stop", t).returncode == 0
    assert history(env) == []  # its reply is not whole yet: the turn waits
    t.write(torn=last[30:] + b"\n")
    assert hook(env, "Stop", t).returncode == 0
    (turn,) = history(env)
    assert [e["kind"] for e in turn["entries"]] == ["user", "reply"]
    assert turn["entries"][1]["text"] == "The deploy finished at 14:02."


def test_a_hook_never_fails_its_host_and_says_why_in_the_log(env: dict) -> None:
    for stdin in (b"not json at all", b"[1, 2]", b"\xff\xfe", b""):
        done = hook(env, "Stop", None, stdin=stdin)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), stdin
    missing = hook(env, "Stop", None, transcript_path=str(env["tmp"] / "user/.claude/projects/-w/gone.jsonl"))
    assert (missing.returncode, missing.stdout, missing.stderr) == (0, b"", b"")
    by_hand = endless(env, "capture", "--agent", "claude", "--transcript", str(env["tmp"] / "gone.jsonl"))
    assert by_hand.returncode == 2 and "no such transcript file" in by_hand.stderr
    assert not (env["home"] / "memories").exists()  # nothing captured made no memory either
    text = (env["home"] / "logs" / "agents.log").read_text()
    assert "is not JSON" in text and "not a JSON object" in text


def _git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(workspace), "-c", "user.email=t@example.com", "-c", "user.name=T",
                           *args], capture_output=True, text=True, check=True).stdout


def _start(env: dict, session: str = "c" * 36) -> str:
    done = hook(env, "SessionStart", None, session_id=session, source="startup")
    assert done.returncode == 0 and done.stderr == b""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout.strip() else ""


def test_the_hand_over_says_where_work_stopped_and_the_files_on_disk_win(env: dict) -> None:
    ws = env["workspace"]
    _git(ws, "init", "-q", "-b", "main")
    (ws / "kept.py").write_text("x = 1\n")
    (ws / "undone.py").write_text("y = 1\n")
    _git(ws, "add", ".")
    _git(ws, "commit", "-qm", "start")
    assert _start(env) == ""  # an empty memory: nothing to hand over
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", ws)
    events = [t.prompt("Make the export handle refunds (objective: refunds in the CSV)")]
    for name in ("kept.py", "undone.py", "fresh.py"):
        call, call_id = t.call("Write" if name == "fresh.py" else "Edit", {"file_path": str(ws / name)})
        events += [call, t.result(call_id, f"updated {name}")]
    call, call_id = t.call("Bash", {"command": "pytest -q"})
    events += [call, t.result(call_id, "2 failed: test_refund_rows", error=True)]
    events.append(t.reply("Refund rows are written; two tests still fail on the sign of the amount."))
    t.write(*events)
    (ws / "kept.py").write_text("x = 2\n")  # the session's edits, as they were on disk
    (ws / "undone.py").write_text("y = 2\n")
    (ws / "fresh.py").write_text("z = 1\n")
    assert hook(env, "Stop", t).returncode == 0
    assert hook(env, "SessionEnd", t, reason="logout").returncode == 0
    _git(ws, "checkout", "--", "undone.py")  # someone took one change back since
    text = _start(env)
    assert text.startswith("[Endless] This folder's memory holds 1 turn")
    assert "Claude Code 3ccf8fa8" in text and "how it stopped: ended (logout)" in text
    assert "Last request: Make the export handle refunds" in text
    assert "two tests still fail on the sign" in text and "test_refund_rows" in text
    assert "kept.py: changed, not committed" in text
    assert "undone.py: same as the last commit, so its change is no longer there (reverted)" in text
    assert "fresh.py: new, not committed" in text
    assert "branch main" in text and "recall_search" in text
    assert len(text.encode()) <= 4096
    # A session that only reads comes next: the one after it still learns what the tree holds of the writes.
    reader = Transcript(env["tmp"] / "user/.claude/projects/-w/r.jsonl", ws, session="e" * 36)
    reader.clock = max(reader.clock, t.clock)  # it runs after the first (whose events were half a second apart)
    reader.write(reader.prompt("What is left to do?"), reader.reply("The sign of refund amounts."))
    assert hook(env, "SessionEnd", reader, reason="other").returncode == 0
    _git(ws, "checkout", "--", "kept.py")
    text = _start(env)
    assert "Last session: Claude Code eeeeeeee" in text
    assert "Files written by Claude Code 3ccf8fa8 (the last session wrote none), checked against" in text
    assert "kept.py: same as the last commit, so its change is no longer there (reverted)" in text


def test_a_usage_limit_and_a_killed_session_are_told_as_such(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    notice = t.reply("Claude AI usage limit reached|1796420000")
    notice["isApiErrorMessage"] = True
    t.write(t.prompt("Rename the ledger columns"), notice)
    assert hook(env, "Stop", t).returncode == 0
    text = _start(env)
    assert "how it stopped: usage limit (Claude AI usage limit reached" in text
    other = Transcript(env["tmp"] / "user/.claude/projects/-w/k.jsonl", env["workspace"], session="d" * 36)
    other.write(other.prompt("Split the ledger module"), other.reply("Splitting into read and write halves."))
    assert hook(env, "Stop", other).returncode == 0
    other.write(other.prompt("Now move the tests"))
    assert hook(env, "UserPromptSubmit", other).returncode == 0  # and then the process was killed
    text = _start(env)
    assert "Claude Code dddddddd" in text and "it stopped in the middle of a turn" in text


def test_install_and_uninstall_give_back_the_files_byte_for_byte(env: dict) -> None:
    ws, user = env["workspace"], Path(env["env"]["HOME"])
    local = ws / ".claude" / "settings.local.json"
    local.parent.mkdir()
    mine = b'{\n    "permissions": {"allow": ["Bash(ls:*)"]},\n    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}\n}\n'
    local.write_bytes(mine)
    state = b'{"numStartups": 3, "projects": {"/elsewhere": {"mcpServers": {}}}}'
    (user / ".claude.json").write_bytes(state)
    done = endless(env, "claude", "install")
    assert done.returncode == 0, done.stderr
    settings = json.loads(local.read_bytes())
    assert settings["permissions"] == {"allow": ["Bash(ls:*)", "mcp__endless"]}  # its tools only read
    assert settings["hooks"]["Stop"][0]["hooks"][0]["command"] == "say done"
    assert all(any("-m endless hook claude " + event in h["command"] for g in settings["hooks"][event]
                   for h in g["hooks"]) for event in ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact",
                                                      "SessionEnd"))
    server = json.loads((user / ".claude.json").read_bytes())["projects"][str(ws)]["mcpServers"]["endless"]
    assert server["args"] == ["-m", "endless", "mcp", "--workspace", str(ws)]
    assert server["env"]["ENDLESS_HOME"] == str(env["home"])
    assert endless(env, "claude", "install").returncode == 0  # twice: still one hook per event
    settings = json.loads(local.read_bytes())
    assert sum("endless hook" in h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]) == 1
    status = json.loads(endless(env, "claude", "status").stdout)
    assert status["missingHooks"] == [] and status["mcpServer"] is True and status["toolsAllowed"] is True
    done = endless(env, "claude", "uninstall")
    assert done.returncode == 0 and "restored as it was before install" in done.stdout
    assert local.read_bytes() == mine and (user / ".claude.json").read_bytes() == state
    assert "nothing to take back" in endless(env, "claude", "uninstall").stdout


def test_uninstall_after_an_edit_takes_out_only_endless_entries(env: dict) -> None:
    ws, user = env["workspace"], Path(env["env"]["HOME"])
    assert endless(env, "claude", "install").returncode == 0
    local = ws / ".claude" / "settings.local.json"
    settings = json.loads(local.read_bytes())
    settings["model"] = "opus"  # the person's own change since
    local.write_text(json.dumps(settings))
    claude_json = json.loads((user / ".claude.json").read_bytes())
    claude_json["numStartups"] = 9  # Claude Code rewrites its state file all the time
    (user / ".claude.json").write_text(json.dumps(claude_json))
    done = endless(env, "claude", "uninstall")
    assert done.returncode == 0 and "only Endless's entries taken out" in done.stdout
    assert json.loads(local.read_bytes()) == {"model": "opus"}
    left = json.loads((user / ".claude.json").read_bytes())
    assert left["numStartups"] == 9 and "endless" not in left["projects"][str(ws)].get("mcpServers", {})


def test_install_refuses_a_damaged_settings_file_and_changes_nothing(env: dict) -> None:
    local = env["workspace"] / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_bytes(b'{"hooks": ')
    done = endless(env, "claude", "install")
    assert done.returncode == 2 and "settings.local.json is not valid JSON" in done.stderr
    assert "nothing was changed" in done.stderr and done.stdout == ""
    assert local.read_bytes() == b'{"hooks": ' and not (Path(env["env"]["HOME"]) / ".claude.json").exists()


# -- Codex's files ---------------------------------------------------------------------------------


def _codex_env(env: dict) -> Path:
    home = env["tmp"] / "codex-home"
    home.mkdir(exist_ok=True)
    env["env"]["CODEX_HOME"] = str(home)
    return home


def test_codex_install_and_uninstall_give_back_config_toml_byte_for_byte(env: dict) -> None:
    home = _codex_env(env)
    mine = (b'# my settings\nmodel = "gpt-x"\nnotify = ["say", "done"]\n\n[features]\nweb_search = true\n\n'
            b'[mcp_servers.docs]\ncommand = "docs-mcp"\n')
    (home / "config.toml").write_bytes(mine)
    done = endless(env, "codex", "install")
    assert done.returncode == 0, done.stderr
    assert "your own notify program stays" in done.stderr
    import tomllib

    config = tomllib.loads((home / "config.toml").read_text())
    assert config["notify"] == ["say", "done"] and config["features"] == {"web_search": True}  # hooks: on by default
    assert config["mcp_optional_startup_grace_ms"] == 5000  # Codex waits for the server's tools
    assert config["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert config["mcp_servers"]["endless"]["args"] == ["-m", "endless", "mcp"]
    assert config["mcp_servers"]["endless"]["env"] == {"ENDLESS_HOME": str(env["home"])}
    hooks = json.loads((home / "hooks.json").read_bytes())["hooks"]
    assert sorted(hooks) == ["Interrupt", "PreCompact", "SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    assert "-m endless hook codex Stop" in hooks["Stop"][0]["hooks"][0]["command"]
    assert hooks["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex's own limit for it (no warning each run)
    assert endless(env, "codex", "install").returncode == 0  # twice: the same files
    done = endless(env, "codex", "uninstall")
    assert done.returncode == 0 and "restored as it was before install" in done.stdout
    assert (home / "config.toml").read_bytes() == mine and not (home / "hooks.json").exists()


def test_codex_uninstall_after_an_edit_keeps_the_persons_lines(env: dict) -> None:
    home = _codex_env(env)
    assert endless(env, "codex", "install").returncode == 0
    import tomllib

    config = tomllib.loads((home / "config.toml").read_text())
    assert config["notify"][-4:] == ["endless", "hook", "codex", "notify"]
    with open(home / "config.toml", "a") as handle:
        handle.write('\n[profiles.fast]\nmodel = "gpt-mini"\n')
    done = endless(env, "codex", "uninstall")
    assert done.returncode == 0 and "only Endless's entries taken out" in done.stdout
    assert tomllib.loads((home / "config.toml").read_text()) == {"profiles": {"fast": {"model": "gpt-mini"}}}


def test_codex_install_refuses_a_damaged_config_and_a_foreign_server(env: dict) -> None:
    home = _codex_env(env)
    (home / "config.toml").write_bytes(b"model = \n")
    done = endless(env, "codex", "install")
    assert done.returncode == 2 and "config.toml is not valid TOML" in done.stderr
    assert (home / "config.toml").read_bytes() == b"model = \n" and not (home / "hooks.json").exists()
    (home / "config.toml").write_bytes(b'[mcp_servers.endless]\ncommand = "something-else"\n')
    done = endless(env, "codex", "install")
    assert done.returncode == 2 and "not Endless's" in done.stderr


def test_codex_notify_captures_a_rollout_turn(env: dict, tmp_path: Path) -> None:
    home = _codex_env(env)
    day = home / "sessions" / "2026" / "12" / "04"
    day.mkdir(parents=True)
    session = "01a242b2-20f7-7542-84fb-2a82884e19ca"
    rollout = day / f"rollout-2026-12-04T20-15-00-{session}.jsonl"
    lines = [
        {"timestamp": "2026-12-04T20:15:00.000Z", "type": "session_meta",
         "payload": {"id": session, "cwd": str(env["workspace"]), "originator": "codex_exec", "cli_version": "0.171.0"}},
        {"timestamp": "2026-12-04T20:15:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Rotate the HERON key"}]}},
        {"timestamp": "2026-12-04T20:15:02.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Rotated."}]}},
    ]
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    notice = json.dumps({"type": "agent-turn-complete", "thread-id": session, "turn-id": "1",
                         "cwd": str(env["workspace"]), "input-messages": ["Rotate the HERON key"],
                         "last-assistant-message": "Rotated."})
    for _ in range(2):  # told twice: logged once
        done = subprocess.run(endless_command() + ["hook", "codex", "notify", notice], capture_output=True,
                              env=env["env"], cwd=env["workspace"], timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (turn,) = history(env)
    assert [(e["kind"], e["text"]) for e in turn["entries"]] == [("user", "Rotate the HERON key"), ("reply", "Rotated.")]
    imported = endless(env, "import", str(rollout))
    assert imported.returncode == 0 and "imported 0 turns" in imported.stdout, imported.stdout + imported.stderr


def test_a_hook_naming_a_file_outside_the_hosts_folders_captures_nothing(env: dict) -> None:
    secret = env["tmp"] / "elsewhere" / "notes.jsonl"
    t = Transcript(secret, env["workspace"])
    t.write(t.prompt("the launch codes are 0000"), t.reply("Noted."))
    done = hook(env, "SessionEnd", t, reason="other")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert history(env) == []
    assert "is not in" in (env["home"] / "logs" / "agents.log").read_text()


def test_the_hand_over_never_shows_a_secret(env: dict) -> None:
    ws = env["workspace"]
    _git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    _git(ws, "add", ".")
    _git(ws, "commit", "-qm", "set AWS key AKIAIOSFODNN7EXAMPLE for the deploy")
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", ws)
    call, call_id = t.call("Bash", {"command": "deploy"})
    t.write(t.prompt("Deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789"), call,
            t.result(call_id, "denied for ghp_abcdefghijklmnopqrstuvwxyz0123456789", error=True), t.reply("Denied."))
    assert hook(env, "SessionEnd", t, reason="other").returncode == 0
    text = _start(env)
    assert "Last request: Deploy with token" in text and "Recent tool failures" in text
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in text and "AKIAIOSFODNN7EXAMPLE" not in text


def test_a_sub_agent_is_captured_as_a_chat_of_its_own(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    call, call_id = t.call("Agent", {"description": "audit", "prompt": "Audit the PELICAN exports"})
    t.write(t.prompt("Have a helper audit the exports"), call)
    helper = Transcript(env["tmp"] / "user/.claude/projects/-w/s/subagents/agent-ae8ef42c.jsonl", env["workspace"])
    events = [helper.prompt("Audit the PELICAN exports"), helper.reply("Two exports skip refunds.")]
    helper.write(*[{**e, "isSidechain": True, "agentId": "ae8ef42cd8f52c1a5"} for e in events])
    t.write(t.result(call_id, "Two exports skip refunds."), t.reply("The helper found two exports skipping refunds."))
    assert hook(env, "Stop", t).returncode == 0
    turns = history(env)
    titles = sorted(turn["sessionTitle"] for turn in turns)
    assert titles == ["Claude Code 3ccf8fa8", "Claude Code 3ccf8fa8, sub-agent ae8ef42c"]
    sub = next(turn for turn in turns if "sub-agent" in turn["sessionTitle"])
    assert [e["text"] for e in sub["entries"]] == ["Audit the PELICAN exports", "Two exports skip refunds."]
    assert hook(env, "SessionEnd", t, reason="other").returncode == 0
    assert len(history(env)) == 2  # each once


@pytest.mark.parametrize("catch_up", [True, False])
def test_a_captured_memory_gets_its_summary_lines_written_without_a_chat(env: dict, catch_up: bool) -> None:
    """No chat runs a writer for a coding agent's memory: the capture's own background process writes the
    lines once enough wait (the offline writer without a writer_route), so search, zoom and a later chat in
    the folder have them.  With capture_catch_up off they stay unwritten (the setting is what writes them)."""
    from endless.core.memory import Memory
    from endless.core.store import workspace_key
    from endless.writer.pace import lines_left

    env["env"]["ENDLESS_CAPTURE_CATCH_UP"] = "true" if catch_up else "false"
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    for k in range(6):  # messages too long to be their own lines: each needs the writer
        t.write(t.prompt(f"Step {k} of the ledger audit: " + "check every refund row and its tax line. " * 30),
                t.reply(f"Step {k} done: " + "the refund rows agree with the tax lines. " * 30))
    assert hook(env, "Stop", t).returncode == 0
    with Memory.open(workspace_key(None, env["workspace"]), root=env["home"], create=False, readonly=True) as m:
        assert m.total == 12
        left = lines_left(m.built_slots(), m.total)
        assert (left == 0) if catch_up else (left >= 12), left
        assert m.is_built(0, 0) is catch_up


def test_two_sessions_of_one_folder_at_once_each_turn_once(env: dict) -> None:
    sessions = [Transcript(env["tmp"] / f"user/.claude/projects/-w/{k}.jsonl", env["workspace"], session=f"{k}" * 36)
                for k in "ab"]
    for round_ in range(3):
        for t in sessions:
            t.write(t.prompt(f"session {t.session[0]} step {round_}"), t.reply(f"done {t.session[0]} {round_}"))
        running = [subprocess.Popen(endless_command() + ["hook", "claude", "Stop"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env["env"],
                                    cwd=env["workspace"])
                   for t in sessions for _ in range(2)]  # each hook fired twice, all at once
        payloads = [json.dumps({"session_id": t.session, "transcript_path": str(t.path), "cwd": str(env["workspace"]),
                                "hook_event_name": "Stop"}).encode() for t in sessions for _ in range(2)]
        for proc, payload in zip(running, payloads):
            out, err = proc.communicate(payload, timeout=120)
            assert (proc.returncode, out, err) == (0, b"", b"")
    texts = sorted(turn["entries"][0]["text"] for turn in history(env))
    assert texts == sorted(f"session {k} step {r}" for k in "ab" for r in range(3))


def test_a_capture_killed_mid_way_is_finished_by_the_next_with_each_turn_once(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    events = []
    for k in range(6000):
        events += [t.prompt(f"question number {k} about the ledger"), t.reply(f"answer number {k}")]
    t.write(*events)
    command = endless_command() + ["capture", "--agent", "claude", "--transcript", str(t.path), "--workspace",
                                   str(env["workspace"]), "--final"]
    proc = subprocess.Popen(command, env=env["env"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    memories = env["home"] / "memories"
    deadline = time.monotonic() + 60
    while not list(memories.glob("*/turns.turn.v1.jsonl")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # polling a real condition (the log exists), not a timed wait
    proc.kill()
    proc.wait(30)
    done = subprocess.run(command + ["--json"], env=env["env"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    texts = [turn["entries"][0]["text"] for turn in history_all(env)]
    assert texts == [f"question number {k} about the ledger" for k in range(6000)]


def history_all(env: dict) -> list[dict]:
    """Every turn, paging back (``history`` gives at most 200 a page)."""
    turns, before = [], None
    while True:
        args = ["history", "--json", "--limit", "200"] + (["--before", str(before)] if before is not None else [])
        done = endless(env, *args)
        assert done.returncode == 0 and done.stdout, (done.returncode, done.stderr[-3000:])
        page = json.loads(done.stdout)
        turns = page["turns"] + turns
        if not page.get("next") and "next" not in page:
            return turns
        before = page["turns"][0]["turn"]
        if before == 0:
            return turns


def test_a_line_that_cannot_be_read_is_left_out_counted_and_shown_by_doctor(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    t.write(t.prompt("first question"), t.reply("first answer"))
    with open(t.path, "ab") as handle:
        handle.write(b'{"type": "user", "message": {"content": \n')  # a line no JSON reader can take
        handle.write(b'{"type": "assistant", "message": 7}\n')  # JSON, but no event of a transcript
    t.write(t.prompt("second question"), t.reply("second answer"))
    for _ in range(2):  # captured twice: each bad line counted once
        assert hook(env, "SessionEnd", t, reason="other").returncode == 0
    assert [turn["entries"][0]["text"] for turn in history(env)] == ["first question", "second question"]
    doctor = endless(env, "doctor", "--json")
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["findings"]}
    assert checks["agents.capture"]["message"].startswith("1 transcript of claude captured")
    assert checks["agents.skipped"]["message"].startswith("2 transcript lines could not be read")


def test_a_hook_with_a_broken_setup_still_exits_0_in_silence(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    t.write(t.prompt("hello"), t.reply("hi"))
    config = Path(env["env"]["XDG_CONFIG_HOME"]) / "endless" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("line_budget = [oops\n")  # a settings file that cannot be read
    done = hook(env, "Stop", t)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    config.unlink()
    env["env"]["ENDLESS_HOME"] = "/proc/endless-cannot-live-here"  # a root nothing can be written in
    for event in ("Stop", "SessionStart"):
        done = hook(env, event, t, source="startup")
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), event


class Rollout:
    """A Codex rollout being written as Codex 0.171 writes it: ``session_meta``, then each turn's items."""

    def __init__(self, home: Path, workspace: Path, session: str) -> None:
        self.session, self.clock = session, time.time()
        day = home / "sessions" / time.strftime("%Y/%m/%d", time.gmtime(self.clock))
        day.mkdir(parents=True, exist_ok=True)
        self.path = day / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', time.gmtime(self.clock))}-{session}.jsonl"
        self.write({"type": "session_meta", "payload": {"id": session, "cwd": str(workspace),
                                                        "originator": "codex_exec", "cli_version": "0.171.0",
                                                        "base_instructions": {"text": "You are Codex. " * 500}}})

    def write(self, *lines: dict) -> None:
        with open(self.path, "a") as handle:
            for line in lines:
                self.clock += 0.5
                stamp = datetime.fromtimestamp(self.clock, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                handle.write(json.dumps({"timestamp": stamp, **line}) + "\n")

    def turn(self, prompt: str, reply: str) -> None:
        item = uuid.uuid4().hex
        self.write({"type": "event_msg", "payload": {"type": "task_started"}},
                   {"type": "response_item", "payload": {"type": "message", "id": f"msg_{item}u", "role": "user",
                                                         "content": [{"type": "input_text", "text": prompt}]}},
                   {"type": "response_item", "payload": {"type": "message", "id": f"msg_{item}a",
                                                         "role": "assistant",
                                                         "content": [{"type": "output_text", "text": reply}]}},
                   {"type": "event_msg", "payload": {"type": "task_complete"}})


def codex_hook(env: dict, event: str, rollout: Rollout, **fields: object) -> subprocess.CompletedProcess:
    payload = {"session_id": rollout.session, "transcript_path": str(rollout.path), "cwd": str(env["workspace"]),
               "hook_event_name": event, **fields}
    return subprocess.run(endless_command() + ["hook", "codex", event], input=json.dumps(payload).encode(),
                          capture_output=True, env=env["env"], cwd=env["workspace"], timeout=120)


def test_a_codex_session_read_in_pieces_keeps_its_id_and_title_on_every_turn(env: dict) -> None:
    """Each capture after the first starts past the ``session_meta`` line: the session and the chat's title
    must still be the rollout's (two sessions whose turns sat on the same lines once shared ids)."""
    home = _codex_env(env)
    sessions = []
    for k in "ab":  # one after the other
        rollout = Rollout(home, env["workspace"], f"01a2488{k}-d6ea-7090-a408-8be91f9c82f3")
        sessions.append(rollout)
        assert codex_hook(env, "SessionStart", rollout, source="startup").returncode == 0  # reads the meta line
        rollout.turn(f"Plan the {rollout.session[7]} migration", "Three steps.")
        assert codex_hook(env, "Stop", rollout).returncode == 0
        rollout.turn("Go on with step two", "Step two done.")
        assert codex_hook(env, "Stop", rollout).returncode == 0
    turns = history(env)
    assert [(t["sessionId"], t["sessionTitle"], t["entries"][0]["text"]) for t in turns] == [
        (r.session, f"Plan the {r.session[7]} migration", text)
        for r in sessions for text in (f"Plan the {r.session[7]} migration", "Go on with step two")]
    text = _start(env)
    assert f"Last session: Codex {sessions[1].session[:8]}" in text, text
    assert "how it stopped: unknown (its last turn ended; the session did not say it ended)" in text
    assert codex_hook(env, "SessionEnd", sessions[1], reason="other").returncode == 0
    assert "how it stopped: ended (other)." in _start(env)


def test_a_codex_turn_the_person_interrupts_is_kept_and_told_so(env: dict) -> None:
    home = _codex_env(env)
    rollout = Rollout(home, env["workspace"], "01a2488a-3c8e-7be2-913e-d3b7d578f372")
    rollout.write({"type": "response_item", "payload": {"type": "message", "id": "msg_1", "role": "user", "content": [
        {"type": "input_text", "text": "Rewrite the HERON importer"}]}})
    assert codex_hook(env, "UserPromptSubmit", rollout, prompt="Rewrite the HERON importer").returncode == 0
    assert history(env) == []  # still going
    assert codex_hook(env, "Interrupt", rollout, turn_id="t1").returncode == 0
    (turn,) = history(env)
    assert turn["entries"][0]["text"] == "Rewrite the HERON importer"
    assert "how it stopped: interrupted by the person." in _start(env)
    assert codex_hook(env, "SessionEnd", rollout, reason="other").returncode == 0  # as codex exec does next
    assert "how it stopped: interrupted by the person, then ended (other)." in _start(env)


def test_sub_agents_are_left_out_when_the_setting_says_so(env: dict) -> None:
    config = Path(env["env"]["XDG_CONFIG_HOME"]) / "endless" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("capture_subagents = false\n")
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    call, call_id = t.call("Agent", {"description": "audit", "prompt": "Audit the PELICAN exports"})
    helper = Transcript(env["tmp"] / "user/.claude/projects/-w/s/subagents/agent-ae8ef42c.jsonl", env["workspace"])
    helper.write(*[{**e, "isSidechain": True, "agentId": "ae8ef42cd8f52c1a5"}
                   for e in (helper.prompt("Audit the PELICAN exports"), helper.reply("Two exports skip refunds."))])
    t.write(t.prompt("Have a helper audit the exports"), call, t.result(call_id, "Two exports skip refunds."),
            t.reply("The helper found two exports skipping refunds."))
    assert hook(env, "SessionEnd", t, reason="other").returncode == 0
    assert [turn["sessionTitle"] for turn in history(env)] == ["Claude Code 3ccf8fa8"]


def _compaction(t: Transcript) -> list[dict]:
    """What Claude Code 2.1.332 appends when the person types /compact (checked with `claude -p --resume ID
    /compact`): a boundary, the model's summary in the person's name, the command and its output."""
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": str(uuid.uuid4()), "sessionId": t.session,
                "content": "Conversation compacted", "compactMetadata": {"trigger": "manual", "preTokens": 9000}}
    summary = t.prompt("This session is being continued from a previous conversation that ran out of context. "
                       "Summary: the person asked for KESTREL totals and they were fixed.")
    summary.update(isCompactSummary=True, isVisibleInTranscriptOnly=True)
    caveat = t.prompt("<local-command-caveat>The command below was run directly in Claude Code.</local-command-caveat>")
    caveat["isMeta"] = True
    command = t.prompt("<command-name>/compact</command-name>\n            <command-message>compact</command-message>"
                       "\n            <command-args></command-args>")
    output = t.prompt("<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>")
    return [boundary, summary, caveat, command, output]


def test_a_compaction_adds_the_command_and_never_the_summary_in_the_persons_name(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    t.write(t.prompt("Fix the HERON totals"), t.reply("Fixed the HERON totals."))
    assert hook(env, "Stop", t).returncode == 0
    t.write(*_compaction(t))
    assert hook(env, "PreCompact", t, trigger="manual").returncode == 0
    assert "how it stopped: compacted its context." in _start(env)
    t.write(t.prompt("/plan-free question after it"))
    assert hook(env, "UserPromptSubmit", t, prompt="/plan-free question after it").returncode == 0
    t.write(t.reply("Answered."))
    assert hook(env, "Stop", t).returncode == 0
    assert [[(e["kind"], e["text"]) for e in turn["entries"]] for turn in history(env)] == [
        [("user", "Fix the HERON totals"), ("reply", "Fixed the HERON totals.")],
        [("user", "/compact")],
        [("user", "/plan-free question after it"), ("reply", "Answered.")]]
    assert endless(env, "search", "KESTREL").stdout.count("KESTREL") == 0  # the summary is nobody's words
    assert "how it stopped: unknown (its last turn ended" in _start(env)  # it went on after the compaction


def test_a_transcript_rewritten_in_place_is_read_again_and_each_turn_lands_once(env: dict) -> None:
    """A host that rewrites its transcript (same file, other bytes, longer or shorter than what was read) must
    not be read from the old place: that would cut a line in two or skip new turns."""
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    first = [t.prompt("Rename the ledger columns"), t.reply("Renamed.")]
    second = [t.prompt("Now the OSPREY report"), t.reply("The OSPREY report is done.")]
    t.write(*first, *second)
    assert hook(env, "Stop", t).returncode == 0
    inode = t.path.stat().st_ino
    third = [t.prompt("Archive the old ledger " + "with care " * 60), t.reply("Archived.")]
    with open(t.path, "r+b") as handle:  # rewritten in place: the first turn gone, a longer third one new
        handle.truncate(0)
        handle.write(b"".join(json.dumps(e).encode() + b"\n" for e in (*second, *third)))
    assert t.path.stat().st_ino == inode and t.path.stat().st_size > 0
    assert hook(env, "Stop", t).returncode == 0
    fourth = [t.prompt("And the last one"), t.reply("Done.")]
    with open(t.path, "wb") as handle:  # rewritten shorter than the place read up to
        handle.write(b"".join(json.dumps(e).encode() + b"\n" for e in fourth))
    assert hook(env, "Stop", t).returncode == 0
    assert [turn["entries"][0]["text"][:30] for turn in history(env)] == [
        "Rename the ledger columns", "Now the OSPREY report", "Archive the old ledger with ca", "And the last one"]
    assert "rewritten since the last capture; read again" in (env["home"] / "logs" / "agents.log").read_text()


def test_a_codex_turn_that_fails_at_its_limit_is_kept_and_the_hand_over_says_why(env: dict) -> None:
    """Codex 0.171 ends every turn with an ``event_msg`` ``task_complete``; a failed one carries its ``error``
    (a real quota: ``codex_error_info.usage_limit_exceeded``; the simulator's 429s: a retry limit)."""
    home = _codex_env(env)
    rollout = Rollout(home, env["workspace"], "01a24897-1a19-7053-bce4-ad8075b2cfb0")
    rollout.turn("Split the ledger module", "Split into read and write halves.")
    rollout.write({"type": "response_item", "payload": {"type": "message", "id": "msg_q", "role": "user", "content": [
        {"type": "input_text", "text": "Now move the tests"}]}},
                  {"type": "event_msg", "payload": {"type": "task_complete", "last_agent_message": None, "error": {
                      "message": "You've hit your usage limit. Try again at 9:05 PM.",
                      "codex_error_info": {"usage_limit_exceeded": None}}}})
    assert codex_hook(env, "Stop", rollout).returncode == 0
    assert [turn["entries"][-1]["text"] for turn in history(env)] == [
        "Split into read and write halves.", "Now move the tests"]  # the failed turn is kept, without a reply
    assert "how it stopped: usage limit (You've hit your usage limit. Try again at 9:05 PM.)." in _start(env)
    assert codex_hook(env, "SessionEnd", rollout, reason="other").returncode == 0
    assert codex_hook(env, "SessionEnd", rollout, reason="other").returncode == 0  # told twice: said once
    assert "how it stopped: usage limit (You've hit your usage limit. Try again at 9:05 PM.), then ended (other)." \
        in _start(env)
    rollout.turn("Try again", "Moved the tests.")  # the next turn ends well: the limit is past
    assert codex_hook(env, "Stop", rollout).returncode == 0
    assert "usage limit" not in _start(env)


@pytest.mark.parametrize("whose", ["another user's", "no"])
def test_a_hook_in_a_folder_that_is_not_the_users_captures_nothing(env: dict, whose: str) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    t.write(t.prompt("the launch codes are 0000"), t.reply("Noted."))
    folder = env["tmp"] / "theirs"
    if whose == "no":
        said = "does not exist"
    else:
        import os

        if os.getuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        folder.mkdir()
        os.chown(folder, 65534, 65534)
        said = "is not a folder of this user"
    done = hook(env, "SessionEnd", t, reason="other", cwd=str(folder))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert history(env) == [] and not (env["home"] / "memories").exists()
    assert said in (env["home"] / "logs" / "agents.log").read_text()


def test_a_100_mb_transcript_is_captured_a_line_at_a_time_and_then_only_what_is_new(env: dict) -> None:
    """Big tool results (a 5 MB file read, then a 70 MB line past the importer's 64 MB line limit): the
    turns land, the line too long is left out and counted, and the next hook reads only what is new."""
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    rows = "".join(f"{i},{i * 3},{i % 2}\n" for i in range(330_000))  # about 5 MB
    for n in range(5):
        call, call_id = t.call("Bash", {"command": f"cat export_{n}.csv"})
        t.write(t.prompt(f"Dump export {n}"), call, t.result(call_id, rows), t.reply(f"Export {n} has 330000 rows."))
    call, call_id = t.call("Bash", {"command": "cat everything.csv"})
    t.write(t.prompt("Dump everything"), call, t.result(call_id, "x" * (70 << 20)), t.reply("That was big."))
    assert t.path.stat().st_size > 100_000_000
    done = hook(env, "Stop", t)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    turns = history(env)
    assert [turn["entries"][0]["text"] for turn in turns] == [f"Dump export {n}" for n in range(5)] + ["Dump everything"]
    assert "[… " in turns[0]["entries"][1]["text"]  # the 5 MB result kept its two ends only
    assert "That was big." == turns[-1]["entries"][-1]["text"]
    log = (env["home"] / "logs" / "agents.log").read_text()
    assert "s.jsonl:23: a line of 73,400," in log and "past 67,108,864; left out" in log
    t.write(t.prompt("One more"), t.reply("Done."))
    assert hook(env, "Stop", t).returncode == 0
    assert [turn["entries"][0]["text"] for turn in history(env)][-1] == "One more"
    doctor = json.loads(endless(env, "doctor", "--json").stdout)
    skipped = next(c for c in doctor["findings"] if c["check"] == "agents.skipped")
    assert skipped["message"].startswith("1 transcript line could not be read")


def test_a_failure_in_a_turn_read_twice_is_told_once(env: dict) -> None:
    t = Transcript(env["tmp"] / "user/.claude/projects/-w/s.jsonl", env["workspace"])
    call, call_id = t.call("Bash", {"command": "pytest -q"})
    t.write(t.prompt("Run the tests"), call, t.result(call_id, "1 failed: test_heron_totals", error=True))
    assert hook(env, "PreCompact", t, trigger="auto").returncode == 0  # mid-turn: read, left open
    t.write(t.reply("One test fails on the HERON totals."))
    assert hook(env, "Stop", t).returncode == 0  # the turn read again, whole
    text = _start(env)
    assert text.count("1 failed: test_heron_totals") == 1, text
    assert "how it stopped: unknown (its last turn ended" in text  # it went on after the compaction


def test_in_a_repository_the_settings_file_install_writes_stays_out_of_git(env: dict) -> None:
    """The hooks name this machine's Python and memory root: `git add .` must not commit them."""
    ws = env["workspace"]
    _git(ws, "init", "-q", "-b", "main")
    exclude = ws / ".git" / "info" / "exclude"
    before = exclude.read_bytes()
    assert endless(env, "claude", "install").returncode == 0
    assert _git(ws, "status", "--porcelain", "--untracked-files=all") == ""
    assert exclude.read_bytes().startswith(before) and b"/.claude/settings.local.json\n" in exclude.read_bytes()
    assert endless(env, "claude", "install").returncode == 0  # twice: the line once
    assert exclude.read_bytes().count(b"settings.local.json") == 1
    done = endless(env, "claude", "uninstall")
    assert done.returncode == 0 and exclude.read_bytes() == before
