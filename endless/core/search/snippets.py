"""A hit's snippet: the words around a match, cut at word boundaries, with the match marked.

Every face shows the same snippet for the same hit (the tool's text, the CLI,
the History page), so it is cut in one place.
"""

from __future__ import annotations

SNIPPET = 80  # characters a snippet shows around its match


def snippet(text: str, pos: int, width: int = SNIPPET) -> str:
    start = max(0, pos - width)
    stop = min(len(text), pos + width)
    piece = " ".join(text[start:stop].split())
    return ("…" if start > 0 else "") + piece + ("…" if stop < len(text) else "")


def snippet_marked(text: str, spans: list[tuple[int, int]], width: int = SNIPPET
                   ) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A window of ``text`` around the first span, whitespace folded, and the spans inside it.

    The spans are character offsets in ``text``; the marks returned are
    offsets in the snippet, so every face can highlight the same way.
    """
    if not spans:
        return snippet(text, 0, width), ()
    first, first_end = spans[0]
    start = max(0, first - width)
    stop = min(len(text), max(first_end, first) + width, first + 4 * width)
    cuts = sorted((max(a, start), min(b, stop)) for a, b in spans if a < stop and b > start and b > a)
    out = ""
    marks: list[tuple[int, int]] = []
    cursor = start
    for a, b in cuts + [(stop, stop)]:
        if a < cursor:
            continue
        out = _join(out, text[cursor:a])
        if b > a:
            piece = " ".join(text[a:b].split())
            if piece:
                out = _join(out, " " if text[a].isspace() and out else "")
                marks.append((len(out), len(out) + len(piece)))
                out += piece
                if text[b - 1].isspace():
                    out += " "
        cursor = b
    body = out.rstrip()
    marks = [(x, min(y, len(body))) for x, y in marks if x < len(body)]
    return ("…" if start > 0 else "") + body + ("…" if stop < len(text) else ""), \
        tuple((x + (1 if start > 0 else 0), y + (1 if start > 0 else 0)) for x, y in marks)


def _join(out: str, piece: str) -> str:
    """``out`` + ``piece`` with whitespace folded to single spaces, none leading."""
    if not piece:
        return out
    folded = " ".join(piece.split())
    lead = piece[0].isspace() and bool(out) and not out.endswith(" ")
    trail = piece[-1].isspace() and bool(folded or out)
    return out + (" " if lead else "") + folded + (" " if trail and folded else "")


# What may make a match depend on text outside it (lookarounds, inline flags, \\A \\Z \\G), or
# run past a message's end and fail there (possessive repeats, fuzzy matching): a pattern with any
# of these is tried message by message only.
