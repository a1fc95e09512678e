"""What the person is told in Hermes's own notice line, and when (DESIGN §4, issue 15 item 4).

Diagnostics go to Hermes's log files (:mod:`endless.core.diagnostics`); the
screen gets at most one short line, only when the person can act on it: the
writer has been failing for a while, or the spend cap paused it.  It goes
through the agent's notice callbacks (``AIAgent._emit_notice`` with an
``agent.credits_tracker.AgentNotice``, ``_emit_notice_clear`` by key): the
classic CLI prints it when the turn starts, above the reply (never inside
its box: :func:`_print_queued`), the TUI shows it in its status bar.
Each notice is shown once until its cause ends, then cleared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KEY = "endless.writer"


def _minutes(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def writer_notice(stats: Any, now: float, after_seconds: float) -> str | None:
    """The line for the writer pool's state (its ``PoolStats``) at wall time ``now``, or None."""
    if stats is None:
        return None
    if stats.paused:
        return ("Endless: today's writer spend cap is reached, so new messages are not summarised until "
                "tomorrow; `endless writer resume` lifts the pause.")
    since = stats.failing_since
    if since is not None and now - since >= after_seconds:
        cause = f" ({stats.last_error.replace('_', ' ')})" if stats.last_error else ""
        return (f"Endless: the memory's writer has been failing for {_minutes(now - since)}{cause}; "
                "messages are kept word for word meanwhile. Details in Hermes's logs/agent.log.")
    return None


@dataclass
class Notices:
    """The notice shown per memory, so each is shown once and cleared when its cause ends."""

    shown: dict[str, str] = field(default_factory=dict)

    def update(self, agent: Any, memory_id: str, text: str | None) -> str | None:
        """Show ``text`` (or clear the last one) through ``agent``; returns what was shown now, if anything."""
        key = f"{KEY}.{memory_id}"
        if text is None:
            if self.shown.pop(key, None) is not None:
                _call(agent, "_emit_notice_clear", key)
            return None
        if self.shown.get(key) is not None:
            return None  # one line until the cause ends, not one a turn
        self.shown[key] = text
        try:
            from agent.credits_tracker import AgentNotice
        except ImportError:  # another Hermes: the log keeps the record
            return None
        _call(agent, "_emit_notice", AgentNotice(text=text, level="warn", kind="sticky", key=key))
        _print_queued(agent)
        return text


def _print_queued(agent: Any) -> None:
    """Have the classic CLI print its queued notices now, at the turn's start, before any reply streams.

    Its notice callback is ``HermesCLI._on_notice`` (bound at
    ``hermes_cli/cli_agent_setup_mixin.py:401``), which only queues; the queue
    is printed by ``_flush_credit_notices`` (``cli.py:5467``) when the agent
    thread's turn returns (``cli.py:12120``), but a streamed reply's last
    line and its box's bottom edge are printed after that, by the main thread
    (``_flush_stream``, ``cli.py:12255``): the line landed inside the reply's
    box.  Notices are decided in ``pre_llm_call``, before the first request,
    so printing the queue there puts the line between the person's message
    and the reply.  Other front ends (the TUI's status bar) have no such queue.
    """
    owner = getattr(getattr(agent, "notice_callback", None), "__self__", None)
    flush = getattr(owner, "_flush_credit_notices", None)
    if callable(flush):
        flush()  # Hermes's own printer; it swallows its errors itself


def _call(agent: Any, name: str, *args: Any) -> None:
    method = getattr(agent, name, None) if agent is not None else None
    if callable(method):
        method(*args)  # Hermes's emitters swallow their callbacks' errors themselves
