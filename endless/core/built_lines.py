"""Who hears of a memory's new lines, and the free lines a commit stores at once (DESIGN §2.3).

A line enters the tree three ways: the writer stores it, another process
stored it and this one reads of it, or it is free (a message that fits the
line budget word for word, or two lines whose join fits) and a commit stores
it with the turn.  Each way ends here: the view keeper learns its size, the
listeners (the writer's queue, an import's index helper) are told, and the
free parents above it are stored level by level.  It works on the store and
the view; ``Memory`` owns one and hands it the commit's messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from endless.core.settings import Settings
from endless.core.store import EncodedTurn, Message, OrderLog, TreeStore
from endless.core.view import FreeStretch, Part, ViewKeeper, free_above, free_encoded, free_leaves, free_parents

BuiltListener = Callable[[Part], None]
StretchListener = Callable[[FreeStretch], None]


@dataclass
class BuiltLines:
    """The memory's listeners of new lines and the storing of free ones (always under the change lock)."""

    tree: TreeStore
    log: OrderLog
    views: ViewKeeper
    settings: Settings
    agent_name: str
    listeners: list[BuiltListener] = field(default_factory=list)
    stretch_listeners: list[StretchListener] = field(default_factory=list)

    def tell(self, part: Part, text: str | None = None) -> None:
        """One new line, from whatever source: the views count it, the listeners hear of it."""
        self.views.built(part, text)
        for listener in self.listeners:
            listener(part)

    def after_stored(self, parts: list[Part], total: int, sync: bool,
                     texts: dict[Part, str] | None = None) -> None:
        """Tell of lines just stored, then store their free parents, level by level."""
        frontier = list(parts)
        in_hand = texts or {}
        while frontier:
            for part in frontier:
                self.tell(part, in_hand.get(part))
            found = free_parents(self.tree, frontier, total, self.settings.line_budget, in_hand)
            if not found.lines:
                break
            frontier = self.tree.add(found.lines, found.parts, found.texts, sync)
            in_hand = dict(zip(found.parts, found.texts))

    def store_free_leaves(self, total: int, in_hand: dict[int, Message]) -> None:
        """Store the free leaves of every message not yet checked, with every level's free parents."""
        found = free_leaves(self.tree, self.log, self.settings, self.agent_name, total, in_hand)
        for message_id, size in found.long_sources.items():
            self.views.note_source_size(message_id, size)
        lines, parts, texts, sizes = found.lines, found.parts, found.texts, found.sizes
        if lines:  # every level's free parents found at once, stored in the same append
            above = free_above(self.tree, found, total, self.settings.line_budget)
            lines, parts, texts, sizes = lines + above.lines, parts + above.parts, texts + above.texts, sizes + above.sizes

        def tell(told: list[Part], picks: list[int] | None) -> None:
            if picks is None:
                self.views.built_all(told, texts, sizes)
            else:
                self.views.built_all(told, [texts[k] for k in picks], [sizes[k] for k in picks])
            self._tell_listeners(told)

        self._store(lines, parts, texts, total, tell)

    def store_free_encoded(self, first: int, turns: Sequence[EncodedTurn], total: int) -> None:
        """Store the free lines of encoded turns just logged from message ``first`` on."""
        found = free_encoded(self.tree, self.settings, self.agent_name, first, turns, total)
        for message_id, size in found.long_sources.items():
            self.views.note_source_size(message_id, size)
        sizes = found.view_sizes

        def tell(told: list[Part], picks: list[int] | None) -> None:
            self.views.built_sized(told, sizes if picks is None else [sizes[k] for k in picks])
            self._tell_listeners(told)

        self._store(found.lines, found.parts, None, total, tell)

    def _store(self, lines: list[bytes], parts: list[Part], texts: list[str] | None, total: int,
               tell: Callable[[list[Part], list[int] | None], None]) -> None:
        """Append a commit's free lines, tell of them, then mark every message checked.

        ``tell(parts, picks)`` tells of the stored parts (``picks``: their places
        in ``parts``; None: all of them).  No fsync of its own: free lines are
        derived from the log (fsynced just before), and a lost one is only a line
        the writer writes again.
        """
        if lines:
            stored = self.tree.add(lines, parts, texts, False)
            if stored == parts:
                tell(parts, None)
                self._tell_stretch()
            else:  # read back past a torn tail: lines found there may have free parents of their own
                place = {part: k for k, part in enumerate(parts)}
                mine = [p for p in stored if p in place]
                tell(mine, [place[p] for p in mine])
                self.after_stored([p for p in stored if p not in place], total, False)
        self.tree.free_upto = total
        self.tree.write_index(force=True)

    def _tell_listeners(self, parts: list[Part]) -> None:
        for listener in self.listeners:
            for part in parts:
                listener(part)

    def _tell_stretch(self) -> None:
        """Tell who listens (an import's index helper) of the bytes the last append filled with free lines."""
        appended, inode = self.tree.appended, self.tree.inode
        if appended is not None and inode is not None:
            for tell in self.stretch_listeners:
                tell(FreeStretch(inode, *appended))
