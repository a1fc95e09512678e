"""Free nodes: lines that need no model call (DESIGN §2.3).

A message whose ``tag: text`` fits the line budget is its own level-0 line,
word for word; a parent whose two child lines, joined by a newline, fit the
budget is that join.  They are found and encoded here; ``Memory`` stores them
at once, under its lock, so the writer never sees them as work.

A free leaf is stored as a reference to its message in the log, and a free
parent whose halves are both such lines (or joins of them) as a join, so
the tree holds no second copy of the log's words (``TreeStore.encode_ref``,
``encode_join``).  A free parent over a written half (the writer's line,
or a forgotten message's tombstone) keeps its text: its words would
otherwise hang on a line the log cannot give back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import add, and_, lshift
from typing import Iterable, Mapping, NamedTuple, Sequence

import orjson

from endless.core.view import tiling
from endless.core.store import OrderLog
from endless.core.store import KINDS, Message, tag
from endless.core.view.render import HIDDEN_RANGES, head, line_size, utf8_size
from endless.core.settings import Settings
from endless.core.view.tiling import Part
from endless.core.store import TreeStore
from endless.core.store import EncodedTurn


@dataclass
class FreeLines:
    """Encoded tree lines to append, the parts they store, and the sizes of messages too long to be free."""

    lines: list[bytes] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each line's text, for the parents found next
    sizes: list[int] = field(default_factory=list)  # each text's bytes (utf-8)
    long_sources: dict[int, int] = field(default_factory=dict)  # message id -> its source's bytes
    derived: list[bool] = field(default_factory=list)  # each line read from the log (a reference or a join)


class FreeStretch(NamedTuple):
    """Bytes ``[start, end)`` of the tree file ``inode`` hold free lines and nothing else.

    Told by the process that appended them (an import, to its index helper): a free
    line repeats messages, so the search index steps over the stretch unread.
    """

    inode: int
    start: int
    end: int


def free_leaves(tree: TreeStore, log: OrderLog, settings: Settings, agent_name: str, total: int,
                in_hand: Mapping[int, Message]) -> FreeLines:
    """The free leaves of every message from the tree's watermark up to ``total``.

    Normally those are just the turn being committed, whose messages are in
    hand; after a crash between a commit and its leaves, the watermark lags
    and the missed messages are read back from the log.
    """
    budget = settings.line_budget
    found = FreeLines()
    lines, parts, texts, sizes = found.lines, found.parts, found.texts, found.sizes
    built = tree.slots[0] if tree.slots else ()
    prefixes: dict[str, str] = {}  # each kind's tag and ": ", asked once (an import brings a million messages)
    encode_ref = tree.encode_ref
    for message_id in range(tree.free_upto, total):
        if message_id < len(built) and built[message_id]:
            continue
        m = in_hand.get(message_id)
        forgotten = False
        if m is not None:
            kind, text = m.kind, (m.writer_text if m.writer_text is not None else m.text)
        else:
            stored = log.message(message_id)
            if stored is None:
                continue
            kind, text = stored.kind, (stored.writer_text if stored.writer_text is not None else stored.text)
            forgotten = message_id in log.forgotten  # its tombstone: words the log does not hold
        prefix = prefixes.get(kind)
        if prefix is None:
            name = tag(kind, settings, agent_name)
            prefix = prefixes[kind] = "" if name is None else f"{name}: "
        source = prefix + text
        size = utf8_size(source)
        if size <= budget:
            lines.append(tree.encode(0, message_id, source, size, size) if forgotten
                         else encode_ref(message_id, prefix, size))
            parts.append((0, message_id))
            texts.append(source)
            sizes.append(size)
            found.derived.append(not forgotten)
        else:
            found.long_sources[message_id] = size
    return found


def free_parents(tree: TreeStore, parts: Iterable[Part], total: int, budget: int,
                 in_hand: Mapping[Part, str]) -> FreeLines:
    """The free parents of newly built ``parts`` (one level up; the caller repeats with them).

    ``in_hand`` holds texts just stored, so a long import does not read back each child.
    """
    found = FreeLines()
    text_of = lambda part: in_hand.get(part) or tree.cached_text(*part)  # noqa: E731
    seen: set[Part] = set()
    for part in parts:
        top = tiling.parent(part)
        if tree.built(*top) or not tree.built(part[0], part[1] ^ 1):
            continue
        if tiling.end(top) > total or top in seen:
            continue
        left, right = tiling.children(top)
        joined = f"{text_of(left)}\n{text_of(right)}"
        seen.add(top)
        size = utf8_size(joined)
        if size <= budget:
            derived = tree.is_derived(*left) and tree.is_derived(*right)
            found.lines.append(tree.encode_join(top[0], top[1], size) if derived
                               else tree.encode(top[0], top[1], joined, None, size))
            found.parts.append(top)
            found.texts.append(joined)
            found.derived.append(derived)
    return found


def free_above(tree: TreeStore, below: FreeLines, total: int, budget: int) -> FreeLines:
    """Every free parent above the new leaves ``below`` (in id order), level by level, children first.

    One pass over what a commit brings, all levels at once, so an import of a
    million short messages does not go back and forth between finding, storing
    and telling of each level.  The same parents, in the same order, as
    :func:`free_parents` called level after level on what each level stored.
    Each level's new nodes come in index order, so two new siblings are
    neighbours in it; only a node whose sibling came before this commit asks
    the tree.  A parent's byte size is its halves' sizes and the newline between them.
    """
    above = FreeLines()
    lines, parts, texts, sizes, derived = above.lines, above.parts, above.texts, above.sizes, above.derived
    encode, encode_join, built, cached_text = tree.encode, tree.encode_join, tree.built, tree.cached_text
    level = 0
    indices, level_texts, level_sizes = [index for _, index in below.parts], below.texts, below.sizes
    level_derived = below.derived
    while indices:
        up = level + 1
        up_slots = tree.slots[up] if up < len(tree.slots) else ()
        stored_up, room = len(up_slots), total >> up  # a parent ends within the history: index < room
        new_indices: list[int] = []
        new_texts: list[str] = []
        new_sizes: list[int] = []
        new_derived: list[bool] = []
        k, n = 0, len(indices)
        while k < n:
            index = indices[k]
            top = index >> 1
            paired = not index & 1 and k + 1 < n and indices[k + 1] == index + 1
            own = k
            k += 2 if paired else 1
            if top >= room or (top < stored_up and up_slots[top]):
                continue
            if paired:
                left, left_size, right, right_size = (level_texts[own], level_sizes[own],
                                                      level_texts[own + 1], level_sizes[own + 1])
                both = level_derived[own] and level_derived[own + 1]
            else:  # its sibling is from before this commit
                sibling = index ^ 1
                other = cached_text(level, sibling) if built(level, sibling) else None
                if other is None:
                    continue
                if index & 1:
                    left, left_size, right, right_size = other, utf8_size(other), level_texts[own], level_sizes[own]
                else:
                    left, left_size, right, right_size = level_texts[own], level_sizes[own], other, utf8_size(other)
                both = level_derived[own] and tree.is_derived(level, sibling)
            size = left_size + right_size + 1
            if size > budget:
                continue
            joined = f"{left}\n{right}"
            lines.append(encode_join(up, top, size) if both else encode(up, top, joined, None, size))
            parts.append((up, top))
            texts.append(joined)
            sizes.append(size)
            derived.append(both)
            new_indices.append(top)
            new_texts.append(joined)
            new_sizes.append(size)
            new_derived.append(both)
        level, indices, level_texts, level_sizes, level_derived = up, new_indices, new_texts, new_sizes, new_derived
    return above


class EncodedLines(NamedTuple):
    """Free lines put together from an import's encoded turns (:func:`free_encoded`)."""

    lines: list[bytes]
    parts: list[Part]
    view_sizes: list[int]  # each line's bytes in a view: head, text and newline (``render.line_size``)
    long_sources: dict[int, int]  # message id -> its source's bytes, for a message too long to be free


