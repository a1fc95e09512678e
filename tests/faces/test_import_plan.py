"""The import's planning of turns: the shortcut for a question and its answer against the general path.

Most imported turns are a person's message and the agent's answer; the
importer plans them directly (``_question_and_answer``) instead of through
the general grouping of calls, results and replies (``_plan_any``).  The two
must make the same turn, message for message, for any texts and times.
"""

from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from endless.core.settings import load_settings
from endless.faces.importers.formats import Entry
from endless.faces.importers.importer import _plan_any, _question_and_answer, plan_turn

SETTINGS = load_settings()
LONG = SETTINGS.message_split_chars

texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\n\t ", "é" * 3, "line\r\nbreak </chat>"]),
    st.builds(lambda n, c: c * n, st.integers(LONG - 2, LONG * 2 + 3), st.sampled_from(["a", " ", "\n", "é"])),
)
times = st.one_of(st.none(), st.floats(1e9, 2e9))


@given(texts, texts, times, times, st.sampled_from(["s", "import:x.jsonl"]))
@hsettings(max_examples=300, deadline=None)
def test_a_question_and_its_answer_plan_as_the_general_path_plans_them(question, answer, asked, answered,
                                                                       session) -> None:
    entries = [Entry("user", question, asked, session, "a title", "f:1"),
               Entry("assistant", answer, answered, session, "a title", "f:2")]
    general = _plan_any(entries, SETTINGS, "turn", 1_500_000_000.0)
    assert _question_and_answer(entries[0], entries[1], SETTINGS, 1_500_000_000.0) == general
    assert plan_turn(entries, SETTINGS, "turn", 1_500_000_000.0) == general
    assert general is not None and general.messages[0].kind == "user"
