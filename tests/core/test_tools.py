"""The agent's look-back tools at their edges (DESIGN §5, §2.3).

``zoom``, ``date`` and ``recall_search`` answer every call in text; bad
arguments get an answer that says what is wrong, never an exception.  Pattern
searches are bounded in time; the tests inject clocks so the bound is checked
without waiting for it, and one run checks the real bound with a small limit.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from endless.core.store import messages as msgs
from endless.core.search import scan as searching
from endless.core import lookback as tools
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message, TraceBuilder
from endless.core.settings import Settings
from endless.writer.queue import ready_work
from tool_forms import anthropic_tools, openai_tools

BASE = 1_700_000_000.0  # a fixed moment; every message time is BASE + something

HIT = re.compile(r"^(\d+)\+0 · (\d{4}-\d\d-\d\d \d\d:\d\d) · «(.*)» · (\w+): (.*)$")


# -- helpers ------------------------------------------------------------------------


def open_memory(root: Path, settings: Settings | None = None, **kwargs) -> Memory:
    root.mkdir(parents=True, exist_ok=True)
    return Memory.open(workspace_key(None, root), settings=settings or Settings(), root=root,
                       **kwargs)


@pytest.fixture
def utc(monkeypatch):
    """Run with the local time zone set to UTC, so local dates are known."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def mem(tmp_path):
    memory = open_memory(tmp_path / "m")
    yield memory
    memory.close()


def add(memory: Memory, *texts: str | tuple[str, str], kind: str = "user", title: str = "Chat",
        session: str = "s1", at: float | None = None) -> list[int]:
    """Commit one turn holding ``texts`` (each a text of ``kind`` or a ``(kind, text)`` pair);
    returns their message ids."""
    first = memory.total
    when = BASE + first if at is None else at
    pairs = [t if isinstance(t, tuple) else (kind, t) for t in texts]
    memory.commit_turn(session, title, [Message(k_, t, when + k) for k, (k_, t) in enumerate(pairs)],
                       sync=False)
    return list(range(first, first + len(texts)))


def hits(answer: str) -> list[tuple[int, str, str, str, str]]:
    """(id, date, title, kind, snippet) of every hit line of a recall_search answer."""
    out = []
    for line in answer.splitlines():
        m = HIT.match(line)
        if m:
            out.append((int(m[1]), m[2], m[3], m[4], m[5]))
    return out


def search(memory: Memory, query, page=1) -> str:
    return tools.call(memory, "recall_search", {"query": query, "page": page})


@pytest.fixture
def six(mem):
    """Six messages: 0-1, 3-5 short (free lines), 2 too long to be its own line."""
    add(mem, "first words", ("reply", "first answer"))                 # 0, 1
    add(mem, "x" * 600, ("reply", "short answer"))                     # 2 (unwritten), 3
    add(mem, "third question", ("reply", "third answer"))              # 4, 5
    assert mem.total == 6
    return mem


# -- zoom: names ---------------------------------------------------------------------


@pytest.mark.parametrize("ident, n", [
    (0, 3), (0, 6), (4, 3),            # n not a power of two
    (0, 0),                            # n = 0
    (0, -1), (0, -2),                  # negative n
    (-1, 1), (-2, 2), (-4, 4),         # negative id
    (1, 2), (2, 4), (3, 2), (2, 8),    # id not a multiple of n
    (4, 4), (0, 8), (6, 1), (100, 1),  # id+n past the end (T = 6)
    (2, 2), (0, 4),                    # valid names, but 2+1 is unwritten so the parent is too
])
def test_zoom_invalid_and_unwritten_names(six, ident, n):
    assert tools.call(six, "zoom", {"id": ident, "n": n}) == f"No line {ident}+{n}."
    assert tools.zoom(six, ident, n) == f"No line {ident}+{n}."


