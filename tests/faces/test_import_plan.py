"""The import's planning of turns: the shortcut for a question and its answer against the general path.

Most imported turns are a person's message and the agent's answer; the
importer plans them directly (``_question_and_answer``) instead of through
the general grouping of calls, results and replies (``_plan_any``).  The two
must make the same turn, message for message, for any texts and times.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from endless.core.settings import load_settings
from endless.faces.importers.formats import Entry, FormatError
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


@hsettings(max_examples=200, deadline=None)
@given(lines=st.lists(st.sampled_from([b"", b"  ", b'{"title": "a"}', b'{"role": "user"}', b'x"title"y"title"',
                                       b'"title"', b"\r", b'{"title": "\xc3\xa9"}\r', b'a\r"title"', b"abc" * 5]), max_size=30),
       last_newline=st.booleans(), block=st.integers(1, 40))
def test_a_marked_line_is_found_in_blocks_as_walking_the_lines_finds_it(tmp_path_factory, lines: list[bytes],
                                                                      last_newline: bool, block: int) -> None:
    """The title scan searches blocks of the file: every line holding the marker, once and in order,
    whatever the block size (a line cut between blocks, a last line without its newline)."""
    import endless.faces.importers.formats as formats

    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    path = tmp_path_factory.mktemp("scan") / "source.jsonl"
    path.write_bytes(data)
    walked = [line for line in data.split(b"\n") if b'"title"' in line]  # as a file's lines are walked
    saved = formats.IMPORT_SCAN_BLOCK
    formats.IMPORT_SCAN_BLOCK = block
    try:
        assert list(formats._marked_lines(path, b'"title"')) == walked
    finally:
        formats.IMPORT_SCAN_BLOCK = saved


@pytest.mark.parametrize("block", [4, 7, 64])
def test_the_title_scan_names_the_line_too_long_by_its_number(tmp_path, monkeypatch, block: int) -> None:
    """A line longer than the limit is named by its number, wherever the blocks cut the lines before it."""
    import endless.core.settings as limits
    import endless.faces.importers.formats as formats

    monkeypatch.setattr(formats, "IMPORT_SCAN_BLOCK", block)
    monkeypatch.setattr(limits, "IMPORT_LINE_BYTES_MAX", 40)
    path = tmp_path / "source.jsonl"
    path.write_bytes(b'{"title": "a"}\nshort\n\n' + b"x" * 200 + b"\nafter\n")
    with pytest.raises(FormatError, match=r"source.jsonl:4: a line longer than"):
        list(formats._marked_lines(path, b'"title"'))


def test_a_commit_counts_again_only_the_identities_said_more_than_once(tmp_path, monkeypatch):
    """The commit counts each batch's identities against the log as it is then; only those more than one
    planned turn begins with are asked after again, so only they are counted (a long import's counter
    stays small).  A turn said three times, one copy of which a live chat logs between two batches, is
    still in the log three times; a turn said once is imported once."""
    import orjson

    from endless.core.memory import Memory
    from endless.core.store import Message, Presence
    from endless.core.store.keys import workspace_key
    from endless.faces.importers import importer

    monkeypatch.setattr(importer, "BATCH_TURNS", 2)
    source = tmp_path / "source.jsonl"
    said = ["hi", "alpha", "hi", "beta", "gamma", "hi", "delta"]
    source.write_bytes(b"".join(orjson.dumps({"role": role, "content": text if role == "user" else f"re {k}",
                                              "at": 1.7e9 + k}) + b"\n"
                                for k, text in enumerate(said) for role in ("user", "assistant")))
    (tmp_path / "ws").mkdir()
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SETTINGS, root=tmp_path / "home")
    have = Presence()
    plan = importer.make_plan(importer.open_sources([source], "auto", None, None, True), SETTINGS, "turn", have,
                              memory.folder)
    assert plan.turns == 7 and plan.repeated is not None and len(plan.repeated) == 1

    def live_chat_logs_a_copy(first: int, end: int) -> None:
        if first == 0:  # after the first batch ("hi", "alpha"): a live chat logs the second "hi"
            memory.commit_turn("import:source.jsonl", "source.jsonl", [Message("user", "hi", 1.7e9 + 2),
                                                                       Message("reply", "re 2", 1.7e9 + 2)])

    done = importer.commit(memory, plan, False, live_chat_logs_a_copy, have)
    firsts = [memory.log.read_record(turn)["m"][0]["x"] for turn in range(memory.turns)]
    assert sorted(firsts) == sorted(said), firsts
    assert (done.turns, done.skipped) == (6, 1)
    assert len(have.counts) == 1  # the identity of "hi" alone
    memory.close()