@dataclass
class _Level:
    """One level's new free nodes, in index order: their texts escaped for JSON (without the
    quotes), their texts' bytes, and whether each is plain (None: all are; see :func:`_plain`)."""

    indices: list[int]
    inners: list[bytes]
    sizes: list[int]
    plain: list[bool] | None
    derived: list[bool] | None = None  # whether each is read from the log (None: all are; see _join_into)


_LEAF = b'{"l":0,"i":%d,"ref":"%s","size":%d,"src":%d}\n'  # TreeStore.encode_ref, as bytes
_PARENT = b'{"l":%d,"i":%d,"join":1,"size":%d}\n'  # and TreeStore.encode_join
_TEXT_PARENT = b'{"l":%d,"i":%d,"text":"%s","size":%d}\n'  # TreeStore.encode of a free parent over a written half
_NEWLINE = b"\\n"  # a newline inside a JSON string
# Bytes of a JSON-escaped text that may make its view line differ from its head, text and newline:
# a carriage return (``\r\n`` folds to one byte), a bracket ``render.neutralise`` may escape, or a
# control it shows escaped (see :func:`_plain`).
# Looked for in the escaped bytes, where ``\r`` may also be an escaped backslash before an ``r``:
# such a line is only sized the slow way.  The escapes are looked for with one pattern, not a
# search each: a backslash is in most realistic batches (a tool call's quotes), and four searches
# for two bytes cost ten times one pass of this pattern (4.1 against 0.35 ms for 4,000 messages).
_NOT_PLAIN_ESCAPES = re.compile(rb"\\(?:[rbf]|u00)")  # \r, and the controls \b, \f, \u00..
_NOT_PLAIN_BYTES = (b"<", b"\x7f")  # a bracket, and DEL (shown escaped, standing as it is)
_NOT_PLAIN_WIDE = ("\uff1c".encode(), "\ufe64".encode())  # the wide brackets


