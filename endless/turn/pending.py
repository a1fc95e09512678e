"""The pending store: messages of refused turns, kept and delivered once, with the next one."""

from __future__ import annotations

from pathlib import Path

import orjson

from endless.core import durable
from endless.core.keys import session_file_name
from endless.core.memory import Memory
from endless.core.messages import Message


def _pending_path(memory: Memory, session: str) -> Path:
    return memory.folder / "pending" / f"{session_file_name(session)}.jsonl"


def keep_pending(memory: Memory, session: str, text: str, at: float) -> None:
    path = _pending_path(memory, session)
    durable.make_dir(path.parent)
    text = memory.kept(Message("user", text, at)).text  # kept as the log would keep it: secrets redacted
    durable.append_lines(path, [durable.dumps_line({"s": session, "x": text, "at": at})])


def pending(memory: Memory, session: str) -> list[str]:
    data, _ = durable.read_complete(_pending_path(memory, session), 0)
    out = []
    for _, line in durable.iter_lines(data, 0):
        try:
            out.append(orjson.loads(line)["x"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            durable.log("turn", f"skipped a damaged line of {_pending_path(memory, session).name}")
    return out


def drop_pending(memory: Memory, session: str) -> None:
    try:
        _pending_path(memory, session).unlink()
    except FileNotFoundError:
        pass
