"""The view files (format 2, packed) and a read-only open that does not read them.

A read command's memory leaves its views unread: a search asks only which
line covers each hit, answered from the stored chat view by bisection, the
same answers the loaded view gives.  A stored view whose bytes changed after
its save is never taken for a view; one of format 1 is still read.
"""

from __future__ import annotations

from array import array
import random
from itertools import accumulate
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from endless.core.memory import Memory
from endless.core.settings import STORED_LOOKUPS_BEFORE_TAKING, VIEW_SUM_BLOCK, Settings
from endless.core.store import Message, TurnRecord, workspace_key
from endless.core.view import packed, tiling

SMALL = Settings(view_ceiling=3000, view_floor=1500, writer_view_ceiling=1400, writer_view_floor=700,
                 view_shrink_slack=800, line_budget=200)


def _memory(root: Path, readonly: bool = False) -> Memory:
    return Memory.open(workspace_key(None, root / "ws"), settings=SMALL, root=root, readonly=readonly)


def _fill(memory: Memory, turns: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    memory.commit_turns([TurnRecord("s", "chat", [Message("user", f"q{k} " + "word " * rng.randint(1, 60), k),
                                                  Message("reply", f"a{k} " + "more " * rng.randint(1, 60), k)],
                                    tid=f"{k + 1:016x}") for k in range(turns)], sync=False)


def test_a_read_only_open_reads_no_view_and_covers_each_message_as_the_loaded_view(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 300)  # lines too long to be free stay unwritten: the view is stuck shrinking, mixed levels
    memory.commit_turns([TurnRecord("s", "chat", [Message("user", "after the save", 999.0)], tid=f"{999:016x}")],
                        sync=False, plan=False)  # appended, not saved: past the stored view's total
    assert any(part[0] for part in memory.views.chat.parts)
    loaded = {mid: memory.views.covering(mid) for mid in range(memory.total)}
    assert all(loaded.values())
    memory.close()
    reader = _memory(tmp_path, readonly=True)
    assert reader.views._deferred  # nothing read at open
    assert {mid: reader.views.covering(mid) for mid in range(reader.total)} == loaded
    assert reader.views._deferred  # nor to cover a hit
    assert reader.views.covering(reader.total) is None and reader.views.covering(-1) is None
    assert reader.views.chat.parts  # asked for: read as an open reads it
    assert {mid: reader.views.covering(mid) for mid in range(reader.total)} == loaded
    reader.close()


def test_a_view_file_changed_after_its_save_is_read_as_an_open_reads_it(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 200)
    parts = list(memory.views.chat.parts)
    memory.close()
    path = tmp_path / "memories" / memory.memory_id / "view.json"
    data = orjson.loads(path.read_bytes())
    assert data["format"] == 2 and "firsts" in data and "parts" not in data
    firsts = bytearray(packed.base64.b64decode(data["firsts"]))
    firsts[-1] ^= 1  # one bit of one part: the checksum no longer holds
    data["firsts"] = packed.base64.b64encode(bytes(firsts)).decode()
    path.write_bytes(orjson.dumps(data))
    reader = _memory(tmp_path, readonly=True)
    assert reader.views.covering(0) == (0, 0)  # not taken for a view: read as a read-only open reads it
    assert not reader.views._deferred and reader.views.chat.parts[0] == (0, 0)
    reader.close()
    memory = _memory(tmp_path)  # a writable open says so and recomputes it
    assert any("stored view is invalid" in r and "checksum" in r for r in memory.reports), memory.reports
    tiling.validate(memory.views.chat, memory.total, memory.tree.built)
    assert memory.views.chat.total == memory.total and len(parts) > 1
    memory.close()


def test_a_view_of_format_1_is_read_and_saved_as_format_2(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    _fill(memory, 200)
    chat, total = list(memory.views.chat.parts), memory.views.chat.total
    memory.close()
    path = tmp_path / "memories" / memory.memory_id / "view.json"
    data = orjson.loads(path.read_bytes())
    old = {"format": 1, "total": data["total"], "shrinking": data["shrinking"], "parts": [list(p) for p in chat],
           "ceiling": data["ceiling"], "floor": data["floor"]}
    path.write_bytes(orjson.dumps(old))
    reader = _memory(tmp_path, readonly=True)
    assert reader.views.covering(total - 1) == chat[-1] and reader.views.chat.parts == chat
    reader.close()
    memory = _memory(tmp_path)
    assert memory.reports == [] and memory.views.chat.parts == chat
    memory.views.save()
    assert orjson.loads(path.read_bytes())["format"] == 2
    memory.close()


def _aligned(levels: list[int]) -> tuple[list[tuple[int, int]], int]:
    """A tiling with a part of each of ``levels`` in turn, each aligned to its size (parts of one message fill
    up to it), and the messages it covers."""
    parts, at = [], 0
    for level in levels:
        while at % (1 << level):
            parts.append((0, at))
            at += 1
        parts.append((level, at >> level))
        at += 1 << level
    return parts, at


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=0, max_size=40))
def test_packed_parts_round_trip_and_check_as_the_tiling_does(levels: list[int]) -> None:
    parts, at = _aligned(levels)
    stored = packed.unpack(packed.pack(parts, at, False))
    assert stored.parts() == parts
    packed.check_tiling(stored)
    assert tiling.check_tiling(parts, at) == at
    for mid in range(at):
        part = packed.covering(stored, mid)
        assert tiling.first(part) <= mid < tiling.end(part)
    if parts:
        broken = parts[1:] + [(0, at)]  # the first part missing: the rest starts past 0
        with pytest.raises(tiling.ViewError):
            tiling.check_tiling(broken, at)
        with pytest.raises(packed.PackError):
            packed.check_tiling(packed.unpack(packed.pack(broken, at + 1, False)))


