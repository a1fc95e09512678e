"""One memory folder, opened by any number of processes at once (DESIGN §2).

Everything that changes the memory (a turn committed, a line stored, the view
changed) happens under the short change lock and begins by catching up on what
other processes wrote.  Readers never lock: they read up to the last complete
line.  Opening reads the indexes, not the history, so it stays fast however
long the conversation grows.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import orjson

from endless.core import durable
from endless.core import journal
from endless.core import sessions
from endless.core import tiling as views
from endless.core.keys import Key, check_memory_id
from endless.core.locks import ChangeLock, Lease
from endless.core.log import OrderLog, TurnInfo, Damage
from endless.core.messages import Message, Stored, check_kind, prepare, render
from endless.core.settings import Settings, load_settings
from endless.core.tree import TreeStore, fold, line_size
from endless.core.tiling import Part, Sawtooth, ViewError, ViewState

FORMAT = 1
TEXT_CACHE = 8192  # node texts kept in memory: every view line and then some
SIZE_CACHE = 65536  # rendered sizes of written lines
STATUSES = ("completed", "stopped", "interrupted", "continued")  # continued: a long turn's earlier part
INTERRUPTED_NOTE = "This turn was interrupted before it finished (the process ended); what is above is all that happened."
STOPPED_NOTE = "The person stopped this turn before it finished; what is above is all that happened."


class MemoryError_(RuntimeError):
    """A memory that cannot be opened or changed as asked; the message says what to do."""


class NoMemory(MemoryError_):
    """No memory exists under that id."""


@dataclass(frozen=True)
class Job:
    """A line the writer may write now: a message's line (level 0) or a merge."""

    level: int
    index: int
    needed: bool = False

    @property
    def part(self) -> Part:
        return self.level, self.index

    @property
    def name(self) -> str:
        return views.name(self.part)


@dataclass(frozen=True)
class _ShrinkPass:
    """The last full pass over a shrinking view: what it ran on and the parents it named."""

    state: ViewState
    saw: Sawtooth
    merged: int  # the tree's merge counter then
    needed: list[Part]


@dataclass(frozen=True)
class ViewLine:
    part: Part
    text: str | None  # None while the line is not written

    @property
    def name(self) -> str:
        return views.name(self.part)

    def render(self) -> str:
        return f"{self.name}|{fold(self.text or '')}"


def root_of(settings: Settings) -> Path:
    return settings.memory_root()


def memories_dir(root: Path) -> Path:
    return root / "memories"