@pytest.mark.parametrize("args", [
    {"id": True, "n": 1}, {"id": 0, "n": True}, {"id": False, "n": 1},
    {"id": "zero", "n": 1}, {"id": "", "n": 1}, {"id": "0", "n": "one"},
    {"id": 0.5, "n": 1}, {"id": 0, "n": 1.5}, {"id": float("nan"), "n": 1},
    {"id": float("inf"), "n": 1}, {"id": None, "n": 1}, {"id": 0, "n": None},
    {"id": [0], "n": 1}, {"id": {"id": 0}, "n": 1},
    {"id": "--2", "n": 1}, {"id": "1-", "n": 1}, {"id": "²", "n": 1}, {"id": "9" * 5000, "n": 1},
])
def test_zoom_non_integer_arguments_answer_no_line(six, args):
    answer = tools.call(six, "zoom", args)
    assert answer.startswith("No line "), answer
    assert answer.endswith(".")


@pytest.mark.parametrize("args", [{"id": 0}, {"n": 1}, {}, {"page": 1}])
def test_zoom_missing_arguments(six, args):
    assert tools.call(six, "zoom", args) == "zoom needs id and n, the two numbers of a line's name id+n."


@pytest.mark.parametrize("args", [None, [0, 1], "[0, 1]", 5])
def test_arguments_not_an_object(six, args):
    for name in tools.TOOL_NAMES:
        answer = tools.call(six, name, args)
        assert answer == f"The {name} tool takes named arguments as a JSON object."


def test_arguments_as_json_text_like_the_wire_sends(six):
    assert tools.call(six, "zoom", '{"id": 0, "n": 1}') == tools.call(six, "zoom", {"id": 0, "n": 1})
    assert tools.call(six, "zoom", "0+1") == "The zoom tool's arguments are not valid JSON; send a JSON object."


def test_unknown_tool_is_named(six):
    answer = tools.call(six, "grep", {"q": "x"})
    assert "'grep'" in answer and "zoom, date, recall_search" in answer


def test_integral_numbers_in_other_forms_are_accepted(six):
    """A model may send 2.0 or "2" for 2; the name is still valid."""
    expected = tools.call(six, "zoom", {"id": 0, "n": 2})
    assert tools.call(six, "zoom", {"id": 0.0, "n": 2.0}) == expected
    assert tools.call(six, "zoom", {"id": "0", "n": " 2 "}) == expected


# -- zoom: lines and messages ------------------------------------------------------------


def test_zoom_gives_the_two_halves(six):
    assert tools.call(six, "zoom", {"id": 0, "n": 2}) == "0+1|you: first words\n1+1|Assistant: first answer"
    assert tools.call(six, "zoom", {"id": 4, "n": 2}) == "4+1|you: third question\n5+1|Assistant: third answer"


def test_zoom_an_unwritten_line_then_written(six):
    assert tools.call(six, "zoom", {"id": 2, "n": 2}) == "No line 2+2."
    assert six.store_line(0, 2, "you: six hundred x")
    assert tools.call(six, "zoom", {"id": 2, "n": 2}) == "2+1|you: six hundred x\n3+1|Assistant: short answer"
    # 0+4 needs 0+2 and 2+2; both are free joins now
    answer = tools.call(six, "zoom", {"id": 0, "n": 4})
    assert answer.splitlines()[0].startswith("0+2|you: first words Assistant: first answer")
    assert answer.splitlines()[1].startswith("2+2|you: six hundred x Assistant: short answer")


def test_zoom_one_is_the_message_word_for_word_even_unwritten(six):
    assert tools.call(six, "zoom", {"id": 2, "n": 1}) == "2+0|you: " + "x" * 600
    assert tools.call(six, "zoom", {"id": 5, "n": 1}) == "5+0|Assistant: third answer"


def test_zoom_one_tags(tmp_path):
    turn = open_memory(tmp_path / "turn", agent_name="Hermes")
    add(turn, "a question", kind="user")
    add(turn, "an answer", kind="reply")
    add(turn, "did: ls\nresult: a b\nsaid: done", kind="trace")
    add(turn, "helper report", kind="work")
    add(turn, "stopped here", kind="status")
    add(turn, "old memory", kind="note")
    assert [tools.zoom(turn, i, 1) for i in range(6)] == [
        "0+0|you: a question", "1+0|Hermes: an answer", "2+0|did: ls\nresult: a b\nsaid: done",
        "3+0|colleague: helper report", "4+0|note: stopped here", "5+0|note: old memory"]
    turn.close()

    step = open_memory(tmp_path / "step", Settings(granularity="step", person_tag="Du"))
    add(step, "frage", kind="user")
    add(step, 'ls {"a": 1}', kind="call")
    add(step, "a b", kind="result")
    add(step, "looking", kind="said")
    add(step, "fertig", kind="reply")
    assert [tools.zoom(step, i, 1) for i in range(5)] == [
        "0+0|Du: frage", '1+0|did: ls {"a": 1}', "2+0|result: a b", "3+0|said: looking",
        "4+0|Assistant: fertig"]
    step.close()


