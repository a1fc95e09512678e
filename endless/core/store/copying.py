"""Copying memories between stores, resumable and verified (``endless store copy``; issue 31 item 4).

Both stores keep a memory's history as the same two streams of bytes: the order
log and the tree's lines, each line at the same byte address (the database store
keeps every record at the address it has in a file).  So a copy is the streams'
bytes, in order, appended to the target in whole-line steps, each one durable
before the next (a transaction, or a write and an fsync), plus the memory's key,
its durable marks and the aliases naming it.

**Resumable.**  Before copying, the target's stream must be a prefix of the
source's, byte for byte: then the copy goes on from the target's end, so a copy
killed at any moment and run again finishes without a duplicate.  A target
whose stream is not a prefix holds another history of that memory (more turns
were added on both sides, or a forget blanked text on one side); nothing of any
memory is copied then, and the command says which memory and where they part.

**Verified.**  After copying, the target's streams are read back and tallied
like the source's: turns, messages, the ids (each record's first id must follow
the one before, no gap and no repeat), the tree's lines, and a SHA-256 of each
stream's bytes.  They are printed, and must be equal.

**The way back.**  When the files side of a copy is a memory folder that a
database store also uses on this machine (one ``ENDLESS_HOME``, before and after
setting ``ENDLESS_STORE``), the copy notes in that folder (``store-copy.json``)
how long the files log was when both sides agreed; the database store then
opens the folder while its files log has not grown since, so a person can try
the database and leave it with another copy (``--to files``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

from endless.core.errors import MemoryUseError
from endless.core.store import durable, keyfile
from endless.core.store.directory import Alias, FileDirectory
from endless.core.store.files import MARKS
from endless.core.store.keys import MEMORY_ID
from endless.core.store.locks import ChangeLock
from endless.core.store.log import OrderLog, file_size
from endless.core.store.records import examine
from endless.core.store.tree import TreeStore

LOG, TREE = "log", "tree"
STREAMS = (LOG, TREE)
COPY_NOTE = "store-copy.json"  # in a memory folder: the files log's length when it and a database's agreed


class CopyRefused(RuntimeError):
    """A memory cannot be copied as asked; nothing was written.  The message says why and what to do."""


class Side(Protocol):
    """One store as a copy reads or writes it: memories' raw streams, keys, marks and aliases."""

    where: str  # the store in a person's words (a database's password masked)
    kind: str  # "files" or "postgresql"

    def memory_ids(self) -> list[str]: ...

    def key_record(self, memory_id: str) -> dict | None: ...

    def end(self, memory_id: str, stream: str) -> int:
        """Just past the stream's last whole line (0: the memory or the stream is not there)."""

    def resume_at(self, memory_id: str, stream: str) -> int:
        """Where a copy into this side goes on: its end, a torn last line included (the copy checks it
        against the source and completes it)."""

    def read(self, memory_id: str, stream: str, start: int, stop: int) -> Iterator[bytes]:
        """The stream's bytes in ``[start, stop)``, in pieces."""

    def make(self, memory_id: str, record: dict) -> None:
        """Make the memory here (its key), unless it is here."""

    def append(self, memory_id: str, stream: str, at: int, data: bytes) -> None:
        """Append whole lines at ``at``, the stream's end; durable before it returns; refused (``CopyRefused``)
        when the end moved (something else writes the memory)."""

    def marks(self, memory_id: str) -> dict[str, bytes]: ...

    def set_mark(self, memory_id: str, name: str, value: bytes) -> None: ...

    def aliases(self) -> list[Alias]: ...

    def add_alias(self, alias: Alias, record: dict | None) -> str: ...

    def generations(self, memory_id: str) -> dict[str, str]:
        """A database stream's generation (what names it); {} for files."""

    def note_copy(self, memory_id: str, generations: dict[str, str], log_end: int) -> None:
        """On a files side: that its log agreed with the database's streams up to ``log_end``."""

    def close(self) -> None: ...


