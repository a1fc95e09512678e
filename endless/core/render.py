"""How the memory's text looks to a model: view lines and recent-block lines (DESIGN §2.4, §4).

One place for the rendering rules, so that the turn's head, the writer's
context, the look-back tools and the faces all show the same bytes for the
same line, and a size counted for the sawtooth is the size that is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from endless.core import tiling
from endless.core.tiling import Part

if TYPE_CHECKING:
    from endless.core.memory import Memory

DAMAGED_NOTE = "note: (this message is damaged in the log)"


def fold(text: str) -> str:
    """A node's text as one view line: line breaks become spaces (same byte count for ``\\n``)."""
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def head(part: Part) -> str:
    """``id+n|``: what every view line starts with."""
    return f"{tiling.name(part)}|"


def line_size(line_head: str, text: str) -> int:
    """Bytes of the rendered line ``head + text`` with its newline.

    Counted without folding: only ``\r\n`` folds to fewer bytes (one space
    for two), so a long import sizes its lines without copying each text.
    """
    return len(line_head) + len(text.encode("utf-8")) - text.count("\r\n") + 1


@dataclass(frozen=True)
class ViewLine:
    """One part of a view with its text (None while the line is not written)."""

    part: Part
    text: str | None

    @property
    def name(self) -> str:
        return tiling.name(self.part)

    def render(self) -> str:
        return f"{self.name}|{fold(self.text or '')}"


def chat_block(lines: list[ViewLine]) -> str:
    """``<chat>`` … ``</chat>`` around rendered view lines."""
    body = "".join(line.render() + "\n" for line in lines)
    return f"<chat>\n{body}</chat>"


def recent_line(memory: "Memory", message_id: int) -> str:
    """Message ``message_id`` as the recent block shows it: ``id+0|tag: text``."""
    stored = memory.message(message_id)
    if stored is None:
        return f"{message_id}+0|{DAMAGED_NOTE}"
    return f"{message_id}+0|{stored.source_text(memory.settings, memory.agent_name)}"


def recent_block(memory: "Memory", start: int) -> str:
    """Messages ``[start, T)`` as ``id+0|tag: text`` lines, oldest first."""
    return "\n".join(recent_line(memory, m) for m in range(start, memory.total))
