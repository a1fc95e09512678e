"""The view: tree parts that tile the history, and the sawtooth that merges them (DESIGN §2.4).

Pure logic, no files.  A part is ``(level, index)`` and covers the ``2**level``
messages from ``index * 2**level``.  ``most_due`` is the merge choice, equal to
Taelin's rollback-list ``push`` when the list length is the budget; the
``Sawtooth`` holds merges back until the view passes its ceiling and then
applies a whole batch at once, so the view changes only at its end between
batches and cached prefixes survive.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import add, itemgetter, lshift
from typing import Callable, Iterable, NamedTuple, Sequence

from endless.core.view import packed
from endless.core.view.parts import Part, Parts, as_parts

Built = Callable[[int, int], bool]
SizeOf = Callable[[Part], int]


@dataclass(frozen=True)
class Lines:
    """What the merge logic asks of the tree: each part's rendered size, and which parts are built.

    ``built`` None plans as if every parent were built (the batch a view would
    make once the writer has caught up).
    """

    size: SizeOf
    built: Built | None = None
    # Optional fast forms of the two, read inline by merge_down (a plan after a long import asks a
    # million times): per level, sizes known already (0: ask ``size``), and the tree's slots
    # (nonzero: built; given only where ``built`` is exactly that).
    known: Sequence[array] | None = None
    slots: Sequence[array] | None = None
    # Planning (see ``planned``): an unbuilt parent counts as this many bytes; ``slots`` then tell only
    # which parents are built for their sizes (every pair may merge).
    estimate: int | None = None

    def is_built(self, part: Part) -> bool:
        return self.built is None or self.built(*part)

    def unbuilt(self, part: Part) -> bool:
        return not self.is_built(part)

    def planned(self, estimate: int) -> "Lines":
        """For planning a batch: an unbuilt parent counts as ``estimate`` bytes, and may merge."""
        size, built = self.size, self.built

        def planned_size(part: Part) -> int:
            return size(part) if part[0] == 0 or built is None or built(*part) else estimate

        if self.slots is not None and self.known is not None:  # the fast form merge_down reads inline
            # (``size`` stays the planned one: a caller summing a view must count what merge_down counts)
            return Lines(planned_size, None, self.known, self.slots, estimate)
        return Lines(planned_size, None)

_KEY_BITS = 80  # due compared as an exact integer: (T - last) << (_KEY_BITS - level)


class ViewError(ValueError):
    """A stored view that does not tile the history or names a part that was never built."""


def first(part: Part) -> int:
    return part[1] << part[0]


def count(part: Part) -> int:
    return 1 << part[0]


def end(part: Part) -> int:
    return (part[1] + 1) << part[0]


def name(part: Part) -> str:
    return f"{first(part)}+{count(part)}"


def parse_name(ident: int, n: int, total: int) -> Part | None:
    """``(level, index)`` for the name ``ident+n``, or None when no such line can exist."""
    if isinstance(ident, bool) or isinstance(n, bool):
        return None
    if not isinstance(ident, int) or not isinstance(n, int):
        return None
    if ident < 0 or n < 1 or n & (n - 1) or ident % n or ident + n > total:
        return None
    level = n.bit_length() - 1
    return level, ident >> level


def parent(part: Part) -> Part:
    return part[0] + 1, part[1] >> 1


def children(part: Part) -> tuple[Part, Part]:
    level, index = part
    return (level - 1, 2 * index), (level - 1, 2 * index + 1)


def _due_key(part: Part, total: int) -> int:
    """Larger is more due: (T - last) / 2**level scaled to an integer, ``last`` the pair's last message."""
    level, index = part
    last = ((index + 2) << level) - 1
    return (total - last) << (_KEY_BITS - level)


def _is_pair(left: Part, right: Part) -> bool:
    return left[0] == right[0] and not left[1] & 1 and right[1] == left[1] + 1


