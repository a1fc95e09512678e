"""Free nodes against their definition (DESIGN §2.3), over commits of any batching.

A message whose ``tag: text`` fits the line budget is its own leaf, and a
parent whose halves are both free and fit together (joined by a newline) is
their join.  The oracle below derives that set from the messages alone; the
memory, committing the same messages in random batches, must hold exactly
those nodes with exactly those texts, and nothing else (no writer runs).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
from hypothesis import example, given, settings as hsettings, strategies as st

from endless.core.view.free_nodes import FreeStretch
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message, render
from endless.core.view.render import head, line_size
from endless.core.settings import Settings
from endless.core.store.records import record_tail
from endless.core.store.messages import KINDS
from endless.core.store.turns import COMPLETED, EncodedTurn, TurnRecord

SETTINGS = Settings(line_budget=200)
WORDS = ["ok", "yes", "déjà vu", "naïve", "日本語", "line\nbreak", "cr\r\nlf", "a <chat> tag",
         "a \uff1cchat\uff1e tag", "x" * 40, "y" * 90, "z" * 190,
         # controls the view shows escaped (render.HIDDEN), and look-alikes it leaves as they are
         "esc \x1b[2J", "bel\x07", "bs\b\b", "ff\f", "del\x7f", "csi \x9b31m", "rlo \u202e", "zw\u200b",
         "tag\U000e0041", "nbsp\xa0", "joiner\u200d", "a \\b and \\f and \\u0041"]
SHORT = ["a", "bc", "d e", "é", "f\\rg"]  # (an escaped backslash before an r: plain, but looks not to be)


def _oracle(messages: list[Message], total: int, written: dict[int, str] | None = None) -> dict[tuple[int, int], str]:
    """Every node a memory holds when no writer ran but for the leaves in ``written``."""
    nodes: dict[tuple[int, int], str] = {}
    for i, m in enumerate(messages):
        source = render(m.kind, m.text, SETTINGS, SETTINGS.agent_name)
        if written and i in written:
            nodes[(0, i)] = written[i]
        elif len(source.encode()) <= SETTINGS.line_budget:
            nodes[(0, i)] = source
    level = 0
    while (1 << (level + 1)) <= total:
        for index in range(total >> (level + 1)):
            left, right = nodes.get((level, 2 * index)), nodes.get((level, 2 * index + 1))
            if left is not None and right is not None:
                joined = f"{left}\n{right}"
                if len(joined.encode()) <= SETTINGS.line_budget:
                    nodes[(level + 1, index)] = joined
        level += 1
    return nodes


def encoded(turn: TurnRecord, budget: int = SETTINGS.line_budget) -> EncodedTurn:
    """A turn as an import spills it (importer.Plan): its log tail, and per message its kind, its
    source's bytes and that source escaped."""
    sources = [m.text if m.writer_text is None else m.writer_text for m in turn.messages]
    sizes = [len(x.encode()) for x in sources]
    return EncodedTurn(record_tail(turn.tid, turn.session, turn.title, COMPLETED, turn.messages[0].at,
                                   [m.to_record() for m in turn.messages]),
                       turn.session, turn.title, turn.messages[0].at, [KINDS.index(m.kind) for m in turn.messages],
                       sizes, [orjson.dumps(x)[1:-1] if size <= budget else b"" for x, size in zip(sources, sizes)])


@hsettings(max_examples=40, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(WORDS) | st.sampled_from(SHORT), min_size=1, max_size=4).map(" ".join),
                      min_size=1, max_size=70),
       turn_sizes=st.lists(st.integers(1, 3), min_size=1, max_size=10),
       cuts=st.lists(st.integers(1, 9), min_size=1, max_size=20),
       writes=st.lists(st.booleans(), min_size=1, max_size=20),
       before=st.sampled_from([0, 1021]))