@dataclass
class Tally:
    """What a memory's streams hold, counted the same way on both sides."""

    log_bytes: int = 0
    tree_bytes: int = 0
    turns: int = 0
    messages: int = 0
    damaged: int = 0  # records that cannot be read (counted, copied as they are)
    id_breaks: int = 0  # records whose first id does not follow the one before
    repeated: int = 0  # turn ids met twice
    lines: int = 0
    log_sha256: str = ""
    tree_sha256: str = ""

    def to_json(self) -> dict:
        return {"logBytes": self.log_bytes, "treeBytes": self.tree_bytes, "turns": self.turns,
                "messages": self.messages, "firstId": 0 if self.messages else None,
                "lastId": self.messages - 1 if self.messages else None, "damaged": self.damaged,
                "idBreaks": self.id_breaks, "repeatedTurns": self.repeated, "lines": self.lines,
                "logSha256": self.log_sha256, "treeSha256": self.tree_sha256}


@dataclass
class _Counter:
    """Tallies a log or a tree as its bytes go by (pieces cut anywhere)."""

    stream: str
    sha: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    size: int = 0
    rest: bytes = b""
    turns: int = 0
    messages: int = 0
    damaged: int = 0
    id_breaks: int = 0
    lines: int = 0
    tids: set = field(default_factory=set)
    repeated: int = 0

    def feed(self, data: bytes) -> None:
        self.sha.update(data)
        self.size += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        if self.stream == TREE:
            self.lines += 1
            return
        self.turns += 1
        record, _ = examine(line)
        if record is None:
            self.damaged += 1
            return
        if record["id"] != self.messages:
            self.id_breaks += 1
        self.messages = max(self.messages, record["id"] + len(record["m"]))
        if record["tid"] in self.tids:
            self.repeated += 1
        self.tids.add(record["tid"])


def tally(side: Side, memory_id: str, ends: dict[str, int]) -> Tally:
    """Count ``[0, end)`` of each stream of the memory on ``side``."""
    counters = {stream: _Counter(stream) for stream in STREAMS}
    for stream in STREAMS:
        for piece in side.read(memory_id, stream, 0, ends[stream]):
            counters[stream].feed(piece)
    return _tally_of(counters)


def _tally_of(counters: dict[str, _Counter]) -> Tally:
    log, tree = counters[LOG], counters[TREE]
    return Tally(log.size, tree.size, log.turns, log.messages, log.damaged, log.id_breaks, log.repeated,
                 tree.lines, log.sha.hexdigest(), tree.sha.hexdigest())


@dataclass
class Copied:
    """One memory's copy: what was there, what moved, and both sides' tallies."""

    memory_id: str
    project: str
    agent: str
    copied: dict[str, int]  # bytes appended per stream
    source: Tally
    target: Tally
    ahead: dict[str, int]  # bytes the target holds past the source's end (written there since)

    @property
    def agrees(self) -> bool:
        s, t = self.source, self.target
        return (s.log_sha256, s.tree_sha256, s.turns, s.messages, s.lines) == \
               (t.log_sha256, t.tree_sha256, t.turns, t.messages, t.lines) and not t.id_breaks and not t.repeated

    def to_json(self) -> dict:
        return {"memoryId": self.memory_id, "agent": self.agent, "project": self.project, "copied": self.copied,
                "targetAhead": self.ahead, "source": self.source.to_json(), "target": self.target.to_json(),
                "agrees": self.agrees}


@dataclass
class _Plan:
    memory_id: str
    record: dict
    ends: dict[str, int]  # the source's ends, read once: what is copied and verified
    starts: dict[str, int]  # the target's ends: where the copy goes on


