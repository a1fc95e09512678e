"""The keeper of a memory's two views: the chat view and the writer view (DESIGN §2.4).

``Memory`` changes the history; this keeper turns each change into the views
the model and the writer read.  It loads and validates the stored views, runs
their sawtooths, derives the writer view and saves them; the byte sizes the
sawtooths count are kept by :mod:`endless.core.view.sizes`.  It must never
recompute a view that loaded cleanly: every cached prefix of every chat hangs
on the live view.

A read command's memory leaves both views unread (:meth:`ViewKeeper.defer`)
until something asks for them: a search asks only which line covers each
hit, answered from the stored file's packed parts by bisection
(:meth:`ViewKeeper.covering`), so opening a memory whose long import is not
written yet costs no more than opening one whose lines are.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

from endless.core.store import durable
from endless.core.view import packed, tiling
from endless.core.store import OrderLog
from endless.core.view.render import ViewLine, chat_block
from endless.core.view.parts import Parts
from endless.core.settings import TRUSTED_TREE_GROWTH_BYTES, Settings
from endless.core.view.sizes import ViewSizes
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
    needed: Sequence[Part] | None  # the parents it named, in merge order (None: planned when asked)
    count: int  # how many (until planned: the view's parts, a bound)
    parents: int  # the tree's built parents (lines above level 0) at the pass
    forgets: int  # the forgets read at the pass


@dataclass(frozen=True)
class _Read:
    """A stored view as read: ``state`` None when there is nothing to use, ``kept`` when the live one stays."""

    state: ViewState | None
    kept: bool = False
    last_pass: object = None  # the file's "pass" field (see _ShrinkPass)
    data: object = None  # the file as read (when its view was taken)


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
        self._cover: tuple[Parts, int, array] | None = None  # chat parts, their count, their first messages
        # Each view's parents waited for, in merge order (None: planned when asked, see ``needed``).
        self._plans: dict[str, Sequence[Part] | None] = {CHAT: [], WRITER: []}
        self._needed: list[Part] | None = []
        self._needed_rank: dict[Part, int] | None = None
        self.stamp: tuple | None = None  # the view files as last read or written
        self._needed_stale = True
        self._last_shrink: dict[str, _ShrinkPass] = {}
        self.sizes = ViewSizes(settings, log, tree, agent_name)

    @property
    def lines(self) -> Lines:
        return Lines(self.size_of, self.tree.built, self.sizes.known, self.tree.slots)

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
            firsts = parts.firsts()
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

    # -- sizes (see endless.core.view.sizes) -------------------------------------------

    def source_size(self, message_id: int) -> int:
        """Bytes of a message's writer source (what its level-0 line is written from)."""
        return self.sizes.source_size(message_id)

    def note_source_size(self, message_id: int, size: int) -> None:
        self.sizes.note_source_size(message_id, size)

    def built(self, part: Part, text: str | None = None) -> None:
        """A node was stored: its size is kept if its text is in hand."""
        self.sizes.built(part, text)

    def forget_source(self, message_id: int) -> None:
        self.sizes.forget_source(message_id)

    def forget_size(self, part: Part) -> None:
        self.sizes.forget_size(part)

    def built_all(self, parts: list[Part], texts: list[str], text_sizes: list[int] | None = None) -> None:
        self.sizes.built_all(parts, texts, text_sizes)

    def built_sized(self, parts: list[Part], line_sizes: Iterable[int]) -> None:
        self.sizes.built_sized(parts, line_sizes)

    def size_of(self, part: Part) -> int:
        """Bytes of the part's rendered line."""
        return self.sizes.size_of(part)

    def size(self, state: ViewState | None = None) -> int:
        """The view's bytes as rendered (the chat view's, unless ``state`` is given)."""
        return self.sizes.size((state or self.chat).parts)

    def mark_needed_stale(self) -> None:
        """Lines were cleared: the parents each view needs are worked out again."""
        self._needed_stale = True

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
        self.sizes.clear_sums()
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
        wread = self._read(writer_path, "writer view", total, repair, writer=True,
                           same_as=read if read.state is self.chat and read.data is not None else None)
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

    def _read(self, path: Path, label: str, total: int, repair: bool, writer: bool = False,
              same_as: _Read | None = None) -> _Read:
        """A view file, checked and its sizes taken; ``same_as``: the chat view just read, whose parts
        this file may hold byte for byte (after an import, both views are one list of parts)."""
        try:
            data = durable.read_json(path)
            if same_as is not None and _same_parts(data, same_as.data):
                state = ViewState(same_as.state.parts.copy(), same_as.state.total, bool(data.get("shrinking")))
                self.sizes.share_sums(same_as.state.parts, state.parts)
                return _Read(state, last_pass=data.get("pass"), data=data)
            written_since = self._written_since(data)
            trusted = written_since is not None
            state = ViewState.from_json(data, saved_here=trusted)
            tiling.validate(state, total, self.tree.built_or_erased, self.tree.slots, checked_merges=trusted)
            self.sizes.take(state, trusted=trusted, written_since=written_since or ())
            return _Read(state, last_pass=data.get("pass"), data=data)
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
            chat = self._packed(self.chat)
            # The writer view is most often the chat view part for part (after an import, before lines
            # are written): its arrays are the chat view's, not sized and packed a second time.
            same = (self.wview.parts == self.chat.parts and self.wview.total == self.chat.total
                    and self.wview.shrinking == self.chat.shrinking)
            writer = chat if same else self._packed(self.wview)
            durable.write_json(chat_path, {"format": FORMAT, **self._with_pass(chat, self.chat, CHAT), **ceiling},
                               sync, compact=True)
            durable.write_json(writer_path, {"format": FORMAT, **self._with_pass(writer, self.wview, WRITER)}, sync,
                               compact=True)
        except durable.LinkRefused:
            raise
        except OSError as exc:
            durable.log("memory", f"the view could not be stored ({exc.strerror or exc}: {exc.filename}); "
                                  "it is stored at the next change, or recomputed from the log when the memory "
                                  "is next opened; `endless doctor` says what is wrong with the file")
        self.stamp = self._file_stamp()

    def _written_since(self, data: object) -> list[Part] | None:
        """The nodes written since a view file was saved, if it can be trusted (None: check it).

        Trusted when saved against this tree file with the forgets read now (nothing erased since, so
        every merged part it holds is still built) and the tree grew by appends alone; the lines written
        since are read by their heads, so their parts' sizes are asked again, when there are not too
        many of them to read (see TRUSTED_TREE_GROWTH_BYTES).
        """
        measured = data.get("measured") if isinstance(data, dict) else None
        if not isinstance(measured, list) or len(measured) != 4:
            return None
        inode, end, count, forgets = measured
        if inode != self.tree.inode or forgets != self.log.forgets or type(end) is not int or type(count) is not int:
            return None
        if end == self.tree.end and count == self.tree.count:
            return []
        if not (0 <= end < self.tree.end and count <= self.tree.count
                and self.tree.end - end <= TRUSTED_TREE_GROWTH_BYTES):
            return None
        return self.tree.parts_between(end, self.tree.end)

    def _measured(self) -> list:
        """What a saved view's sizes and merged parts were checked against: the tree file read, how far,
        how many lines it holds, and the forgets read.  A file that says the same at an open needs no
        check of its merged parts or its sizes (nothing was written, erased or forgotten since)."""
        return [self.tree.inode, self.tree.end, self.tree.count, self.log.forgets]

    def _packed(self, state: ViewState) -> dict:
        """A view's parts packed with their sizes (an unwritten part's flagged), as its file holds them."""
        self.sizes.take_pending()  # (every part's size is asked: read from arrays, not searched for)
        parts = state.parts
        sizes = array("I", map(self.size_of, parts))
        slots = self.tree.slots
        levels = len(slots)
        for k, (level, index) in enumerate(parts):
            if not (level < levels and index < len(slots[level]) and slots[level][index]):
                sizes[k] |= packed.UNWRITTEN
        return {**packed.pack(parts, state.total, state.shrinking, sizes, self.settings.line_budget),
                "measured": self._measured()}

    def _with_pass(self, fields: dict, state: ViewState, which: str) -> dict:
        """A view's file fields: its packed parts, and the last pass of a shrinking view (see _ShrinkPass)."""
        last = self._last_shrink.get(which)
        if last is not None and state.shrinking:
            return {**fields, "pass": [last.parents, last.forgets, last.count]}
        return fields

    # -- changes -------------------------------------------------------------------

    def append(self, total: int) -> None:
        """Pure appends are not saved: extend both views to every message read (unread views stay so)."""
        if self._deferred:
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
        if outcome.changed or woutcome.changed:
            self.sizes.retain_sums(self.chat.parts, self.wview.parts)
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

    def _plan(self, which: str, state: ViewState, saw: Sawtooth) -> Sequence[Part]:
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


_PACKED_FIELDS = ("width", "levels", "firsts", "sizes", "budget", "total", "crc")


def _same_parts(data: object, other: object) -> bool:
    """Two view files holding the same packed parts and sizes (the second needs no reading of its own)."""
    return (isinstance(data, dict) and isinstance(other, dict) and packed.is_packed(data)
            and all(field in data and data[field] == other.get(field) for field in _PACKED_FIELDS))
