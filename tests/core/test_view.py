"""The merge choice, the sawtooth and the worked example of DESIGN §2.4."""

from __future__ import annotations

from array import array

from hypothesis import example, given, settings, strategies as st

from endless.core.view import tiling as views
from endless.core.view.tiling import Lines, Part, Sawtooth, ViewState, merge_down, most_due


def merge_at(parts: list[Part], k: int) -> Part:
    """The slow oracle's merge: pair ``k, k+1`` becomes their parent, in place."""
    merged = views.parent(parts[k])
    parts[k:k + 2] = [merged]
    return merged


# -- the oracle: an independent transcription of Taelin's rollback-list push -----------

def push(entries: list[list[int]], state: int) -> list[list[int]]:
    """Newest-first list of [state, keep]. A 0 absorbs the new state; a 1 carries the old one down."""
    if not entries:
        return [[state, 0]]
    newest = entries[0]
    if newest[1] == 0:
        newest[1] = 1
        return entries
    return [[state, 0]] + push(entries[1:], newest[0])


def push_view(entries: list[list[int]]) -> list[int]:
    """Oldest-first starts of the lines the list stands for."""
    return [state for state, _ in reversed(entries)]


def first_message_due(parts: list[tuple[int, int]], total: int) -> int | None:
    """The known-wrong variant: due measured from the pair's first message."""
    best, best_score = None, None
    for k in range(len(parts) - 1):
        (l, i), (l2, i2) = parts[k], parts[k + 1]
        if l != l2 or i % 2 or i2 != i + 1:
            continue
        score = (total - (i << l)) / (1 << (l + 2))
        if best is None or score > best_score:
            best, best_score = k, score
    return best


def run_with_budget(choose, steps: int):
    """Yield (T, view starts, push starts) with the push list's length as the line budget."""
    entries: list[list[int]] = []
    parts: list[tuple[int, int]] = []
    for t in range(steps):
        entries = push(entries, t)
        parts.append((0, t))
        while len(parts) > len(entries):
            k = choose(parts, t + 1)
            assert k is not None, f"nothing to merge at T={t + 1}"
            merge_at(parts, k)
        yield t + 1, [views.first(p) for p in parts], push_view(entries)


def test_most_due_equals_push_for_twenty_thousand_steps():
    checked = 0
    for total, ours, theirs in run_with_budget(most_due, 20_001):
        assert ours == theirs, f"T={total}: view {ours} but push {theirs}"
        checked += 1
    assert checked == 20_001


def test_first_message_variant_disagrees_first_at_ten():
    first_bad = None
    for total, ours, theirs in run_with_budget(first_message_due, 200):
        if ours != theirs:
            first_bad = total
            break
    assert first_bad == 10
    parts = [(2, 0), (2, 1), (0, 8), (0, 9)]
    assert most_due(parts, 10) == 2  # merges 8+1, 9+1
    assert first_message_due(parts, 10) == 0  # merges 0..7: the bug


