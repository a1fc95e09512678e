"""``endless hook AGENT EVENT``: what Claude Code's and Codex's hooks run.

A hook must never block or break the agent that runs it: it reads the host's
JSON, starts ``endless capture`` for the transcript in a process of its own
(detached, so it outlives the hook) and returns without waiting for it
(``ENDLESS_HOOK_WAIT`` seconds: tests wait to read what landed); at a
session's start it prints the hand-over.  Whatever
goes wrong is written to Endless's own log (``agents.log`` under the memory
root), never to the agent's screen, and the hook exits 0.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from endless.core import diagnostics
from endless.core.settings import HOOK_INPUT_MAX, HOOK_WAIT_SECONDS, load_settings
from endless.core.store import durable

LOG_FILE = "logs/agents.log"  # under the memory root
WAIT_ENV = "ENDLESS_HOOK_WAIT"  # seconds a hook waits for its capture (tests wait for it to end)
# What each host's events mean to a capture: (capture at all, the turn is over, the session ended).
CLAUDE_EVENTS = {"SessionStart": (True, False, False), "UserPromptSubmit": (True, False, False),
                 "Stop": (True, True, False), "SubagentStop": (True, True, False), "PreCompact": (True, False, False),
                 "SessionEnd": (True, True, True)}
CODEX_EVENTS = {"SessionStart": (True, False, False), "UserPromptSubmit": (True, False, False),
                "Stop": (True, True, False), "PreCompact": (True, False, False), "notify": (True, True, False)}


def log(message: str, level: int = logging.INFO) -> None:
    durable.log("agents", message, level)


@dataclass(frozen=True)
class HookInput:
    """What a host's hook said, in its own words normalised."""

    agent: str
    event: str
    session: str
    transcript: str
    workspace: Path
    source: str = ""  # SessionStart: startup, resume, clear, compact
    reason: str = ""  # SessionEnd: why


def parse(agent: str, event: str, raw: bytes, env: dict[str, str]) -> HookInput:
    """The hook's JSON as a :class:`HookInput`; ValueError names what is missing."""
    try:
        data = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the {agent} {event} hook's input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the {agent} {event} hook's input is not a JSON object")
    if agent == "codex" and event == "notify":  # Codex's notify program: {"type", "thread-id", "cwd", ...}
        session = str(data.get("thread-id") or data.get("thread_id") or "")
        cwd = data.get("cwd")
    else:
        session = str(data.get("session_id") or "")
        cwd = data.get("cwd")
    project = env.get("CLAUDE_PROJECT_DIR") if agent == "claude" else None
    folder = project or (cwd if isinstance(cwd, str) and cwd else None) or os.getcwd()
    transcript = data.get("transcript_path")
    return HookInput(agent, str(data.get("hook_event_name") or event), session,
                     transcript if isinstance(transcript, str) else "", Path(folder).resolve(),
                     str(data.get("source") or ""), str(data.get("reason") or ""))


def _to_log_file(root: Path) -> logging.Handler:
    path = root / LOG_FILE
    durable.make_dir(path.parent)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s] %(message)s"))
    return handler


def run(agent: str, event: str, raw: bytes, env: dict[str, str] | None = None) -> str:
    """Do what the hook asks; return what it prints (the hand-over at a session start, else '').

    Nothing raises out of here: a settings file that cannot be read, a memory root that cannot be
    written (its log either), a full disk: the agent goes on, and the log says why where it can.
    """
    env = dict(os.environ) if env is None else env
    try:
        settings = load_settings()
        root = settings.memory_root()
    except Exception:
        return ""
    try:
        handler: logging.Handler = _to_log_file(root)
    except Exception:
        handler = logging.NullHandler()
    with diagnostics.diverted_to(handler):
        try:
            return _run(agent, event, raw, env, root)
        except Exception as exc:  # the agent goes on whatever happens here
            log(f"{agent} {event} hook failed: {exc!r}", logging.WARNING)
            return ""
        finally:
            handler.close()