def test_zoom_pages_a_long_message(mem):
    whole = ("Grüße 日本語 " * 7000)[:60_001]            # 60,001 characters, many multi-byte
    add(mem, whole, kind="trace")
    pages = [tools.call(mem, "zoom", {"id": 0, "n": 1, "page": p}) for p in (1, 2, 3)]
    bodies = []
    for k, answer in enumerate(pages, 1):
        assert answer.startswith("0+0|")
        assert answer.endswith(f"\n[page {k} of 3]")
        bodies.append(answer[len("0+0|"):-len(f"\n[page {k} of 3]")])
    assert [len(b) for b in bodies] == [25_000, 25_000, 10_001]
    assert "".join(bodies) == whole                     # nothing lost, no character cut
    assert tools.call(mem, "zoom", {"id": 0, "n": 1}) == pages[0]   # page defaults to 1
    assert tools.call(mem, "zoom", {"id": 0, "n": 1, "page": 4}) == "No page 4: message 0 has 3 pages."
    for bad in (0, -1, "x", True, 1.5):
        assert tools.call(mem, "zoom", {"id": 0, "n": 1, "page": bad}).startswith(f"No page {bad}: ")


def test_zoom_message_of_exactly_one_page_has_no_page_note(mem):
    add(mem, "y" * (25_000 - len("you: ")))
    answer = tools.zoom(mem, 0, 1)
    assert answer == "0+0|you: " + "y" * 24_995
    assert tools.zoom(mem, 0, 1, page=2) == "No page 2: message 0 has 1 page."
    add(mem, "y" * (25_001 - len("you: ")))
    assert tools.zoom(mem, 1, 1).endswith("\n[page 1 of 2]")
    assert tools.zoom(mem, 1, 1, 2) == "1+0|y\n[page 2 of 2]"


def test_zoom_sees_what_another_process_committed(tmp_path):
    a = open_memory(tmp_path / "m")
    b = open_memory(tmp_path / "m")
    add(a, "from a")
    assert tools.zoom(b, 0, 1) == "0+0|you: from a"
    assert tools.date(b, 0).startswith("Message 0 was written")
    assert hits(tools.recall_search(b, "FROM A"))[0][0] == 0
    a.close()
    b.close()


# -- free lines: sizes are UTF-8 bytes ---------------------------------------------------


def test_free_line_is_its_source_word_for_word_by_bytes(mem):
    ascii_512 = "a" * 507                      # "you: " + 507 = 512 bytes
    umlaut_512 = "ä" * 253 + "a"               # 5 + 506 + 1 = 512 bytes, 259 characters
    over = "a" * 505 + "日"                     # 5 + 505 + 3 = 513 bytes, only 511 characters
    ascii_513 = "a" * 508
    ids = [add(mem, t)[0] for t in (ascii_512, umlaut_512, over, ascii_513)]
    assert mem.node_text(0, ids[0]) == "you: " + ascii_512
    assert mem.node_text(0, ids[1]) == "you: " + umlaut_512
    assert not mem.is_built(0, ids[2]) and mem.node_text(0, ids[2]) is None
    assert not mem.is_built(0, ids[3])
    waiting = {(j.level, j.index) for j in ready_work(mem)}
    assert {(0, ids[2]), (0, ids[3])} <= waiting and (0, ids[0]) not in waiting
    assert tools.zoom(mem, 2, 2) == "No line 2+2."
    # two 512-byte lines do not join into a free parent
    assert not mem.is_built(1, 0) and tools.zoom(mem, 0, 2) == "No line 0+2."
    # zoom(id, 1) shows each message whole, whether its line is free or waits for the writer
    assert tools.zoom(mem, 1, 1) == "1+0|you: " + umlaut_512
    assert tools.zoom(mem, 2, 1) == "2+0|you: " + over