@example(texts=["ok", "yes", "a", "bc", "a", "é"], turn_sizes=[1], cuts=[1], writes=[False], before=0)  # odd starts
@example(texts=["a"] * 40, turn_sizes=[3], cuts=[1, 2], writes=[False], before=1021)
def test_the_memory_holds_exactly_the_free_nodes(texts: list[str], turn_sizes: list[int], cuts: list[int],
                                                 writes: list[bool], before: int) -> None:
    """Both ways of committing (a live chat's records, an import's encoded turns) hold the oracle's
    nodes, store the very same bytes, and size every line as the views render it.  Turns have one
    to three messages (so a batch may start at any id), a memory may hold a thousand short
    messages before (so heads grow digits), and between batches a writer may write the leaves
    of messages too long to be free (their parents may then be free)."""
    messages = [Message("user" if k % 2 == 0 else "reply", f"p{k}", 1_600_000_000.0 + k) for k in range(before)]
    k = 0
    while len(messages) < before + len(texts):
        size = min(turn_sizes[k % len(turn_sizes)], before + len(texts) - len(messages))
        for j in range(size):
            n = len(messages)
            messages.append(Message("user" if j == 0 else "reply", texts[n - before], 1_700_000_000.0 + n))
        k += 1
    with tempfile.TemporaryDirectory() as tmp:
        trees: dict[str, bytes] = {}
        written: dict[int, str] = {}
        for way in ("records", "encoded"):
            home = Path(tmp) / way
            memory = Memory.open(workspace_key(None, home / "ws"), settings=SETTINGS, root=home)
            told: list[FreeStretch] = []
            memory.on_free_stretch(told.append)
            if before:
                memory.commit_turns([TurnRecord("s", "t", messages[i:min(i + 2, before)], tid=f"{i + 1:016x}")
                                     for i in range(0, before, 2)], sync=False)
            at, k = before, 0
            while at < len(messages):  # batches of whole turns, cut at random
                turns = []
                for _ in range(cuts[k % len(cuts)]):
                    if at >= len(messages):
                        break
                    take = 1
                    while at + take < len(messages) and messages[at + take].kind == "reply":
                        take += 1
                    turns.append(TurnRecord("s", "t", messages[at:at + take], tid=f"{at + 1:016x}"))
                    at += take
                if way == "records":
                    memory.commit_turns(turns, sync=False)
                else:
                    memory.bulk_commit(lambda m: [encoded(turn) for turn in turns], sync=False)
                if writes[k % len(writes)]:  # the writer writes the unwritten leaves so far
                    for i in range(memory.total):
                        if not memory.is_built(0, i):
                            written[i] = f"long message {i}"
                            memory.store_line(0, i, written[i], sync=False)
                k += 1
            trees[way] = memory.tree.path.read_bytes() if memory.tree.path.exists() else b""
            expected = _oracle(messages, len(messages), written)
            if not written:
                _check_told(memory, told, expected)
            held = {(level, index): memory.node_text(level, index)
                    for level, slots in enumerate(memory.built_slots())
                    for index in range(len(slots)) if slots[index]}
            # the sizes the views plan with are the rendered lines' (counted as the lines were stored)
            sizes = {part: memory.views.size_of(part) for part in held}
            assert sizes == {part: line_size(head(part), text) for part, text in held.items()}
            for state in (memory.views.chat, memory.views.wview):  # summed a run at a time, as one by one
                assert memory.views.size(state) == sum(memory.views.size_of(part) for part in state.parts)
            memory.close()
            again = Memory.open(workspace_key(None, home / "ws"), settings=SETTINGS, root=home, readonly=True)
            reread = {part: again.node_text(*part) for part in expected}
            again.close()
            assert held == expected
            assert reread == expected
        assert trees["encoded"] == trees["records"]


def _check_told(memory: Memory, told: list[FreeStretch], free: dict[tuple[int, int], str]) -> None:
    """The stretches told are the commits' appends, one after another, and hold free lines alone."""
    data = memory.tree.path.read_bytes() if memory.tree.path.exists() else b""
    at = 0
    for stretch in told:
        assert stretch.inode == memory.tree.path.stat().st_ino
        assert stretch.start == at < stretch.end <= len(data)
        for line in data[stretch.start:stretch.end].splitlines():
            record = orjson.loads(line)
            assert "text" not in record  # a free line holds no copy of the log's words
            assert free[(record["l"], record["i"])] == memory.node_text(record["l"], record["i"])
        at = stretch.end
    assert at == len(data)  # no writer ran: every line is a commit's free line, and told


def test_a_written_line_is_never_in_a_stretch_told_free(tmp_path: Path) -> None:
    """Between commits a writer stores a summary line: the next commit's stretch starts after it."""
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SETTINGS, root=tmp_path)
    told: list[FreeStretch] = []
    memory.on_free_stretch(told.append)
    long = "w" * 300  # past the budget: its leaf and its parent are the writer's
    memory.commit_turns([TurnRecord("s", "t", [Message("user", long, 1.0), Message("reply", "ok", 2.0)],
                                    tid=f"{1:016x}")], sync=False)
    assert [(s.start, s.end) for s in told] == [(0, memory.tree.end)]  # the short reply's leaf alone
    memory.store_line(0, 0, "the person pasted a long row of w")
    written_end = memory.tree.end  # the written leaf, and the free parent it makes with the reply's
    told.clear()
    memory.commit_turns([TurnRecord("s", "t", [Message("user", "hi", 3.0), Message("reply", "yes", 4.0)],
                                    tid=f"{2:016x}")], sync=False)
    assert [(s.start, s.end) for s in told] == [(written_end, memory.tree.end)]
    lines = memory.tree.path.read_bytes()[told[0].start:told[0].end].splitlines()
    # the new leaves, their parent, and the one above it over the written leaf's free parent (not told)
    assert [(orjson.loads(line)["l"], orjson.loads(line)["i"]) for line in lines] == [(0, 2), (0, 3), (1, 1), (2, 0)]
    memory.close()


def test_a_parent_exactly_at_the_budget_is_free_and_one_byte_more_is_not(tmp_path: Path) -> None:
    tags = len(render("user", "", SETTINGS, SETTINGS.agent_name)) + len(render("reply", "", SETTINGS,
                                                                               SETTINGS.agent_name))
    room = SETTINGS.line_budget - tags - 1  # the newline between the halves
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SETTINGS, root=tmp_path)
    pairs = [("é" * (room // 4), "a" * (room - 2 * (room // 4))),  # exactly the budget, two-byte letters
             ("b" * (room // 2), "c" * (room - room // 2 + 1))]  # one byte over
    for k, (user, reply) in enumerate(pairs):
        memory.commit_turns([TurnRecord("s", "t", [Message("user", user, 1.0), Message("reply", reply, 2.0)],
                                        tid=f"{k + 1:016x}")], sync=False)
    assert memory.is_built(1, 0) and not memory.is_built(1, 1)
    assert len(memory.node_text(1, 0).encode()) == SETTINGS.line_budget
    memory.close()
