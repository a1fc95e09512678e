"""A turn record as the order log stores it: its encoding, its checksum, its checks, its tombstone.

The log (:mod:`endless.core.store.log`) decides where records go and finds
them again; this module says what one is, so an importer preparing records,
the log reading them back and a forget blanking them in place agree on every
byte (DESIGN §2.2, §2.5).
"""

from __future__ import annotations

import time
import zlib

import orjson

from endless import prompts
from endless.core.store.messages import KINDS, Stored


def record_tail(tid: str, session: str, title: str, status: str, at: float, messages: list[dict]) -> bytes:
    """A turn record as the log writes it, all but its place: from its turn id to its end.

    An import encodes its turns once, before it knows where they land
    (:class:`endless.core.store.turns.EncodedTurn`); :func:`placed` completes them.
    """
    return orjson.dumps({"tid": tid, "s": session, "t": title, "st": status, "at": at, "m": messages})[1:]


_TID_AT = len(b'"tid":"')  # where a record tail's turn id starts (record_tail puts it first)
_TID_END = _TID_AT + 16


def tail_tid(tail: bytes) -> str:
    """The turn id of a record tail (an import's ids are 16 hex digits)."""
    return tail[_TID_AT:_TID_END].decode("ascii")


def with_tid(tail: bytes, tid: str) -> bytes:
    """The record tail with another turn id of the same length (a turn counted anew)."""
    return tail[:_TID_AT] + tid.encode("ascii") + tail[_TID_AT + len(tid):]


def placed(turn: int, first: int, tail: bytes) -> bytes:
    """The log line of a record whose tail is ``tail``, sealed with its checksum (the one place lines are made:
    live commits and imports both come here)."""
    body = b'{"turn":%d,"id":%d,' % (turn, first) + tail[:-1]
    return b'%s,"c":"%08x"}\n' % (body, zlib.crc32(body))


_SEAL = b',"c":"'
_SEALED = len(b',"c":"01234567"}')  # the checksum's bytes at a record's end


def sealed(line: bytes) -> bool | None:
    """True: the record's checksum holds; False: it has one and it fails; None: it has none (an older record)."""
    if line[-_SEALED:-_SEALED + len(_SEAL)] != _SEAL or line[-2:] != b'"}':
        return None
    return b"%08x" % zlib.crc32(line[:-_SEALED]) == line[-10:-2]


def reseal(line: bytes) -> bytes | None:
    """The checksum a record line changed in place should carry now (None: it has none)."""
    if line[-_SEALED:-_SEALED + len(_SEAL)] != _SEAL:
        return None
    return b"%08x" % zlib.crc32(line[:-_SEALED])


SEAL_FROM_END = 10  # the checksum's eight digits start this many bytes before a record's end



def stored_from(record: dict, k: int, turn: int) -> Stored:
    m = record["m"][k]
    return Stored(record["id"] + k, m["k"], m["x"], m["at"], record["s"], record["t"],
                  turn, m.get("w"))


_RECORD_KEYS = frozenset(("turn", "id", "tid", "s", "t", "st", "at", "m"))
_MESSAGE_KEYS = frozenset(("k", "x", "at", "w"))
_KIND_SET = frozenset(KINDS)
_NUMBER = (int, float)


def examine(line: bytes, turn: int | None = None) -> tuple[dict | None, str]:
    """The record of a log line and ``""``, or None and why it is damage (in words).

    Every field a reader uses is checked here, once, so no reader meets a
    missing or ill-typed one (``KeyError: 'at'``, a number as a
    text): a record is whole or it is damage.  ``turn``: the line's place, which
    the record must name.
    """
    seal = sealed(line)
    if seal is False:
        return None, "its checksum does not match (its bytes changed after it was written)"
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, "it is not readable JSON"
    why = shape(record, seal, turn)
    return (None, why) if why else (record, "")


def shape(record: object, seal: bool | None, turn: int | None = None) -> str:
    """Why a parsed record is not a whole turn record (``""``: it is); ``seal`` as :func:`sealed` said."""
    if type(record) is not dict:
        return "it is not a turn record"
    if seal is None and not record.keys() <= _RECORD_KEYS:
        return "it has a field no turn record has"
    ident, tid, messages = record.get("id"), record.get("tid"), record.get("m")
    if type(ident) is not int or ident < 0:
        return "its first message id is missing or not a number"
    named = record.get("turn")
    if type(named) is not int:
        return "its turn number is missing or not a number"
    if turn is not None and named != turn:
        return f"it says it is turn {named} (moved or copied from elsewhere in the log)"
    if type(tid) is not str or type(messages) is not list:
        return "its turn id or its messages are missing"
    try:
        int(tid, 16)
    except ValueError:
        return "its turn id is not a hexadecimal number"
    if (type(record.get("s")) is not str or type(record.get("t")) is not str or type(record.get("st")) is not str
            or type(record.get("at")) not in _NUMBER):
        return "its chat, title, status or time is missing or ill-typed"
    kinds, number = _KIND_SET, _NUMBER
    for m in messages:
        if (type(m) is not dict or type(m.get("x")) is not str or m.get("k") not in kinds
                or type(m.get("at")) not in number or ("w" in m and type(m["w"]) is not str)
                or (seal is None and not m.keys() <= _MESSAGE_KEYS)):
            return "a message in it lacks its kind, text or time, or has one of the wrong type"
    return ""


def parse_turn(line: bytes, turn: int | None, first: int | None) -> dict | None:
    record, _ = examine(line, turn)
    if record is None or (first is not None and record["id"] < first):
        return None
    return record


def tombstone(at: float) -> str:
    """What a forgotten message reads as: that it was forgotten and when, never what it said."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
    return prompts.text("forget/tombstone.txt").strip().format(when=when)


def shown(stored: Stored | None, forgotten: dict[int, float]) -> Stored | None:
    """``stored`` as every reader shows it: a forgotten message as its tombstone."""
    if stored is None or stored.id not in forgotten:
        return stored
    return Stored(stored.id, stored.kind, tombstone(forgotten[stored.id]), stored.at, stored.session,
                  stored.title, stored.turn, None)
