"""The keeper of a memory's two views: the chat view and the writer view (DESIGN §2.4).

``Memory`` changes the history; this keeper turns each change into the views
the model and the writer read.  It loads and validates the stored views, runs
their sawtooths, derives the writer view, saves them, and keeps the byte
sizes the sawtooths count.  It must never recompute a view that loaded
cleanly: every cached prefix of every chat hangs on the live view.

A read command's memory leaves both views unread (:meth:`ViewKeeper.defer`)
until something asks for them: a search asks only which line covers each
hit, answered from the stored file's packed parts by bisection
(:meth:`ViewKeeper.covering`), so opening a memory whose long import is not
written yet costs no more than opening one whose lines are.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from operator import itemgetter, lshift
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from endless.core.store import durable
from endless.core.view import packed, tiling
from endless.core.store import OrderLog
from endless.core.store import utf8_size
from endless.core.view.render import ViewLine, chat_block, head, line_size, part_line_sizes
from endless.core.settings import SUMS_KEPT, VIEW_SUM_BLOCK, Settings
from endless.core.view.tiling import BatchOutcome, Lines, Part, Sawtooth, ViewError, ViewState
from endless.core.store import TreeStore

FORMAT = 2  # the parts packed (endless.core.view.packed); format 1 (a list of pairs) is read too
CHAT, WRITER = "chat", "writer"


class Prefix(NamedTuple):
    """A view's written lines from its start, and the first message they do not show."""

    lines: list[ViewLine]
    stop: int


class Rendered(NamedTuple):
    """A view as the model reads it, and the first message it does not show."""

    text: str
    stop: int


@dataclass(frozen=True)
class _ShrinkPass:
    """The last full pass over a shrinking view: the tree's merge counter then, and the parents it named.

    A view's file keeps its pass (``parents``, ``forgets``, ``count``), so a process that reads it (an
    open, or a reload after another process's save) goes on from that pass instead of making its own: a
    pass walks the whole view (seconds after a long import).  Such a pass's ``needed`` is None until a
    writer asks for it (see :attr:`ViewKeeper.needed`).
    """

    merged: int  # this process's tree.merged, counted as if at the pass
    needed: list[Part] | None  # the parents it named, in merge order (None: planned when asked)
    count: int  # how many (until planned: the view's parts, a bound)
    parents: int  # the tree's built parents (lines above level 0) at the pass
    forgets: int  # the forgets read at the pass


@dataclass
class _SizeSums:
    """One view's size summed by blocks of ``block`` parts, so a commit sums a few thousand numbers.

    Why: after a long import a view holds a part per unwritten message (a
    million), and every commit asked the size of each: 300 ms a commit at 1M.
    A block's sum stays right while its parts and their sizes do: the parts
    list is only ever extended in place (a merge makes a new list, which gets
    new sums), and a size changes only through the keeper, which marks the
    block holding that part's first message for summing again.
    """

    parts: list[Part]  # the list summed (by identity)
    sums: array = field(default_factory=lambda: array("q"))  # sums[k]: parts[k*block:(k+1)*block]
    firsts: array = field(default_factory=lambda: array("Q"))  # first message of each block's first part
    dirty: set[int] = field(default_factory=set)  # blocks to sum again


@dataclass(frozen=True)
class _Read:
    """A stored view as read: ``state`` None when there is nothing to use, ``kept`` when the live one stays."""

    state: ViewState | None
    kept: bool = False
    last_pass: object = None  # the file's "pass" field (see _ShrinkPass)