def test_reply_tag_counts_in_the_budget(mem):
    add(mem, "b" * (512 - len("Assistant: ")), kind="reply")
    add(mem, "b" * (513 - len("Assistant: ")), kind="reply")
    assert mem.is_built(0, 0) and not mem.is_built(0, 1)


def test_free_parent_is_the_join_by_bytes(tmp_path):
    fits = open_memory(tmp_path / "fits")
    add(fits, "ä" * 125, "ä" * 125 + "a")          # 255 + "\n" + 256 = 512 bytes
    assert fits.is_built(1, 0)
    assert fits.node_text(1, 0) == "you: " + "ä" * 125 + "\nyou: " + "ä" * 125 + "a"
    assert tools.zoom(fits, 0, 2).startswith("0+1|you: ää")
    fits.close()

    over = open_memory(tmp_path / "over")
    add(over, "ä" * 125, "ä" * 126)                 # 255 + 1 + 257 = 513 bytes, 263 characters
    assert over.is_built(0, 0) and over.is_built(0, 1)
    assert not over.is_built(1, 0)
    assert tools.zoom(over, 0, 2) == "No line 0+2."
    over.close()


# -- date ------------------------------------------------------------------------------


def test_date_is_local_time(mem, utc):
    add(mem, "hello", at=0.0)
    add(mem, "later", at=BASE)
    assert tools.call(mem, "date", {"id": 0}) == "Message 0 was written Thursday 1970-01-01 00:00:00 UTC (local time)."
    expected = dt.datetime.fromtimestamp(BASE, dt.timezone.utc).strftime("%A %Y-%m-%d %H:%M:%S")
    assert tools.call(mem, "date", {"id": 1}).startswith(f"Message 1 was written {expected}")


def test_date_follows_the_local_zone(mem, monkeypatch):
    add(mem, "hello", at=0.0)
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    try:
        assert "1970-01-01 09:00:00" in tools.date(mem, 0)
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("ident", [-1, 2, 3, 10**30, "x", "", True, False, 1.5, None, [0],
                                   "--1", "²", "9" * 5000, float("nan")])
def test_date_bad_ids(mem, ident):
    add(mem, "hello", "there")
    assert tools.call(mem, "date", {"id": ident}) == f"No message {ident}."


def test_date_missing_id(mem):
    assert tools.call(mem, "date", {}) == "date needs id, a message number."


def test_date_of_an_empty_memory(mem):
    assert tools.call(mem, "date", {"id": 0}) == "No message 0."


# -- recall_search ---------------------------------------------------------------------


def test_search_any_case_with_id_date_title_kind_snippet(mem, utc):
    add(mem, "We talked about the Garden plan", ("reply", "the garden needs water"), title="Garden",
        at=0.0)
    add(mem, "something else", title="Other", at=60.0)
    add(mem, "GARDEN again, loudly", title="Shouting", at=120.0)
    for query in ("garden", "GARDEN", "GaRdEn"):
        answer = search(mem, query)
        assert answer.splitlines()[0] == f"Hits 1–4 for {query}, best first:"
        # the chat whose title holds the word comes first, named by its first message (issue #33)
        assert answer.splitlines()[1] == "0+0 · 1970-01-01 00:00 · the chat's title: «**Garden**»"
        assert hits(answer) == [  # the shorter message ranks first (BM25 weighs by length)
            (3, "1970-01-01 00:02", "Shouting", "user", "**GARDEN** again, loudly"),
            (1, "1970-01-01 00:00", "Garden", "reply", "the **garden** needs water"),
            (0, "1970-01-01 00:00", "Garden", "user", "We talked about the **Garden** plan"),
        ]


def test_search_finds_only_message_text_not_the_record_around_it(mem):
    add(mem, "plain words", title="A plain chat")
    for query in ("tid", "turn", '"k"', "at", "st", "user", "s1", "/tid/", '"turn tid"'):
        assert search(mem, query) == f"No hits for {query}."
    # the title is text the memory keeps and sends: it is found, and said to be the title (issue #33)
    for query in ("chat", '"plain chat"', "/pl.in c/"):
        assert "0+0 · " in search(mem, query) and "the chat's title: «" in search(mem, query), query
    assert search(mem, '":') == ("Cannot search: '\":' holds no word to search for; search for words, "
                                 'a "quoted phrase" or a /regular expression/.')