def test_sizes_a_view_file_kept_are_taken_back_only_where_they_still_hold(tmp_path: Path, monkeypatch) -> None:
    """A writable open takes each part's size from the file instead of reading its line, but not for a line
    erased by a forget since, a message forgotten since, or a message whose line was written since: every
    size is then what reading the lines gives."""
    from endless.core.privacy import forget
    from endless.core.view.sizes import ViewSizes

    memory = _memory(tmp_path)
    _fill(memory, 300)
    memory.views.save()
    unwritten = [i for i in range(memory.total) if not memory.is_built(0, i)]
    memory.store_line(0, unwritten[0], "written after the save")  # (the view file was not saved again)
    forget.forget(memory, forget.select(memory, ids=[unwritten[1], 3]))
    memory.close()
    taking = _memory(tmp_path)
    assert taking.views.sizes.unwritten_known() and any(row.count(0) < len(row) for row in taking.views.sizes.known)
    with monkeypatch.context() as reading:
        reading.setattr(ViewSizes, "take", lambda self, state, trusted=False, written_since=(): None)
        reading_all = _memory(tmp_path)
        for state in ("chat", "wview"):
            parts = getattr(reading_all.views, state).parts
            assert getattr(taking.views, state).parts == parts
            assert [taking.views.size_of(p) for p in parts] == [reading_all.views.size_of(p) for p in parts]
        reading_all.close()
    taking.close()


def _sizes_as_reading_gives(memory: Memory, root: Path, monkeypatch) -> None:
    """Each part's size in ``memory`` is the one an open that reads every line gives, and each view's whole
    size is the sum of its parts'."""
    from endless.core.view.sizes import ViewSizes

    with monkeypatch.context() as reading:
        reading.setattr(ViewSizes, "take", lambda self, state, trusted=False, written_since=(): None)
        reading_all = _memory(root)
        for state in ("chat", "wview"):  # (the reading open may merge what a forget made free)
            own = getattr(memory.views, state).parts
            parts = sorted(set(own) | set(getattr(reading_all.views, state).parts))
            assert [memory.views.size_of(p) for p in parts] == [reading_all.views.size_of(p) for p in parts]
            assert memory.views.size(getattr(memory.views, state)) == sum(map(memory.views.size_of, own))
        reading_all.close()


@pytest.mark.parametrize("lookups", [STORED_LOOKUPS_BEFORE_TAKING, 5])
def test_a_view_file_saved_against_the_tree_read_now_is_trusted_and_sizes_as_reading_does(
        tmp_path: Path, monkeypatch, lookups: int) -> None:
    """An open whose view file was saved against the tree it reads (or that tree and lines appended since)
    and the forgets it reads copies no size and checks no part: sizes are read from the file when asked
    (or all taken at once after ``lookups`` of them).  Each is the size reading the lines gives, for
    lines written and messages forgotten by another process after the open or before it.  A forget
    since the save makes the next open check the file."""
    from endless.core.privacy import forget
    from endless.core.view import sizes as sizes_module

    monkeypatch.setattr(sizes_module, "STORED_LOOKUPS_BEFORE_TAKING", lookups)
    memory = _memory(tmp_path)
    _fill(memory, 1000)
    memory.views.save()
    memory.close()

    def trusted(memory: Memory, lines: int = 0) -> bool:
        """Sizes asked at the open for the view's tail and the ``lines`` written since the save alone (the
        blocks' sums are the file's), read from the file, or all taken once more than ``lookups`` were."""
        asked_at_most = len(memory.views.chat.parts) % VIEW_SUM_BLOCK + lines
        asked = memory.views.sizes.unwritten_known() + sum(len(row) - row.count(0) for row in memory.views.sizes.known)
        if lookups > asked_at_most:
            return bool(memory.views.sizes._pending) and asked <= asked_at_most
        return not memory.views.sizes._pending and asked > asked_at_most

    trusting = _memory(tmp_path)
    assert trusted(trusting)
    unwritten = [i for i in range(trusting.total) if not trusting.is_built(0, i)]
    assert len(unwritten) > 20
    other = _memory(tmp_path)  # (another process's changes, read by the trusting open without a save of its own)
    other.store_line(0, unwritten[0], "written after the open")
    other.close()
    pending = list(trusting.views.sizes._pending)
    trusting.catch_up()
    assert trusting.views.sizes._pending == pending  # (no view saved since: sizes still read from the file)
    _sizes_as_reading_gives(trusting, tmp_path, monkeypatch)
    trusting.close()
    other = _memory(tmp_path)
    other.store_line(0, unwritten[2], "written after the save")
    other.close()
    grown = _memory(tmp_path)  # the tree grew by a line (and a free parent above it) since the save
    assert orjson.loads((tmp_path / "memories" / grown.memory_id / "view.json").read_bytes())["measured"][1] < grown.tree.end
    assert trusted(grown, lines=2)
    _sizes_as_reading_gives(grown, tmp_path, monkeypatch)
    other = _memory(tmp_path)
    forget.forget(other, forget.select(other, ids=[unwritten[1], 3]))
    other.close()
    grown.catch_up()
    _sizes_as_reading_gives(grown, tmp_path, monkeypatch)
    grown.close()
    other = _memory(tmp_path)
    other.views.save()
    forget.forget(other, forget.select(other, ids=[unwritten[4]]))
    other.close()
    checking = _memory(tmp_path)  # a forget since the save: checked part by part
    assert not checking.views.sizes._pending and checking.views.sizes.unwritten_known() > len(unwritten) // 2
    _sizes_as_reading_gives(checking, tmp_path, monkeypatch)
    checking.close()


