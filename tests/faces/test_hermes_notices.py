"""The one line the person sees in Hermes when the writer needs them (issue 15 item 4).

The agent here stands in for Hermes's ``AIAgent`` notice emitters (Hermes is
not imported in this test's venv); the pool's stats are the real ``PoolStats``.
"""

from __future__ import annotations

from endless.faces.hermes.notices import Notices, writer_notice
from endless.writer.pool import PoolStats


class Agent:
    def __init__(self) -> None:
        self.shown: list[object] = []
        self.cleared: list[str] = []

    def _emit_notice(self, notice) -> None:
        self.shown.append(notice)

    def _emit_notice_clear(self, key: str) -> None:
        self.cleared.append(key)


def test_a_writer_failing_for_minutes_is_one_line():
    stats = PoolStats(failing_since=1000.0, last_error="rate_limit")
    assert writer_notice(stats, 1100.0, 180.0) is None, "a short failure is only logged"
    assert writer_notice(stats, 1000.0 + 240, 180.0) == (
        "Endless: the memory's writer has been failing for 4 minutes (rate limit); messages are kept word for "
        "word meanwhile. Details in Hermes's logs/agent.log.")
    assert writer_notice(PoolStats(), 5000.0, 180.0) is None


def test_the_spend_cap_is_one_line():
    assert writer_notice(PoolStats(paused=True), 0.0, 180.0).startswith("Endless: today's writer spend cap is reached")


def test_shown_once_until_the_cause_ends_then_cleared():
    agent, notices = Agent(), Notices()
    notices.update(agent, "m1", "Endless: failing")
    notices.update(agent, "m1", "Endless: failing")
    notices.update(agent, "m1", "Endless: failing")
    try:
        from agent.credits_tracker import AgentNotice
    except ImportError:  # this venv has no Hermes: nothing to show it with, the log keeps it
        assert agent.shown == []
    else:
        assert len(agent.shown) == 1 and isinstance(agent.shown[0], AgentNotice)
        assert (agent.shown[0].text, agent.shown[0].level, agent.shown[0].key) == (
            "Endless: failing", "warn", "endless.writer.m1")
    assert notices.shown == {"endless.writer.m1": "Endless: failing"}
    notices.update(agent, "m1", None)
    notices.update(agent, "m1", None)
    assert agent.cleared == ["endless.writer.m1"] and notices.shown == {}