def test_search_pages_twenty_newest_first(mem):
    for k in range(0, 44, 2):
        add(mem, f"apple {k}", f"apple {k + 1}")
    add(mem, "pear")                                    # 44, no hit
    p1, p2, p3 = (search(mem, "APPLE", p) for p in (1, 2, 3))
    # Every hit ranks the same (one word, same length): ties go newest first.
    assert p1.splitlines()[0] == "Hits 1–20 for APPLE, best first (more on page 2):"
    assert [h[0] for h in hits(p1)] == list(range(43, 23, -1))
    assert p2.splitlines()[0] == "Hits 21–40 for APPLE, best first (more on page 3):"
    assert [h[0] for h in hits(p2)] == list(range(23, 3, -1))
    assert p3.splitlines()[0] == "Hits 41–44 for APPLE, best first:"
    assert [h[0] for h in hits(p3)] == [3, 2, 1, 0]
    assert search(mem, "APPLE", 4) == "No hits for APPLE on page 4."
    assert search(mem, "APPLE", "2") == p2
    for bad in (0, -1, "x", True, 1.5, "--2", "²"):
        assert search(mem, "apple", bad) == f"No page {bad}: pages are numbered from 1."
    assert tools.call(mem, "recall_search", {"query": "APPLE"}) == p1


def test_search_exactly_twenty_hits_says_no_more(mem):
    for k in range(20):
        add(mem, f"kiwi {k}")
    answer = search(mem, "kiwi")
    assert answer.splitlines()[0] == "Hits 1–20 for kiwi, best first:"
    assert len(hits(answer)) == 20


def test_search_regex_pattern(mem):
    add(mem, "order 1234 shipped", "no digits here", "ORDER 99 lost")
    answer = search(mem, r"/order \d+/")
    assert [(h[0], h[4]) for h in hits(answer)] == [(2, "**ORDER 99** lost"), (0, "**order 1234** shipped")]
    assert [h[0] for h in hits(search(mem, "/^no/"))] == [1]
    # without slashes, regex characters are not words: this ranks the word "order" (and "d")
    assert [h[0] for h in hits(search(mem, r"order \d+"))] == [2, 0]


@pytest.mark.parametrize("query, why", [
    ("/(/", "is not valid"), ("/[a-/", "is not valid"), ("/a{2,1}/", "is not valid"),
    ("//", "is empty"),
])
def test_search_invalid_regex(mem, query, why):
    add(mem, "text")
    answer = search(mem, query)
    assert answer.startswith("Cannot search: ") and why in answer


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_search_empty_query(mem, query):
    add(mem, "text")
    assert search(mem, query) == ('Cannot search: give words to search for, a "quoted phrase" or a '
                                  "/regular expression/.")


@pytest.mark.parametrize("args", [{}, {"query": None}, {"query": 5}, {"query": ["a"]}])
def test_search_missing_query(mem, args):
    assert tools.call(mem, "recall_search", args) == (
        'Give recall_search a query: words, a "quoted phrase" or a /regular expression/.')


def test_search_quotes_backslashes_newlines(mem):
    text = 'He said "run C:\\temp\\x.bat"\nthen left\ttabbed'
    add(mem, text)
    add(mem, "two\nlines here")
    # A phrase is its words in a row as written, any case, any whitespace between them.
    for query in ('"C:\\TEMP\\X.BAT"', '"he SAID"', '"left tabbed"', "bat tabbed"):
        assert [h[0] for h in hits(search(mem, query))] == [0], query
    assert [h[0] for h in hits(search(mem, '"TWO LINES"'))] == [1]
    assert [h[0] for h in hits(search(mem, '"TWO\nLINES"'))] == [1]
    # a phrase's punctuation counts: the words are in a row but the text between them differs
    assert search(mem, '"C:/temp/x.bat"') == 'No hits for "C:/temp/x.bat".'
    # the JSON escapes themselves are not text: "\n" typed as backslash + n finds nothing
    assert search(mem, '"two\\nlines"') == 'No hits for "two\\nlines".'
    assert [h[0] for h in hits(search(mem, '/"run c:\\\\temp/'))] == [0]
    # snippets stay on one line, the matched words marked
    assert hits(search(mem, '"then left"'))[0][4] == 'He said "run C:\\temp\\x.bat" **then left** tabbed'