@hsettings(max_examples=120, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=30), st.data())
def test_the_packed_cover_check_agrees_with_the_tiling_one(levels: list[int], data) -> None:
    """``packed.covers`` (C-level passes, and a view equal to the other at once) answers as ``tiling.covers``
    for a view against itself, a copy, a coarsening, a refinement and a shorter view."""
    fine, at = _aligned(levels)
    leaves = [(0, k) for k in range(at)]
    merged = list(fine)
    for _ in range(data.draw(st.integers(0, 4))):  # merge a pair of siblings, if there is one
        pairs = [k for k in range(len(merged) - 1) if merged[k][0] == merged[k + 1][0]
                 and merged[k][1] % 2 == 0 and merged[k + 1][1] == merged[k][1] + 1]
        if not pairs:
            break
        k = data.draw(st.sampled_from(pairs))
        merged[k:k + 2] = [(merged[k][0] + 1, merged[k][1] // 2)]
    for coarse, finer in [(fine, fine), (list(fine), fine), (merged, fine), (fine, merged), (fine, leaves),
                          (leaves, fine), (fine[:-1], fine)]:
        assert packed.covers(coarse, finer) == tiling.covers(coarse, finer), (coarse, finer)


@hsettings(max_examples=100, deadline=None)
@given(st.binary(max_size=60), st.integers(0, 255))
def test_a_level_mask_marks_the_parts_of_that_level_alone(levels: bytes, level: int) -> None:
    assert list(packed.level_mask(levels, level)) == [int(code == level) for code in levels]


def _tiles(levels: list[int], firsts: list[int], total: int) -> bool:
    """The plain rule a stored view's arrays must keep: in order from 0, each part aligned, up to ``total``."""
    at = 0
    for level, first in zip(levels, firsts):
        if first != at or first % (1 << level):
            return False
        at += 1 << level
    return at == total


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=30), st.data())
def test_a_stored_view_is_accepted_exactly_when_its_parts_tile_its_total(levels: list[int], data) -> None:
    """Both ways of checking (counts a byte each up to level 7, wider above) against the plain rule, for
    tilings, tilings with one thing changed (a first message moved, a level changed, the total), and parts
    laid end to end whatever their alignment."""
    parts, at = _aligned(levels)
    stored = packed.unpack(packed.pack(parts, at, False))
    p_levels, firsts, total = list(stored.levels), stored.firsts.tolist(), at
    change = data.draw(st.sampled_from(["none", "first", "level", "total", "packed"]))
    if change == "packed":  # the levels as drawn, each part right after the one before: maybe unaligned
        p_levels, firsts = levels, list(accumulate((1 << level for level in levels[:-1]), initial=0))[:len(levels)]
        total = sum(1 << level for level in levels)
    elif change != "none" and parts:
        k = data.draw(st.integers(0, len(parts) - 1))
        if change == "first":
            firsts[k] = max(0, firsts[k] + data.draw(st.sampled_from([-2, -1, 1, 2, 64])))
        elif change == "level":
            p_levels[k] = data.draw(st.integers(0, 9))
        else:
            total += data.draw(st.sampled_from([-1, 1]))
    changed = packed.Packed(bytes(p_levels), array(stored.firsts.typecode, firsts), max(total, 0), False)
    if _tiles(p_levels, firsts, max(total, 0)):
        packed.check_tiling(changed)
    else:
        with pytest.raises(packed.PackError):
            packed.check_tiling(changed)


@given(st.lists(st.sampled_from([0, 0, 0, 1, 1, 2, 5]), max_size=200), st.integers(0, 6))
def test_a_levels_values_are_picked_alike_whether_it_is_rare_or_common(levels: list[int], level: int) -> None:
    values = list(range(1000, 1000 + len(levels)))
    picked = packed.of_level(bytes(levels), values, level)
    assert picked == [v for v, lv in zip(values, levels) if lv == level]
