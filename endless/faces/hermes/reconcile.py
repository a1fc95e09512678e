"""Turns Hermes stored that never reached the memory: found at the next turn, committed once as interrupted.

Endless journals a turn from its first request on, so API errors and
interrupts after that are closed by the plugin (same process) or by the
memory's orphan recovery (next process).  What is left is a turn whose
person message Hermes saved in its session store but whose first request
never went through Endless: Hermes died or was killed before it (during the
settle wait, say).  At the next turn, ``pre_llm_call`` hands over the
session's history as Hermes loaded it; every message of the person after the
last one the memory holds for this session (other than the current one, the
refused ones (in the memory already, as kept turns), the ones sent while Endless was
off and Hermes's own interrupt texts, :mod:`endless.faces.hermes.host_texts`) is
committed as its own ``interrupted`` turn.  A session with no turn in the memory
at all (its first message was lost: Hermes interrupted it before its first
request, or died then) has every such message missed, not none.  Identity is the
text and its place after the last known message, so a message is reconciled
once: after that it is the last known one.
"""

from __future__ import annotations

from typing import Iterable

from endless.core.store import sessions
from endless.faces.hermes.host_texts import without_host_texts
from endless.faces.hermes.transcripts import TRANSCRIPT_NOTE
from endless.faces.hermes.wire import content_text
from endless.core.memory import Memory

LOOKBACK_TURNS = 400  # how far back to look for the session's last turn in a shared memory
NOTE = "Endless did not see this turn's requests; only the person's message is kept."
NOTHING_KNOWN = ""  # last_known_text of a session with no turn in the memory: every message is new


def last_known_text(memory: Memory, session: str) -> str | None:
    """The person's words of this session's newest turn in the memory.

    ``NOTHING_KNOWN`` when the memory has no turn of the session at all (the
    session index says so, ``sessions.note_turns`` at every first commit), so
    all of its messages are new; None when it has turns but none within
    ``LOOKBACK_TURNS`` (then nothing can be told apart, and nothing is
    reconciled rather than everything twice).
    """
    for n in range(memory.turns - 1, max(-1, memory.turns - 1 - LOOKBACK_TURNS), -1):
        info = memory.turn(n)
        if info is not None and info.session == session:
            text = "".join(m.text for m in memory.turn_messages(n) if m.kind == "user")
            if text:  # the later parts of a long turn hold no message of the person
                return text
    record = sessions.lookup(memory.root, session)
    if record is None or not record.has_turns or record.memory_id != memory.memory_id:
        if memory.turns <= LOOKBACK_TURNS or not _has_turn_of(memory, session):
            return NOTHING_KNOWN
    return None


def _has_turn_of(memory: Memory, session: str) -> bool:
    """Whether any turn of the memory, beyond the lookback too, is the session's (a memory the index missed)."""
    return any((info := memory.turn(n)) is not None and info.session == session for n in range(memory.turns))


def _recent_people(memory: Memory) -> list[str]:
    """The person's messages of the memory's last turns, any session's.

    A session new to the memory can still carry messages it holds: Hermes's
    ``/branch`` starts a new session id on a copy of the parent's history.
    """
    return [m.text for n in range(max(0, memory.turns - LOOKBACK_TURNS), memory.turns)
            for m in memory.turn_messages(n) if m.kind == "user"]


def missed(history: list[dict], current: str, known: str | None, skip: Iterable[str]) -> list[str]:
    """Person messages in ``history`` after the last one ``known`` holds, except ``current`` and ``skip``.

    ``known`` is ``NOTHING_KNOWN`` for a session with no turn in the memory
    (every message is after it) and None when the session's last turn could
    not be found (none is).
    """
    if known is None:
        return []
    people = [content_text(m.get("content")).strip() for m in history
              if isinstance(m, dict) and m.get("role") == "user"]
    if people and people[-1] == current.strip():
        people = people[:-1]
    people = [without_host_texts(text) for text in people]
    last = -1
    for index, text in enumerate(people):
        if text and known and text in known:
            last = index
    if last < 0 and known != NOTHING_KNOWN:
        return []  # the memory's last message is not in Hermes's history (compacted): nothing to say
    skipped = {s.strip() for s in skip} | {TRANSCRIPT_NOTE}
    return [text for text in people[last + 1:] if text and text not in skipped]


def reconcile(memory: Memory, session: str, title: str, history: list[dict], current: str,
              skip: Iterable[str]) -> int:
    """Commit each missed message as an interrupted turn; returns how many (runs on the loop thread)."""
    from endless.turn.pending import waiting

    memory.catch_up()
    known = last_known_text(memory, session)
    held = _recent_people(memory) if known == NOTHING_KNOWN else []
    texts = missed(history, current, known, [*skip, *held,
                                             *(k.text for k in waiting(memory) if k.session == session)])
    for text in texts:
        journal = memory.journal(session, title)
        journal.add("user", text)
        journal.commit("interrupted", NOTE)
    return len(texts)