def test_search_non_ascii_any_case(mem):
    add(mem, "So ein Ärger heute", "日本語のテキスト", "ΣΊΣΥΦΟΣ rolls")
    add(mem, "KEIN ÄRGER MEHR", "mixed Ärger with ascii WORDS")
    for query in ("ärger", "ÄRGER", "äRgEr", "arger"):  # case and accents folded; shortest first
        assert [h[0] for h in hits(search(mem, query))] == [3, 0, 4], query
    assert [h[0] for h in hits(search(mem, "σίσυφοσ"))] == [2]
    assert [h[0] for h in hits(search(mem, "words"))] == [4]
    assert [h[0] for h in hits(search(mem, "/ärger \\w+/"))] == [4, 3, 0]
    assert [h[0] for h in hits(search(mem, '"ärger"'))] == [4, 3, 0]  # a phrase: newest first
    # Japanese has no spaces between words: it is looked for as written, inside the run.
    assert [h[0] for h in hits(search(mem, "日本語"))] == [1]
    assert hits(search(mem, "日本"))[0][4] == "**日本**語のテキスト"


def test_search_snippet_is_short_and_marks_cuts(mem):
    add(mem, "a " * 2000 + "NEEDLE" + " b" * 2000)
    (_, _, _, _, snip), = hits(search(mem, "needle"))
    assert "**NEEDLE**" in snip and snip.startswith("…") and snip.endswith("…")
    assert len(snip) < 200


def test_search_turned_off(tmp_path):
    memory = open_memory(tmp_path / "off", Settings(recall_search=False))
    add(memory, "text")
    assert tools.call(memory, "recall_search", {"query": "text"}) == "recall_search is turned off for this chat."
    memory.close()


def test_search_empty_memory(mem):
    assert search(mem, "anything") == "No hits for anything."
    assert search(mem, "/any/") == "No hits for /any/."


# -- recall_search: time limit ---------------------------------------------------------------

CATASTROPHIC = "a" * 5000 + "b"


class JumpClock:
    """Reads ``start`` once (the search takes its deadline), then ``later`` forever."""

    def __init__(self, start: float, later: float) -> None:
        self.values = [start]
        self.later = later
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.values.pop(0) if self.values else self.later


def test_pattern_search_stops_at_the_limit_fake_clock(mem):
    add(mem, "aaaa first")
    add(mem, CATASTROPHIC)
    add(mem, "aaaa newest")
    started = time.monotonic()
    clock = JumpClock(100.0, 102.5)                     # 2.5 s later: past the 2 s deadline
    answer = tools.recall_search(mem, "/(a+)+$/", clock=clock)
    assert time.monotonic() - started < 0.5
    assert clock.calls >= 2
    assert "stopped after 2 s" in answer
    assert "Narrow the pattern" in answer
    assert hits(answer) == []
    assert "messages 3 to 2" not in answer              # nothing was searched; say so plainly
    assert "before it had searched a single message" in answer


def test_pattern_search_reports_how_far_it_got(mem):
    """A clock that stands just before the deadline: the newer messages are searched, the
    catastrophic one runs out of time, older ones are never reached."""
    add(mem, "aaaa oldest")                             # 0, never reached
    add(mem, CATASTROPHIC)                              # 1
    add(mem, "bbb", "ends with aaaa")                   # 2, 3
    started = time.monotonic()
    answer = tools.recall_search(mem, "/(a+)+$/", clock=JumpClock(0.0, 2.0 - 0.05))
    assert time.monotonic() - started < 1.0
    assert "stopped after 2 s" in answer
    assert "messages 2 to 3" in answer
    assert [h[0] for h in hits(answer)] == [3]


