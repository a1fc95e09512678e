"""The in-flight journal of a turn: its messages, fsynced as they happen (DESIGN §2.2).

A turn reaches the order log only whole, when it ends.  Until then each message
is appended to a per-session journal, and the owning process holds a beacon
lock beside it; a journal whose beacon nobody holds belongs to a dead process
and is closed as ``interrupted`` by the next process that opens the memory.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store import durable
from endless.core.store.keys import session_file_name
from endless.core.store.locks import Beacon, try_lock
from endless.core.store.messages import Message


class JournalBusy(RuntimeError):
    """The session already has a turn in flight in another process."""


@dataclass
class Pending:
    """A journal read back: the header and the messages that were fully written."""

    path: Path
    tid: str
    session: str
    title: str
    messages: list[Message] = field(default_factory=list)
    torn: bool = False


def journal_dir(folder: Path) -> Path:
    return folder / "journal"


def paths(folder: Path, session: str) -> tuple[Path, Path]:
    stem = session_file_name(session)
    base = journal_dir(folder)
    return base / f"{stem}.jsonl", base / f"{stem}.alive"


class Journal:
    """One session's turn in flight; created with its first message."""

    def __init__(self, folder: Path, session: str, title: str,
                 keep: Callable[[Message], Message] | None = None) -> None:
        self.path, self.beacon_path = paths(folder, session)
        self.keep = keep  # what of a message is kept (secrets redacted), applied before it is written
        self.session, self.title = session, title
        self.tid = secrets.token_hex(8)
        self.messages: list[Message] = []
        self._beacon: Beacon | None = None

    def add(self, messages: list[Message], sync: bool = True) -> None:
        if not messages:
            return
        if self.keep is not None:
            messages = [self.keep(m) for m in messages]
        lines = []
        if self._beacon is None:
            durable.make_dir(self.path.parent)
            beacon = try_lock(self.beacon_path)
            if beacon is None:
                raise JournalBusy(f"session {self.session!r} already has a turn in flight in "
                                  "another process; finish or stop it there first")
            if self.path.exists():
                beacon.release()
                raise JournalBusy(f"session {self.session!r} has an unfinished turn journal "
                                  f"({self.path}); reopen the memory to close it first")
            self._beacon = beacon
            lines.append(durable.dumps_line({"tid": self.tid, "s": self.session, "t": self.title,
                                             "pid": os.getpid()}))
        lines.extend(durable.dumps_line(m.to_record()) for m in messages)
        durable.append_lines(self.path, lines, sync)
        self.messages.extend(messages)

    @property
    def started(self) -> bool:
        return self._beacon is not None

    def finish(self) -> None:
        """After the commit: drop the journal, then the beacon."""
        if self._beacon is None:
            return
        for path in (self.path, self.beacon_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        durable.fsync_dir(self.path.parent)
        self._beacon.release()
        self._beacon = None


def read(path: Path) -> Pending | None:
    """A journal's header and whole messages; a torn last line is dropped and flagged."""
    try:
        data = durable.read_all(path)
    except FileNotFoundError:
        return None
    lines = data.split(b"\n")
    torn = lines[-1] != b""
    lines = lines[:-1]
    if not lines:
        return Pending(path, "", "", "", [], torn)
    try:
        head = orjson.loads(lines[0])
        pending = Pending(path, str(head["tid"]), str(head["s"]), str(head["t"]), [], torn)
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return Pending(path, "", "", "", [], True)
    for line in lines[1:]:
        try:
            record = orjson.loads(line)
            pending.messages.append(Message(record["k"], record["x"], float(record["at"]),
                                            record.get("w")))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            pending.torn = True
    return pending


def orphans(folder: Path) -> list[tuple[Path, Beacon]]:
    """Journals whose process is gone, each with its beacon now held by us."""
    base = journal_dir(folder)
    if not base.is_dir():
        return []
    found = []
    for path in sorted(base.glob("*.jsonl")):
        beacon = try_lock(path.with_suffix(".alive"))
        if beacon is None:
            continue
        if path.exists():
            found.append((path, beacon))
        else:
            beacon.release()
    return found
