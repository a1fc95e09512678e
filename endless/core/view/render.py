"""How the memory's text looks to a model: view lines and recent-block lines (DESIGN §2.4, §4).

One place for the rendering rules, so that the turn's head, the writer's
context, the look-back tools and the faces all show the same bytes for the
same line, and a size counted for the sawtooth is the size that is sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Protocol

from endless.core.store import utf8_size
from endless.core.view import tiling
from endless.core.settings import FRAME_TAGS, STATE_MARKER, TASK_MARKER
from endless.core.view.tiling import Part

if TYPE_CHECKING:
    from endless.core.settings import Settings
    from endless.core.store import Stored


class MessageSource(Protocol):
    """What the recent block is read from (``Memory`` is one)."""

    settings: "Settings"
    agent_name: str

    @property
    def total(self) -> int: ...

    def message(self, message_id: int) -> "Stored | None": ...

DAMAGED_NOTE = "note: (this message is damaged in the log)"

# Blanks a model may read past inside a tag: whitespace, zero-width characters, the soft hyphen.
_BLANKS = r"[\s\u00ad\u200b-\u200d\u2060\ufeff]*"
# The opening bracket of anything that reads as one of our tags, in any case, with blanks, a slash,
# attributes or no closing bracket at all (``</ CHAT >``, ``<job id=9``), also in full-width forms.
_TAG_BRACKET = re.compile(rf"[<\uff1c\ufe64](?={_BLANKS}/?{_BLANKS}(?:{'|'.join(FRAME_TAGS)})(?![\w-]))", re.I)
_LESS_THAN = "&lt;"
_STATE_WORD = STATE_MARKER.strip("[:").strip()
_TASK_WORD = TASK_MARKER.rstrip(":")
# What only Endless puts at the start of a line of the view message: a line's ``id+n|`` head (the
# recent block's messages and notes), the per-turn state and the writer task's marker.
_LINE_START = re.compile(
    rf"(?<=[\n\r])([ \t]*)(?:(\d+[ \t]*\+[ \t]*\d+[ \t]*)\||\[(?=[ \t]*{_STATE_WORD}[ \t]*:)"
    rf"|({_TASK_WORD}[ \t]*):)", re.I)


# Characters a reader cannot see or that act on their reader, rendered in a visible escaped form
# (``\x1b``, ``\u202e``): the C0 controls but tab, newline and carriage return, DEL and the C1
# controls, the line and paragraph separators, lone surrogates, and Unicode's format controls
# (category Cf: bidi embeddings, overrides, isolates and marks, zero-width spaces, the BOM, the
# invisible tag characters) but the zero-width joiner and non-joiner, which emoji and several
# scripts need.  The terminal faces show the same characters the same way (endless.faces.kit.terminal,
# which also writes carriage returns visibly); tests/faces/test_terminal.py holds the list to Cf.
HIDDEN_RANGES = ((0x00, 0x08), (0x0b, 0x0c), (0x0e, 0x1f), (0x7f, 0x9f), (0xad, 0xad), (0x600, 0x605),
                 (0x61c, 0x61c), (0x6dd, 0x6dd), (0x70f, 0x70f), (0x890, 0x891), (0x8e2, 0x8e2),
                 (0x180e, 0x180e), (0x200b, 0x200b), (0x200e, 0x200f), (0x2028, 0x202e), (0x2060, 0x2064),
                 (0x2066, 0x206f), (0xd800, 0xdfff), (0xfeff, 0xfeff), (0xfff9, 0xfffb), (0x110bd, 0x110bd),
                 (0x110cd, 0x110cd), (0x13430, 0x1343f), (0x1bca0, 0x1bca3), (0x1d173, 0x1d17a),
                 (0xe0001, 0xe0001), (0xe0020, 0xe007f))
HIDDEN = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in HIDDEN_RANGES)  # a regex class
_HIDDEN = re.compile(f"[{HIDDEN}]")
_SHORT = {"\n": "\\n", "\r": "\\r"}


def visible(char: str) -> str:
    """One character in the escaped form Python writes it: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _visible(match: re.Match) -> str:
    return visible(match.group(0))


def controls_shown(text: str) -> str:
    """``text`` with every :data:`HIDDEN` character in its visible form (tabs and line breaks kept)."""
    return text if text.isprintable() else _HIDDEN.sub(_visible, text)


def _controls_growth(text: str) -> int:
    """Bytes :func:`controls_shown` adds to ``text`` (0 for nearly every text, found without a scan)."""
    if text.isprintable():
        return 0
    return sum(len(visible(c)) - len(c.encode("utf-8", "surrogatepass")) for c in _HIDDEN.findall(text))