def _hidden_bytes() -> tuple[bytes, "re.Pattern[bytes]"]:
    """The UTF-8 forms of ``render.HIDDEN``'s characters past DEL: every byte but the first bytes
    they start with (a UTF-8 first byte never stands inside another character), and a pattern
    matching exactly them (their bytes but the last, then a class of last bytes)."""
    ends: dict[bytes, set[int]] = {}
    for first, last in HIDDEN_RANGES:
        for code in range(max(first, 0x80), last + 1):
            if not 0xD800 <= code <= 0xDFFF:  # a lone surrogate does not encode: never in the log
                data = chr(code).encode("utf-8")
                ends.setdefault(data[:-1], set()).add(data[-1])
    leads = {lead[0] for lead in ends}
    others = bytes(sorted(set(range(256)) - leads))  # every byte but those leading bytes
    pattern = b"|".join(re.escape(lead) + b"[" + b"".join(re.escape(bytes([c])) for c in sorted(last)) + b"]"
                        for lead, last in ends.items())
    return others, re.compile(pattern)


_NOT_HIDDEN_LEADS, _HIDDEN_BYTES = _hidden_bytes()


def _plain(inner: bytes) -> bool:
    """Whether a JSON-escaped text's view line is its head, its bytes and a newline: no carriage return,
    no bracket ``render.neutralise`` may escape, and no character it shows escaped (``render.HIDDEN``).
    A C0 control is escaped as ``\\u00..``, ``\\b`` or ``\\f`` (an escaped backslash before ``u00``,
    ``b`` or ``f`` is sized the slow way too), DEL stands as it is, and the others are looked for in
    the UTF-8 bytes, only when one of their first bytes is there."""
    if _NOT_PLAIN_BYTES[0] in inner or _NOT_PLAIN_BYTES[1] in inner or _NOT_PLAIN_ESCAPES.search(inner):
        return False
    if inner.isascii():
        return True
    if _NOT_PLAIN_WIDE[0] in inner or _NOT_PLAIN_WIDE[1] in inner:
        return False
    # one pass keeping only those first bytes: none (CJK, Cyrillic, most accents) answers at once
    return not (inner.translate(None, _NOT_HIDDEN_LEADS) and _HIDDEN_BYTES.search(inner) is not None)


def _exact_view_size(part: Part, inner: bytes) -> int:
    return line_size(head(part), orjson.loads(b'"' + inner + b'"'))


def _view_sizes(level: int, nodes: _Level, out: list[int]) -> None:
    """Each node's line size in a view (``render.part_line_sizes``), added to ``out``."""
    count_bytes = len(str(1 << level)) + 3  # "+", the count, "|" and the newline
    if nodes.plain is None:
        starts = map(lshift, nodes.indices, repeat(level)) if level else nodes.indices
        out += map(add, map(len, map(str, starts)), map(count_bytes.__add__, nodes.sizes))
        return
    for index, inner, size, plain in zip(nodes.indices, nodes.inners, nodes.sizes, nodes.plain):
        out.append(len(str(index << level)) + count_bytes + size if plain
                   else _exact_view_size((level, index), inner))


