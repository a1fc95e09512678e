"""Kept messages: those of refused turns, in the memory at once, shown once to the next turn of any chat.

A kept message belongs to the memory, not to the session it was sent in: a
Hermes launch is a new session, so a store per session delivered nothing once
that chat ended.  It is committed at once as a turn with status ``kept`` (an
id, a place in history and search from that moment); ``pending/kept.jsonl``
only says which kept messages no turn has shown the model yet.  The file is
append-only (a kept message, the ids a turn claimed, released or delivered),
so two processes on one memory never lose each other's lines.  A turn claims
the kept messages it shows under the memory's lock, so two chats starting a
turn at the same moment never both show one; a claim whose turn never ended
(its process died) lapses with that process, or after ``KEPT_CLAIM_SECONDS``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import orjson

from endless import prompts
from endless.core.store import durable
from endless.core import moments
from endless.core.privacy import redact
from endless.core.memory import Memory
from endless.core.store import Message
from endless.core.settings import KEPT_CLAIM_SECONDS
from endless.core.store import KEPT

STORE = "kept.jsonl"


@dataclass(frozen=True)
class Kept:
    """A refused turn's message, as the log holds it (``ident``: its message id)."""

    ident: int
    session: str
    title: str
    text: str
    at: float


def _store(memory: Memory) -> Path:
    return memory.folder / "pending" / STORE


def _append(memory: Memory, records: list[dict]) -> None:
    path = _store(memory)
    durable.make_dir(path.parent)
    durable.append_lines(path, [durable.dumps_line(r) for r in records])


def keep(memory: Memory, session: str, title: str, text: str) -> Kept:
    """Commit a refused turn's message as a ``kept`` turn of its chat, and note it as not delivered yet."""
    at = memory.clock()
    text = memory.redacted(Message("user", text, at)).text  # as the log keeps it: secrets redacted
    title = redact.kept_title(memory, title)
    info = memory.commit_turn(session, title, [Message("user", text, at)], KEPT,
                              prompts.text("turn/kept_status.txt").strip())
    kept = Kept(info.first, session, title, text, at)
    _append(memory, [{"id": kept.ident, "s": session, "t": title, "x": text, "at": at}])
    return kept


@dataclass(frozen=True)
class _Claim:
    by: str
    pid: int
    at: float


def _read(memory: Memory) -> tuple[dict[int, Kept], dict[int, _Claim]]:
    """The kept messages not delivered yet, and the claims on them still standing."""
    data, _ = durable.read_complete(_store(memory), 0)
    kept: dict[int, Kept] = {}
    done: set[int] = set()
    claims: dict[int, _Claim] = {}
    for _, line in durable.iter_lines(data, 0):
        try:
            record = orjson.loads(line)
            if "done" in record:
                done.update(int(i) for i in record["done"])
            elif "claim" in record:
                claim = _Claim(str(record["by"]), int(record["pid"]), float(record["at"]))
                claims.update((int(i), claim) for i in record["claim"])
            elif "release" in record:
                for i in record["release"]:
                    if int(i) in claims and claims[int(i)].by == record["by"]:
                        del claims[int(i)]
            else:
                kept[int(record["id"])] = Kept(int(record["id"]), str(record["s"]), str(record.get("t") or ""),
                                               str(record["x"]), float(record["at"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            durable.log("turn", f"skipped a damaged line of {_store(memory)}")
    return {i: k for i, k in kept.items() if i not in done}, claims


def waiting(memory: Memory) -> list[Kept]:
    """Kept messages no turn has delivered yet, oldest first (from every chat of the memory; claimed or not)."""
    kept, _ = _read(memory)
    return [kept[i] for i in sorted(kept)]


def claim(memory: Memory, by: str) -> list[Kept]:
    """The kept messages no other running turn shows, taken for the turn ``by`` (under the memory's lock)."""
    with memory.lock:
        kept, claims = _read(memory)
        now = memory.clock()
        free = [kept[i] for i in sorted(kept) if i not in claims or not _standing(claims[i], now)]
        if free:
            _append(memory, [{"claim": [k.ident for k in free], "by": by, "pid": os.getpid(), "at": now}])
    return free


def release(memory: Memory, kept: Sequence[Kept], by: str) -> None:
    """The turn ``by`` did not show them after all (it was refused): the next turn may."""
    if kept:
        _append(memory, [{"release": [k.ident for k in kept], "by": by}])


def _standing(claim: _Claim, now: float) -> bool:
    if now - claim.at > KEPT_CLAIM_SECONDS:
        return False
    try:
        os.kill(claim.pid, 0)
    except ProcessLookupError:
        return False  # its process is gone: the turn never ended
    except PermissionError:
        pass  # another user's process, alive
    return True


def delivered(memory: Memory, kept: Sequence[Kept]) -> None:
    """The turn that showed these kept messages is committed: no later turn shows them again."""
    if kept:
        _append(memory, [{"done": [k.ident for k in kept]}])


def with_kept(kept: Sequence[Kept], message: str,
              shorten: Callable[[str, int], str] | None = None) -> str:
    """The new message as the model reads it: the kept ones first, each saying where it came from.

    ``shorten(text, id)`` bounds each kept text when they would not fit whole
    (a long paste kept because it filled the window must not refuse every later turn).
    """
    if not kept:
        return message
    form = prompts.text("turn/kept.txt").strip()
    notes = [form.format(id=k.ident, title=k.title or "untitled chat", when=moments.local(k.at),
                         text=k.text if shorten is None else shorten(k.text, k.ident)) for k in kept]
    return "\n\n".join([*notes, message])


def adopt_per_session(memory: Memory) -> int:
    """Messages an older Endless kept per session (``pending/<session>.jsonl``) become kept turns, once."""
    folder = memory.folder / "pending"
    if not folder.is_dir():
        return 0
    adopted = 0
    for path in sorted(folder.glob("*.jsonl")):
        if path.name == STORE:
            continue
        data, _ = durable.read_complete(path, 0)
        for _, line in durable.iter_lines(data, 0):
            try:
                record = orjson.loads(line)
                keep(memory, str(record["s"]), "", str(record["x"]))
                adopted += 1
            except (orjson.JSONDecodeError, KeyError, TypeError):
                durable.log("turn", f"skipped a damaged line of {path}")
        path.unlink(missing_ok=True)
    return adopted