def most_due(parts: Sequence[Part], total: int, built: Built | None = None) -> int | None:
    """Position of the left part of the pair to merge next, or None.

    A candidate is two adjacent true siblings whose parent is built; the score
    is ``(T - last) / 2**level`` with ``last`` the pair's last message; ties go
    to the oldest pair.
    """
    best: int | None = None
    best_key = 0
    for k in range(len(parts) - 1):
        left = parts[k]
        if not _is_pair(left, parts[k + 1]):
            continue
        if built is not None and not built(left[0] + 1, left[1] >> 1):
            continue
        key = _due_key(left, total)
        if best is None or key > best_key:
            best, best_key = k, key
    return best


def covers(coarse: Sequence[Part], fine: Sequence[Part]) -> bool:
    """Whether every part of ``fine`` lies inside one part of ``coarse``.

    True for a writer view against its chat view, and for a later view against
    an earlier one: a merged part is never split again.
    """
    k = 0
    for part in coarse:
        stop = end(part)
        while k < len(fine) and end(fine[k]) <= stop:
            if first(fine[k]) < first(part):
                return False
            k += 1
        if k == len(fine):
            return True
    return k == len(fine)


def check_tiling(parts: Sequence[Part], total: int) -> int:
    """The end of the prefix ``[0, k)`` that ``parts`` tile; raises if they do not tile one.

    Checked with C-level passes over the whole list (a view after a long import holds hundreds of
    thousands of parts); a view that fails is walked part by part to say where.
    """
    try:
        if isinstance(parts, Parts):
            levels, indices = bytes(parts.levels), parts.indices.tolist()
        else:
            levels = bytes(map(itemgetter(0), parts))
            indices = list(map(itemgetter(1), parts))
        firsts = list(map(lshift, indices, levels))
        ends = list(map(add, firsts, map((1).__lshift__, levels)))
        covered = ends[-1] if parts else 0
        if (not parts or (firsts[0] == 0 and ends[:-1] == firsts[1:] and min(indices) >= 0)) and covered <= total:
            return covered
    except (TypeError, ValueError):
        pass
    return _check_tiling_slowly(parts, total)


def _check_tiling_slowly(parts: Iterable[Part], total: int) -> int:
    at = 0
    for part in parts:
        level, index = part
        if not isinstance(level, int) or not isinstance(index, int) or level < 0 or index < 0:
            raise ViewError(f"part {part!r} is not a (level, index) pair of naturals")
        if first(part) != at:
            raise ViewError(f"part {name(part)} starts at {first(part)}, expected {at}")
        at = end(part)
    if at > total:
        raise ViewError(f"the view covers {at} messages but the history has only {total}")
    return at


class Merged(NamedTuple):
    """A view after merging: its parts, the parents merged (in order), its size in bytes."""

    parts: Parts
    merged: Parts
    size: int


