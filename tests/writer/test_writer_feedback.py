"""Each feedback a writer's try can get, word for word (issue 15 item 5: a garbled retry message).

Each starts from a real verdict of the checks, as the pool does, so a detail
reworded in the checks shows up here as a changed sentence.
"""

from __future__ import annotations

import pytest

from endless.writer.checks import cut_mark, judge
from endless.writer.task import feedback

SOURCE = "you: move the database to port 5433 on db-prod-7 and keep the old one off."
TAIL = ("Write the line itself: one paragraph describing the input, with no tags, no task words and no "
        "comment.\n")


def _feedback(reply: str, key: str | None = None) -> str:
    verdict = judge(reply, [SOURCE], 512)
    assert not verdict.ok
    return feedback(verdict, budget=512, target=384, cut=cut_mark(verdict.text, 384), key=key)


@pytest.mark.parametrize("reply, expected", [
    ("", "That reply is not a usable memory line (it is empty). " + TAIL),
    ("I'm sorry, but I can't help with that request.",
     "That reply is not a usable memory line (it refuses the task instead of writing the line). " + TAIL),
    ("<input>\nyou: move the database\n</input>",
     "That reply is not a usable memory line (it repeats the task's own input tag and closing input tag). " + TAIL),
    ("Compaction: compress message 4\nyou: move the database",
     "That reply is not a usable memory line (it repeats the task's own marker). " + TAIL),
    ("<chat>\n0+1|you: move the database\n</chat>",
     "That reply is not a usable memory line (it repeats the task's own view tag and closing view tag). " + TAIL),
    ("That reply is not a usable memory line (it is empty). " + TAIL,
     "That reply is not a usable memory line (it repeats the task's instructions instead of describing the "
     "input). " + TAIL),
    ("—", "That reply is not a usable memory line (it has no letters or digits). " + TAIL),
    ('{"line": "you: move the database"}',
     "That reply is not a usable memory line (it is JSON, not a line of prose). " + TAIL),
    ('<tool_call>{"name": "zoom"}</tool_call>',
     "That reply is not a usable memory line (it holds tool-call syntax: “<tool_call”). " + TAIL),
    ("<think>the person wants port 5433",
     "That reply is not a usable memory line (it holds an unfinished thinking block). " + TAIL),
    ("you: move the database to port \ufffd",
     "That reply is not a usable memory line (it holds broken characters (U+FFFD)). " + TAIL),
    ("用户要求把数据库移到端口 5433",
     "That line is written in Han, which the input does not use. Write it again in the language of the "
     "messages.\n"),
    ("you: move the database to port 5432 on db-prod-9",
     "That line mentions 5432 and db-prod-9, which the input does not contain. Write it again using only facts "
     "that appear in the input.\n"),
])
def test_each_feedback_sentence(reply, expected):
    assert _feedback(reply) == expected


def test_a_quoted_fact_with_a_task_tag_is_named_in_words():
    source = "you: the page has an <input> field for port 5433"
    verdict = judge('you: the page says "<input> now" for port 5433', [source], 512)
    assert verdict.problem == "invented"
    assert feedback(verdict, budget=512, target=384, cut="", key=None) == (
        "That line mentions \"the input tag now\", which the input does not contain. Write it again using only "
        "facts that appear in the input.\n")


def test_too_long_feedback_names_sizes_and_shows_the_cut():
    reply = "you: move the database to port 5433 " + "and keep the old one off " * 30
    verdict = judge(reply, [SOURCE], 512)
    cut = cut_mark(verdict.text, 384)
    assert feedback(verdict, budget=512, target=384, cut=cut, key=None) == (
        f"That line is {verdict.size} bytes; the limit is 512. Write the whole line again for the same input in "
        f"at most 384 bytes, dropping just enough of the least important details. Here is where 384 bytes "
        f"end:\n{cut}\n")


def test_a_batched_job_gets_its_own_form_first():
    assert _feedback("", key="3") == (
        'Job 3 only: answer in the form <line id="3">…</line>.\n'
        "That reply is not a usable memory line (it is empty). " + TAIL)