class ViewKeeper:
    """Both views of one open memory, their sawtooths, their files and their size caches."""

    def __init__(self, folder: Path, settings: Settings, log: OrderLog, tree: TreeStore,
                 agent_name: str, report: Callable[[str], None]) -> None:
        self.folder, self.settings, self.log, self.tree = folder, settings, log, tree
        self.agent_name = agent_name
        self.report = report
        self.window_tokens: int | None = None
        estimate = settings.planned_line_bytes
        self.chat_saw = Sawtooth(*settings.window_limits(None), settings.view_shrink_slack, estimate)
        self.writer_saw = Sawtooth(settings.writer_view_ceiling, settings.writer_view_floor,
                                   settings.view_shrink_slack, estimate)
        self._chat = ViewState()
        self._wview = ViewState()
        self._deferred = False  # both views unread until asked for (defer)
        self._peeked: tuple[tuple | None, packed.Packed | None] | None = None  # (file stamp, the chat view)
        self._cover: tuple[list[Part], int, array] | None = None  # chat parts, their count, their first messages
        # Each view's parents waited for, in merge order (None: planned when asked, see ``needed``).
        self._plans: dict[str, list[Part] | None] = {CHAT: [], WRITER: []}
        self._needed: list[Part] | None = []
        self._needed_rank: dict[Part, int] | None = None
        self.stamp: tuple | None = None  # the view files as last read or written
        self._needed_stale = True
        self._last_shrink: dict[str, _ShrinkPass] = {}
        # Rendered bytes of written lines, per level (0: not known yet).  A written line's size
        # never changes, and a plan after a long import asks for every one of them: an array
        # of 4 bytes a node, not a cache that a 100,000-line view would thrash.
        self._sizes: list[array] = []
        # Per message without its line (0: not known): its writer source's bytes, and its rendered
        # size in a view (as a stored view kept it, see _take_sizes, or as counted here).  Arrays
        # beside _sizes[0], never set for a written message, so a million cost 8 MB, not two dicts.
        self._src = array("I")
        self._unwritten = array("I")
        self._sums: list[_SizeSums] = []  # the views' sizes by blocks (see _SizeSums), newest last

    @property
    def lines(self) -> Lines:
        return Lines(self.size_of, self.tree.built, self._sizes, self.tree.slots)

    # -- the views, read when first asked for ----------------------------------------

    @property
    def chat(self) -> ViewState:
        if self._deferred:
            self._load_deferred()
        return self._chat

    @chat.setter
    def chat(self, state: ViewState) -> None:
        self._chat = state

    @property
    def wview(self) -> ViewState:
        if self._deferred:
            self._load_deferred()
        return self._wview

    @wview.setter
    def wview(self, state: ViewState) -> None:
        self._wview = state

    def defer(self) -> None:
        """Leave both views unread until something asks for them (a read-only open: see the module doc)."""
        self._deferred = True

    def _load_deferred(self) -> None:
        self._deferred = False
        total = self.log.total
        self.load(total, repair=False)
        self.append(total)

    def covering(self, message_id: int) -> Part | None:
        """The chat view's part holding message ``message_id`` (None: no such message).

        Unread views are not read for it: the stored chat view's packed parts are
        bisected (its checksum checked, and the part found built), and a message past
        what it stores is its own part, as an open appends it.  A stored view that
        cannot be used so is read as an open reads it.
        """
        if not 0 <= message_id < self.log.total:
            return None
        if self._deferred:
            stored = self._peek()
            if stored is not None and stored.total <= self.log.total:
                part = packed.covering(stored, message_id)
                if part is None:
                    return 0, message_id
                if part[0] == 0 or self.tree.built_or_erased(*part):
                    return part
            self._load_deferred()
        return self._covering_loaded(message_id)

    def _covering_loaded(self, message_id: int) -> Part | None:
        if message_id >= self._chat.total:  # logged since the view was last extended: its own part, to come
            return 0, message_id
        parts = self._chat.parts
        if self._cover is None or self._cover[0] is not parts or self._cover[1] != len(parts):
            firsts = array("Q", map(lshift, map(itemgetter(1), parts), map(itemgetter(0), parts)))
            self._cover = (parts, len(parts), firsts)
        firsts = self._cover[2]
        at = bisect.bisect_right(firsts, message_id) - 1
        if at < 0 or message_id >= tiling.end(parts[at]):
            return None
        return parts[at]

    def _peek(self) -> packed.Packed | None:
        """The stored chat view's packed parts, checksum checked (None: no file, format 1, or unusable)."""
        stamp = self._file_stamp()
        if self._peeked is not None and self._peeked[0] == stamp:
            return self._peeked[1]
        try:
            data = durable.read_json(self._paths()[0])
            stored = packed.unpack(data) if packed.is_packed(data) else None
        except (OSError, ValueError):  # (a PackError or a JSON error is a ValueError)
            stored = None
        self._peeked = (stamp, stored)
        return stored

    def set_window(self, window_tokens: int) -> None:
        """Scale the chat view to a model's window: ceiling = min(128,000, tokens × 1 byte)."""
        self.window_tokens = window_tokens
        self.chat_saw = Sawtooth(*self.settings.window_limits(window_tokens), self.settings.view_shrink_slack,
                                 self.settings.planned_line_bytes)
        self._last_shrink.pop(CHAT, None)

    # -- sizes ---------------------------------------------------------------------

    def source_size(self, message_id: int) -> int:
        """Bytes of a message's writer source (what its level-0 line is written from)."""
        if message_id < len(self._src) and self._src[message_id]:
            return self._src[message_id]
        stored = self.log.message(message_id)
        size = 0 if stored is None else len(stored.writer_source(self.settings, self.agent_name).encode("utf-8"))
        if size:
            _put(self._src, message_id, size)
        return size

    def note_source_size(self, message_id: int, size: int) -> None:
        _put(self._src, message_id, size)
        if message_id < len(self._unwritten) and self._unwritten[message_id]:
            self._unwritten[message_id] = 0
            self._changed(message_id)

    def built(self, part: Part, text: str | None = None) -> None:
        """A node was stored: its source size is no longer needed; its size is kept if its text is in hand."""
        if part[0] == 0:
            _clear(self._src, part[1])
            _clear(self._unwritten, part[1])
        if text is not None:
            self._keep_size(part, line_size(head(part), text))
        self._changed(tiling.first(part))

    def forget_source(self, message_id: int) -> None:
        """A forgotten message's source size is no longer known (its tombstone is measured anew)."""
        _clear(self._src, message_id)
        _clear(self._unwritten, message_id)
        self._changed(message_id)

    def forget_size(self, part: Part) -> None:
        """An erased line no longer counts its old size."""
        level, index = part
        if level < len(self._sizes) and index < len(self._sizes[level]):
            self._sizes[level][index] = 0
        self._changed(tiling.first(part))

    def mark_needed_stale(self) -> None:
        """Lines were cleared: the parents each view needs are worked out again."""
        self._needed_stale = True

    def built_all(self, parts: list[Part], texts: list[str], text_sizes: list[int] | None = None) -> None:
        """:meth:`built` for a commit's free lines (``text_sizes``: each text's utf-8 bytes, when known)."""
        if text_sizes is None:
            text_sizes = [utf8_size(text) for text in texts]
        self.built_sized(parts, part_line_sizes(parts, texts, text_sizes))

    def built_sized(self, parts: list[Part], line_sizes: Iterable[int]) -> None:
        """:meth:`built` for lines whose rendered sizes are known: room made once per level, each set in place."""
        highest: dict[int, int] = {}
        for level, index in parts:
            if index > highest.get(level, -1):
                highest[level] = index
        for level, index in highest.items():
            self._keep_size((level, index), 0)
        sizes = self._sizes
        for told in (self._src, self._unwritten):
            if told:
                for level, index in parts:
                    if level == 0 and index < len(told):
                        told[index] = 0
        for (level, index), size in zip(parts, line_sizes):
            sizes[level][index] = size
        if self._sums:
            for part in parts:
                self._changed(tiling.first(part))

    def _keep_size(self, part: Part, size: int) -> None:
        level, index = part
        while len(self._sizes) <= level:
            self._sizes.append(array("I"))
        sizes = self._sizes[level]
        if index >= len(sizes):
            sizes.frombytes(bytes(sizes.itemsize * (index + 1 - len(sizes))))
        sizes[index] = size

    def size_of(self, part: Part) -> int:
        """Bytes of the part's rendered line; a written line's size never changes, so it is kept."""
        level, index = part
        if level < len(self._sizes):
            sizes = self._sizes[level]
            if index < len(sizes) and sizes[index]:
                return sizes[index]
        line_head = head(part)
        text = self.tree.cached_text(level, index) if self.tree.built(level, index) else None
        if text is not None:
            size = line_size(line_head, text)
            self._keep_size(part, size)
            return size
        if level == 0:
            if index < len(self._unwritten) and self._unwritten[index]:
                return self._unwritten[index]
            size = len(line_head) + min(self.source_size(index), self.settings.line_budget) + 1
            _put(self._unwritten, index, size)
            return size
        return len(line_head) + self.settings.line_budget + 1

    def size(self, state: ViewState | None = None) -> int:
        """The view's bytes as rendered (an unwritten line counted at its cap): summed by blocks kept
        from one call to the next (see _SizeSums), so a commit does not walk a million parts."""
        parts = (state or self.chat).parts
        block = VIEW_SUM_BLOCK
        sums = self._sums_of(parts)
        size_of = self.size_of
        for k in sums.dirty:
            if k < len(sums.sums):
                sums.sums[k] = sum(map(size_of, parts[k * block:(k + 1) * block]))
        sums.dirty.clear()
        full = len(parts) // block
        for k in range(len(sums.sums), full):
            sums.firsts.append(tiling.first(parts[k * block]))
            sums.sums.append(sum(map(size_of, parts[k * block:(k + 1) * block])))
        return sum(sums.sums) + sum(map(size_of, parts[full * block:]))

    def _sums_of(self, parts: list[Part]) -> _SizeSums:
        """The block sums kept for this parts list, or new ones (a list cut short in place gets new ones)."""
        for k, sums in enumerate(self._sums):
            if sums.parts is parts:
                kept = len(sums.sums)
                if kept * VIEW_SUM_BLOCK <= len(parts) and (
                        not kept or tiling.first(parts[(kept - 1) * VIEW_SUM_BLOCK]) == sums.firsts[-1]):
                    return sums
                del self._sums[k]
                break
        sums = _SizeSums(parts)
        self._sums.append(sums)
        del self._sums[:-SUMS_KEPT]
        return sums

    def _changed(self, message_id: int) -> None:
        """The size of the part starting at this message may have changed: its block is summed again."""
        for sums in self._sums:
            k = bisect.bisect_right(sums.firsts, message_id) - 1
            if k >= 0:
                sums.dirty.add(k)

    # -- reading -------------------------------------------------------------------

    def view_lines(self, writer: bool = False) -> list[ViewLine]:
        state = self.wview if writer else self.chat
        return [ViewLine(p, self.tree.cached_text(*p)) for p in state.parts]

    def written_prefix(self, writer: bool = False, upto: int | None = None) -> Prefix:
        """The view's lines up to the first unwritten one (or up to message ``upto``), and where they stop."""
        state = self.wview if writer else self.chat
        lines: list[ViewLine] = []
        for part in state.parts:
            if upto is not None and tiling.end(part) > upto:
                return Prefix(lines, tiling.first(part))
            text = self.tree.cached_text(*part)
            if text is None:
                return Prefix(lines, tiling.first(part))
            lines.append(ViewLine(part, text))
        return Prefix(lines, state.total)

    def render(self, writer: bool = False) -> Rendered:
        """``<chat>`` … ``</chat>`` up to the first unwritten line, and the first message not shown."""
        prefix = self.written_prefix(writer)
        return Rendered(chat_block(prefix.lines), prefix.stop)

    # -- files ---------------------------------------------------------------------

    def _paths(self) -> tuple[Path, Path]:
        return self.folder / "view.json", self.folder / "writer-view.json"

    def _file_stamp(self) -> tuple | None:
        chat_path, writer_path = self._paths()
        try:
            st, wst = chat_path.stat(), writer_path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size, wst.st_ino, wst.st_mtime_ns, wst.st_size)

    def reload_if_changed(self, total: int) -> bool:
        """Read the view files again if another process saved them; True if it did (unread views stay so)."""
        if self._deferred or self._file_stamp() == self.stamp:
            return False
        self.load(total, repair=False)
        return True

    def load(self, total: int, repair: bool) -> None:
        """Load both views; one that fails validation is recomputed from the log, loudly."""
        chat_path, writer_path = self._paths()
        self.stamp = self._file_stamp()
        read = self._read(chat_path, "view", total, repair)
        if read.state is None or read.kept:
            # Not accepted (it may name messages or lines we have not read yet): try again
            # at the next catch-up instead of keeping a stale view until the file changes.
            self.stamp = None
            if read.state is None:
                return
        else:
            self.chat = read.state
            self._resume_pass(CHAT, read.state, read.last_pass)
        wread = self._read(writer_path, "writer view", total, repair, writer=True)
        wview = wread.state
        if wview is None or not packed.covers(wview.parts, self.chat.parts):
            if wview is not None and repair:
                self.report("the writer view was not derived from the chat view; re-deriving it")
            wview = tiling.derive(self.chat, self.writer_saw, self.lines)
            self._last_shrink.pop(WRITER, None)
        else:
            self._resume_pass(WRITER, wview, wread.last_pass)
        self.wview = wview

    def _resume_pass(self, which: str, state: ViewState, stored: object) -> None:
        """Go on from the pass a view's file kept, if a pass now could merge no more than the live
        rule would wait for (fewer parents built since than ``shrink_replan_share`` of those it
        named, and no forget since); else the next update makes a pass of its own."""
        self._last_shrink.pop(which, None)
        if not state.shrinking or not isinstance(stored, list) or len(stored) != 3:
            return
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in stored):
            return
        parents, forgets, count = stored
        since = self.tree.parents_built() - parents
        if forgets == self.log.forgets and 0 <= since < max(1, int(count * self.settings.shrink_replan_share)):
            self._last_shrink[which] = _ShrinkPass(self.tree.merged - since, None, count, parents, forgets)

    def _read(self, path: Path, label: str, total: int, repair: bool, writer: bool = False) -> _Read:
        try:
            data = durable.read_json(path)
            state = ViewState.from_json(data)
            tiling.validate(state, total, self.tree.built_or_erased)
            self._take_sizes(state)
            return _Read(state, last_pass=data.get("pass"))
        except FileNotFoundError:
            return _Read(None if writer else ViewState())
        except (ViewError, ValueError, OSError) as exc:
            if not repair:
                if writer or not self.chat.parts:
                    return _Read(None)
                return _Read(self.chat, kept=True)
            if writer:
                self.report(f"the stored {label} is invalid ({exc}); re-deriving it")
                return _Read(None)
            self.report(f"the stored {label} is invalid ({exc}); recomputing it from the log "
                        "(the provider cache is lost once)")
            return _Read(tiling.refold(total, self.lines, self.chat_saw.floor))

    def save(self, sync: bool = True) -> None:
        """Store both views (derived from the log and the tree): one that cannot be stored is said and
        stored at the next change, never the failure of the turn just committed."""
        chat_path, writer_path = self._paths()
        ceiling = {"ceiling": self.chat_saw.ceiling, "floor": self.chat_saw.floor}
        try:
            durable.write_json(chat_path, {"format": FORMAT, **self._stored(self.chat, CHAT), **ceiling}, sync,
                               compact=True)
            durable.write_json(writer_path, {"format": FORMAT, **self._stored(self.wview, WRITER)}, sync, compact=True)
        except durable.LinkRefused:
            raise
        except OSError as exc:
            durable.log("memory", f"the view could not be stored ({exc.strerror or exc}: {exc.filename}); "
                                  "it is stored at the next change, or recomputed from the log when the memory "
                                  "is next opened; `endless doctor` says what is wrong with the file")
        self.stamp = self._file_stamp()

    def _stored(self, state: ViewState, which: str) -> dict:
        """A view's file fields: its parts packed with their sizes (an unwritten part's flagged), and
        the last pass of a shrinking view (see _ShrinkPass)."""
        parts = state.parts
        sizes = array("I", map(self.size_of, parts))
        slots = self.tree.slots
        levels = len(slots)
        for k, (level, index) in enumerate(parts):
            if not (level < levels and index < len(slots[level]) and slots[level][index]):
                sizes[k] |= packed.UNWRITTEN
        fields = packed.pack(parts, state.total, state.shrinking, sizes, self.settings.line_budget)
        last = self._last_shrink.get(which)
        if last is not None and state.shrinking:
            fields["pass"] = [last.parents, last.forgets, last.count]
        return fields

    def _take_sizes(self, state: ViewState) -> None:
        """Keep the sizes a stored view kept, where they still hold: a line written then and not erased
        since (its text never changes), and an unwritten message still without its line, counted with the
        same line budget and not forgotten since.  Then the state lets them go."""
        stored, budget = state.stored_sizes, state.stored_budget
        state.stored_sizes = state.stored_budget = None
        if stored is None:
            return
        slots, erased, forgotten = self.tree.slots, self.tree.erased, self.log.forgotten
        levels = len(slots)
        same_budget = budget == self.settings.line_budget
        flag = packed.UNWRITTEN
        highest: dict[int, int] = {}
        taken: list[tuple[int, int, int]] = []
        unwritten: list[tuple[int, int]] = []
        for (level, index), size in zip(state.parts, stored):
            built = level < levels and index < len(slots[level]) and slots[level][index]
            if size & flag:
                if level == 0 and same_budget and not built and index not in forgotten:
                    unwritten.append((index, size & ~flag))
            elif built and size and (level, index) not in erased and (level or index not in forgotten):
                taken.append((level, index, size))
                if index > highest.get(level, -1):
                    highest[level] = index
        for level, index in highest.items():  # room made once per level
            while len(self._sizes) <= level:
                self._sizes.append(array("I"))
            row = self._sizes[level]
            if index >= len(row):
                row.frombytes(bytes(row.itemsize * (index + 1 - len(row))))
        for level, index, size in taken:
            row = self._sizes[level]
            if not row[index]:
                row[index] = size
        if unwritten:
            _put(self._unwritten, unwritten[-1][0], 0)  # room made once (the parts are in order)
            row = self._unwritten
            for index, size in unwritten:
                row[index] = size
        self._sums.clear()

    # -- changes -------------------------------------------------------------------

    def append(self, total: int) -> None:
        """Pure appends are not saved: extend both views to every message read (unread views stay so)."""
        if self._deferred:
            return
        if self.chat.total == self.wview.total < total:
            added = self.chat.append(total)  # both views hold the same new parts: share them
            self.wview.parts.extend(added)
            self.wview.total = total
            return
        for state in (self.chat, self.wview):
            if state.total < total:
                state.append(total)

    def update(self, total: int, save: bool, sync: bool = True) -> None:
        """Append new messages to both views, run the sawtooths, save after merges (under the lock).

        A pure append is not saved: a stored view tiling ``[0, k)`` gets the
        messages after ``k`` appended when it is loaded, which gives the same view.
        """
        flags = (self.chat.shrinking, self.wview.shrinking)
        self.append(total)
        outcome = self._run_sawtooth(CHAT, self.chat_saw, self.chat)
        if outcome.changed:
            self.wview = tiling.derive(self.chat, self.writer_saw, self.lines)
            self._last_shrink.pop(WRITER, None)
        woutcome = self._run_sawtooth(WRITER, self.writer_saw, self.wview)
        if self._needed_stale or outcome.replanned or woutcome.replanned:
            # (Skipped while both views wait on their last plans: these lists run to tens of
            # thousands of parents after a long import, and a store would walk them each time.)
            self._plans = {CHAT: outcome.needed, WRITER: woutcome.needed}
            self._needed = self._needed_rank = None
            self._needed_stale = False
        merged = outcome.changed or woutcome.changed
        # A new pass over a shrinking view is saved too, so the next process to read the file goes on
        # from it (see _ShrinkPass) instead of walking the whole view again.
        passed = (self.chat.shrinking and outcome.replanned) or (self.wview.shrinking and woutcome.replanned)
        if save and (merged or passed or flags != (self.chat.shrinking, self.wview.shrinking)):
            self.save(sync)

    def _run_sawtooth(self, which: str, saw: Sawtooth, state: ViewState) -> BatchOutcome:
        """Run a view's sawtooth; a shrinking view is re-planned only when that can pay off.

        A shrinking pass merges every pair whose parent is built, so when it
        leaves the view still shrinking, a new pass can merge something only
        after a node above level 0 is built: appended messages and their own
        lines bring no built parent.  So the pass is skipped until one is.
        And while the view waits for many parents (after importing a long
        history: tens of thousands), it is re-planned once a share of them
        (``shrink_replan_share``) is built rather than at each one: each pass
        walks the whole view (about 2 s at 100,000 unwritten messages), and
        the writer keeps building the parents of the last plan meanwhile.
        The view is then a few merges behind, never wrong: every part of it
        is built, and the next pass applies all that is ready.  (A view or a
        sawtooth that is replaced forgets its last pass.)
        """
        last = self._last_shrink.get(which)
        if last is not None and state.shrinking:
            built_since = self.tree.merged - last.merged
            if built_since < max(1, int(last.count * self.settings.shrink_replan_share)):
                if self.size(state) > saw.floor:
                    return BatchOutcome(False, [], last.needed, replanned=False)
                # Written leaves brought the view under its floor with no merge: the shrink is
                # over, as a full pass would find (and as a reopened memory does find).
                state.shrinking = False
                self._last_shrink.pop(which, None)
                return BatchOutcome(False, [], [])
        outcome = saw.batch(state, self.size(state), self.lines, plan=False)
        if state.shrinking:
            count = len(state.parts) if outcome.needed is None else len(outcome.needed)
            self._last_shrink[which] = _ShrinkPass(self.tree.merged, outcome.needed, count,
                                                   self.tree.parents_built(), self.log.forgets)
        else:
            self._last_shrink.pop(which, None)
        return outcome

    # -- what the views wait for -------------------------------------------------------

    @property
    def needed(self) -> list[Part]:
        """The parents the views wait for, the chat view's first, each in the order its batch merges them.

        A view that went on from a stored pass (see _ShrinkPass) is planned here, when a writer first
        asks: a process that only commits (a chat with no writer, a capture) never pays for it.
        """
        if self._deferred:
            self._load_deferred()
        if self._needed is None:
            chat = self._plan(CHAT, self.chat, self.chat_saw)
            writer = self._plan(WRITER, self.wview, self.writer_saw)
            in_chat = set(chat)
            self._needed = chat + [p for p in writer if p not in in_chat]
            self._needed_rank = None
        return self._needed

    @property
    def needed_rank(self) -> dict[Part, int]:
        """Each needed part's place in :attr:`needed`."""
        needed = self.needed
        if self._needed_rank is None:
            self._needed_rank = {part: k for k, part in enumerate(needed)}
        return self._needed_rank

    def _plan(self, which: str, state: ViewState, saw: Sawtooth) -> list[Part]:
        plan = self._plans.get(which)
        if plan is not None:
            return plan
        plan = []
        if state.shrinking:
            _, plan, _ = tiling.merge_down(state.parts, state.total, saw.floor, self.lines.planned(saw.estimate),
                                           self.size(state), self.lines.unbuilt)
        self._plans[which] = plan
        last = self._last_shrink.get(which)
        if last is not None and last.needed is None:
            self._last_shrink[which] = _ShrinkPass(last.merged, plan, len(plan), last.parents, last.forgets)
        return plan


def _put(row: array, index: int, value: int) -> None:
    """``row[index] = value``, the row grown with zeros to hold it (by half again, so a growing
    history is not copied at every message)."""
    if index >= len(row):
        row.frombytes(bytes(row.itemsize * (max(index + 1, len(row) * 3 // 2) - len(row))))
    row[index] = value


def _clear(row: array, index: int) -> None:
    if index < len(row):
        row[index] = 0
