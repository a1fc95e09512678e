"""Bindings and the session → memory index, kept under ``<root>/sessions/`` (DESIGN §2.1, §2.5).

One small JSON file per session, replaced atomically: a host's binding of a
session to its own key, and, once a session's first turn is committed, the
memory that holds its turns, so a later bind elsewhere can be refused without
scanning any log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from endless.core.store import durable
from endless.core.store.keys import Key, session_file_name
from endless.core.store.locks import ChangeLock


class AlreadyBound(RuntimeError):
    """The session's turns are already in another memory."""


@dataclass(frozen=True)
class SessionRecord:
    session: str
    memory_id: str
    agent: str
    project: str
    bound: bool
    agent_name: str | None = None
    has_turns: bool = False


def _path(root: Path, session: str) -> Path:
    durable.guard_root(root)  # sessions/ is never followed through a link
    return root / "sessions" / f"{session_file_name(session)}.json"


def lookup(root: Path, session: str) -> SessionRecord | None:
    try:
        data = durable.read_json(_path(root, session))
    except FileNotFoundError:
        return None
    except ValueError:
        durable.log("sessions", f"the session file {_path(root, session)} is unreadable; ignoring it")
        return None
    if not isinstance(data, dict) or data.get("session") != session:
        return None
    return SessionRecord(session, data["memoryId"], data["agent"], data["project"],
                         bool(data.get("bound")), data.get("agentName"), bool(data.get("hasTurns")))


def _write(root: Path, record: SessionRecord) -> None:
    durable.make_dir(root / "sessions")
    value = {"session": record.session, "memoryId": record.memory_id, "agent": record.agent,
             "project": record.project, "bound": record.bound, "hasTurns": record.has_turns}
    if record.agent_name:
        value["agentName"] = record.agent_name
    durable.write_json(_path(root, record.session), value)


def _lock(root: Path) -> ChangeLock:
    """One short lock for every session file's read-modify-write, so a bind cannot race a first commit."""
    durable.guard_root(root)
    durable.make_dir(root / "sessions")
    return ChangeLock(root / "sessions" / "lock")


def bind(root: Path, session: str, key: Key, agent_name: str | None = None) -> SessionRecord:
    """Bind a session to ``key`` before its first turn; rebinding to the same key is a no-op."""
    with _lock(root):
        return _bind(root, session, key, agent_name)


def _bind(root: Path, session: str, key: Key, agent_name: str | None) -> SessionRecord:
    current = lookup(root, session)
    if current is not None and current.has_turns and current.memory_id != key.memory_id:
        raise AlreadyBound(f"session {session!r} already has turns in memory {current.memory_id}; "
                           "bind a new session instead")
    record = SessionRecord(session, key.memory_id, key.agent, key.project, True, agent_name,
                           current is not None and current.has_turns and current.memory_id == key.memory_id)
    _write(root, record)
    return record


def note_turns(root: Path, session: str, key: Key) -> None:
    """Record that ``session`` has turns in ``key``'s memory (once, at its first commit)."""
    if (record := lookup(root, session)) is not None and record.has_turns:
        return
    with _lock(root):
        _note_turns(root, session, key)


def _note_turns(root: Path, session: str, key: Key) -> None:
    current = lookup(root, session)
    if current is not None and current.has_turns:
        return
    if current is not None and current.memory_id == key.memory_id:
        record = SessionRecord(session, current.memory_id, current.agent, current.project,
                               current.bound, current.agent_name, True)
    else:
        record = SessionRecord(session, key.memory_id, key.agent, key.project, False, None, True)
    _write(root, record)


def key_for_session(root: Path, session: str, fallback: Key) -> tuple[Key, str | None]:
    """The key a session's turns go to: its binding if a host bound it, else ``fallback``.

    Also returns the agent name the host gave, if any.
    """
    record = lookup(root, session)
    if record is not None and record.bound:
        return Key(record.agent, record.project), record.agent_name
    return fallback, None