class Memory:
    """An open memory.  Use :meth:`open`; close it when done."""

    def __init__(self, folder: Path, root: Path, key: Key, settings: Settings, granularity: str,
                 agent_name: str | None, clock: Callable[[], float], readonly: bool) -> None:
        self.folder, self.root, self.key, self.settings = folder, root, key, settings
        self.memory_id = key.memory_id
        self.granularity = granularity
        self.agent_name = agent_name or settings.agent_name
        self.clock = clock
        self.readonly = readonly
        self.log = OrderLog(folder, granularity)
        self.tree = TreeStore(folder, granularity)
        self.lock = ChangeLock(folder / "lock")
        self.lease = Lease(folder, expiry=settings.lease_expiry_seconds, clock=clock)
        self.quarantine = folder / "damaged.jsonl"
        self.reports: list[str] = []
        self.window_tokens: int | None = None
        ceiling, floor = settings.window_limits(None)
        self._set_sawtooth(ceiling, floor)
        self.writer_saw = Sawtooth(settings.writer_view_ceiling, settings.writer_view_floor,
                                   settings.view_shrink_slack, settings.line_budget + 12)
        self.chat = ViewState()
        self.wview = ViewState()
        self._last_shrink: dict[str, _ShrinkPass] = {}  # see _settle
        self.needed: list[Part] = []
        self._needed_rank: dict[Part, int] = {}  # each needed part's place in ``needed``
        self._needed_from: tuple[list[Part], list[Part]] | None = None  # the plans ``needed`` was made from
        self._view_stamp: tuple | None = None
        self._texts: OrderedDict[Part, str] = OrderedDict()
        self._sizes: OrderedDict[Part, int] = OrderedDict()
        self._src: dict[int, int] = {}
        self._next_leaf = 0
        self._ready_merges: set[Part] | None = None
        self._noted_sessions: set[str] = set()
        self._waiters: list[asyncio.Future] = []
        self._routes_end = 0
        self._routes: dict[str, dict] = {}

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(cls, key: Key | None = None, *, memory_id: str | None = None,
             settings: Settings | None = None, root: Path | None = None, create: bool = True,
             readonly: bool = False, clock: Callable[[], float] = time.time,
             agent_name: str | None = None, window_tokens: int | None = None) -> "Memory":
        settings = settings or load_settings()
        root = Path(root) if root is not None else root_of(settings)
        if key is None and memory_id is None:
            raise MemoryError_("open a memory by its key or its memory id")
        mid = key.memory_id if key is not None else check_memory_id(memory_id)
        folder = memories_dir(root) / mid
        key_path = folder / "key.json"
        if not key_path.exists():
            if key is None or not create or readonly:
                raise NoMemory(f"no memory {mid} under {memories_dir(root)}; "
                               "list them with `endless memories`")
            durable.make_dir(folder)
            durable.write_json(key_path, {"format": FORMAT, "memoryId": mid, "agent": key.agent,
                                          "project": key.project, "granularity": settings.granularity,
                                          "agentName": agent_name, "created": clock()})
        meta = _read_key(key_path)
        stored_key = Key(meta["agent"], meta["project"])
        if stored_key.memory_id != mid:
            raise MemoryError_(f"{key_path} names the key of memory {stored_key.memory_id}, "
                               f"not {mid}; the folder was moved or edited by hand")
        memory = cls(folder, root, stored_key, settings, meta.get("granularity", "turn"),
                     agent_name or meta.get("agentName"), clock, readonly)
        if window_tokens is not None:
            memory.set_window(window_tokens)
        memory._load()
        return memory

    def _set_sawtooth(self, ceiling: int, floor: int) -> None:
        self.chat_saw = Sawtooth(ceiling, floor, self.settings.view_shrink_slack,
                                 self.settings.line_budget + 12)

    def set_window(self, window_tokens: int) -> None:
        """Scale the view to a model's window: ceiling = min(128,000, tokens × 1 byte)."""
        if not self.settings.serves_window(window_tokens):
            raise MemoryError_(f"a window of {window_tokens} tokens is below the "
                               f"{self.settings.smallest_window_tokens} Endless needs; "
                               "run this chat without Endless")
        self.window_tokens = window_tokens
        self._set_sawtooth(*self.settings.window_limits(window_tokens))

    def _load(self) -> None:
        self.log.load_index()
        self.tree.load_index()
        if self.readonly:
            self.log.catch_up(False)
            self.tree.catch_up(False)
            self._load_views(repair=False)
            self._replay_appends()
            self._advance_leaf()
            return
        with self.lock:
            for what in (self.log.repair_tail(self.quarantine), self.tree.repair_tail(self.quarantine)):
                if what:
                    self._report(what)
            self.log.catch_up(True)
            self.tree.catch_up(True)
            reported = len(self.reports)
            self._load_views(repair=True)
            repaired = len(self.reports) > reported  # a view was recomputed: store it
            self._advance_leaf()
            self._close_orphans()
            self._store_free_leaves({}, True)
            self._update_views(save=True)
            if repaired:
                self._save_views()

    def _report(self, what: str) -> None:
        self.reports.append(what)
        durable.log("memory", f"{self.memory_id}: {what}")

    def close(self) -> None:
        if self.lease.token is not None:
            try:
                with self.lock:
                    self.lease.release()
            except OSError:
                self.lease.release_local()
        self.log.close()
        self.tree.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the history -----------------------------------------------------------------

    @property
    def total(self) -> int:
        """T: the number of messages committed."""
        return self.log.total

    @property
    def turns(self) -> int:
        return len(self.log.offsets)

    @property
    def damage(self) -> list[Damage]:
        return self.log.damage + self.tree.damage

    def message(self, message_id: int) -> Stored | None:
        return self.log.message(message_id)

    def turn(self, turn: int) -> TurnInfo | None:
        if turn < 0 or turn >= self.turns:
            return None
        return self.log.info(turn)

    def turn_messages(self, turn: int) -> list[Stored]:
        from endless.core.log import stored_from
        record = self.log.read_record(turn)
        if record is None:
            return []
        return [stored_from(record, k, turn) for k in range(len(record["m"]))]

    # -- committing turns ------------------------------------------------------------

    def journal(self, session: str, title: str = "") -> "TurnInProgress":
        """Start logging a turn; its messages are fsynced to the journal as they are added."""
        self._writable()
        return TurnInProgress(self, journal.Journal(self.folder, session, title))

    def commit_turn(self, session: str, title: str, messages: Iterable[Message],
                    status: str = "completed", status_text: str | None = None,
                    tid: str | None = None, sync: bool = True) -> TurnInfo:
        """Log one whole turn in one record; returns where it landed."""
        return self.commit_turns([(session, title, list(messages), status, status_text, tid)],
                                 sync=sync)[0]

    def commit_turns(self, turns: list[tuple], sync: bool = True) -> list[TurnInfo]:
        """Commit several turns in one write (imports and fixtures: one fsync per batch).

        Each item is ``(session, title, messages, status, status_text, tid)``, optionally
        followed by the turn's time (an import keeps the original one; default: now).
        """
        self._writable()
        import secrets
        with self.lock:
            self._catch_up(locked=True)
            lines: list[bytes] = []
            infos: list[TurnInfo] = []
            first = self.total
            turn_no = self.turns
            at_now = self.clock()
            in_hand: dict[int, Message] = {}
            for item in turns:
                session, title, messages, status, status_text, tid = item[:6]
                at_turn = item[6] if len(item) > 6 and item[6] is not None else at_now
                if status not in STATUSES:
                    raise MemoryError_(f"turn status must be one of {', '.join(STATUSES)}, not {status!r}")
                messages = list(messages)
                for m in messages:
                    check_kind(m.kind, self.granularity)
                if status not in ("completed", "continued"):
                    note = status_text or (STOPPED_NOTE if status == "stopped" else INTERRUPTED_NOTE)
                    messages.append(Message("status", note, at_turn))
                if not messages:
                    continue
                tid = tid or secrets.token_hex(8)
                lines.append(self.log.encode(tid=tid, session=session, title=title, status=status,
                                             at=at_turn, messages=messages, turn=turn_no, first=first))
                infos.append(TurnInfo(turn_no, first, len(messages), session, title, status, at_turn, tid))
                for k, m in enumerate(messages):
                    in_hand[first + k] = m
                first += len(messages)
                turn_no += 1
            if not lines:
                return []
            for info in infos:  # before the turns exist: a crash must not leave them unrecorded
                self._note_session(info.session)
            self.log.append(lines, sync)
            self.log.catch_up(True)
            self._store_free_leaves(in_hand, sync)
            self._update_views(save=True, sync=sync)
        self._notify()
        return infos

    def _source(self, kind: str, text: str) -> str:
        return render(kind, text, self.settings, self.agent_name)

    def _note_session(self, session: str) -> None:
        if session in self._noted_sessions:
            return
        sessions.note_turns(self.root, session, self.key)
        self._noted_sessions.add(session)

    def _writable(self) -> None:
        if self.readonly:
            raise MemoryError_("this memory was opened read-only")

    def _close_orphans(self) -> None:
        """Close journals of dead processes as interrupted turns (under the lock)."""
        for path, beacon in journal.orphans(self.folder):
            try:
                pending = journal.read(path)
                if pending is None:
                    continue
                if pending.tid and self.log.has_tid(pending.tid):
                    self._report(f"removed the journal of turn {pending.tid}, already committed")
                elif pending.messages:
                    self.commit_turn(pending.session, pending.title, pending.messages,
                                     "interrupted", tid=pending.tid)
                    self._report(f"closed an unfinished turn of session {pending.session!r} "
                                 f"({len(pending.messages)} messages) as interrupted")
                for p in (path, path.with_suffix(".alive")):
                    try:
                        p.unlink()
                    except FileNotFoundError:
                        pass
                durable.fsync_dir(path.parent)
            finally:
                beacon.release()

    # -- the tree --------------------------------------------------------------------

    def is_built(self, level: int, index: int) -> bool:
        return self.tree.built(level, index)

    def node_text(self, level: int, index: int) -> str | None:
        part = (level, index)
        text = self._texts.get(part)
        if text is not None:
            self._texts.move_to_end(part)
            return text
        text = self.tree.text(level, index)
        if text is not None:
            self._texts[part] = text
            if len(self._texts) > TEXT_CACHE:
                self._texts.popitem(last=False)
        return text

    def store_line(self, level: int, index: int, text: str, sync: bool = True) -> bool:
        """Store a written line; False if it already existed (the first one wins)."""
        return self.store_lines([(level, index, text)], sync)[0]

    def store_lines(self, lines: list[tuple[int, int, str]], sync: bool = True) -> list[bool]:
        """Store several written lines in one write, in order (children before parents)."""
        self._writable()
        for _, _, text in lines:
            if not isinstance(text, str):
                raise MemoryError_("a line's text must be a string")
        stored: list[bool] = []
        with self.lock:
            self._catch_up(locked=True)
            encoded, parts = [], []
            pending: set[Part] = set()
            for level, index, text in lines:
                part = (level, index)
                if views.parse_name(views.first(part), views.count(part), self.total) is None:
                    raise MemoryError_(f"no line {views.name(part)} can exist with {self.total} messages")
                if self.tree.built(level, index) or part in pending:
                    stored.append(False)
                    continue
                if level > 0 and not all(self.tree.built(*c) or c in pending
                                         for c in views.children(part)):
                    raise MemoryError_(f"line {views.name(part)} cannot be stored before both halves")
                src = self._src_size(index) if level == 0 else None
                encoded.append(self.tree.encode(level, index, text, src))
                parts.append(part)
                pending.add(part)
                stored.append(True)
            if encoded:
                self.tree.append(encoded, sync)
                self.tree.catch_up(True)
                self._after_built(parts, sync)
                self._update_views(save=True, sync=sync)
        if encoded:
            self._notify()
        return stored

    def _src_size(self, message_id: int) -> int:
        size = self._src.get(message_id)
        if size is None:
            stored = self.log.message(message_id)
            size = 0 if stored is None else len(
                stored.writer_source(self.settings, self.agent_name).encode("utf-8"))
            self._src[message_id] = size
        return size

    def _store_free_leaves(self, in_hand: dict[int, Message], sync: bool) -> None:
        """Store the free leaves of every message not yet checked (under the lock).

        Normally that is just the turn being committed, whose messages are in
        hand; after a crash between a commit and its leaves, the watermark lags
        and the missed messages are read back from the log.
        """
        budget = self.settings.line_budget
        lines, parts = [], []
        for message_id in range(self.tree.free_upto, self.total):
            if self.tree.built(0, message_id):
                continue
            m = in_hand.get(message_id)
            if m is not None:
                source = self._source(m.kind, m.writer_text if m.writer_text is not None else m.text)
            else:
                stored = self.log.message(message_id)
                if stored is None:
                    continue
                source = stored.writer_source(self.settings, self.agent_name)
            size = len(source.encode("utf-8"))
            if size <= budget:
                lines.append(self.tree.encode(0, message_id, source, size))
                parts.append((0, message_id))
            else:
                self._src[message_id] = size
        if lines:
            # No fsync of its own: free lines are derived from the log (fsynced just
            # before), and a lost one is only a line the writer writes again.
            self.tree.append(lines, False)
            self.tree.catch_up(False)
            self._after_built(parts, False)
        self.tree.free_upto = self.total
        self.tree.write_index(force=True)

    def _after_built(self, parts: list[Part], sync: bool) -> None:
        """Store free parents of new nodes, level by level, and keep ready work current."""
        budget = self.settings.line_budget
        frontier = list(parts)
        while frontier:
            lines, new = [], []
            seen: set[Part] = set()
            for part in frontier:
                self._mark_built(part)
                level, index = part
                sibling = (level, index ^ 1)
                top = views.parent(part)
                if self.tree.built(*top) or not self.tree.built(*sibling):
                    continue
                if views.end(top) > self.total or top in seen:
                    continue
                left, right = views.children(top)
                joined = f"{self.node_text(*left)}\n{self.node_text(*right)}"
                seen.add(top)
                if len(joined.encode("utf-8")) <= budget:
                    lines.append(self.tree.encode(top[0], top[1], joined, None))
                    new.append(top)
            if lines:
                self.tree.append(lines, sync)
                self.tree.catch_up(True)
            frontier = new

    def _mark_built(self, part: Part) -> None:
        level, index = part
        if level == 0:
            self._src.pop(index, None)
        if self._ready_merges is not None:
            self._ready_merges.discard(part)
            sibling = (level, index ^ 1)
            top = views.parent(part)
            if (self.tree.built(*sibling) and not self.tree.built(*top)
                    and views.end(top) <= self.total):
                self._ready_merges.add(top)

    def _advance_leaf(self) -> None:
        """Move to the first unbuilt leaf; the search runs in C over the level-0 slots."""
        slots = self.tree.slots[0] if self.tree.slots else None
        if slots is None:
            return
        start = min(self._next_leaf, len(slots))
        try:
            found = slots.index(0, start)
        except ValueError:
            found = len(slots)
        self._next_leaf = min(max(found, self._next_leaf), self.total)

    # -- catching up -----------------------------------------------------------------

    def refresh(self) -> bool:
        """Catch up on other processes' writes without locking; True if anything changed."""
        return self._catch_up(locked=False)

    def _catch_up(self, locked: bool) -> bool:
        before = (self.total, self.tree.count)
        new_nodes = self.tree.catch_up(locked and not self.readonly)
        self.log.catch_up(locked and not self.readonly)
        for part in new_nodes:
            self._mark_built(part)
        self._advance_leaf()
        changed = self._reload_views_if_changed()
        self._replay_appends()
        return changed or before != (self.total, self.tree.count)

    def _replay_appends(self) -> None:
        """Pure appends are not saved: extend the loaded views to every message read."""
        for state in (self.chat, self.wview):
            if state.total < self.total:
                state.append(self.total)

    # -- views -----------------------------------------------------------------------

    def _view_paths(self) -> tuple[Path, Path]:
        return self.folder / "view.json", self.folder / "writer-view.json"

    def _stamp(self) -> tuple | None:
        try:
            st = self._view_paths()[0].stat()
            wst = self._view_paths()[1].stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size, wst.st_ino, wst.st_mtime_ns, wst.st_size)

    def _reload_views_if_changed(self) -> bool:
        if self._stamp() == self._view_stamp:
            return False
        self._load_views(repair=False)
        return True

    def _load_views(self, repair: bool) -> None:
        """Load both views; one that fails validation is recomputed from the log, loudly."""
        chat_path, writer_path = self._view_paths()
        self._view_stamp = self._stamp()
        chat = self._read_view(chat_path, "view", repair)
        if chat is None or chat is self.chat:
            # Not accepted (it may name messages or lines we have not read yet): try again
            # at the next catch-up instead of keeping a stale view until the file changes.
            self._view_stamp = None
            if chat is None:
                return
        self.chat = chat
        wview = self._read_view(writer_path, "writer view", repair, writer=True)
        if wview is None or not views.covers(wview.parts, chat.parts):
            if wview is not None and repair:
                self._report("the writer view was not derived from the chat view; re-deriving it")
            wview = views.derive(self.chat, self.writer_saw, self._size_of, self.tree.built)
        self.wview = wview

    def _read_view(self, path: Path, label: str, repair: bool, writer: bool = False) -> ViewState | None:
        try:
            state = ViewState.from_json(durable.read_json(path))
            views.validate(state, self.total, self.tree.built)
            return state
        except FileNotFoundError:
            if writer:
                return None
            return ViewState()
        except (ViewError, ValueError, OSError) as exc:
            if not repair:
                return None if writer else (self.chat if self.chat.parts else None)
            if writer:
                self._report(f"the stored {label} is invalid ({exc}); re-deriving it")
                return None
            self._report(f"the stored {label} is invalid ({exc}); recomputing it from the log "
                         "(the provider cache is lost once)")
            return views.refold(self.total, self._size_of, self.tree.built, self.chat_saw.floor)

    def _size_of(self, part: Part) -> int:
        """Bytes of the part's rendered line; a written line's size never changes, so it is kept."""
        size = self._sizes.get(part)
        if size is not None:
            return size
        level, index = part
        head = f"{views.first(part)}+{views.count(part)}|"
        text = self.node_text(level, index) if self.tree.built(level, index) else None
        if text is not None:
            size = line_size(head, text)
            self._sizes[part] = size
            if len(self._sizes) > SIZE_CACHE:
                self._sizes.popitem(last=False)
            return size
        if level == 0:
            return len(head) + min(self._src_size(index), self.settings.line_budget) + 1
        return len(head) + self.settings.line_budget + 1

    def view_size(self, state: ViewState | None = None) -> int:
        state = state or self.chat
        return sum(self._size_of(p) for p in state.parts)

    def _update_views(self, save: bool, sync: bool = True) -> None:
        """Append new messages to both views, run the sawtooths, save after merges (under the lock).

        A pure append is not saved: a stored view tiling ``[0, k)`` gets the
        messages after ``k`` appended when it is loaded, which gives the same view.
        """
        flags = (self.chat.shrinking, self.wview.shrinking)
        for state in (self.chat, self.wview):
            if state.total < self.total:
                state.append(self.total)
        outcome = self._settle("chat", self.chat_saw, self.chat)
        if outcome.changed:
            self.wview = views.derive(self.chat, self.writer_saw, self._size_of, self.tree.built)
        woutcome = self._settle("writer", self.writer_saw, self.wview)
        made_from = self._needed_from
        if made_from is None or made_from[0] is not outcome.needed or made_from[1] is not woutcome.needed:
            # (Skipped while both views wait on their last plans: these lists run to tens of
            # thousands of parents after a long import, and a store would walk them each time.)
            chat_needed = set(outcome.needed)
            self.needed = outcome.needed + [p for p in woutcome.needed if p not in chat_needed]
            self._needed_rank = {part: k for k, part in enumerate(self.needed)}
            self._needed_from = (outcome.needed, woutcome.needed)
        merged = outcome.changed or woutcome.changed
        if save and (merged or flags != (self.chat.shrinking, self.wview.shrinking)):
            self._save_views(sync)

    def _settle(self, which: str, saw: Sawtooth, state: ViewState) -> views.BatchOutcome:
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
        is built, and the next pass applies all that is ready.
        """
        last = self._last_shrink.get(which)
        if last is not None and last.state is state and last.saw is saw and state.shrinking:
            built_since = self.tree.merged - last.merged
            if built_since < max(1, int(len(last.needed) * self.settings.shrink_replan_share)):
                return views.BatchOutcome(False, [], last.needed)  # the same list: see _update_views
        outcome = saw.settle(state, self.view_size(state), self._size_of, self.tree.built)
        if state.shrinking:
            self._last_shrink[which] = _ShrinkPass(state, saw, self.tree.merged, outcome.needed)
        else:
            self._last_shrink.pop(which, None)
        return outcome

    def _save_views(self, sync: bool = True) -> None:
        chat_path, writer_path = self._view_paths()
        ceiling = {"ceiling": self.chat_saw.ceiling, "floor": self.chat_saw.floor}
        durable.write_json(chat_path, {"format": FORMAT, **self.chat.to_json(), **ceiling}, sync)
        durable.write_json(writer_path, {"format": FORMAT, **self.wview.to_json()}, sync)
        self._view_stamp = self._stamp()

    def view_lines(self, writer: bool = False) -> list[ViewLine]:
        state = self.wview if writer else self.chat
        return [ViewLine(p, self.node_text(*p)) for p in state.parts]

    def written_prefix(self, writer: bool = False, upto: int | None = None) -> tuple[list[ViewLine], int]:
        """The view's lines up to the first unwritten one (or up to message ``upto``), and where they stop."""
        state = self.wview if writer else self.chat
        lines: list[ViewLine] = []
        for part in state.parts:
            if upto is not None and views.end(part) > upto:
                return lines, views.first(part)
            text = self.node_text(*part)
            if text is None:
                return lines, views.first(part)
            lines.append(ViewLine(part, text))
        return lines, state.total

    def render_view(self, writer: bool = False) -> tuple[str, int]:
        """``<chat>`` … ``</chat>`` up to the first unwritten line, and the first message not shown."""
        lines, stop = self.written_prefix(writer)
        body = "".join(line.render() + "\n" for line in lines)
        return f"<chat>\n{body}</chat>", stop

    def recent_block(self, start: int) -> str:
        """Messages ``[start, T)`` as ``id+0|tag: text`` lines, oldest first."""
        return "\n".join(self.recent_line(m) for m in range(start, self.total))

    def recent_line(self, message_id: int) -> str:
        """Message ``message_id`` as the recent block shows it: ``id+0|tag: text``."""
        stored = self.message(message_id)
        if stored is None:
            return f"{message_id}+0|note: (this message is damaged in the log)"
        return f"{message_id}+0|{stored.source_text(self.settings, self.agent_name)}"

    # -- the writer's side -----------------------------------------------------------

    def ready_work(self) -> list[Job]:
        """Lines the writer may write now, in build order (DESIGN §3.1)."""
        if self._ready_merges is None:
            self._ready_merges = self._scan_ready_merges()
        jobs: list[Job] = []
        rank = self._needed_rank
        if len(self._ready_merges) < len(rank):  # walk the shorter side, in the plan's order
            ready_needed = sorted((p for p in self._ready_merges if p in rank), key=rank.__getitem__)
        else:
            ready_needed = [p for p in self.needed if p in self._ready_merges]
        jobs += [Job(part[0], part[1], True) for part in ready_needed]
        unwritten = 0
        message_id = self._next_leaf
        while unwritten < self.settings.unwritten_ahead and message_id < self.total:
            if not self.tree.built(0, message_id):
                jobs.append(Job(0, message_id))
                unwritten += 1
            message_id += 1
        for part in sorted(p for p in self._ready_merges if p not in rank):
            jobs.append(Job(part[0], part[1]))
        return jobs

    def _scan_ready_merges(self) -> set[Part]:
        ready: set[Part] = set()
        for level, slots in enumerate(self.tree.slots):
            parents = self.tree.slots[level + 1] if level + 1 < len(self.tree.slots) else ()
            for j in range(len(slots) // 2):
                if slots[2 * j] and slots[2 * j + 1] and not (j < len(parents) and parents[j]):
                    if ((j + 1) << (level + 1)) <= self.total:
                        ready.add((level + 1, j))
        return ready

    def job_input(self, job: Job) -> str:
        """What the writer compresses: ``tag: message`` (tool output trimmed), or the two child lines."""
        if job.level == 0:
            stored = self.message(job.index)
            if stored is None:
                raise MemoryError_(f"message {job.index} cannot be read from the log")
            return stored.writer_task_input(self.settings, self.agent_name)
        left, right = views.children(job.part)
        return "\n".join(ViewLine(p, self.node_text(*p)).render() for p in (left, right))

    def job_sources(self, job: Job) -> list[str]:
        """Everything a line may draw facts from: its whole message, or a merge's lines and messages."""
        if job.level == 0:
            stored = self.message(job.index)
            return [self.job_input(job) if stored is None
                    else stored.writer_source(self.settings, self.agent_name)]
        sources = [self.job_input(job)]
        if job.level > 0:
            start = views.first(job.part)
            for message_id in range(start, views.end(job.part)):
                stored = self.message(message_id)
                if stored is not None:
                    sources.append(stored.writer_source(self.settings, self.agent_name))
        return sources

    def writer_context(self, job: Job) -> list[ViewLine]:
        """The writer view up to the node, stopping at the first unwritten line."""
        upto = job.index if job.level == 0 else views.end(job.part)
        lines, _ = self.written_prefix(writer=True, upto=upto)
        return lines

    def record_route(self, session: str, route: dict, system_prompt: str,
                     tools: list[dict] | None = None) -> None:
        """Remember the route, system prompt and tools a session last used, for its writer calls.

        Written only when they change, so a long chat adds a line only when its
        prompt does.  The route must not hold secrets (an API key's variable
        name, never the key).
        """
        self._writable()
        self._read_routes()
        record = {"route": route, "system": system_prompt, "tools": tools or []}
        if self._routes.get(session) == record:
            return
        with self.lock:
            durable.append_lines(self.folder / "routes.jsonl", [durable.dumps_line(
                {"s": session, **record, "at": self.clock()})])
        self._routes[session] = record

    def route_for(self, session: str) -> tuple[dict, str] | None:
        """The route and system prompt last recorded for ``session``."""
        found = self.recorded(session)
        return None if found is None else (found["route"], found["system"])

    def recorded(self, session: str) -> dict | None:
        """``{route, system, tools}`` last recorded for ``session``, or None."""
        self._read_routes()
        return self._routes.get(session)

    def job_session(self, job: Job) -> str | None:
        """The session whose route a job uses: its message's, or a merge's last message's."""
        stored = self.message(job.index if job.level == 0 else views.end(job.part) - 1)
        return None if stored is None else stored.session

    def job_route(self, job: Job) -> tuple[dict, str] | None:
        """The route and system prompt last recorded for the job's session, if any."""
        session = self.job_session(job)
        return None if session is None else self.route_for(session)

    def job_recorded(self, job: Job) -> dict | None:
        """``{route, system, tools}`` last recorded for the job's session, if any."""
        session = self.job_session(job)
        return None if session is None else self.recorded(session)

    def _read_routes(self) -> None:
        data, tail = durable.read_complete(self.folder / "routes.jsonl", self._routes_end)
        for _, line in durable.iter_lines(data, self._routes_end):
            try:
                record = orjson.loads(line)
                self._routes[record["s"]] = {"route": record["route"], "system": record["system"],
                                             "tools": record.get("tools", [])}
            except (orjson.JSONDecodeError, KeyError, TypeError):
                self._report("skipped a damaged line of routes.jsonl")
        self._routes_end = tail.complete_end

    # -- settle ----------------------------------------------------------------------

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                try:
                    waiter.get_loop().call_soon_threadsafe(_resolve, waiter)
                except RuntimeError:
                    pass

    async def settle(self, predicate: Callable[["Memory"], bool], timeout: float) -> bool:
        """Wait until ``predicate(memory)`` holds, across processes; False on timeout.

        Wakes at once when this process stores something, and polls the
        memory's files for other processes' writes.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self.refresh()
            if predicate(self):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, min(remaining, self.settings.settle_poll_seconds))
            except (asyncio.TimeoutError, TimeoutError):
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    # -- the lease -------------------------------------------------------------------

    def take_lease(self) -> bool:
        """Try to become the process that runs this memory's writer pool."""
        self._writable()
        with self.lock:
            return self.lease.try_acquire()

    def renew_lease(self) -> bool:
        with self.lock:  # else a takeover between the renewal's read and write is undone
            return self.lease.renew()

    async def keep_lease(self, stop: asyncio.Event) -> bool:
        """Renew the lease every few seconds until ``stop`` is set; False once it was lost."""
        while not stop.is_set():
            if not self.renew_lease():
                durable.log("memory", f"{self.memory_id}: lost the writer lease to another process")
                return False
            try:
                await asyncio.wait_for(stop.wait(), self.settings.lease_renew_seconds)
            except (asyncio.TimeoutError, TimeoutError):
                pass
        return True


def _resolve(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _read_key(path: Path) -> dict:
    try:
        meta = durable.read_json(path)
    except (OSError, ValueError) as exc:
        raise MemoryError_(f"cannot read {path}: {exc}; restore it from a backup") from exc
    if not isinstance(meta, dict) or "agent" not in meta or "project" not in meta:
        raise MemoryError_(f"{path} lacks its agent and project; restore it from a backup")
    version = meta.get("format")
    if version != FORMAT:
        if isinstance(version, int) and version > FORMAT:
            raise MemoryError_(f"memory {path.parent.name} has format {version}, newer than this "
                               f"Endless understands ({FORMAT}); upgrade endless-memory to open it")
        raise MemoryError_(f"memory {path.parent.name} has format {version!r}, which this Endless "
                           f"cannot migrate to {FORMAT}; open it with the version that wrote it "
                           "and export it with `endless export`")
    return meta


class TurnInProgress:
    """A turn being logged: messages go to the journal at once, the order log at the end."""

    def __init__(self, memory: Memory, journal_: journal.Journal) -> None:
        self.memory = memory
        self.journal = journal_

    def add(self, kind: str, text: str, at: float | None = None,
            writer_text: str | None = None, sync: bool = True) -> list[Message]:
        check_kind(kind, self.memory.granularity)
        at = self.memory.clock() if at is None else at
        messages = prepare(kind, text, at, self.memory.settings, writer_text)
        self.add_messages(messages, sync)
        return messages

    def add_messages(self, messages: list[Message], sync: bool = True) -> None:
        for m in messages:
            check_kind(m.kind, self.memory.granularity)
        if messages and not self.journal.started:
            # A journalled turn ends up in this memory even if the process dies: note it first.
            self.memory._note_session(self.journal.session)
        self.journal.add(messages, sync)

    @property
    def messages(self) -> list[Message]:
        return list(self.journal.messages)

    def commit(self, status: str = "completed", status_text: str | None = None,
               sync: bool = True) -> TurnInfo | None:
        """Commit what the journal holds with ``status``; None if the turn logged nothing."""
        if not self.journal.started:
            return None
        info = self.memory.commit_turn(self.journal.session, self.journal.title,
                                       self.journal.messages, status, status_text,
                                       tid=self.journal.tid, sync=sync)
        self.journal.finish()
        return info