def merge_down(parts: Sequence[Part], total: int, target: int, lines: Lines,
               size: int | None = None, keep: Callable[[Part], bool] | None = None) -> Merged:
    """Merge most-due pairs until the size is at most ``target`` or nothing can merge.

    Returns the new parts, the parents merged in order (only those ``keep``
    accepts, if given: a plan after a long import makes a million merges and
    needs only the unbuilt ones), and the new size.  The same choices as
    calling ``most_due`` repeatedly, found without a heap: a merge only ever
    makes pairs less due than itself (one level up, ending no earlier), so
    most-due-first is the order of every merge the rule could make, sorted
    by due.  Those are found in one pass, sorted once, and taken in order
    until the size is at most ``target``.  A long import's plan makes a
    million merges here: one pass and one sort of integers cost far less
    than a heap operation per merge.
    """
    size_of, built, known, slots = lines.size, lines.built, lines.known or (), lines.slots
    levels_known = len(known)
    estimate, built_slots = lines.estimate, lines.slots  # (a planned form: an unbuilt parent's size)
    if estimate is None or built_slots is None:
        estimate, built_slots = None, ()
    levels_built = len(built_slots)
    if built is None:
        slots = None
    parts = as_parts(parts)
    n = len(parts)
    # Each position's part as merged so far: its size once asked (-1: not yet), and the next
    # position still alive.  Arrays, not lists: a plan after a long import has a million parts.
    sizes = array("q", [-1]) * n
    if size is None:
        sizes = array("q", map(size_of, parts))
        size = sum(sizes)
    if size <= target or n < 2:
        return Merged(parts.copy(), Parts(), size)
    # Every merge the rule could make, as one integer each: how little due it is, then the
    # position of its left half's first part (ties go to the oldest pair).  Due is
    # (T - last) / 2**level, made an exact integer by a shift that no level reaches.
    # One pass from the left finds them: the parts seen so far, merged as far as the rule
    # allows, are a stack, and a part joins the one below it while they are siblings whose
    # parent is built (with the parts tiling the history, siblings are neighbours).
    shift = n.bit_length()
    scale = total.bit_length() + 1
    cap = (total + 1) << scale
    codes: list[int] = []
    stack_levels, stack_indices = bytearray(), array("q")  # (arrays: the stack may hold every part)
    at = array("q")  # each stacked part's first position
    for k, (level, index) in enumerate(parts):
        pos = k
        while index & 1 and stack_indices and stack_indices[-1] == index - 1 and stack_levels[-1] == level:
            if slots is not None:  # built(level + 1, index >> 1), inline
                up = level + 1
                if up >= len(slots) or (index >> 1) >= len(slots[up]) or not slots[up][index >> 1]:
                    break
            elif built is not None and not built(level + 1, index >> 1):
                break
            stack_levels.pop()
            stack_indices.pop()
            left = at.pop()
            last = ((index + 1) << level) - 1
            codes.append(((cap - ((total - last) << (scale - level))) << shift) | left)
            level, index, pos = level + 1, index >> 1, left
        stack_levels.append(level)
        stack_indices.append(index)
        at.append(pos)
    del stack_levels, stack_indices, at
    codes.sort()
    # Take them in order: a merge joins the part at its position with the next one alive (its
    # sibling: merges are taken children first).  A size known already (``known``, or an unbuilt
    # parent's ``estimate`` when planning) is read inline; ``keep`` is told apart when it is the
    # planned form's "unbuilt" (a million calls).  The parts as merged so far are two arrays.
    cur_levels, cur_indices = bytearray(parts.levels), array("q", parts.indices)
    nxt = array("q", range(1, n + 1))
    dead = bytearray(n)
    merged_levels, merged_indices = bytearray(), array("q")
    mask = (1 << shift) - 1
    keep_unbuilt = estimate is not None and getattr(keep, "__func__", None) is Lines.unbuilt
    for code in codes:
        if size <= target:
            break
        k = code & mask
        j = nxt[k]
        level, index = cur_levels[k], cur_indices[k]
        up, top_index = level + 1, index >> 1
        top = (up, top_index)
        a = sizes[k]
        if a < 0:
            a = _first_size((level, index), known, levels_known, size_of, estimate, built_slots, levels_built)
        b = sizes[j]
        if b < 0:
            b = _first_size((level, cur_indices[j]), known, levels_known, size_of, estimate, built_slots,
                            levels_built)
        c = 0
        if up < levels_known:  # size_of(top), inline when known
            row = known[up]
            if top_index < len(row):
                c = row[top_index]
        unbuilt = False
        if estimate is not None:
            unbuilt = not (up < levels_built and top_index < len(built_slots[up]) and built_slots[up][top_index])
            if unbuilt:
                c = estimate
        if not c:
            c = size_of(top)
        size += c - a - b
        cur_levels[k], cur_indices[k] = up, top_index
        sizes[k] = c
        dead[j] = 1
        nxt[k] = nxt[j]
        if keep is None or (unbuilt if keep_unbuilt else keep(top)):
            merged_levels.append(up)
            merged_indices.append(top_index)
    alive = dead.translate(_ALIVE)
    return Merged(Parts.of(bytearray(compress(cur_levels, alive)), array("q", compress(cur_indices, alive))),
                  Parts.of(merged_levels, merged_indices), size)


