"""Which turns a memory already holds, decided under its lock, so no turn is logged twice.

A turn's identity is its session and the kind and whole text of its first
message; the same words said again in one session are told apart by how
many turns of that session began with them before (the occurrence).  An
import plans its new turns from a count of identities read before it takes
the lock, so another import of the same source, or the Hermes plugin
committing the same turn live, may land in between.  :class:`Presence`
keeps that count and brings it up to date under the lock, at each commit,
from the turns appended since it last looked and from the turns in flight
(journals not committed yet): what decides "already there?" is the log as
it is when the turn is written.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import add, itemgetter, le
from typing import TYPE_CHECKING, Iterable, Sequence

from endless.core.store import journal

if TYPE_CHECKING:
    from endless.core.store.contract import MemoryHost
    from endless.core.store.turns import TurnRecord


def identity(session: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{session}\0{kind}\0{text}".encode("utf-8")).hexdigest()[:32]


def identity_key(base: str) -> int:
    """A turn identity as a 64-bit number: what the counters keep, a tenth of the text's memory."""
    return int(base[:16], 16)


def messages_identity(session: str, messages: Sequence[dict]) -> str | None:
    """The identity of a turn whose messages are ``{"k", "x"}`` records (a logged turn, a journal)."""
    if not messages:
        return None
    kind = messages[0]["k"]
    text = []
    for m in messages:  # a very long message is logged as consecutive parts: join them back
        if m["k"] != kind:
            break
        text.append(m["x"])
        if kind != "user":
            break
    return identity(session, kind, "".join(text))


def record_identity(record: dict) -> str | None:
    """A logged turn's identity: its session and its first message's kind and whole text."""
    return messages_identity(record["s"], record.get("m") or [])


@dataclass
class Presence:
    """How many turns begin with each identity, for the log's first ``scanned`` turns."""

    counts: Counter = field(default_factory=Counter)
    scanned: int = 0
    _admitted: tuple = field(default_factory=lambda: (None, []), repr=False)  # (turn count, keys) of the last admit

    @classmethod
    def of(cls, memory: "MemoryHost") -> "Presence":
        """Every turn the memory holds (one read of each record)."""
        presence = cls()
        presence.refresh(memory)
        return presence

    def refresh(self, memory: "MemoryHost") -> None:
        """Count the turns appended since the last look (under the lock, caught up, for a commit)."""
        for turn in range(self.scanned, memory.turns):
            record = memory.log.read_record(turn)
            if record is not None and (ident := record_identity(record)) is not None:
                self.counts[identity_key(ident)] += 1
        self.scanned = max(self.scanned, memory.turns)

    def in_flight(self, memory: "MemoryHost") -> Counter:
        """Identities of turns journalled and not committed (a live chat's turn, a dead process's)."""
        found: Counter = Counter()
        base = journal.journal_dir(memory.folder)
        if not base.is_dir():
            return found
        for path in sorted(base.glob("*.jsonl")):
            pending = journal.read(path)
            if pending is None or not pending.messages or (pending.tid and memory.log.has_tid(pending.tid)):
                continue
            ident = messages_identity(pending.session, [m.to_record() for m in pending.messages])
            if ident is not None:
                found[identity_key(ident)] += 1
        return found

    def admit(self, memory: "MemoryHost", planned: Iterable[tuple["TurnRecord", int, int]]) -> list["TurnRecord"]:
        """The planned ``(record, identity key, occurrence)`` turns that are not there yet (under the lock)."""
        self.refresh(memory)
        flying = self.in_flight(memory)
        planned = list(planned)
        keys = list(map(itemgetter(1), planned))
        # Compared a batch at a time with ``map`` (an import admits half a million turns); ``get``, as a
        # Counter's ``__missing__`` is Python.
        there = map(self.counts.get, keys, repeat(0))
        if flying:
            there = map(add, there, map(flying.get, keys, repeat(0)))
        new = list(map(le, there, map(itemgetter(2), planned)))
        if all(new):
            self._admitted = (memory.turns, keys)
            return list(map(itemgetter(0), planned))
        self._admitted = (memory.turns, list(compress(keys, new)))
        return [record for record, _, _ in compress(planned, new)]

    def committed(self, infos: Sequence, asked_again: set[int] | None = None) -> None:
        """Count what the last :meth:`admit` let through as logged, if it landed as admitted (no read back).

        ``asked_again``: the only identities a later admit may ask after (an import's repeated ones); the
        others' counts would never be read.
        """
        at, keys = self._admitted
        if infos and infos[0].turn == at == self.scanned and len(infos) == len(keys):
            self.counts.update(keys if asked_again is None else filter(asked_again.__contains__, keys))
            self.scanned = infos[-1].turn + 1
        self._admitted = (None, [])


def imported_copy(memory: "MemoryHost", session: str, messages: Sequence[dict], since: int) -> set[tuple[str, str]]:
    """Under the lock: the ``(kind, text)`` of a live turn's messages another process logged after turn ``since``.

    A live turn is journalled from its first request and committed when it
    ends; an import of Hermes's ``state.db`` running meanwhile may already
    have logged the same turn (same session, same first message), as far as
    Hermes had stored it.  Those messages are not logged twice: the live
    commit keeps only the others.
    """
    ident = messages_identity(session, messages)
    held: set[tuple[str, str]] = set()
    if ident is None:
        return held
    for turn in range(since, memory.turns):
        record = memory.log.read_record(turn)
        if record is not None and record.get("s") == session and record_identity(record) == ident:
            held.update((m["k"], m["x"]) for m in record["m"])
    return held
