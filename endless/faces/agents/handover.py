"""The hand-over: what a coding agent starting in a folder is told of the work done there before.

Built from the memory and git alone, no model call, so it works when the last
session's model stopped at its quota.  It names the last session and how it
stopped (as its host said, else "unknown"), the objective and where it stood,
the last prompt and reply, recent tool failures, the files that session wrote
checked against the working tree now, and the repository's state.  The files
on disk win: a change the memory records that the tree no longer holds is
reported as gone, never as done.  Bounded to ``HANDOVER_BYTES``.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from endless.core import moments
from endless.core.errors import NoMemory
from endless.core.memory import Memory
from endless.core.privacy import redact
from endless.core.settings import HANDOVER_BYTES, HANDOVER_GIT_SECONDS, load_settings
from endless.core.store import workspace_key
from endless.core.words import count
from endless.faces.kit.agent_sessions import read_sessions

AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex", "": "a chat"}
TURNS_LOOKED_AT = 400  # the newest turns read for the last session's prompts and replies
QUOTE = 300  # characters of a prompt or reply quoted


@dataclass
class _Git:
    """The working tree now, as git says (empty when the folder is no repository)."""

    ok: bool = False
    branch: str = ""
    last: str = ""
    changed: dict[str, str] = field(default_factory=dict)  # path -> porcelain status
    deadline: float = 0.0

    def run(self, folder: Path, *args: str) -> str | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=left,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def _git_now(folder: Path) -> tuple[_Git, Path | None]:
    git = _Git(deadline=time.monotonic() + HANDOVER_GIT_SECONDS)
    found = git.run(folder, "rev-parse", "--show-toplevel", "--abbrev-ref", "HEAD")  # (one process: two answers)
    if found is None:
        top = git.run(folder, "rev-parse", "--show-toplevel")  # a repository without a commit has no HEAD yet
        if top is None:
            return git, None
        found = top + "\n"
    top, _, branch = found.partition("\n")
    git.ok = True
    git.branch = branch.strip()
    git.last = (git.run(folder, "log", "-1", "--format=%h %s (%cr)") or "").strip()
    status = git.run(folder, "status", "--porcelain=v1", "-z", "--untracked-files=all") or ""
    for item in status.split("\0"):
        if len(item) > 3:
            git.changed[item[3:]] = item[:2]
    return git, Path(top.strip())


def _one_line(text: str, limit: int = QUOTE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def handover_text(workspace: Path, agent: str, session: str, root: Path) -> str:
    """The block for a session starting in ``workspace`` ('' when its memory holds nothing yet)."""
    settings = load_settings()
    try:
        memory = Memory.open(workspace_key(None, workspace), settings=settings, root=root, readonly=True,
                             create=False, views="skip")  # (turns and messages only)
    except NoMemory:
        return ""
    try:
        if not memory.turns:
            return ""
        sessions = [s for s in read_sessions(root, memory.memory_id) if s.session != session]
        text = _block(memory, workspace, sessions, time.time())
        # What the memory holds is redacted already; file names, commit subjects and failures are not.
        return redact.redact(text).text if settings.redact_secrets else text
    finally:
        memory.close()


@dataclass
class _Seen:
    """The last session's turns, read from the newest back."""

    session: str = ""
    title: str = ""
    agent: str = ""
    first_prompt: str = ""
    last_prompt: str = ""
    last_reply: str = ""
    last_at: float | None = None
    failures: list[str] = field(default_factory=list)


def _last_turns(memory: Memory, session: str | None) -> _Seen:
    """The newest turns of ``session`` (None: of whichever chat spoke last), looked for among the newest."""
    seen = _Seen()
    for turn in range(memory.turns - 1, max(-1, memory.turns - 1 - TURNS_LOOKED_AT), -1):
        info = memory.turn(turn)
        if info is None or (session is not None and info.session != session):
            continue
        if not seen.session:
            seen.session, seen.title, seen.last_at = info.session, info.title, info.at
            session = info.session
        messages = memory.turn_messages(turn)
        for message in reversed(messages):
            if message.kind == "reply" and not seen.last_reply:
                seen.last_reply = message.text
            if message.kind == "trace" and len(seen.failures) < 3:
                seen.failures += [line for line in message.text.splitlines()
                                  if line.startswith("result: (error)")][:3 - len(seen.failures)]
        prompt = next((m.text for m in messages if m.kind == "user"), "")
        if prompt:
            seen.last_prompt = seen.last_prompt or prompt
            seen.first_prompt = prompt
    return seen