_ALIVE = b"\1" + bytes(255)  # a dead flag (0 or 1) turned into an alive one, by translate


def _first_size(part: Part, known: Sequence[array], levels_known: int, size_of: SizeOf, estimate: int | None,
                built_slots: Sequence[array], levels_built: int) -> int:
    """A part's size when merge_down first meets it: known already, else asked (planning: an unbuilt
    merged part, erased by a forget, counts as the estimate)."""
    level, index = part
    if estimate is not None and level and not (level < levels_built and index < len(built_slots[level])
                                               and built_slots[level][index]):
        return estimate  # (before a known size: as the planned size_of counts it)
    if level < levels_known:
        row = known[level]
        if index < len(row) and row[index]:
            return row[index]
    return size_of(part)


@dataclass
class ViewState:
    """A view as stored: its parts, how many messages they cover, and the shrinking flag."""

    parts: Parts = field(default_factory=Parts)
    total: int = 0
    shrinking: bool = False
    # As read from a packed file: its arrays, tiling checked, and each part's rendered size when it was
    # saved (see endless.core.view.packed); checked and taken back by the keeper, then dropped.
    stored: "packed.Packed | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.parts = as_parts(self.parts)  # (given as pairs, by a test or a format 1 file: held packed)

    def append(self, new_total: int) -> None:
        """Each message from the view's end to ``new_total`` becomes a part of its own."""
        self.parts.extend_leaves(self.total, new_total)
        self.total = max(self.total, new_total)

    def to_json(self) -> dict:
        """The stored form (format 2: the parts packed, see :mod:`endless.core.view.packed`)."""
        return packed.pack(self.parts, self.total, self.shrinking)

    @classmethod
    def from_json(cls, data: object, saved_here: bool = False) -> "ViewState":
        """A stored view of format 2 (packed, its checksum and tiling checked) or 1 (a list of pairs).

        ``saved_here``: the file says it was saved against the tree and forgets as they are read now (the
        keeper compares them), so its parts, their checksum matching, are a view this code made whole:
        the tiling is not checked again (at 1M messages, 60 ms of an open).
        """
        if not isinstance(data, dict):
            raise ViewError("the stored view is not a JSON object")
        if packed.is_packed(data):
            try:
                stored = packed.unpack(data)
                if not saved_here:
                    packed.check_tiling(stored)
            except packed.PackError as exc:
                raise ViewError(str(exc)) from None
            return cls(stored.parts(), stored.total, stored.shrinking, stored)
        try:
            parts = Parts((int(p[0]), int(p[1])) for p in data["parts"])
            total = int(data["total"])
            shrinking = bool(data.get("shrinking", False))
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise ViewError(f"the stored view is malformed: {exc}") from exc
        return cls(parts, total, shrinking)


def validate(state: ViewState, total: int, built: Built, slots: Sequence[Sequence[int]] | None = None,
             checked_merges: bool = False) -> None:
    """Accept a stored view only if it tiles a prefix of the history and every merged part exists.

    With the tree's ``slots``, a view read from a packed file (its tiling checked as it was read) is
    checked on its arrays, a level at a time: an open after a long import checks half a million parts.
    ``checked_merges``: the file was saved against the tree as this process reads it (the keeper
    compares what it was measured against), when every merged part it holds was built.
    """
    stored = state.stored
    if stored is not None and slots is not None and len(stored.levels) == len(state.parts):
        if state.total > total:
            raise ViewError(f"the view covers {state.total} messages but the history has only {total}")
        if checked_merges:
            return
        missing = packed.first_unbuilt(stored, slots, lambda part: built(*part))
        if missing is not None:
            raise ViewError(f"the view holds {name(missing)}, which was never built")
        return
    covered = check_tiling(state.parts, total)
    if covered != state.total:
        raise ViewError(f"the view says it covers {state.total} messages but its parts cover {covered}")
    for part in compress(state.parts, state.parts.levels):  # the merged parts alone
        if not built(*part):
            raise ViewError(f"the view holds {name(part)}, which was never built")