def test_most_due_respects_built_and_siblings():
    parts = [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert most_due(parts, 4) == 0
    assert most_due(parts, 4, built=lambda l, i: (l, i) != (1, 0)) == 2
    assert most_due(parts, 4, built=lambda l, i: False) is None
    assert most_due([(0, 1), (0, 2)], 3) is None  # neighbours but not siblings
    assert most_due([(1, 0), (0, 2)], 3) is None  # different levels
    assert most_due([], 0) is None


# -- the worked example ------------------------------------------------------------

def test_worked_example_step_by_step():
    saw = Sawtooth(ceiling=1000, floor=500, slack=16_000, estimate=100)
    state = ViewState()
    size_of = lambda part: 100  # noqa: E731 - every line 100 bytes
    built = lambda l, i: True  # noqa: E731
    for t in range(10):
        state.append(t + 1)
        outcome = saw.batch(state, 100 * len(state.parts), Lines(size_of, built))
        assert not outcome.changed and len(state.parts) == t + 1
    assert 100 * len(state.parts) == 1000
    state.append(11)
    outcome = saw.batch(state, 1100, Lines(size_of, built))
    assert [views.name(p) for p in outcome.merged] == ["0+2", "2+2", "4+2", "0+4", "6+2", "4+4"]
    assert [views.name(p) for p in state.parts] == ["0+4", "4+4", "8+1", "9+1", "10+1"]
    expected = {16: ["0+8", "8+4", "12+2", "14+2", "16+1"],
                22: ["0+8", "8+8", "16+4", "20+2", "22+1"]}
    for t in range(11, 23):
        state.append(t + 1)
        before = list(state.parts)
        outcome = saw.batch(state, 100 * len(state.parts), Lines(size_of, built))
        if t in expected:
            assert outcome.changed and [views.name(p) for p in state.parts] == expected[t]
            assert 100 * len(state.parts) == 500
        else:
            assert not outcome.changed and state.parts == before


def test_a_view_past_its_slack_merges_what_is_built_and_waits_only_for_what_it_still_needs():
    """Past the slack (a long import), the built parents are merged at once; the view waits only for the
    parents the merged view still needs to reach its floor, planned from the merged view."""
    saw = Sawtooth(ceiling=2000, floor=1000, slack=300, estimate=40)
    size_of = lambda part: {0: 100, 1: 60, 2: 40}.get(part[0], 40)  # noqa: E731  (merging saves bytes)
    up_to = lambda top: (lambda l, i: l <= top)  # noqa: E731
    # Parents built up to level 2: the built merges alone bring 64 messages under the floor.
    state = ViewState()
    state.append(64)
    outcome = saw.batch(state, 6400, Lines(size_of, up_to(2)))
    assert outcome.changed and outcome.needed == [] and not state.shrinking
    assert all(part[0] <= 2 for part in state.parts) and sum(size_of(p) for p in state.parts) <= saw.floor
    # Only level 1 built: 32 lines of 60 bytes, still over the floor; it waits only for unbuilt parents,
    # most due first, as many as bring the merged view to its floor.
    state = ViewState()
    state.append(64)
    lines = Lines(size_of, up_to(1))
    outcome = saw.batch(state, 6400, lines)
    assert state.shrinking and all(part[0] == 1 for part in state.parts)
    assert outcome.needed and all(part[0] >= 2 and not lines.is_built(part) for part in outcome.needed)
    planned = merge_down(state.parts, 64, saw.floor, lines.planned(saw.estimate), keep=lines.unbuilt)
    assert outcome.needed == planned.merged and planned.size <= saw.floor


def test_batch_waits_for_parents_then_applies_in_one_step():
    saw = Sawtooth(ceiling=1000, floor=500, slack=300, estimate=100)
    state = ViewState()
    have: set[tuple[int, int]] = set()
    built = lambda l, i: (l, i) in have  # noqa: E731
    size_of = lambda part: 100  # noqa: E731
    state.append(11)
    outcome = saw.batch(state, 1100, Lines(size_of, built))
    assert not outcome.changed and len(state.parts) == 11
    assert [views.name(p) for p in outcome.needed] == ["0+2", "2+2", "4+2", "0+4", "6+2", "4+4"]
    for part in outcome.needed[:-1]:
        have.add(part)
        again = saw.batch(state, 1100, Lines(size_of, built))
        assert not again.changed, "a batch must not be applied before all its parents exist"
    have.add(outcome.needed[-1])
    final = saw.batch(state, 1100, Lines(size_of, built))
    assert final.changed and [views.name(p) for p in state.parts] == ["0+4", "4+4", "8+1", "9+1", "10+1"]


def test_shrinking_when_parents_stay_missing():
    saw = Sawtooth(ceiling=1000, floor=500, slack=300, estimate=100)
    state = ViewState()
    have = {(1, 0), (1, 1)}
    built = lambda l, i: (l, i) in have  # noqa: E731
    size_of = lambda part: 100  # noqa: E731
    state.append(14)  # 1,400 bytes: past ceiling + slack
    outcome = saw.batch(state, 1400, Lines(size_of, built))
    assert outcome.changed and state.shrinking
    assert [views.name(p) for p in state.parts[:2]] == ["0+2", "2+2"]
    assert (2, 0) not in have and (1, 2) not in have
    have.update((l, i) for l in range(1, 5) for i in range(16))
    state.append(15)
    outcome = saw.batch(state, 100 * len(state.parts), Lines(size_of, built))
    assert 100 * len(state.parts) <= 500 and not state.shrinking


# -- properties ----------------------------------------------------------------------

@st.composite
def scenarios(draw):
    total = draw(st.integers(1, 300))
    sizes = draw(st.lists(st.integers(20, 700), min_size=total, max_size=total))
    missing = draw(st.sets(st.tuples(st.integers(1, 9), st.integers(0, 300)), max_size=40))
    ceiling = draw(st.integers(800, 6000))
    floor = draw(st.integers(200, ceiling - 100))
    slack = draw(st.integers(0, 3000))
    return total, sizes, missing, ceiling, floor, slack


def _sizes(sizes):
    def size_of(part):
        level, index = part
        return sum(sizes[views.first(part):views.end(part)]) // (1 << level) + 10 * level
    return size_of


@given(scenarios())
@settings(max_examples=150, deadline=None)
def test_sawtooth_properties(scenario):
    total, sizes, missing, ceiling, floor, slack = scenario
    built = lambda l, i: l == 0 or (l, i) not in missing  # noqa: E731
    size_of = _sizes(sizes)
    saw = Sawtooth(ceiling, floor, slack, 512)
    state = ViewState()
    for t in range(total):
        before = list(state.parts)
        state.append(t + 1)
        size = sum(size_of(p) for p in state.parts)
        outcome = saw.batch(state, size, Lines(size_of, built))
        assert views.check_tiling(state.parts, t + 1) == t + 1
        for part in state.parts:
            assert part[0] == 0 or built(*part)
        # never split: every part of the previous view lies inside one part of the new one
        for part in before:
            assert any(views.first(q) <= views.first(part) and views.end(part) <= views.end(q)
                       for q in state.parts)
        new_size = sum(size_of(p) for p in state.parts)
        if outcome.changed:
            assert new_size <= floor or state.shrinking or not _can_merge(state, t + 1, built)
            for merged in outcome.merged:
                assert built(*merged)
        else:
            assert state.parts == before + [(0, t)]
            assert state.shrinking or new_size <= ceiling + slack or not _can_merge(state, t + 1, built)


def _can_merge(state, total, built):
    return most_due(state.parts, total, built) is not None


@given(st.lists(st.integers(0, 4), min_size=1, max_size=200), st.integers(0, 110),
       st.sets(st.tuples(st.integers(1, 8), st.integers(0, 200)), max_size=30),
       st.integers(0, 200), st.integers(0, 60), st.sampled_from([None, 10, 700]), st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
@example([0] * 64, 60, set(), 0, 5, None, False, True)  # sizes read inline, stopped half way
@example([0] * 64, 0, {(1, 3), (2, 1)}, 0, 5, None, False, True)  # slots read inline, some parents missing
@example([0] * 4, 22, {(1, 1)}, 0, 0, 10, False, True)  # a planned parent, its size not read inline
@example([0] * 2, 0, {(1, 0)}, 0, 0, 10, False, True)  # the only parent planned
def test_merge_down_equals_repeated_most_due(levels_seed, target_share, missing, cut, growth, estimate, keep_even,
                                             inline):
    """From a view already merged up to ``cut`` (the rest appended), parents that may be larger than their
    halves (so a merge can grow the view), planned or not, with or without ``keep``, and with the sizes
    and slots read inline (some sizes not known yet) or asked."""
    total = len(levels_seed)
    cut = min(cut, total)
    built = lambda l, i: (l, i) not in missing  # noqa: E731
    size_of = lambda part: 100 + part[0] * growth + (part[1] * 7919) % 61  # noqa: E731
    lines = Lines(size_of, built)
    if inline:
        known = [array("I", [size_of((l, i)) if (i * 7 + l) % 3 else 0 for i in range((total >> l) - l % 2)])
                 for l in range(6)]  # some sizes not known, some rows short
        slots = [array("Q", [int(built(l, i)) for i in range(total >> l)]) for l in range(9)]
        lines = Lines(size_of, built, known, slots)
    parts = merge_down([(0, i) for i in range(cut)], cut, 50 * cut, lines).parts + [(0, i) for i in range(cut, total)]
    if estimate is not None:
        lines = lines.planned(estimate)
    keep = (lambda part: part[0] % 2 == 0) if keep_even else None  # noqa: E731
    target = sum(lines.size(p) for p in parts) * target_share // 100  # (past 100: nothing to merge)
    fast, merged, size = merge_down(parts, total, target, lines, keep=keep)
    slow = list(parts)
    slow_merged = []
    while sum(lines.size(p) for p in slow) > target:
        k = most_due(slow, total, lines.built)
        if k is None:
            break
        slow_merged.append(merge_at(slow, k))
    assert fast == slow and merged == [p for p in slow_merged if keep is None or keep(p)]
    assert size == sum(lines.size(p) for p in fast)


def test_parse_name_rejects_every_invalid_form():
    assert views.parse_name(40, 8, 48) == (3, 5)
    assert views.parse_name(0, 1, 1) == (0, 0)
    for ident, n in [(40, 8, ), (41, 8), (40, 6), (40, 0), (-8, 8), (0, -1), (48, 1), (47, 2)]:
        if (ident, n) == (40, 8):
            assert views.parse_name(ident, n, 47) is None  # past the end
            continue
        assert views.parse_name(ident, n, 48) is None
    assert views.parse_name(True, 1, 5) is None
    assert views.parse_name(1.0, 1, 5) is None


@settings(max_examples=200, deadline=None)
@given(total=st.integers(2, 300), seed=st.integers(0, 10_000), built_share=st.floats(0, 1),
       known_share=st.floats(0, 1), target_share=st.floats(0, 1))
def test_the_fast_planned_form_plans_as_the_sized_one(total, seed, built_share, known_share, target_share):
    """merge_down reads a planned Lines' sizes and built parents inline (the keeper's fast form): the same
    parts, merges and size as the form that asks a function for every size, erased merged parts included."""
    import random

    rng = random.Random(seed)
    levels = total.bit_length()
    slots = [array("Q", [rng.random() < built_share or level == 0 for _ in range(total >> level)])
             for level in range(levels)]
    true_size = {(level, index): 50 + rng.randrange(400) for level in range(levels) for index in range(total >> level)}
    known = [array("I", [true_size[(level, index)] if slots[level][index] and rng.random() < known_share else 0
                         for index in range(total >> level)]) for level in range(levels)]
    parts = [(0, i) for i in range(total)]
    parts, _, _ = merge_down(parts, total, 0, Lines(true_size.__getitem__, lambda l, i: bool(slots[l][i])))
    erased = [p for p in parts if p[0] and rng.random() < 0.2]
    for level, index in erased:  # a forget erased them: still in the view, unbuilt now
        slots[level][index] = 0
        known[level][index] = 0
    built = lambda l, i: l < len(slots) and i < len(slots[l]) and bool(slots[l][i])  # noqa: E731
    size_of = lambda part: true_size[part] if built(*part) or part[0] == 0 else 900  # noqa: E731
    fast = Lines(size_of, built, known, slots)
    slow = Lines(size_of, built)
    assert fast.planned(333).estimate == 333 and slow.planned(333).estimate is None
    size = sum(map(size_of, parts))
    target = int(size * target_share)
    one = merge_down(parts, total, target, fast.planned(333), size, fast.unbuilt)
    two = merge_down(parts, total, target, slow.planned(333), size, slow.unbuilt)
    assert one == two


@given(st.integers(2, 300), st.sets(st.tuples(st.integers(1, 6), st.integers(0, 150)), max_size=120),
       st.integers(0, 2))
@settings(max_examples=200, deadline=None)
def test_a_shrink_not_planned_ends_as_a_planned_one_and_plans_the_same_when_asked(total, built_set, rounds):
    """``batch(plan=False)``: the same view and shrinking flag as a planned batch, ``needed`` None exactly
    when the plan would name parents, and those parents planned afterwards from the merged view."""
    built = lambda level, index: (level, index) in built_set  # noqa: E731
    size_of = lambda part: 90 if part[0] == 0 else (150 if built(*part) else 120)  # noqa: E731
    saw = Sawtooth(ceiling=1200, floor=600, slack=200, estimate=120)
    planned_state, lazy_state = ViewState(), ViewState()
    for step in range(rounds + 1):
        planned_state.append(total + step)
        lazy_state.append(total + step)
        lines = Lines(size_of, built)
        planned = saw.batch(planned_state, sum(map(size_of, planned_state.parts)), lines)
        lazy = saw.batch(lazy_state, sum(map(size_of, lazy_state.parts)), lines, plan=False)
        assert lazy_state.parts == planned_state.parts and lazy_state.shrinking == planned_state.shrinking
        if lazy.needed is None:
            assert planned.needed and lazy_state.shrinking
            later = merge_down(lazy_state.parts, lazy_state.total, saw.floor, lines.planned(saw.estimate),
                               keep=lines.unbuilt)
            assert later.merged == planned.needed
        else:
            assert lazy.needed == planned.needed
