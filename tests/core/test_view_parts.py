"""A view's parts held packed (endless.core.view.parts): read as the pairs every caller knows, and held so
by every way a view is made (a merge, an append, a file read, a refold), since the memory saved is the point."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, strategies as st

from endless.core.view import tiling
from endless.core.view.parts import Parts, as_parts
from endless.core.view.tiling import Lines, ViewState, merge_down

pairs = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2 ** 20)), max_size=30)


@given(pairs, st.data())
def test_parts_read_back_as_the_pairs_they_were_made_of(made, data) -> None:
    parts = Parts(made)
    assert list(parts) == made and len(parts) == len(made) and parts == made and made == parts
    assert list(reversed(parts)) == made[::-1]
    if made:
        k = data.draw(st.integers(-len(made), len(made) - 1))
        assert parts[k] == made[k]
    start, stop = data.draw(st.integers(0, len(made))), data.draw(st.integers(0, len(made)))
    assert isinstance(parts[start:stop], Parts) and parts[start:stop] == made[start:stop]
    assert parts + [(1, 1)] == made + [(1, 1)] and [(1, 1)] + parts == [(1, 1)] + made
    assert pickle.loads(pickle.dumps(parts)) == parts
    assert parts.firsts().tolist() == [index << level for level, index in made]


def test_parts_change_in_place_and_copies_do_not_follow() -> None:
    parts = Parts([(1, 0)])
    copy = parts.copy()
    parts.append((0, 2))
    parts.extend([(0, 3)])
    parts.extend(Parts([(0, 4)]))
    parts.extend_leaves(5, 8)
    assert parts == [(1, 0), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7)]
    assert copy == [(1, 0)] and as_parts(parts) is parts and as_parts([(0, 0)]) == [(0, 0)]
    assert parts != [(1, 0)] and parts != Parts([(1, 0)]) and Parts() == [] and not Parts()


def test_a_part_that_cannot_be_held_is_refused() -> None:
    with pytest.raises(ValueError):
        Parts([(256, 0)])
    with pytest.raises(ValueError):
        Parts([(-1, 0)])
    with pytest.raises(OverflowError):
        Parts([(0, 2 ** 63)])
    with pytest.raises(tiling.ViewError):  # a stored view of format 1 naming one: a view error, as any other
        ViewState.from_json({"parts": [[300, 0]], "total": 1})


def _lines(sizes: dict) -> Lines:
    return Lines(lambda part: sizes.get(part, 10 * (part[0] + 1)))


@given(st.integers(1, 300), st.integers(0, 3000))
def test_every_way_of_making_a_view_holds_its_parts_packed(total, target) -> None:
    lines = _lines({})
    leaves = Parts.leaves(0, total)
    merged = merge_down(leaves, total, target, lines)
    assert isinstance(merged.parts, Parts) and isinstance(merged.merged, Parts)
    assert merge_down(list(leaves), total, target, lines) == merged  # a list of pairs merges alike
    assert tiling.check_tiling(merged.parts, total) == total
    state = ViewState(merged.parts, total)
    state.append(total + 3)
    assert isinstance(state.parts, Parts) and state.parts[-3:] == [(0, total), (0, total + 1), (0, total + 2)]
    read = ViewState.from_json(state.to_json())
    assert isinstance(read.parts, Parts) and read.parts == state.parts and read.total == total + 3
    assert isinstance(tiling.refold(total, lines, target).parts, Parts)
    assert isinstance(ViewState().parts, Parts)