def plan(source: Side, target: Side, memory_ids: list[str]) -> list[_Plan]:
    """Each memory's copy, checked before anything is written: the key known, and every target stream a
    prefix of the source's (or the source's a prefix of it).  ``CopyRefused`` names every memory that
    cannot be copied."""
    plans, refused = [], []
    for mid in memory_ids:
        record = source.key_record(mid)
        if record is None:
            refused.append(f"memory {mid} in {source.where} has no key record (an older Endless made it, and this "
                           f"one never opened it): run `endless view --memory {mid}` once on a machine that used "
                           "it, then copy again (or leave it out with --memory)")
            continue
        there = target.key_record(mid)
        if there is not None and (there.get("agent"), there.get("project")) != (record["agent"], record["project"]):
            refused.append(f"memory {mid} in {target.where} has another key ({there.get('project')!r}); "
                           "nothing of it was changed")
            continue
        if there is not None and there.get("granularity", "turn") != record.get("granularity", "turn"):
            refused.append(f"memory {mid} in {target.where} logs by {there.get('granularity')!r}, the source by "
                           f"{record.get('granularity')!r}; nothing of it was changed")
            continue
        ends = {stream: source.end(mid, stream) for stream in STREAMS}
        starts = {stream: target.resume_at(mid, stream) for stream in STREAMS}
        for stream in STREAMS:
            common = min(ends[stream], starts[stream])
            apart = _first_difference(source.read(mid, stream, 0, common), target.read(mid, stream, 0, common))
            if apart is not None:
                what = "order log" if stream == LOG else "tree of lines"
                refused.append(f"memory {mid} in {target.where} holds another history: its {what} differs from the "
                               f"source's at byte {apart} (turns were added on both sides since the last copy, or "
                               "a forget blanked text on one side only); nothing of it was changed. Forget the "
                               "same on both sides, or keep the two apart")
                break
        else:
            plans.append(_Plan(mid, record, ends, starts))
    if refused:
        raise CopyRefused("\n".join(refused))
    return plans


def _first_difference(one: Iterator[bytes], other: Iterator[bytes]) -> int | None:
    """The first byte address where two streams of pieces differ (None: they agree)."""
    at, a, b = 0, b"", b""
    one_it, other_it = iter(one), iter(other)
    while True:
        if not a:
            a = next(one_it, b"")
        if not b:
            b = next(other_it, b"")
        if not a or not b:
            return None if not a and not b else at
        n = min(len(a), len(b))
        if a[:n] != b[:n]:
            return at + next(k for k in range(n) if a[k] != b[k])
        at, a, b = at + n, a[n:], b[n:]


def copy(source: Side, target: Side, plans: list[_Plan], chunk_bytes: int,
         progress: Callable[[str, int, int], None] = lambda mid, done, total: None) -> list[Copied]:
    """Copy each planned memory; returns what each holds on both sides after (module doc)."""
    done = []
    for p in plans:
        mid = p.memory_id
        target.make(mid, p.record)
        total = sum(max(0, p.ends[s] - p.starts[s]) for s in STREAMS)
        moved = {stream: 0 for stream in STREAMS}
        for stream in STREAMS:
            at = p.starts[stream]
            if at >= p.ends[stream]:
                continue
            for data in _whole_lines(source.read(mid, stream, at, p.ends[stream]), chunk_bytes):
                target.append(mid, stream, at, data)
                at += len(data)
                moved[stream] += len(data)
                progress(mid, sum(moved.values()), total)
        for name, value in source.marks(mid).items():
            if name not in target.marks(mid):
                target.set_mark(mid, name, value)
        generations = target.generations(mid) or source.generations(mid)
        for side in (source, target):
            if side.kind == "files" and generations:
                side.note_copy(mid, generations, p.ends[LOG])
        done.append(Copied(mid, p.record["project"], p.record["agent"], moved, tally(source, mid, p.ends),
                           tally(target, mid, p.ends),
                           {s: max(0, p.starts[s] - p.ends[s]) for s in STREAMS}))
    copied = {p.memory_id for p in plans}
    records = {p.memory_id: p.record for p in plans}
    for alias in source.aliases():
        if alias.target in copied:
            target.add_alias(alias, records[alias.target])
    return done


def _whole_lines(pieces: Iterator[bytes], chunk_bytes: int) -> Iterator[bytes]:
    """The bytes regrouped into runs of whole lines of about ``chunk_bytes`` (a line longer than that is a
    run of its own); the first run may start inside a line (a torn tail the target holds)."""
    buffer = bytearray()
    for piece in pieces:
        buffer += piece
        while len(buffer) >= chunk_bytes:
            cut = buffer.rfind(b"\n", 0, chunk_bytes)
            if cut < 0:
                cut = buffer.find(b"\n", chunk_bytes)
                if cut < 0:
                    break
            yield bytes(buffer[:cut + 1])
            del buffer[:cut + 1]
    if buffer:
        yield bytes(buffer)


def read_note(folder) -> dict | None:
    """A memory folder's copy note (module doc), or None."""
    try:
        value = durable.read_json(folder / COPY_NOTE)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_note(folder, generations: dict[str, str], log_end: int) -> None:
    durable.write_json(folder / COPY_NOTE, {"generations": generations, "logEnd": log_end})


