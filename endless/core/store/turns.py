"""A turn on its way into the order log (DESIGN §2.2): the record committed in one write,
and the journalled turn whose messages are fsynced as they happen.

Turns are atomic: nothing reaches the log until the turn ends, and a journal
left behind by a dead process is closed as ``interrupted`` by the next one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Sequence

import orjson

from endless.core.store import durable, journal
from endless.core.store.journal import Journal
from endless.core.store.log import TurnInfo
from endless.core.store.records import placed, tail_tid
from endless.core.store.messages import KINDS, STEP_KINDS, TURN_KINDS, Message, check_kind, prepare

if TYPE_CHECKING:
    from endless.core.store.contract import MemoryHost

COMPLETED, STOPPED, INTERRUPTED, CONTINUED = "completed", "stopped", "interrupted", "continued"
KEPT = "kept"  # a refused turn's message, kept for the next turn of any chat (endless.turn.pending)
STATUSES = (COMPLETED, STOPPED, INTERRUPTED, CONTINUED, KEPT)  # continued: a long turn's earlier part
INTERRUPTED_NOTE = "This turn was interrupted before it finished (the process ended); what is above is all that happened."
STOPPED_NOTE = "The person stopped this turn before it finished; what is above is all that happened."


@dataclass(frozen=True)
class TurnRecord:
    """One whole turn to commit: its chat, its messages, how it ended.

    ``at`` is the turn's time (an import keeps the original one); None: now.
    ``since``: a live turn's first turn number to look at for a copy an
    import logged while it ran.
    A turn that did not complete gets a closing ``status`` message, ``status_text``
    or the standard note.
    """

    session: str
    title: str
    messages: Sequence[Message]
    status: str = COMPLETED
    status_text: str | None = None
    tid: str | None = None
    at: float | None = None
    since: int | None = None  # a live turn: the log's turn count when it began (see identity.imported_copy)

    def closing_note(self) -> str | None:
        if self.status in (COMPLETED, CONTINUED):
            return None
        return self.status_text or (STOPPED_NOTE if self.status == STOPPED else INTERRUPTED_NOTE)


@dataclass(slots=True)
class EncodedTurn:
    """A completed turn encoded for the log but for its place: an import's turn, read from its spill.

    ``tail`` is the record from its turn id on (:func:`endless.core.store.records.record_tail`),
    its messages already as the memory keeps them (redacted); the commit
    writes it after the turn's place instead of encoding the turn again.
    What the commit needs besides comes with it, so that a long import never
    decodes its turns again: per message its kind (an index into ``KINDS``),
    the bytes of its writer source in UTF-8 without the tag, and that source
    as the inside of a JSON string (``b""`` when it is longer than the line
    budget, so never a free leaf).  A free line is then put together from
    bytes (:func:`endless.core.view.free_nodes.free_encoded`).  ``redacted`` counts
    the secrets replaced in it.
    """

    tail: bytes
    session: str
    title: str
    at: float
    kinds: list[int]
    sizes: list[int]
    sources: list[bytes]
    redacted: dict[str, int] | None = None


class Placed(NamedTuple):
    """Encoded turns at their places in the log (:func:`place_encoded`)."""

    lines: list[bytes]
    infos: list[TurnInfo]
    turns: list[EncodedTurn]  # those that log a message, in order
    redacted: Counter  # the secrets replaced in them, by kind


def place_encoded(turns: Sequence[EncodedTurn], first: int, turn_no: int, granularity: str) -> Placed:
    """An import's encoded turns placed from message ``first`` and turn ``turn_no`` on (the log's ends)."""
    lines: list[bytes] = []
    infos: list[TurnInfo] = []
    kept: list[EncodedTurn] = []
    redacted: Counter = Counter()
    logged = TURN_KINDS if granularity == "turn" else STEP_KINDS
    allowed = bytes(code for code, kind in enumerate(KINDS) if kind in logged)
    for turn in turns:
        count = len(turn.kinds)
        if not count:
            continue
        if bytes(turn.kinds).translate(None, allowed):  # a kind this granularity does not log: say which
            for code in turn.kinds:
                check_kind(KINDS[code] if 0 <= code < len(KINDS) else str(code), granularity)
        if turn.redacted:
            redacted.update(turn.redacted)
        lines.append(placed(turn_no, first, turn.tail))
        infos.append(TurnInfo(turn_no, first, count, turn.session, turn.title, COMPLETED, turn.at,
                              tail_tid(turn.tail)))
        kept.append(turn)
        first += count
        turn_no += 1
    return Placed(lines, infos, kept, redacted)


def decoded(turns: Sequence[EncodedTurn], infos: Sequence[TurnInfo]) -> dict[int, Message]:
    """The messages of placed encoded turns by id (decoded only for an index fed in the same process)."""
    in_hand: dict[int, Message] = {}
    for turn, info in zip(turns, infos):
        for k, record in enumerate(orjson.loads(b"{" + turn.tail)["m"], info.first):
            in_hand[k] = Message.from_record(record)
    return in_hand


class TurnInProgress:
    """A turn being logged: messages go to the journal at once, the order log at the end."""

    def __init__(self, memory: "MemoryHost", journal: Journal, since: int | None = None) -> None:
        self.memory = memory
        self.journal = journal
        if since is None:
            memory.catch_up()
            since = memory.turns
        self.since = since  # a copy of this turn logged after this is an import's (identity.imported_copy)

    def add(self, kind: str, text: str, at: float | None = None,
            writer_text: str | None = None, sync: bool = True) -> list[Message]:
        check_kind(kind, self.memory.granularity)
        at = self.memory.clock() if at is None else at
        messages = prepare(kind, text, at, self.memory.settings, writer_text)
        self.add_messages(messages, sync)
        return messages

    def add_messages(self, messages: list[Message], sync: bool = True) -> None:
        for m in messages:
            check_kind(m.kind, self.memory.granularity)
        if messages and not self.journal.started:
            # A journalled turn ends up in this memory even if the process dies: note it first.
            self.memory.note_session(self.journal.session)
        self.journal.add(messages, sync)

    @property
    def messages(self) -> list[Message]:
        return list(self.journal.messages)

    def commit(self, status: str = COMPLETED, status_text: str | None = None,
               sync: bool = True) -> TurnInfo | None:
        """Commit what the journal holds with ``status``; None if the turn logged nothing."""
        if not self.journal.started:
            return None
        info = self.memory.commit_turn(self.journal.session, self.journal.title,
                                       self.journal.messages, status, status_text,
                                       tid=self.journal.tid, sync=sync, since=self.since)
        self.journal.finish()
        return info



def close_orphans(memory: "MemoryHost") -> None:
    """Close journals of dead processes as interrupted turns (under the memory's lock, at open)."""
    for path, beacon in journal.orphans(memory.folder):
        try:
            pending = journal.read(path)
            if pending is None:
                continue
            if pending.tid and memory.log.has_tid(pending.tid):
                memory.report(f"removed the journal of turn {pending.tid}, already committed")
            elif pending.messages:
                memory.commit_turn(pending.session, pending.title, pending.messages, INTERRUPTED,
                                   tid=pending.tid)
                memory.report(f"closed an unfinished turn of session {pending.session!r} "
                                      f"({len(pending.messages)} messages) as interrupted")
            for p in (path, path.with_suffix(".alive")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
            durable.fsync_dir(path.parent)
        finally:
            beacon.release()
