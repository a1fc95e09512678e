"""Issue #17 items 2-4: the derived files are checked against the order log, never trusted blindly.

Each test is an attack on a real memory's files (cut, zeroed, swapped or
garbage bytes), then what a person would see: the view, ``zoom``, the
memory's reports, and ``endless doctor``'s full scan.  ``scripts/attack_integrity.py``
runs the same attacks and prints the table.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import orjson
import pytest

from endless.core import integrity
from endless.core.view import tiling
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.core.store.turns import TurnRecord
from endless.writer.queue import ready_work

SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}


def fill(root: Path, turns: int, write: bool = True) -> Memory:
    memory = Memory.open(workspace_key(None, root / "ws"), settings=Settings(**SMALL), root=root)
    memory.commit_turns([TurnRecord("s", "attack", [Message("user", f"MARK-{k:06d}U", float(k)),
                                                    Message("reply", f"MARK-{k:06d}A", float(k))])
                         for k in range(turns)])
    while write:
        jobs = [j for j in ready_work(memory)]
        if not jobs:
            break
        for job in jobs:
            memory.store_line(job.level, job.index, f"summary {job.level}/{job.index}")
    return memory


def reopen(memory: Memory, readonly: bool = False) -> Memory:
    memory.close()
    return Memory.open(memory.key, settings=memory.settings, root=memory.root, readonly=readonly)


def shown(memory: Memory) -> str:
    return "\n".join(f"{tiling.name(line.part)}|{line.text}" for line in memory.views.view_lines() if line.text)


def cut_last_line(memory: Memory) -> None:
    data = memory.log.path.read_bytes()
    cut = data[:-1].rfind(b"\n") + 1
    with open(memory.log.path, "r+b") as handle:
        handle.truncate(cut)


# -- item 2: a log that got shorter ---------------------------------------------------------


@pytest.mark.parametrize("how", ["cut", "zeroed"])
def test_a_shorter_log_sets_aside_what_lies_past_its_end(tmp_path: Path, how: str) -> None:
    memory = fill(tmp_path, 1000)
    lost = memory.message(1998).text
    assert lost == "MARK-000999U" and memory.is_built(0, 1998)
    if how == "cut":
        cut_last_line(memory)
    else:  # the last block zeroed: the final newline with it
        size = memory.log.path.stat().st_size
        with open(memory.log.path, "r+b") as handle:
            handle.seek(size - 40)
            handle.write(b"\x00" * 40)
    memory = reopen(memory)
    assert memory.total == 1998 and memory.shortened is not None
    assert memory.shortened.claimed == 2000 and memory.shortened.lines >= 2
    assert any("got shorter" in r for r in memory.reports), memory.reports
    assert not memory.is_built(0, 1998) and not memory.is_built(0, 1999)
    quarantined = [orjson.loads(line) for line in memory.quarantine.read_bytes().splitlines()]
    # the free leaf of the lost message is set aside (it names its message: its words were the log's)
    assert any(q.get("reason", "").startswith("past the order log's end") and '"l":0,"i":1998,' in q["bytes"]
               for q in quarantined), quarantined
    memory.commit_turns([TurnRecord("s", "after", [Message("user", f"NEW-{k}", 5.0)]) for k in range(5)])
    assert memory.message(1998).text == "NEW-0"
    assert memory.node_text(0, 1998) == "you: NEW-0"
    assert "MARK-000999U" not in shown(memory) and "MARK-000999" not in (memory.node_text(0, 1999) or "")
    memory = reopen(memory)
    assert memory.reports == [] and memory.shortened is None
    assert memory.node_text(0, 1998) == "you: NEW-0" and "MARK-000999U" not in shown(memory)
    found = integrity.scan(memory)
    assert found.past_end == [] and found.bad_rows == [] and found.bad_slots == []
    memory.close()


def test_a_shorter_log_read_only_hides_the_lines_past_its_end(tmp_path: Path) -> None:
    memory = fill(tmp_path, 50)
    cut_last_line(memory)
    memory = reopen(memory, readonly=True)
    assert memory.shortened is not None and memory.total == 98
    assert not memory.is_built(0, 98) and "MARK-000049U" not in shown(memory)
    memory.close()


def test_a_shorter_log_drops_its_search_rows(tmp_path: Path) -> None:
    from endless.core.search.finder import corpus_of, search

    def run_search(corpus, words):
        return search(corpus, words, 0, 10, 5.0)

    memory = fill(tmp_path, 50, write=False)
    assert [h.id for h in run_search(corpus_of(memory), "000049U").hits] == [98]
    cut_last_line(memory)
    memory = reopen(memory)
    memory.commit_turns([TurnRecord("s", "after", [Message("user", "freshword", 5.0)])])
    assert [h.id for h in run_search(corpus_of(memory), "000049U").hits] == []
    assert [h.id for h in run_search(corpus_of(memory), "freshword").hits] == [98]
    memory.close()


# -- item 3: damage in the middle, found by the full scan -------------------------------------


@pytest.mark.parametrize("garbage", [b"\x00" * 30, b"{garbage not a turn"], ids=["nul", "garbage"])
def test_mid_log_damage_is_found_once_the_index_covers_it(tmp_path: Path, garbage: bytes) -> None:
    memory = fill(tmp_path, 20)
    lines = memory.log.path.read_bytes().split(b"\n")
    lines[7] = garbage[:len(lines[7])].ljust(len(lines[7]), b" ")  # same length: the index still points at it
    memory.log.path.write_bytes(b"\n".join(lines))
    memory = reopen(memory)
    found = integrity.scan(memory)
    assert [(t, ids) for t, _, ids in found.damaged_turns] == [(7, "messages 14..15")]
    assert memory.message(14) is None and memory.message(16).text == "MARK-000008U"
    assert any(d.offset == memory.log.offsets[7] for d in memory.damage)  # reported once read
    memory.close()


def test_a_damaged_last_line_stays_found_after_a_writer_indexes_past_it(tmp_path: Path) -> None:
    memory = fill(tmp_path, 10)
    with open(memory.log.path, "ab") as handle:
        handle.write(b"{not a turn at all}\n")
    memory = reopen(memory)  # a writer: indexes past it
    memory.commit_turn("s", "later", [Message("user", "later", 1.0)])
    memory = reopen(memory, readonly=True)
    assert memory.damage == []  # the index covers it now: nothing read it at open
    found = integrity.scan(memory)
    assert [t for t, _, _ in found.damaged_turns] == [10]
    memory.close()


# -- item 4: derived indexes verified --------------------------------------------------------


def test_swapped_turn_index_rows_are_caught_and_rebuilt(tmp_path: Path) -> None:
    memory = fill(tmp_path, 30)
    texts = [memory.message(i).text for i in range(memory.total)]
    rows = array("Q")
    rows.frombytes(memory.log.index_path.read_bytes())
    a, b = rows[5 * 5:6 * 5], rows[9 * 5:10 * 5]
    rows[5 * 5:6 * 5], rows[9 * 5:10 * 5] = b, a
    memory.log.index_path.write_bytes(rows.tobytes())
    memory = reopen(memory, readonly=True)
    assert [memory.message(i).text if memory.message(i) else None for i in range(memory.total)] == texts
    assert any("does not match" in r for r in memory.reports), memory.reports
    assert integrity.scan(memory).bad_rows == [5, 9]  # read-only: the file is as it was
    memory = reopen(memory)
    integrity.repair(memory)  # endless doctor --repair (or the writer's open, if its sample caught it)
    memory = reopen(memory)
    assert integrity.scan(memory).bad_rows == []
    memory.close()


def test_swapped_tree_slots_are_caught_and_rebuilt(tmp_path: Path) -> None:
    memory = fill(tmp_path, 30)
    text10, text20 = memory.node_text(0, 10), memory.node_text(0, 20)
    assert text10 != text20
    path = memory.tree.slot_path(0)
    slots = array("Q")
    slots.frombytes(path.read_bytes())
    slots[10], slots[20] = slots[20], slots[10]
    path.write_bytes(slots.tobytes())
    memory = reopen(memory)
    assert memory.node_text(0, 10) == text10 and memory.node_text(0, 20) == text20
    assert any("tree index does not match" in r for r in memory.reports), memory.reports
    memory.commit_turn("s", "later", [Message("user", "later", 1.0)])  # a writer stores the rebuilt slots
    memory = reopen(memory)
    assert integrity.scan(memory).bad_slots == []
    memory.close()


def test_a_garbage_tree_line_whose_slot_is_set_is_written_again(tmp_path: Path) -> None:
    memory = fill(tmp_path, 30)
    offset = memory.tree.slots[1][3] - 1
    data = bytearray(memory.tree.path.read_bytes())
    end = data.index(b"\n", offset)
    data[offset:end] = b"#" * (end - offset)
    memory.tree.path.write_bytes(bytes(data))
    memory = reopen(memory)
    found = integrity.scan(memory)
    assert [o for o, _ in found.damaged_lines] == [offset]
    assert memory.node_text(1, 3) is None and not memory.is_built(1, 3)
    assert any("written again" in r for r in memory.reports), memory.reports
    assert (1, 3) in [j.part for j in ready_work(memory)]
    assert memory.store_line(1, 3, "written again")
    memory = reopen(memory)
    assert memory.node_text(1, 3) == "written again"
    memory.close()


def test_a_process_open_while_the_log_gets_shorter_reads_it_again(tmp_path: Path) -> None:
    """A reader that had read past the new end catches up from the start, and sees no line past it."""
    writer = fill(tmp_path, 40)
    reader = Memory.open(writer.key, settings=writer.settings, root=writer.root, readonly=True)
    assert reader.total == 80
    cut_last_line(writer)
    writer = reopen(writer)  # sets aside the lines past the end: the tree file is replaced
    writer.commit_turns([TurnRecord("s", "after", [Message("user", "NEW-0", 5.0)])])
    reader.catch_up()
    assert reader.total == 79 and reader.message(78).text == "NEW-0"
    assert reader.node_text(0, 78) == "you: NEW-0" and not reader.is_built(0, 79)
    reader.close()
    writer.close()
