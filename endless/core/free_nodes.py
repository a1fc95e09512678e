"""Free nodes: lines that need no model call (DESIGN §2.3).

A message whose ``tag: text`` fits the line budget is its own level-0 line,
word for word; a parent whose two child lines, joined by a newline, fit the
budget is that join.  They are found and encoded here; ``Memory`` stores them
at once, under its lock, so the writer never sees them as work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

from endless.core import tiling
from endless.core.log import OrderLog
from endless.core.messages import Message, tag
from endless.core.render import utf8_size
from endless.core.settings import Settings
from endless.core.tiling import Part
from endless.core.tree import TreeStore


@dataclass
class FreeLines:
    """Encoded tree lines to append, the parts they store, and the sizes of messages too long to be free."""

    lines: list[bytes] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each line's text, for the parents found next
    sizes: list[int] = field(default_factory=list)  # each text's bytes (utf-8)
    long_sources: dict[int, int] = field(default_factory=dict)  # message id -> its source's bytes


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
    tags: dict[str, str | None] = {}  # each kind's tag, asked once (an import brings a million messages)
    encode = tree.encode
    for message_id in range(tree.free_upto, total):
        if message_id < len(built) and built[message_id]:
            continue
        m = in_hand.get(message_id)
        if m is not None:
            kind = m.kind
            name = tags[kind] if kind in tags else tags.setdefault(kind, tag(kind, settings, agent_name))
            text = m.writer_text if m.writer_text is not None else m.text
            source = text if name is None else f"{name}: {text}"
        else:
            stored = log.message(message_id)
            if stored is None:
                continue
            source = stored.writer_source(settings, agent_name)
        size = utf8_size(source)
        if size <= budget:
            lines.append(encode(0, message_id, source, size, size))
            parts.append((0, message_id))
            texts.append(source)
            sizes.append(size)
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
        if len(joined.encode("utf-8")) <= budget:
            found.lines.append(tree.encode(top[0], top[1], joined, None))
            found.parts.append(top)
            found.texts.append(joined)
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
    lines, parts, texts, sizes = above.lines, above.parts, above.texts, above.sizes
    encode, built, cached_text = tree.encode, tree.built, tree.cached_text
    level = 0
    indices, level_texts, level_sizes = [index for _, index in below.parts], below.texts, below.sizes
    while indices:
        up = level + 1
        up_slots = tree.slots[up] if up < len(tree.slots) else ()
        stored_up, room = len(up_slots), total >> up  # a parent ends within the history: index < room
        new_indices: list[int] = []
        new_texts: list[str] = []
        new_sizes: list[int] = []
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
            else:  # its sibling is from before this commit
                sibling = index ^ 1
                other = cached_text(level, sibling) if built(level, sibling) else None
                if other is None:
                    continue
                if index & 1:
                    left, left_size, right, right_size = other, utf8_size(other), level_texts[own], level_sizes[own]
                else:
                    left, left_size, right, right_size = level_texts[own], level_sizes[own], other, utf8_size(other)
            size = left_size + right_size + 1
            if size > budget:
                continue
            joined = f"{left}\n{right}"
            lines.append(encode(up, top, joined, None, size))
            parts.append((up, top))
            texts.append(joined)
            sizes.append(size)
            new_indices.append(top)
            new_texts.append(joined)
            new_sizes.append(size)
        level, indices, level_texts, level_sizes = up, new_indices, new_texts, new_sizes
    return above
