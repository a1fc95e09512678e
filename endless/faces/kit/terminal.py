"""Stored text as it may reach a terminal: the one output filter of every terminal face.

Messages, titles, summary lines and snippets are written by people, models,
tools and imported files, so they may hold anything: ``ESC [2J`` clears the
screen, ``ESC ]52;c;…BEL`` overwrites the clipboard of terminals that allow
it, a carriage return or backspaces overwrite what was printed, a bidi
override (U+202E) shows text in another order than it is stored, and a
newline inside a message would start a line of its own that reads as one of
the listing's (``99+1|…`` in ``endless history``).

Every face that prints stored text on a terminal (the CLI read commands,
``forget``, ``import --dry-run``, ``chat``, ``doctor``, ``/endless …`` in
Hermes and ``hermes endless …``) passes it through here:

- :func:`shown` keeps line breaks and tabs and writes every other control in
  a visible escaped form (``\\x1b``, ``\\u202e``), as Python writes it;
- :func:`one_line` also writes line breaks visibly: for a title or a
  snippet, which must stay on its line;
- :func:`entry` keeps a long text's line breaks readable, with every line
  after the first indented by :data:`CONTINUATION`, so no line of the text
  can start where the listing's own lines start.

Only what is printed changes: the log keeps every text word for word, and
``--json`` prints it as stored (JSON writes controls as ``\\u001b``).
"""

from __future__ import annotations

import re

from endless.core.view import render

CONTINUATION = "    "  # before each later line of a multi-line entry in a listing

# What a terminal acts on or hides: the characters the model's view shows escaped
# (endless.core.view.render.HIDDEN: C0 and C1 controls, separators, bidi and other format controls),
# and the carriage return, which on a terminal overwrites the line.
_CONTROL = re.compile(f"[{render.HIDDEN}\r]")
_CONTROL_OR_NEWLINE = re.compile(f"[{render.HIDDEN}\r\n]")  # one_line: the newline too
_NEWLINE = re.compile(r"\n")
visible = render.visible


def _visible(match: re.Match) -> str:
    return visible(match.group(0))


def _text(value: object) -> str:
    return value if isinstance(value, str) else str(value)  # a damaged record may hold a number or null


def shown(text: object) -> str:
    """``text`` safe for a terminal: line breaks (``\\n``, ``\\r\\n``) and tabs kept, other controls visible."""
    text = _text(text)
    if text.isprintable():  # nearly every text: nothing to do
        return text
    return _CONTROL.sub(_visible, text.replace("\r\n", "\n"))


def one_line(text: object) -> str:
    """``text`` on one terminal line: every control visible, line breaks as ``\\n``."""
    text = _text(text)
    if text.isprintable():
        return text
    return _CONTROL_OR_NEWLINE.sub(_visible, text)


def entry(text: object) -> str:
    """``text`` as one entry of a listing: controls visible, each line after the first indented."""
    text = _text(text)
    return text if text.isprintable() else _NEWLINE.sub("\n" + CONTINUATION, shown(text))


def title(text: object) -> str:
    """A chat's title as listings show it, ``«…»``, or nothing while the chat has none."""
    return f"«{one_line(text)}»" if text else ""
