"""A turn on its way into the order log (DESIGN §2.2): the record committed in one write,
and the journalled turn whose messages are fsynced as they happen.

Turns are atomic: nothing reaches the log until the turn ends, and a journal
left behind by a dead process is closed as ``interrupted`` by the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from endless.core import durable, journal
from endless.core.journal import Journal
from endless.core.log import TurnInfo
from endless.core.messages import Message, check_kind, prepare

if TYPE_CHECKING:
    from endless.core.memory import Memory

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

    ``tail`` is the record from its turn id on (:func:`endless.core.log.record_tail`),
    ``record`` the same decoded, its messages already as the memory keeps
    them (redacted); ``redacted`` counts the secrets replaced in them.  The
    commit writes the tail after the turn's place instead of encoding the
    turn again.
    """

    tail: bytes
    record: dict
    redacted: dict[str, int] | None = None


class TurnInProgress:
    """A turn being logged: messages go to the journal at once, the order log at the end."""

    def __init__(self, memory: "Memory", journal: Journal, since: int | None = None) -> None:
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



def close_orphans(memory: "Memory") -> None:
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