def note_allows(folder, generations: dict[str, str], log_size: int) -> bool:
    """Whether a files log of ``log_size`` bytes in ``folder`` is the one a copy left agreeing with the
    database streams of these generations (it has not grown since)."""
    note = read_note(folder)
    return (note is not None and note.get("generations", {}).get(LOG) == generations.get(LOG)
            and note.get("logEnd") == log_size)


class FilesSide:
    """A files root as a copy's source or target: ``memories/<id>/`` with its log, tree, marks and key."""

    kind = "files"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        durable.guard_root(self.root)
        self.where = f"the files under {self.root}"
        self.directory = FileDirectory(self.root)

    def folder(self, memory_id: str) -> Path:
        return self.root / "memories" / memory_id

    def memory_ids(self) -> list[str]:
        try:
            names = sorted(os.listdir(self.root / "memories"))
        except FileNotFoundError:
            return []
        return [n for n in names if MEMORY_ID.fullmatch(n) and (self.folder(n) / "key.json").exists()]

    def key_record(self, memory_id: str) -> dict | None:
        path = self.folder(memory_id) / "key.json"
        if not path.exists():
            return None
        try:
            return keyfile.read(path, memory_id)
        except MemoryUseError as exc:
            raise CopyRefused(str(exc)) from None

    def _path(self, memory_id: str, stream: str) -> Path:
        record = self.key_record(memory_id) or {}
        granularity = record.get("granularity", "turn")
        if stream == LOG:
            return OrderLog(self.folder(memory_id), granularity).path
        return TreeStore(self.folder(memory_id), granularity).path

    def end(self, memory_id: str, stream: str) -> int:
        """Just past the last newline (a torn last line is not the memory's yet)."""
        path = self._path(memory_id, stream)
        size = file_size(path)
        if size == 0:
            return 0
        with durable.open_read(path) as handle:
            at = size
            while at > 0:
                start = max(0, at - (1 << 16))
                handle.seek(start)
                block = handle.read(at - start)
                cut = block.rfind(b"\n")
                if cut >= 0:
                    return start + cut + 1
                at = start
        return 0

    def resume_at(self, memory_id: str, stream: str) -> int:
        return file_size(self._path(memory_id, stream))

    def read(self, memory_id: str, stream: str, start: int, stop: int) -> Iterator[bytes]:
        if stop <= start:
            return
        with durable.open_read(self._path(memory_id, stream)) as handle:
            handle.seek(start)
            left = stop - start
            while left > 0:
                piece = handle.read(min(left, 1 << 20))
                if not piece:
                    return
                left -= len(piece)
                yield piece

    def make(self, memory_id: str, record: dict) -> None:
        path = self.folder(memory_id) / "key.json"
        if not path.exists():
            keyfile.create(path, record)

    def append(self, memory_id: str, stream: str, at: int, data: bytes) -> None:
        path = self._path(memory_id, stream)
        with ChangeLock(self.folder(memory_id) / "lock"):
            if file_size(path) != at:
                raise CopyRefused(f"memory {memory_id} in {self.where} changed while it was copied into (its "
                                  f"{stream} is {file_size(path)} bytes, not {at}); stop what writes to it and copy "
                                  "again")
            durable.append_lines(path, [data], sync=True)

    def marks(self, memory_id: str) -> dict[str, bytes]:
        folder = self.folder(memory_id) / MARKS
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return {}
        return {name: durable.read_all(folder / name) for name in names if not name.startswith(".")}

    def set_mark(self, memory_id: str, name: str, value: bytes) -> None:
        durable.replace_file(durable.make_dir(self.folder(memory_id) / MARKS) / name, value)

    def aliases(self) -> list[Alias]:
        return self.directory.aliases()

    def add_alias(self, alias: Alias, record: dict | None) -> str:
        return self.directory.add_alias(alias, record)

    def generations(self, memory_id: str) -> dict[str, str]:
        return {}

    def note_copy(self, memory_id: str, generations: dict[str, str], log_end: int) -> None:
        write_note(self.folder(memory_id), generations, log_end)

    def close(self) -> None:
        pass
