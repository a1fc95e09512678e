"""Texts Hermes 0.19.0 makes itself and hands on as if the person had typed them (SEAMS.md, seam 26).

``AIAgent.interrupt(message)`` keeps ``message`` as the turn's
``interrupt_message`` (``agent/turn_finalizer.py:566-567``), and the classic
CLI sends it as the next person message (``cli.py:12349``, queued at
``:12473-12490``, "⚡ Sending after interrupt").  That is right when the
person typed it; but Hermes also interrupts with words of its own: a signal
(``cli.py:15199``, ``:15808``: ``received signal 15``), a Ctrl-C during a tool
(``agent/tool_executor.py:617``, ``:1512``, ``:1552``: ``keyboard interrupt``),
the end of a one-shot run (``cli.py:1277``), the API server and cron
(``gateway/platforms/api_server.py:3158``, ``:3730``, ``:3749``, ``:5296``;
``cron/scheduler.py:3499``) and the gateway's control reasons
(``gateway/run.py:2368-2385``, which the gateway itself already drops,
``:2388`` ``_is_control_interrupt_message``, ``:21705-21714``).  Such a
message is no one's words: Endless answers it itself without asking a model
and never stores it; the turn it interrupted is marked as stopped by Hermes,
not by the person.  A message is Hermes's when its whole text (white space
folded, case ignored, as Hermes's own check does) is one of these.
"""

from __future__ import annotations

import re

# every text Hermes 0.19.0 passes to AIAgent.interrupt() itself (file:line in the module docstring)
_EXACT = frozenset({
    "keyboard interrupt",  # agent/tool_executor.py:617, :1512, :1552; cli.py:1277 (reason "keyboard_interrupt")
    "shutdown",  # cli.py:1277 (the default reason)
    "sse client disconnected",  # gateway/platforms/api_server.py:3158, :3730; gateway/run.py:2372
    "sse task cancelled",  # gateway/platforms/api_server.py:3749
    "stop requested via api",  # gateway/platforms/api_server.py:5296
    "cron job timed out (inactivity)",  # cron/scheduler.py:3499
    "stop requested",  # gateway/run.py:2369
    "session reset requested",  # gateway/run.py:2370
    "execution timed out (inactivity)",  # gateway/run.py:2371
    "gateway shutting down",  # gateway/run.py:2373
    "gateway restarting",  # gateway/run.py:2374
    "async delegation cancelled",  # tools/delegate_tool.py:2995 (a subagent's)
})
_PATTERNS = (
    re.compile(r"received signal \d{1,2}"),  # cli.py:15199 (interactive), :15808 (hermes -q)
    re.compile(r"interrupted via tui \(.{1,200}\)"),  # tools/delegate_tool.py:199 (a subagent's)
)


def _folded(text: str) -> str:
    return " ".join(str(text).split()).lower()


def is_host_text(text: str) -> bool:
    """Whether ``text`` is one of Hermes's own interrupt texts rather than anything the person wrote."""
    folded = _folded(text)
    return folded in _EXACT or any(pattern.fullmatch(folded) for pattern in _PATTERNS)


def without_host_texts(text: str) -> str:
    """``text`` without the paragraphs that are Hermes's own texts.

    Hermes joins consecutive person messages of a loaded history with a blank
    line (its consecutive-user repair, named at ``agent/turn_context.py:106``),
    so an interrupted message and the ``received signal 15`` sent after it come
    back as one message on ``--resume``.
    """
    if "\n\n" not in text:
        return "" if is_host_text(text) else text
    return "\n\n".join(part for part in text.split("\n\n") if not is_host_text(part)).strip()


def stopped_by_host(text: str) -> str:
    """The status note of a turn Hermes itself stopped with ``text`` (a signal, say)."""
    return (f"Hermes stopped this turn itself ({' '.join(str(text).split())}), not the person; "
            "what is above is all that happened.")


def answer(text: str) -> str:
    """What Endless answers such a message with, in place of a model (shown, and stored by Hermes)."""
    return (f"(Hermes sent “{' '.join(str(text).split())[:80]}” itself after stopping the last turn; "
            "nobody asked anything, so no model was asked and Endless keeps nothing of it.)")
