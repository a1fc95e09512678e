"""``endless hook AGENT EVENT``: what Claude Code's and Codex's hooks run.

A hook must never block or break the agent that runs it: it reads the host's
JSON, starts ``endless capture`` for the transcript in a process of its own
(a session of its own, at a lower priority, so it outlives the hook and yields
to the agent) and returns without waiting for it (``ENDLESS_HOOK_WAIT``
seconds: tests wait to read what landed); at a session's start it prints the
hand-over.  Whatever goes wrong is written to Endless's own log
(``agents.log`` under the memory root), never to the agent's screen, and the
hook exits 0.

Every hook is a whole Python process, so this module imports little: the
stdlib's ``json`` (the payload is small), no argument parser (``endless.cli``
hands ``hook`` straight to :func:`fast_main`), no ``subprocess``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from endless.core import diagnostics
from endless.core.settings import CAPTURE_NICE, HOOK_INPUT_MAX, HOOK_WAIT_SECONDS, load_settings

AGENTS = ("claude", "codex")
LOG_FILE = "logs/agents.log"  # under the memory root
WAIT_ENV = "ENDLESS_HOOK_WAIT"  # seconds a hook waits for its capture (tests wait for it to end)
# What each host's events mean to a capture: (capture at all, the turn is over, the session ended).
CLAUDE_EVENTS = {"SessionStart": (True, False, False), "UserPromptSubmit": (True, False, False),
                 "Stop": (True, True, False), "SubagentStop": (True, True, False), "PreCompact": (True, False, False),
                 "SessionEnd": (True, True, True)}
CODEX_EVENTS = {"SessionStart": (True, False, False), "UserPromptSubmit": (True, False, False),
                "Stop": (True, True, False), "PreCompact": (True, False, False), "notify": (True, True, False),
                "SessionEnd": (True, True, True), "Interrupt": (True, True, True)}


def log(message: str, level: int = logging.INFO) -> None:
    diagnostics.log("agents", message, level)


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
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:  # not JSON, or not text at all
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
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(diagnostics.LOG_FILE_FORMAT))
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
    if captures and transcript and not os.path.isfile(transcript):
        captures = False  # (a session's first hooks come before its host writes the transcript)
    if captures and transcript:
        stopped = ""
        if hook.event == "SessionEnd":
            stopped = f"ended ({hook.reason})" if hook.reason else "ended"
        elif hook.event == "PreCompact":
            stopped = "compacted its context"  # (live.COMPACTED: cleared once a turn ends after it)
        elif hook.event == "Interrupt":  # (Codex: the person stopped the turn; its words so far are kept)
            stopped = "interrupted by the person"
        _start_capture(agent, transcript, hook, turn_over, final, stopped, env, root)
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
    return ""


def _session_start_output(agent: str, text: str) -> str:
    """Claude Code and Codex both add a SessionStart hook's ``additionalContext`` to the model's context."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}},
                      ensure_ascii=False)


def _start_capture(agent: str, transcript: str, hook: HookInput, turn_over: bool, final: bool, stopped: str,
                   env: dict[str, str], root: Path) -> None:
    command = [sys.executable, "-m", "endless", "capture", "--agent", agent, "--transcript", transcript,
               "--workspace", str(hook.workspace), "--event", hook.event, "--nice", str(CAPTURE_NICE)]
    if hook.session:
        command += ["--session", hook.session]
    if stopped:
        command += ["--stopped", stopped]
    if turn_over:
        command.append("--turn-over")
    if final:
        command.append("--final")
    started = time.monotonic()
    # The capture's own diagnostics (and a crash's traceback) go to the same log; its standard streams
    # are never the host's: its output is not the agent's business.
    try:
        said = os.open(root / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        said = os.open(os.devnull, os.O_WRONLY)
    try:
        pid = os.posix_spawn(sys.executable, command, env, setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, said, 2)])
    finally:
        os.close(said)
    try:
        wait = float(env.get(WAIT_ENV, HOOK_WAIT_SECONDS))
    except ValueError:
        wait = HOOK_WAIT_SECONDS
    if wait <= 0:
        return
    code = _wait_for(pid, wait)
    if code is None:
        log(f"the capture of {transcript} goes on in the background (pid {pid}, "
            f"{time.monotonic() - started:.1f} s so far)")
    elif code:
        log(f"the capture of {transcript} exited {code}; see the lines above", logging.WARNING)


def _wait_for(pid: int, seconds: float) -> int | None:
    """The exit code of child ``pid`` once it ends within ``seconds``, else None (it runs on)."""
    import select

    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], seconds)
    finally:
        os.close(fd)
    if not ready:
        return None
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


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


def fast_main(argv: list[str]) -> int | None:
    """``endless hook AGENT EVENT [JSON]`` without building the command line's parser (a hook is a whole
    process, run at every turn); None when ``argv`` is not that shape (``--help``, a wrong agent): the
    parser then says what is wrong."""
    if len(argv) not in (2, 3) or argv[0] not in AGENTS or argv[1].startswith("-") or \
            (len(argv) == 3 and argv[2].startswith("-")):
        return None
    return _hook(argv[0], argv[1], argv[2] if len(argv) == 3 else None)


def hook_command(args) -> int:
    """``endless hook AGENT EVENT [JSON]``: stdin (or, for Codex's notify, the last argument) is the host's JSON."""
    return _hook(args.agent, args.event, args.payload)


def _hook(agent: str, event: str, payload: str | None) -> int:
    try:
        if payload is not None:
            raw = payload.encode()
        else:
            raw = sys.stdin.buffer.read(HOOK_INPUT_MAX) if not sys.stdin.isatty() else b""
    except (OSError, ValueError):
        raw = b""
    out = run(agent, event, raw)
    if out:
        try:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
        except OSError:
            pass
    return 0