@dataclass
class BatchOutcome:
    """What one run of a sawtooth did, and the parents the next batch still waits for.

    ``replanned`` is False when the keeper reused the last pass's plan
    instead of running a new one (see ``ViewKeeper``): ``needed`` is then that
    plan, unchanged.
    """

    changed: bool
    merged: Sequence[Part]
    needed: Sequence[Part] | None  # in the order the batch would merge them (None: a shrink not planned)
    replanned: bool = True


@dataclass(frozen=True)
class Sawtooth:
    """When to merge: let the view grow to the ceiling, then merge down to the floor in one step.

    The parents a batch needs are reported first so the writer can build them;
    the batch is applied only once all exist, unless the view runs ``slack``
    bytes past the ceiling, when it merges what it can and keeps going at later
    changes (``shrinking``).
    """

    ceiling: int
    floor: int
    slack: int
    estimate: int  # size assumed for a parent not yet written, when planning

    def batch(self, state: ViewState, size: int, lines: Lines, plan: bool = True) -> BatchOutcome:
        """Merge a whole batch if the view passed its ceiling and the parents exist (a full pass).

        ``plan=False``: a shrinking view's parents are not planned (``needed`` None when some
        are waited for): a caller that plans them only when a writer asks saves a second walk
        of the whole view.
        """
        if state.shrinking:
            return self._shrink(state, size, lines, plan)
        if size <= self.ceiling:
            return BatchOutcome(False, [], [])
        if size > self.ceiling + self.slack:
            # Past the slack the view merges what is built at once, whatever is still unwritten, and
            # what it waits for is planned from the view as merged, as at each re-plan while it
            # shrinks: a plan of the unmerged view (a million parts after a long import) costs a
            # pass as long, and names parents the merged view may no longer need.
            state.shrinking = True
            outcome = self._shrink(state, size, lines, plan)
            if outcome.needed == []:  # under the floor, or nothing left to wait for
                state.shrinking = False
            return outcome
        _, needed, _ = merge_down(state.parts, state.total, self.floor, lines.planned(self.estimate), size,
                                  lines.unbuilt)
        if not needed:
            parts, merged, _ = merge_down(state.parts, state.total, self.floor, lines, size)
            state.parts = parts
            return BatchOutcome(bool(merged), merged, [])
        return BatchOutcome(False, [], needed)

    def _shrink(self, state: ViewState, size: int, lines: Lines, plan: bool = True) -> BatchOutcome:
        parts, merged, new_size = merge_down(state.parts, state.total, self.floor, lines, size)
        state.parts = parts
        needed: Sequence[Part] | None = []
        if new_size <= self.floor:
            state.shrinking = False
        elif plan:
            _, needed, _ = merge_down(parts, state.total, self.floor, lines.planned(self.estimate), new_size,
                                      lines.unbuilt)
        elif has_pair(parts):
            # Every pair left has an unbuilt parent (the pass merged the built ones and stayed over
            # the floor), so a plan would name one: it is made when asked.
            needed = None
        return BatchOutcome(bool(merged), merged, needed)


def has_pair(parts: Sequence[Part]) -> bool:
    """Whether two neighbouring parts are siblings (the pair a merge would join)."""
    return any(map(_is_pair, parts, islice(parts, 1, None)))


def derive(chat: ViewState, sawtooth: Sawtooth, lines: Lines) -> ViewState:
    """The writer view: the chat view merged further with the same rule, down to its floor."""
    parts, _, size = merge_down(chat.parts, chat.total, sawtooth.floor, lines)
    return ViewState(parts, chat.total, size > sawtooth.floor)


def refold(total: int, lines: Lines, floor: int) -> ViewState:
    """A view recomputed from scratch: every message, merged down to the floor with built parents."""
    parts, _, _ = merge_down(Parts.leaves(0, total), total, floor, lines)
    return ViewState(parts, total, False)