def test_pattern_search_stopped_inside_a_turn(mem):
    """The limit can strike between two messages of one turn: the report counts what was
    searched, so it never lists a hit older than the messages it says it searched."""
    add(mem, "aaaa oldest")                             # 0, never reached
    add(mem, CATASTROPHIC, "ends with aaaa")            # 1 times out, 2 is searched
    answer = tools.recall_search(mem, "/(a+)+$/", clock=JumpClock(0.0, 2.0 - 0.05))
    assert [h[0] for h in hits(answer)] == [2]
    assert "messages 2 to 2" in answer
    result = searching.scan_pattern(mem.log, "(a+)+$", 0, 20, 2.0, JumpClock(0.0, 2.0 - 0.05))
    assert result.stopped_at == 2 and [h.id for h in result.hits] == [2]


def test_search_module_stops_with_fake_clock(mem):
    add(mem, CATASTROPHIC)
    result = searching.scan_pattern(mem.log, "(a+)+$", 0, 20, 2.0, JumpClock(0.0, 5.0))
    assert result.pattern and result.hits == [] and result.stopped_at is not None
    finished = searching.scan_pattern(mem.log, "first", 0, 20, 2.0, JumpClock(0.0, 0.0))
    assert finished.stopped_at is None


def test_pattern_search_real_time_limit(tmp_path):
    memory = open_memory(tmp_path / "m", Settings(regex_seconds=0.5))
    for _ in range(10):                                 # ten catastrophic messages
        add(memory, CATASTROPHIC)
    started = time.monotonic()
    answer = tools.call(memory, "recall_search", {"query": "/(a+)+$/"})
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, elapsed                       # one shared deadline, not 0.5 s per message (5 s)
    assert "stopped after 0.5 s" in answer
    memory.close()


def test_literal_search_finds_within_the_limit_and_stops_at_it(mem):
    """A query looked for as written (here Japanese, which the index cannot split) has the same limit."""
    add(mem, "日本語" * 2000)
    answer = tools.recall_search(mem, "語日")
    assert [h[0] for h in hits(answer)] == [0] and "stopped" not in answer
    answer = tools.recall_search(mem, "語日", clock=JumpClock(0.0, 1e9))
    assert hits(answer) == []
    assert "The search stopped after 2 s, before it had searched a single message." in answer
    assert "Search for fewer or shorter words." in answer


def test_ranked_search_stops_at_the_limit(mem):
    """Ranking is interrupted inside SQLite when its time is up, and says so."""
    for k in range(300):
        add(mem, f"common words {k} here and there")
    answer = tools.recall_search(mem, "common words", clock=JumpClock(0.0, 1e9))
    assert hits(answer) == []
    assert answer.startswith("The search stopped after 2 s before ranking every match. "
                             "Search for fewer or rarer words.")


# -- nothing raises ----------------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(tools.TOOL_NAMES + ("other",)),
       args=st.dictionaries(st.sampled_from(["id", "n", "page", "query", "x"]), JSONISH, max_size=4))
def test_call_never_raises(six, name, args):
    answer = tools.call(six, name, args)
    assert isinstance(answer, str) and answer


# -- tool definitions ------------------------------------------------------------------


def test_definitions_names_and_constancy():
    first = tools.definitions()
    assert [t["name"] for t in first] == ["zoom", "date", "recall_search"]
    raw = json.dumps(first, sort_keys=False).encode()
    for _ in range(3):
        assert json.dumps(tools.definitions()).encode() == raw
    assert [t["name"] for t in tools.definitions(include_search=False)] == ["zoom", "date"]
    assert json.dumps(tools.definitions()).encode() == raw


def test_definitions_survive_a_caller_changing_them():
    """Providers add cache marks to the last tool; that must not leak into the next call."""
    raw = json.dumps(tools.definitions())
    tools.definitions()[-1]["cache_control"] = {"type": "ephemeral"}
    anthropic_tools()[0]["input_schema"]["properties"]["id"]["minimum"] = 5
    openai_tools()[1]["function"]["description"] = "changed"
    assert json.dumps(tools.definitions()) == raw


