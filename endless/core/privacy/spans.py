"""Where a message's words lie in the order log's bytes: what a forget blanks in place.

A forget patches JSON strings where they stand (same length, so no offset
moves); these find them by re-encoding each message of a record and looking
for those bytes in the record's line.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterator

import orjson

from endless.core.privacy.host import Forgettable


def id_at(memory: Forgettable, offset: int) -> int | None:
    """The message whose text's JSON string starts at byte ``offset`` of the log."""
    turn = bisect.bisect_right(memory.log.offsets, offset) - 1
    if turn < 0:
        return None
    for span in message_spans(memory, turn):
        if span.offset <= offset < span.offset + len(span.encoded):
            return span.ident
    return None


@dataclass(frozen=True)
class Span:
    """One message's stored form and where it lies in the log."""

    ident: int  # the message's id
    message: dict  # its stored form
    encoded: bytes  # that form as the log holds it
    offset: int  # where it starts in the log


def message_spans(memory: Forgettable, turn: int) -> Iterator[Span]:
    """Each message of the turn's record with its bytes and place in the log (one already forgotten,
    its text now spaces, no longer matches its re-encoding and is skipped)."""
    base = memory.log.offsets[turn]
    line = memory.log.read_at(base, memory.log.lengths[turn])
    record = orjson.loads(line)
    pos = line.find(b',"m":[')
    for k, m in enumerate(record["m"]):
        enc = orjson.dumps(m)
        found = line.find(enc, pos)
        if found < 0:
            continue
        pos = found + len(enc)
        yield Span(record["id"] + k, m, enc, base + found)