def _line_start(match: re.Match) -> str:
    blanks, line_head, task = match.group(1), match.group(2), match.group(3)
    if line_head is not None:
        return f"{blanks}{line_head}&#124;"
    if task is not None:
        return f"{blanks}{task}&#58;"
    return f"{blanks}&#91;"


def neutralise(text: str) -> str:
    """Memory text as it may stand inside the frames Endless builds (DESIGN §4).

    A message, or a line a model wrote, may hold ``</chat>``, a fake
    ``12+0|you:`` line or a fake ``[now: …]`` state: unescaped, it would end
    the view early and pose as the person or as Endless (prompt injection).
    So the bracket of anything reading as one of our tags becomes ``&lt;``,
    and at the start of a line a head's ``|``, the state's ``[`` and the task
    marker's ``:`` become character references.  Only these change, so
    ordinary ``<div>`` or ``a < b`` stay as written; the same text always
    gives the same bytes (the prompt cache depends on it) and neutralising
    twice changes nothing.  The stored text is never changed: ``zoom(id, 1)``
    answers it word for word.

    Last, controls and invisible format characters (:data:`HIDDEN`) are
    written in a visible escaped form, ``\\x1b`` for ESC: the model is no
    terminal, but such bytes in a request are junk to it, and a bidi override
    or an invisible tag character shows a person one text and the model
    another.  Tags are looked for first, so a zero-width space inside one
    (``<\u200b/chat>``) is still a blank there.
    """
    if "<" in text or "\uff1c" in text or "\ufe64" in text:
        text = _TAG_BRACKET.sub(_LESS_THAN, text)
    if "\n" in text or "\r" in text:
        text = _LINE_START.sub(_line_start, text)
    return controls_shown(text)


def _neutralised_growth(text: str) -> int:
    """Bytes :func:`neutralise` adds to a folded line (tags and controls count: it has no line starts).

    A text's line breaks fold to spaces of the same size and ``\\r\\n`` to one
    (counted apart), so the controls are counted on the text as stored."""
    growth = _controls_growth(text) if not text.isprintable() else 0
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:
        return growth
    return growth + sum(len(_LESS_THAN) - len(m.group(0).encode("utf-8")) for m in _TAG_BRACKET.finditer(text))


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
    Folding keeps every tag :func:`neutralise` escapes (blanks stay blanks),
    so its growth is counted on the text as stored.
    """
    return _sized(len(line_head), text, utf8_size(text))


def part_line_sizes(parts: Iterable[Part], texts: Iterable[str], text_bytes: Iterable[int]) -> Iterator[int]:
    """:func:`line_size` of each part's line when its text's utf-8 bytes are known: the head
    (``first+count|``) counted, not formatted (a long import sizes two million lines)."""
    for (level, index), text, size in zip(parts, texts, text_bytes):
        # _sized, inline: the head, the text less a byte per folded CRLF, any tags neutralised, the newline
        yield (len(str(index << level)) + len(str(1 << level)) + 3 + size - text.count("\r\n")
               + (_neutralised_growth(text) if "<" in text or "\uff1c" in text or "\ufe64" in text
                  or not text.isprintable() else 0))


def _sized(head_bytes: int, text: str, text_bytes: int) -> int:
    return head_bytes + text_bytes - text.count("\r\n") + _neutralised_growth(text) + 1


@dataclass(frozen=True)
class ViewLine:
    """One part of a view with its text (None while the line is not written)."""

    part: Part
    text: str | None

    @property
    def name(self) -> str:
        return tiling.name(self.part)

    def render(self) -> str:
        return f"{self.name}|{neutralise(fold(self.text or ''))}"


def chat_block(lines: list[ViewLine]) -> str:
    """``<chat>`` … ``</chat>`` around rendered view lines."""
    body = "".join(line.render() + "\n" for line in lines)
    return f"<chat>\n{body}</chat>"


def state_line(moment: str) -> str:
    """The per-turn state after the recent block: ``[now: …]`` (its opening is neutralised in memory text)."""
    return f"{STATE_MARKER} {moment}]"


def recent_line(memory: MessageSource, message_id: int) -> str:
    """Message ``message_id`` as the recent block shows it: ``id+0|tag: text``."""
    stored = memory.message(message_id)
    if stored is None:
        return f"{message_id}+0|{DAMAGED_NOTE}"
    return f"{message_id}+0|{neutralise(stored.source_text(memory.settings, memory.agent_name))}"


def recent_block(memory: MessageSource, start: int) -> str:
    """Messages ``[start, T)`` as ``id+0|tag: text`` lines, oldest first."""
    return "\n".join(recent_line(memory, m) for m in range(start, memory.total))