def _run(agent: str, event: str, raw: bytes, env: dict[str, str], root: Path) -> str:
    hook = parse(agent, event, raw, env)
    events = CLAUDE_EVENTS if agent == "claude" else CODEX_EVENTS
    captures, turn_over, final = events.get(hook.event, (False, False, False))
    transcript = hook.transcript or (_codex_rollout(hook.session) if agent == "codex" else "")
    refused = _refusal(agent, transcript, hook.workspace, env) if captures and transcript else ""
    if refused:
        log(f"{agent} {hook.event} hook: {refused}; nothing captured", logging.WARNING)
        return ""
    if captures and transcript:
        stopped = ""
        if hook.event == "SessionEnd":
            stopped = f"ended ({hook.reason})" if hook.reason else "ended"
        elif hook.event == "PreCompact":
            stopped = "compacted its context"
        _start_capture(agent, transcript, hook, turn_over, final, stopped, env)
    if hook.event == "SessionStart":
        from endless.faces.agents.handover import handover_text

        text = handover_text(hook.workspace, agent, hook.session, root)
        return _session_start_output(agent, text) if text else ""
    return ""


def agent_folders(agent: str, env: dict[str, str]) -> list[Path]:
    """Where the host keeps its transcripts: a hook is trusted to name a file there only."""
    home = Path(env.get("HOME") or Path.home())
    if agent == "claude":
        return [Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "projects"]
    return [Path(env.get("CODEX_HOME") or home / ".codex") / "sessions"]


def _refusal(agent: str, transcript: str, workspace: Path, env: dict[str, str]) -> str:
    """Why a hook's input must not be captured ('' when it may): a transcript outside the host's own
    folders (any file could be named: it would be read into the memory), a folder not the user's."""
    path = Path(transcript).resolve()
    if not any(path.is_relative_to(folder.resolve()) for folder in agent_folders(agent, env)):
        return (f"the transcript {path} is not in {agent_folders(agent, env)[0]}, where the host keeps its "
                "transcripts")
    try:
        owner = os.stat(workspace).st_uid
    except OSError:
        return f"the folder {workspace} does not exist"
    if not workspace.is_dir() or owner != os.getuid():
        return f"the folder {workspace} is not a folder of this user"
    from endless.core.store import IdFileError, folder_identity

    try:
        folder_identity(workspace)  # (an .endless-id that names nothing: said here, the capture would fail)
    except IdFileError as exc:
        return str(exc)
    return ""


def _session_start_output(agent: str, text: str) -> str:
    """Claude Code and Codex both add a SessionStart hook's ``additionalContext`` to the model's context."""
    return orjson.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}).decode()


def _start_capture(agent: str, transcript: str, hook: HookInput, turn_over: bool, final: bool, stopped: str,
                   env: dict[str, str]) -> None:
    command = [sys.executable, "-m", "endless", "capture", "--agent", agent, "--transcript", transcript,
               "--workspace", str(hook.workspace), "--event", hook.event]
    if hook.session:
        command += ["--session", hook.session]
    if stopped:
        command += ["--stopped", stopped]
    if turn_over:
        command.append("--turn-over")
    if final:
        command.append("--final")
    started = time.monotonic()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, cwd=str(hook.workspace)
                             if hook.workspace.is_dir() else None, env=env)
    try:
        wait = float(env.get(WAIT_ENV, HOOK_WAIT_SECONDS))
    except ValueError:
        wait = HOOK_WAIT_SECONDS
    if wait <= 0:
        return
    try:
        code = child.wait(timeout=wait)
        if code:
            log(f"the capture of {transcript} exited {code}; see the lines above", logging.WARNING)
    except subprocess.TimeoutExpired:
        log(f"the capture of {transcript} goes on in the background (pid {child.pid}, "
            f"{time.monotonic() - started:.1f} s so far)")


def _codex_rollout(session: str) -> str:
    """The rollout file of a Codex session, found by its id in the dated layout (newest first)."""
    if not session:
        return ""
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"
    try:
        days = sorted(home.glob("*/*/*"), reverse=True)[:7]
    except OSError:
        return ""
    for day in days:
        for path in day.glob(f"rollout-*{session}*.jsonl"):
            return str(path)
    return ""


def hook_command(args) -> int:
    """``endless hook AGENT EVENT [JSON]``: stdin (or, for Codex's notify, the last argument) is the host's JSON."""
    try:
        if args.payload is not None:
            raw = args.payload.encode()
        else:
            raw = sys.stdin.buffer.read(HOOK_INPUT_MAX) if not sys.stdin.isatty() else b""
    except (OSError, ValueError):
        raw = b""
    out = run(args.agent, args.event, raw)
    if out:
        try:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
        except OSError:
            pass
    return 0