def test_definitions_are_valid_json_schemas():
    for tool in tools.definitions():
        assert set(tool) == {"name", "description", "parameters"}
        assert tool["description"]
        jsonschema.Draft202012Validator.check_schema(tool["parameters"])
        jsonschema.Draft7Validator.check_schema(tool["parameters"])
        assert tool["parameters"]["type"] == "object"
    schemas = {t["name"]: jsonschema.Draft202012Validator(t["parameters"]) for t in tools.definitions()}
    assert schemas["zoom"].is_valid({"id": 0, "n": 1})
    assert schemas["zoom"].is_valid({"id": 8, "n": 8, "page": 2})
    assert not schemas["zoom"].is_valid({"id": 0})
    assert not schemas["zoom"].is_valid({"id": -1, "n": 1})
    assert not schemas["zoom"].is_valid({"id": 0, "n": 1, "extra": 1})
    assert schemas["date"].is_valid({"id": 3}) and not schemas["date"].is_valid({})
    assert schemas["recall_search"].is_valid({"query": "x"})
    assert not schemas["recall_search"].is_valid({"query": 1})


def test_definitions_match_the_settings_they_describe():
    s = Settings()
    by_name = {t["name"]: t for t in tools.definitions()}
    assert f"{s.zoom_page_chars:,}" in by_name["zoom"]["description"]
    assert f"{s.search_hits_tool} hits a page" in by_name["recall_search"]["description"]


def test_provider_shapes():
    defs = tools.definitions()
    assert openai_tools() == [{"type": "function", "function": t} for t in defs]
    assert anthropic_tools() == [
        {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
        for t in defs]
    assert len(openai_tools(include_search=False)) == 2


# -- the writer reads look-backs in words -------------------------------------------------


def test_lookback_words_for_each_tool():
    assert tools.lookback_words("zoom", {"id": 4, "n": 1}, "Plans") == "looked back at message 4 in «Plans»"
    assert tools.lookback_words("zoom", {"id": 0, "n": 8}, "Plans") == "looked back at line 0+8 in «Plans»"
    assert tools.lookback_words("date", {"id": 7}, "") == "looked up when message 7 was written"
    assert tools.lookback_words("recall_search", {"query": "garden"}, "Plans") == (
        "searched the history for 'garden' in «Plans»")
    for name, args in [("zoom", {"id": 4, "n": 1}), ("date", {"id": 7}),
                       ("recall_search", {"query": "x", "page": 2})]:
        words = tools.lookback_words(name, args, "T")
        assert words and "{" not in words and name not in words
    # a malformed call still reads as words, never as "None"
    for name, args in [("zoom", {"id": "abc", "n": 1}), ("zoom", {}), ("date", {"id": None}),
                       ("date", {})]:
        words = tools.lookback_words(name, args, "T")
        assert words and "None" not in words and words.endswith(" in «T»")
    assert tools.lookback_words("terminal", {"cmd": "ls"}, "T") is None
    assert tools.lookback_words("zoom", "not a dict", "T") is None


def test_trace_builder_hides_lookback_results_from_the_writer():
    trace = TraceBuilder(Settings())
    trace.add("said", "let me check")
    args = {"id": 4, "n": 1}
    trace.add("did", "zoom " + json.dumps(args), writer_text=tools.lookback_words("zoom", args, "Plans"))
    trace.add("result", "4+0|you: the secret plan", writer_text="")
    trace.add("did", "terminal ls")
    trace.add("result", "a.txt")
    assert trace.text() == ('said: let me check\ndid: zoom {"id": 4, "n": 1}\n'
                            "result: 4+0|you: the secret plan\ndid: terminal ls\nresult: a.txt")
    writer = trace.writer_text()
    assert writer == ("said: let me check\nlooked back at message 4 in «Plans»\n"
                      "did: terminal ls\nresult: a.txt")
    assert "zoom" not in writer and "secret plan" not in writer
    [message] = msgs.prepare("trace", trace.text(), BASE, Settings(), writer)
    assert message.to_record()["w"] == writer


def test_the_writer_line_of_a_lookback_trace(mem):
    trace = TraceBuilder(Settings())
    trace.add("did", 'zoom {"id": 0, "n": 1}', writer_text="looked back at message 0")
    trace.add("result", "0+0|you: hidden", writer_text="")
    mem.commit_turn("s1", "Chat", [Message("trace", trace.text(), BASE, trace.writer_text())])
    assert mem.node_text(0, 0) == "looked back at message 0"        # free line: the writer's words
    assert tools.zoom(mem, 0, 1) == '0+0|did: zoom {"id": 0, "n": 1}\nresult: 0+0|you: hidden'