def _plainness(inners: list[bytes]) -> list[bool] | None:
    joined = b"\0".join(inners)  # one look over a whole level, the usual answer being "all plain"
    return None if _plain(joined) else list(map(_plain, inners))


def free_encoded(tree: TreeStore, settings: Settings, agent_name: str, first: int,
                 turns: Sequence[EncodedTurn], total: int) -> EncodedLines:
    """The free lines of encoded turns just logged from message ``first`` on, every level at once.

    The same lines, byte for byte and in the same order, as :func:`free_leaves`
    and :func:`free_above` make from the messages (a property test holds them
    equal), put together from the turns' JSON-escaped sources: a leaf is its
    tag's bytes and its source's, a parent its halves' joined by an escaped
    newline, so no text is decoded, tagged, measured or escaped again, and the
    usual run of new nodes is made a level at a time by ``map`` over whole
    lists (an import of a million messages makes two million such lines).
    A line's size in a view is its head, its bytes and a newline, unless it
    holds a carriage return or a bracket (then it is measured as ``render`` does).
    """
    budget = settings.line_budget
    kinds = list(chain.from_iterable([turn.kinds for turn in turns]))
    sizes = list(chain.from_iterable([turn.sizes for turn in turns]))
    sources = list(chain.from_iterable([turn.sources for turn in turns]))
    tag_inners, tag_sizes = [], []
    for kind in KINDS:
        name = tag(kind, settings, agent_name)
        prefix = "" if name is None else f"{name}: "
        tag_inners.append(orjson.dumps(prefix)[1:-1])
        tag_sizes.append(utf8_size(prefix))
    ids = range(first, first + len(kinds))
    sizes = list(map(add, sizes, map(tag_sizes.__getitem__, kinds)))
    keep = list(map(budget.__ge__, sizes))
    built0 = tree.slots[0] if tree.slots else ()
    unbuilt = None if not any(built0[first:first + len(kinds)]) else [
        not (i < len(built0) and built0[i]) for i in ids]
    long_sources: dict[int, int] = {}
    if unbuilt is not None or not all(keep):
        if unbuilt is None:
            unbuilt = [True] * len(keep)
        long_sources = {i: size for i, size, free, new in zip(ids, sizes, keep, unbuilt) if new and not free}
        keep = list(map(and_, keep, unbuilt))
        ids, sizes = list(compress(ids, keep)), list(compress(sizes, keep))
        kinds, sources = list(compress(kinds, keep)), list(compress(sources, keep))
    inners = list(map(add, map(tag_inners.__getitem__, kinds), sources))
    leaves = _Level(list(ids), inners, sizes, _plainness(inners))
    lines = list(map(_LEAF.__mod__, zip(leaves.indices, map(tag_inners.__getitem__, kinds), sizes, sizes)))
    parts = list(zip(repeat(0), leaves.indices))
    view_sizes: list[int] = []
    _view_sizes(0, leaves, view_sizes)
    level, nodes = 0, leaves
    while nodes.indices:
        up = level + 1
        nodes = _parents(tree, level, nodes, total >> up, budget)
        if nodes.derived is None:
            lines += map(_PARENT.__mod__, zip(repeat(up), nodes.indices, nodes.sizes))
        else:
            lines += [_PARENT % (up, index, size) if derived else _TEXT_PARENT % (up, index, inner, size)
                      for index, inner, size, derived in zip(nodes.indices, nodes.inners, nodes.sizes,
                                                             nodes.derived)]
        parts += zip(repeat(up), nodes.indices)
        _view_sizes(up, nodes, view_sizes)
        level = up
    return EncodedLines(lines, parts, view_sizes, long_sources)


