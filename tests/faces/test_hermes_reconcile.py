"""Reconciling turns Hermes stored that never reached the memory (``endless.hermes.reconcile``)."""

from __future__ import annotations

from pathlib import Path

from endless.faces.hermes.reconcile import NOTE, missed, reconcile
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
    assert missed(hist, "now", None, []) == []  # no turn of this session yet: nothing to reconcile
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
