"""What live capture keeps of coding agents: each session's last doings (read by the hand-over) and each
transcript's place (read by doctor).

Kept under the memory root of this machine (``agents/sessions/<memory id>.json``),
beside the memory and not in it: it names transcripts and hook events of this
machine's agents, and the hand-over reads it without opening the memory's log.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import orjson

from endless.core.settings import CAPTURE_LOCK_SECONDS
from endless.core.store import durable

SESSIONS = "agents/sessions"  # under the memory root
PLACES = "agents/places"  # under the memory root: where each transcript's reading stopped (this machine's own)
KEPT = 20  # sessions remembered per memory, the newest


@dataclass
class Session:
    """What one agent session did, as the hand-over at the next session start tells it."""

    agent: str
    session: str
    transcript: str
    workspace: str
    started: float | None = None
    last_at: float | None = None
    event: str = ""  # the last hook that reported on it
    stopped: str = ""  # how it stopped, as the host said (empty: it did not say)
    files: list[str] = field(default_factory=list)  # files its tools wrote (as given)
    failures: list[str] = field(default_factory=list)  # its last tool failures, short
    turns: int = 0  # turns captured


def session_path(root: Path, memory_id: str) -> Path:
    return root / SESSIONS / f"{memory_id}.json"


def read_sessions(root: Path, memory_id: str) -> list[Session]:
    """The memory's agent sessions this machine captured, oldest report first."""
    try:
        raw = orjson.loads(durable.read_all(session_path(root, memory_id)))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return []
    out = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(Session(**item))
        except TypeError:
            continue
    return out


def note_session(root: Path, memory_id: str, change: Callable[[Session], None], agent: str, session: str,
                 transcript: str, workspace: str) -> None:
    """Change one session's record (made when new), the newest last; the few newest are kept."""
    from filelock import FileLock

    path = session_path(root, memory_id)
    durable.make_dir(path.parent)
    with FileLock(str(path) + ".lock", timeout=CAPTURE_LOCK_SECONDS):
        sessions = read_sessions(root, memory_id)
        found = next((s for s in sessions if s.agent == agent and s.session == session), None)
        if found is None:
            found = Session(agent, session, transcript, workspace)
        else:
            sessions.remove(found)
        change(found)
        sessions = (sessions + [found])[-KEPT:]
        durable.replace_file(path, orjson.dumps([asdict(s) for s in sessions]))


@dataclass
class Place:
    """Where the reading of one transcript stopped: the first byte (and line) not committed yet."""

    path: str
    offset: int = 0
    line: int = 1
    inode: int = 0
    skipped: int = 0  # lines that could not be read, left out
    agent: str = ""
    memory: str = ""
    title: str = ""  # the chat's title where the transcript's first lines give it (a Codex rollout)
    mark: str = ""  # a digest of the bytes just before ``offset`` (they change: the file was rewritten)


def place_path(root: Path, transcript: Path) -> Path:
    digest = hashlib.sha256(str(transcript).encode()).hexdigest()[:24]
    return root / PLACES / f"{digest}.json"


def read_place(root: Path, transcript: Path) -> Place:
    try:
        place = _place(orjson.loads(durable.read_all(place_path(root, transcript))))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return Place(str(transcript))
    return place if place is not None and place.path == str(transcript) else Place(str(transcript))


def _place(raw: object) -> Place | None:
    try:
        return Place(**raw) if isinstance(raw, dict) else None
    except TypeError:
        return None


def save_place(root: Path, transcript: Path, place: Place) -> None:
    path = place_path(root, transcript)
    durable.make_dir(path.parent)
    durable.replace_file(path, orjson.dumps(asdict(place)))


def all_places(root: Path) -> list[Place]:
    """Every transcript this machine captured (for doctor)."""
    folder = root / PLACES
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            place = _place(orjson.loads(path.read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            continue
        if place is not None:
            found.append(place)
    return found
