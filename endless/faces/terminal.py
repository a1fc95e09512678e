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

CONTINUATION = "    "  # before each later line of a multi-line entry in a listing

# Characters a terminal acts on or hides, written visibly: C0 controls but tab and newline, DEL and
# the C1 controls (CSI, OSC, NEL...), the line and paragraph separators, lone surrogates (which would
# not encode), and the Unicode format controls (category Cf: bidi embeddings, overrides, isolates and
# marks, zero-width spaces, the BOM, invisible tag characters), except the zero-width joiner and
# non-joiner, which emoji and several scripts need.  ``test_terminal`` holds the list to Cf.
_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
           "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
           "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_HIDDEN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + _FORMAT
_CONTROL = re.compile(f"[{_HIDDEN}]")
_CONTROL_OR_NEWLINE = re.compile(f"[{_HIDDEN}\n]")  # one_line: the newline too
_NEWLINE = re.compile(r"\r\n|\n")
_SHORT = {"\n": "\\n", "\r": "\\r"}


def visible(char: str) -> str:
    """One character in the escaped form Python writes it: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


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
