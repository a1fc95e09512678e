"""The demo's written conversation: its format, and what the data must hold for the story to be true."""

from __future__ import annotations

import time

import pytest

from endless.demo.conversation import ConversationError, best_sentence, load

SMALL = """@# two turns
@day 2027-03-08
@chat Planning
@09:00 you
The code is AB-12. Remember it.
@fact AB-12
@assistant
Noted.
@chat Later
@09:30 you
Run the tests.
@assistant
Running them now.
@$ pytest -q
3 passed
@$ git status
clean
@assistant
All 3 pass and the tree is clean.
"""


def test_a_small_conversation_is_read_turn_by_turn():
    first, second = load(SMALL)
    assert (first.chat_title, first.person, first.facts, first.reply) == (
        "Planning", "The code is AB-12. Remember it.", ["AB-12"], "Noted.")
    assert first.at == time.mktime(time.strptime("2027-03-08 09:00", "%Y-%m-%d %H:%M"))
    assert second.chat != first.chat and second.kind == "tool"
    assert second.commands == ["pytest -q", "git status"] and second.outputs == ["3 passed", "clean"]
    assert second.said == ["Running them now.", ""], "a reply written before a command is said beside it"
    assert second.reply == "All 3 pass and the tree is clean."


@pytest.mark.parametrize("text, words", [
    ("stray words\n", "line 1: text outside a turn"),
    ("@day 2027-03-08\n@09:00 you\nHi\n", "before its @day and @chat"),
    ("@day 2027-03-08\n@chat A\n@09:00 you\nHi\n@fact Bye\n@assistant\nHello\n", "is not in the message"),
    ("@day 2027-03-08\n@chat A\n@09:00 you\nHi\n", "a message and a reply are both needed"),
    ("@day 2027-03-08\n@chat A\n@09:00 you\nHi\n@assistant\nHo\n@08:00 you\nHi\n@assistant\nHo\n",
     "is earlier than the turn before"),
])
def test_a_file_off_its_format_is_refused_with_where_and_what(text, words):
    with pytest.raises(ConversationError, match=words):
        load(text)


def test_the_demo_conversation_holds_what_the_story_tells():
    turns = load()
    days = sorted({t.day for t in turns})
    assert len(days) >= 4 and len({t.chat_title for t in turns}) >= 3
    assert [t.at for t in turns] == sorted(t.at for t in turns)
    facts = [(t, f) for t in turns for f in t.facts]
    looks = [t for t in turns if t.look]
    assert len(facts) == 1 and len(looks) == 1
    planted, fact = facts[0]
    assert planted.day == days[0] and looks[0].day == days[-1]
    assert looks[0].chat_title != planted.chat_title, "asked in another chat of the same folder"
    assert "{recalled}" in looks[0].reply
    assert best_sentence(f"9+0|you: {planted.person}", looks[0].look).find(fact) >= 0, \
        "the look-back's words pick the sentence holding the fact"
    assert sum(len(t.commands) for t in turns) >= 30, "code and tool output, not only talk"
    assert "[[" not in "".join(t.person + t.reply for t in turns)