def _parents(tree: TreeStore, level: int, below: _Level, room: int, budget: int) -> _Level:
    """The free parents of a level's new nodes: pairs of new siblings, and a first node's sibling
    from before; a parent ends within the history (index < ``room``) and is not built yet."""
    up = level + 1
    up_slots = tree.slots[up] if up < len(tree.slots) else ()
    indices, inners, sizes = below.indices, below.inners, below.sizes
    plain, derived = below.plain, below.derived
    out = _Level([], [], [], None if plain is None else [], None if derived is None else [])
    n = len(indices)
    k = 0
    if indices[0] & 1:  # its left sibling is from before these turns
        _with_stored_sibling(tree, level, below, 0, room, budget, out)
        k = 1
    if k == n:
        return out
    if indices[-1] - indices[0] == n - 1:  # the usual run of neighbours: whole lists at once
        pairs = (n - k) // 2
        top0 = indices[k] >> 1
        pairs = max(0, min(pairs, room - top0))
        stop = k + 2 * pairs
        tops = range(top0, top0 + pairs)
        joined = list(map(add, map(add, sizes[k:stop:2], sizes[k + 1:stop:2]), repeat(1)))
        ok = list(map(budget.__ge__, joined))
        stored = up_slots[top0:top0 + pairs]
        if any(stored):
            ok = [fits and not (j < len(stored) and stored[j]) for j, fits in enumerate(ok)]
        lefts, rights = inners[k:stop:2], inners[k + 1:stop:2]
        if all(ok):
            out.indices += tops
            out.sizes += joined
        else:
            out.indices += compress(tops, ok)
            out.sizes += compress(joined, ok)
            lefts, rights = list(compress(lefts, ok)), list(compress(rights, ok))
        out.inners += map(_NEWLINE.join, zip(lefts, rights))
        if plain is not None:  # a parent is plain when both halves are
            both = map(and_, plain[k:stop:2], plain[k + 1:stop:2])
            out.plain += both if all(ok) else compress(both, ok)
        elif out.plain is not None:  # (the first parent, over a stored sibling, was not plain)
            out.plain += [True] * len(lefts)
        if derived is not None:  # and read from the log when both halves are
            both = map(and_, derived[k:stop:2], derived[k + 1:stop:2])
            out.derived += both if all(ok) else compress(both, ok)
        elif out.derived is not None:  # (the first parent, over a stored written sibling, was not)
            out.derived += [True] * len(lefts)
        return out
    while k < n:  # not neighbours (a message too long to be free between them): one at a time
        index = indices[k]
        if index & 1:
            _with_stored_sibling(tree, level, below, k, room, budget, out)
            k += 1
            continue
        paired = k + 1 < n and indices[k + 1] == index + 1
        if paired:
            _join_into(out, index >> 1, room, up_slots, budget,
                       inners[k], sizes[k], plain is None or plain[k], derived is None or derived[k],
                       inners[k + 1], sizes[k + 1], plain is None or plain[k + 1],
                       derived is None or derived[k + 1])
        k += 2 if paired else 1  # an even node without its right sibling: that one is not logged yet
    return out


def _with_stored_sibling(tree: TreeStore, level: int, below: _Level, k: int, room: int, budget: int,
                         out: _Level) -> None:
    """The parent of the odd node ``k`` and its left sibling, stored before these turns (if it is)."""
    index = below.indices[k]
    other = tree.cached_text(level, index - 1) if tree.built(level, index - 1) else None
    if other is None:
        return
    up_slots = tree.slots[level + 1] if level + 1 < len(tree.slots) else ()
    other_inner = orjson.dumps(other)[1:-1]
    _join_into(out, index >> 1, room, up_slots, budget, other_inner, utf8_size(other), _plain(other_inner),
               tree.is_derived(level, index - 1),
               below.inners[k], below.sizes[k], below.plain is None or below.plain[k],
               below.derived is None or below.derived[k])


def _join_into(out: _Level, top: int, room: int, up_slots: Sequence[int], budget: int,
               left: bytes, left_size: int, left_plain: bool, left_derived: bool,
               right: bytes, right_size: int, right_plain: bool, right_derived: bool) -> None:
    size = left_size + right_size + 1
    if top >= room or size > budget or (top < len(up_slots) and up_slots[top]):
        return
    out.indices.append(top)
    out.inners.append(left + _NEWLINE + right)
    out.sizes.append(size)
    plain = left_plain and right_plain
    if out.plain is not None:
        out.plain.append(plain)
    elif not plain:  # the first node of the level that is not plain: from now on, one flag each
        out.plain = [True] * (len(out.indices) - 1) + [False]
    derived = left_derived and right_derived
    if out.derived is not None:
        out.derived.append(derived)
    elif not derived:  # likewise: a join over a written half keeps its text (module doc)
        out.derived = [True] * (len(out.indices) - 1) + [False]