def _ago(at: float | None, now: float) -> str:
    if at is None:
        return "at a time not recorded"
    minutes = max(0, int(now - at) // 60)
    when = moments.local(at)
    if minutes < 1:
        return f"{when}, just now"
    if minutes < 120:
        return f"{when}, {minutes} min ago"
    hours = minutes // 60
    return f"{when}, {hours} h ago" if hours < 48 else f"{when}, {hours // 24} days ago"


def _block(memory: Memory, workspace: Path, sessions: list, now: float) -> str:
    last = max(sessions, key=lambda s: s.last_at or 0.0) if sessions else None
    seen = _last_turns(memory, last.session if last is not None else None)
    if last is not None and not seen.session:  # its turns are not in the memory yet: the newest chat's then
        seen = _last_turns(memory, None)
    out = [f"[Endless] This folder's memory holds {count(memory.turns, 'turn')} of earlier work "
           f"(memory {memory.memory_id}). Where the last session left off:"]
    if last is not None and last.session == seen.session:
        name = AGENT_NAMES.get(last.agent, last.agent)
        ended = "unknown (its last turn ended; the session did not say it ended)"
        how = last.stopped or {"Stop": ended, "notify": ended,
                               "UserPromptSubmit": "unknown (it stopped in the middle of a turn: killed, "
                                                   "crashed or cut off)"}.get(last.event, "unknown")
        out.append(f"- Last session: {name} {last.session[:8]}, last active {_ago(last.last_at, now)}; "
                   f"how it stopped: {how}.")
    else:
        out.append(f"- Last chat: «{_one_line(seen.title, 80)}», last active {_ago(seen.last_at, now)}; "
                   "how it stopped: unknown.")
    if seen.first_prompt and seen.first_prompt != seen.last_prompt:
        out.append(f"- Objective (its first request): {_one_line(seen.first_prompt)}")
    if seen.last_prompt:
        out.append(f"- Last request: {_one_line(seen.last_prompt)}")
    if seen.last_reply:
        out.append(f"- Last state (its last reply): {_one_line(seen.last_reply, 2 * QUOTE)}")
    failures = (last.failures if last is not None and last.session == seen.session else []) or \
        [f[len("result: (error)"):] for f in seen.failures]
    if failures:
        out.append("- Recent tool failures: " + "; ".join(_one_line(f, 120) for f in failures[-3:]))
    git, top = _git_now(workspace)
    # The files the last session wrote; when it wrote none (it only read, or asked), those of the newest
    # session that did: the next agent must still learn what the tree holds of that work.
    wrote = last if last is not None and last.session == seen.session and last.files else \
        next((s for s in sorted(sessions, key=lambda s: s.last_at or 0.0, reverse=True) if s.files), None)
    if wrote is not None:
        who = "it wrote" if wrote is last else \
            f"written by {AGENT_NAMES.get(wrote.agent, wrote.agent)} {wrote.session[:8]} (the last session wrote none)"
        out.append(f"- Files {who}, checked against the folder now (the files on disk win):")
        out += [f"  - {line}" for line in _files_now(wrote.files, git, top, workspace, wrote.started)]
    if git.ok:
        dirty = len(git.changed)
        out.append(f"- Repository now: branch {git.branch or '?'}, last commit {git.last or 'none'}; "
                   + (f"{dirty} path(s) changed or untracked." if dirty else "working tree clean."))
    out.append("To look further back: the endless tools recall_search (words, a phrase, /pattern/), "
               "zoom (a line or message by id) and date (what happened when).")
    return _bounded(out)


def _files_now(files: list[str], git: _Git, top: Path | None, workspace: Path, since: float | None) -> list[str]:
    said = []
    for name in files[-12:]:
        path = Path(name) if Path(name).is_absolute() else workspace / name
        shown = _shown(path, workspace)
        if not path.exists():
            said.append(f"{shown}: not on disk now (deleted or moved since)")
            continue
        if top is None or not git.ok:
            said.append(f"{shown}: on disk (no git repository to check it against)")
            continue
        try:
            relative = str(path.resolve().relative_to(top))
        except ValueError:
            said.append(f"{shown}: outside the repository, on disk")
            continue
        status = git.changed.get(relative)
        if status is not None:
            said.append(f"{shown}: " + ("new, not committed" if status == "??" else "changed, not committed"))
            continue
        # A commit of it made after the session began (git's --since is whole seconds and inclusive: a
        # commit in the second the session began, but before it, is no commit of the session's change).
        found = git.run(top, "log", "-1", "--format=%ct %h %s", f"--since=@{int(since)}", "--",
                        relative) if since else None
        stamp, _, committed = (found or "").strip().partition(" ")
        if committed and stamp.isdigit() and int(stamp) >= since:
            said.append(f"{shown}: committed ({_one_line(committed, 80)})")
        elif git.run(top, "check-ignore", "-q", "--", relative) is not None:
            said.append(f"{shown}: ignored by git, on disk")
        else:
            said.append(f"{shown}: same as the last commit, so its change is no longer there (reverted)")
    return said


def _shown(path: Path, workspace: Path) -> str:
    try:
        return str(path.relative_to(workspace))
    except ValueError:
        return str(path)


def _bounded(lines: list[str]) -> str:
    """The lines joined, cut to ``HANDOVER_BYTES`` (the look-further line kept)."""
    text = "\n".join(lines)
    if len(text.encode()) <= HANDOVER_BYTES:
        return text
    tail = lines[-1]
    room = HANDOVER_BYTES - len(tail.encode()) - 8
    body = "\n".join(lines[:-1]).encode()[:room].decode("utf-8", "ignore")
    return body.rsplit("\n", 1)[0] + "\n…\n" + tail
