"""The tree's format 2: free lines read through the log, and a format-1 memory opened as it was.

A free leaf refers to its message and a free parent over two such lines is
their join, so the tree holds no copy of the log's words; the texts read
back are the very texts format 1 stored, and a memory of format 1 is
migrated on open with every line, the view's bytes and the search index as
they were.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from endless.core.memory import Memory
from endless.core.privacy import forget
from endless.core.settings import Settings
from endless.core.store import Message, TurnRecord, workspace_key
from endless.core.store.tree import FORMAT, TreeStore

SETTINGS = Settings(line_budget=200)


def _memory(root: Path) -> Memory:
    return Memory.open(workspace_key(None, root / "ws"), settings=SETTINGS, root=root)


def _fill(memory: Memory, turns: int) -> None:
    memory.commit_turns([TurnRecord("s", "chat", [Message("user", f"question {k} about pelicans", 10.0 + k),
                                                  Message("reply", f"answer {k}: " + ("long " * 60 if k % 5 == 0
                                                                                      else "short"), 11.0 + k)],
                                    tid=f"{k + 1:016x}") for k in range(turns)], sync=False)


def _texts(memory: Memory) -> dict[tuple[int, int], str | None]:
    return {(level, index): memory.node_text(level, index)
            for level, slots in enumerate(memory.built_slots()) for index in range(len(slots)) if slots[index]}


def _as_format_1(memory: Memory) -> Path:
    """The memory's tree rewritten as format 1 stored it (every line with its text), under format 1's names."""
    lines = []
    for raw in memory.tree.path.read_bytes().splitlines():
        record = orjson.loads(raw)
        if "text" not in record:
            text = memory.node_text(record["l"], record["i"])
            record = {"l": record["l"], "i": record["i"], "text": text, "size": record["size"],
                      **({"src": record["src"]} if "src" in record else {})}
        lines.append(orjson.dumps(record) + b"\n")
    folder = memory.folder
    memory.close()
    old = folder / "tree.turn.v1.jsonl"
    old.write_bytes(b"".join(lines))
    (folder / f"tree.turn.v{FORMAT}.jsonl").unlink()
    for path in (folder / "index").glob(f"tree-*.v{FORMAT}.bin"):
        path.unlink()  # the old index would not match the rewritten file (rebuilt at open either way)
    return old


def test_free_lines_hold_no_copy_of_the_log_and_read_as_their_texts(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 40)
    data = memory.tree.path.read_bytes()
    assert b"pelicans" not in data  # no free line copies a message
    records = [orjson.loads(line) for line in data.splitlines()]
    assert {("ref" in r, "join" in r) for r in records} == {(True, False), (False, True)}
    assert memory.node_text(0, 0) == "you: question 0 about pelicans"
    assert memory.node_text(1, 1) == "you: question 1 about pelicans\nAssistant: answer 1: short"
    memory.close()
    again = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SETTINGS, root=tmp_path, readonly=True)
    assert again.node_text(1, 1) == "you: question 1 about pelicans\nAssistant: answer 1: short"
    again.close()


def test_a_parent_over_a_written_line_keeps_its_text(tmp_path: Path) -> None:
    """A written half's words live in the tree alone: a free parent over it stores them, so losing that
    half (damage) never takes the parent's words with it."""
    memory = _memory(tmp_path)
    _fill(memory, 1)  # message 1 is too long to be free
    assert memory.store_line(0, 1, "Assistant: a long answer")
    parent = orjson.loads(memory.tree.path.read_bytes().splitlines()[-1])
    assert (parent["l"], parent["i"]) == (1, 0)
    assert parent["text"] == "you: question 0 about pelicans\nAssistant: a long answer"
    memory.close()


def test_a_format_1_memory_is_migrated_on_open_and_reads_the_same(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 60)
    for index in range(0, 120, 10):  # the writer wrote the long answers' leaves
        if not memory.is_built(0, index + 1):
            memory.store_line(0, index + 1, f"Assistant: answer {index // 2}, long")
    memory.plan_views()
    texts, view = _texts(memory), memory.views.render().text
    hits = [h.id for h in memory_search(memory, "pelicans")]
    old = _as_format_1(memory)
    size = old.stat().st_size
    memory = _memory(tmp_path)
    assert not old.exists() and memory.tree.path.name == f"tree.turn.v{FORMAT}.jsonl"
    assert memory.tree.path.stat().st_size == size  # renamed, not rewritten: the index's offsets hold
    assert _texts(memory) == texts
    assert memory.views.render().text == view  # the view's bytes, as before
    assert [h.id for h in memory_search(memory, "pelicans")] == hits
    _fill_more(memory)  # new lines go on in format 2 after the old ones
    assert memory.node_text(0, 120) == "you: question 100 about pelicans"
    memory.close()


def test_a_format_1_tree_in_a_folder_that_cannot_be_written_is_read_in_place(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 10)
    texts = _texts(memory)
    folder = memory.folder
    old = _as_format_1(memory)
    tree = TreeStore(folder, "turn")
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user writes any folder (root)")
        assert tree.migrate() is None and tree.path == old
    finally:
        os.chmod(folder, 0o700)
    memory = _memory(tmp_path)
    assert _texts(memory) == texts
    memory.close()


def test_forgetting_a_message_leaves_no_line_that_reads_its_words(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 20)
    gone = [m for m in forget.select(memory, query="question 7 about")]
    assert gone == [14]
    forget.forget(memory, gone)
    texts = _texts(memory)
    assert not any("question 7 about" in (text or "") for text in texts.values())
    assert "question 7 about" not in memory.tree.path.read_text()
    assert texts[(0, 14)].startswith("you: (forgotten on ")  # its tombstone's line
    memory.close()
    again = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SETTINGS, root=tmp_path, readonly=True)
    assert not any("question 7 about" in (again.node_text(*part) or "") for part in texts)
    again.close()


def memory_search(memory: Memory, query: str) -> list:
    from endless.core.search.finder import corpus_of, search

    return search(corpus_of(memory), query, 0, 50, 10.0).hits


def _fill_more(memory: Memory) -> None:
    memory.commit_turns([TurnRecord("s", "chat", [Message("user", "question 100 about pelicans", 500.0)],
                                    tid=f"{999:016x}")], sync=False)
