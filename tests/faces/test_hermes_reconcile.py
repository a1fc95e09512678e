"""Reconciling turns Hermes stored that never reached the memory (``endless.hermes.reconcile``)."""

from __future__ import annotations

from pathlib import Path

from endless.faces.hermes.reconcile import NOTE, NOTHING_KNOWN, missed, reconcile
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import load_settings
from endless.turn.pending import keep


def history(*texts: str) -> list[dict]:
    out = []
    for text in texts:
        out.append({"role": "user", "content": text})
        out.append({"role": "assistant", "content": f"reply to {text}"})
    return out


def test_only_messages_after_the_last_known_one_are_missed() -> None:
    hist = history("one", "two", "three", "four") + [{"role": "user", "content": "now"}]
    assert missed(hist, "now", "two", []) == ["three", "four"]
    assert missed(hist, "now", "four", []) == []
    assert missed(hist, "now", "pending text\n\nfour", []) == []  # a merged (pending + new) message
    assert missed(hist, "now", None, []) == []  # the session's last turn could not be found: nothing
    assert missed(hist, "now", "compacted away", []) == []
    assert missed(hist, "now", "two", ["three"]) == ["four"]


def test_reconcile_commits_each_missed_message_once(tmp_path: Path) -> None:
    settings = load_settings(environ={"ENDLESS_HOME": str(tmp_path)})
    with Memory.open(workspace_key(None, tmp_path), settings=settings, create=True) as memory:
        memory.commit_turn("s1", "", [Message("user", "two", 1.0), Message("reply", "ok", 2.0)])
        memory.commit_turn("s2", "", [Message("user", "other chat", 3.0)])
        # the turn "refused one" starts: "lost" never reached the memory, and is reconciled first
        hist = history("one", "two", "lost") + [{"role": "user", "content": "refused one"}]
        assert reconcile(memory, "s1", "t", hist, "refused one", skip=[]) == 1
        assert memory.turns == 3
        last = memory.turn(2)
        assert last.status == "interrupted" and last.session == "s1"
        texts = [(m.kind, m.text) for m in memory.turn_messages(2)]
        assert texts == [("user", "lost"), ("status", NOTE)]
        keep(memory, "s1", "t", "refused one")  # then no head fits: it is kept, in the memory at once
        hist = history("one", "two", "lost", "refused one") + [{"role": "user", "content": "now"}]
        assert reconcile(memory, "s1", "t", hist, "now", skip=[]) == 0  # once


def test_a_session_with_no_turn_in_the_memory_has_every_message_missed() -> None:
    """Issue 33 item 1: a first message lost to an interrupt is found like any later one."""
    hist = [{"role": "user", "content": "First message DELTA-4"}, {"role": "user", "content": "now"}]
    assert missed(hist, "now", NOTHING_KNOWN, []) == ["First message DELTA-4"]
    hist = history("one", "two") + [{"role": "user", "content": "now"}]
    assert missed(hist, "now", NOTHING_KNOWN, []) == ["one", "two"]
    assert missed(hist, "now", NOTHING_KNOWN, ["one"]) == ["two"]


def test_hermes_s_own_interrupt_texts_are_never_reconciled() -> None:
    """Issue 33 item 3: "received signal 15" in Hermes's store is Hermes's, not the person's."""
    hist = (history("one") + [{"role": "user", "content": "slow one"}, {"role": "user", "content": "received signal 15"},
                             {"role": "assistant", "content": "..."}, {"role": "user", "content": " Keyboard  interrupt"},
                             {"role": "user", "content": "now"}])
    assert missed(hist, "now", "one", []) == ["slow one"]
    assert missed(hist, "now", NOTHING_KNOWN, []) == ["one", "slow one"]
    # Hermes joins consecutive person messages of a loaded history with a blank line (on --resume)
    merged = history("one") + [{"role": "user", "content": "slow one\n\nreceived signal 15"},
                               {"role": "user", "content": "now"}]
    assert missed(merged, "now", "one", []) == ["slow one"]
    assert missed(merged, "now", "slow one", []) == []
    assert missed(merged, "now", NOTHING_KNOWN, []) == ["one", "slow one"]


def test_a_session_whose_turns_are_past_the_lookback_is_not_reconciled_again(tmp_path: Path) -> None:
    """Not finding the session's last turn nearby is not "no turn at all": nothing is committed twice."""
    from endless.faces.hermes import reconcile as module

    settings = load_settings(environ={"ENDLESS_HOME": str(tmp_path)})
    with Memory.open(workspace_key(None, tmp_path), settings=settings, create=True) as memory:
        memory.commit_turn("old", "", [Message("user", "one", 1.0), Message("reply", "ok", 2.0)])
        for n in range(3):
            memory.commit_turn(f"s{n}", "", [Message("user", f"other {n}", 3.0 + n)])
        hist = history("one", "two") + [{"role": "user", "content": "now"}]
        lookback, module.LOOKBACK_TURNS = module.LOOKBACK_TURNS, 2
        try:
            assert module.last_known_text(memory, "old") is None
            assert reconcile(memory, "old", "t", hist, "now", skip=[]) == 0
            assert module.last_known_text(memory, "new") == NOTHING_KNOWN
        finally:
            module.LOOKBACK_TURNS = lookback
        assert memory.turns == 4


def test_a_new_session_on_a_copy_of_another_s_history_adds_only_what_is_new(tmp_path: Path) -> None:
    """Hermes's /branch: a new session id whose history is the parent's, already in the memory."""
    settings = load_settings(environ={"ENDLESS_HOME": str(tmp_path)})
    with Memory.open(workspace_key(None, tmp_path), settings=settings, create=True) as memory:
        memory.commit_turn("parent", "", [Message("user", "one", 1.0), Message("reply", "ok", 2.0)])
        memory.commit_turn("parent", "", [Message("user", "two", 3.0), Message("reply", "ok", 4.0)])
        hist = history("one", "two") + [{"role": "user", "content": "lost first"},
                                        {"role": "user", "content": "now"}]
        assert reconcile(memory, "branch", "t", hist, "now", skip=[]) == 1
        assert [m.text for m in memory.turn_messages(2) if m.kind == "user"] == ["lost first"]
        assert memory.turn(2).session == "branch"
