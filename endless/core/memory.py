"""One memory folder, opened by any number of processes at once (DESIGN §2).

Everything that changes the memory (a turn committed, a line stored, the view
changed) happens under the short change lock and begins by catching up on what
other processes wrote.  Readers never lock: they read up to the last complete
line.  Opening reads the indexes, not the history, so it stays fast however
long the conversation grows.  The views live in their keeper
(:mod:`endless.core.view.keeper`); the writer's work queue and the routes it writes
with live in the writer layer, which sees this class through a small interface.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple, Sequence

from endless.core import integrity
from endless.core.built_lines import BuiltLines, BuiltListener, StretchListener
from endless.core.errors import MemoryUseError, NoMemory  # (NoMemory: re-exported, the faces name it here)
from endless.core.privacy import forget, redact
from endless.core.search import index as search_index
from endless.core.search import word_index
from endless.core.search import upkeep as index_upkeep
from endless.core.settings import Settings, load_settings, store_url
from endless.core.store import (COMPLETED, STATUSES, Damage, EncodedTurn, Key, Message, Store, Stored,
                                TurnInfo, TurnInProgress, TurnRecord, Waiters, check_kind,
                                close_orphans, decoded, durable, identity, keyfile, place_encoded, sessions,
                                memory_folder, open_store, stored_from)
from endless.core.view import Part, ViewKeeper, tiling

if TYPE_CHECKING:  # only the lease keeper waits: a read command never loads asyncio
    import asyncio


def memories_dir(root: Path) -> Path:
    return root / "memories"


# How Memory.open treats the views: "plan" (the merges due are planned), "append" (the new messages are
# appended and no merge planned, for a process that only commits turns, a coding agent's capture: each plan
# walks the whole view, seconds in a memory of tens of thousands of unwritten messages; the next opener that
# plans does it), "skip" (read only: not read at all, for a reader of turns and messages alone).
VIEWS = ("plan", "append", "skip")


def _views_mode(views: str, readonly: bool) -> str:
    if views not in VIEWS or (views == "skip" and not readonly):
        raise MemoryUseError(f"views must be one of {', '.join(VIEWS)} (skip: read only), not {views!r}")
    return views


class Memory:
    """An open memory.  Use :meth:`open`; close it when done."""
    expand_query: Callable[[str], Sequence[str]] | None = None  # a question's other words (endless.writer.expand)

    def __init__(self, folder: Path, root: Path, key: Key, settings: Settings, granularity: str,
                 agent_name: str | None, clock: Callable[[], float], readonly: bool) -> None:
        self.folder, self.root, self.key, self.settings = folder, root, key, settings
        self.memory_id = key.memory_id
        self.granularity = granularity
        self.agent_name = agent_name or settings.agent_name
        self.clock = clock
        self.readonly = readonly
        self.store: Store = open_store(folder, granularity, settings, clock)
        self.log, self.tree, self.lock, self.lease = self.store.log, self.store.tree, self.store.lock, self.store.lease
        self.quarantine = folder / "damaged.jsonl"
        self.reports: list[str] = []
        self.shortened: integrity.Shortened | None = None  # the log was found shorter than the rest at open
        self.log.on_problem = self.tree.on_problem = self.report
        self.views = ViewKeeper(folder, settings, self.log, self.tree, self.agent_name, self.report)
        self.search_index = word_index.open_index(folder, store_url(settings), self.store)
        self._redactions: Counter = Counter()  # counted since the last commit
        self.built = BuiltLines(self.tree, self.log, self.views, settings, self.agent_name)
        self._noted_sessions: set[str] = set()
        self._waiters = Waiters()

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(cls, key: Key | None = None, *, memory_id: str | None = None,
             settings: Settings | None = None, root: Path | None = None, create: bool = True,
             readonly: bool = False, clock: Callable[[], float] = time.time,
             agent_name: str | None = None, window_tokens: int | None = None, views: str = "plan") -> "Memory":
        settings = settings or load_settings()
        root = Path(root) if root is not None else settings.memory_root()
        if key is None and memory_id is None:
            raise MemoryUseError("open a memory by its key or its memory id")
        folder = memory_folder(settings, root, key, memory_id, create=create, readonly=readonly,
                               agent_name=agent_name, clock=clock)
        mid, key_path = folder.name, folder / "key.json"
        meta = keyfile.read(key_path, mid)
        stored_key = Key(meta["agent"], meta["project"])
        memory = cls(folder, root, stored_key, settings, meta.get("granularity", "turn"),
                     agent_name or meta.get("agentName"), clock, readonly)
        if window_tokens is not None:
            memory.set_window(window_tokens)
        memory._load(_views_mode(views, readonly))
        return memory

    def set_window(self, window_tokens: int) -> None:
        """Scale the view to a model's window: ceiling = min(128,000, tokens × 1 byte)."""
        if not self.settings.serves_window(window_tokens):
            raise MemoryUseError(f"a window of {window_tokens} tokens is below the "
                                 f"{self.settings.smallest_window_tokens} Endless needs; "
                                 "run this chat without Endless")
        self.views.set_window(window_tokens)

    @property
    def window_tokens(self) -> int | None:
        """The window set by :meth:`set_window` (None: none was set)."""
        return self.views.window_tokens

    @property
    def window(self) -> int:
        """The model's window in tokens that every bound is counted against: the one set, else the default."""
        return self.views.window_tokens or self.settings.default_window_tokens

    def _load(self, views: str = "plan") -> None:
        self.store.load()
        if self.readonly:
            forget.catch_up(self)
            self.log.catch_up(False)
            self.tree.catch_up(False)
            self.log.catch_up(False)  # the log is written before its lines: now it covers every line read
            self._check(writable=False)
            self.views.defer()  # read when asked for: a search asks only which line covers a hit
            return
        with self.lock:
            for what in (self.log.repair_tail(self.quarantine), self.tree.repair_tail(self.quarantine)):
                if what:
                    self.report(what)
            self.log.catch_up(True)
            self.tree.catch_up(True)
            forget.on_open(self)  # a forget a crash cut short is finished first
            self._check(writable=True)
            reported = len(self.reports)
            self.views.load(self.total, repair=True)
            repaired = len(self.reports) > reported  # a view was recomputed: store it
            close_orphans(self)
            self.built.store_free_leaves(self.total, {})
            self.views.update(self.total, save=True) if views == "plan" else self.views.append(self.total)
            if repaired:
                self.views.save()

    def _check(self, writable: bool) -> None:
        """The derived files against the log: its length, then a sample of rows and slots (module integrity)."""
        self.shortened = integrity.check_length(self, writable)
        if self.shortened is not None:
            self.report(self.shortened.sentence(done=writable))
        integrity.sample(self)
        if writable:
            self.log.write_index()
            self.tree.write_index()

    def report(self, what: str) -> None:
        """Keep ``what`` among this open memory's reports (doctor shows them) and log it."""
        self.reports.append(what)
        durable.log("memory", f"{self.memory_id}: {what}")

    def close(self) -> None:
        if self.lease.token is not None:
            try:
                with self.lock:
                    self.lease.release()
            except OSError:
                self.lease.release_local()
        self.store.close()
        self.search_index.close()

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
        return self.log.turns

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
        record = self.log.read_record(turn)
        if record is None:
            return []
        return [self.log.shown(stored_from(record, k, turn)) for k in range(len(record["m"]))]

    # -- committing turns ------------------------------------------------------------

    def journal(self, session: str, title: str = "", since: int | None = None) -> TurnInProgress:
        """Start logging a turn; its messages are fsynced to the journal as they are added.

        ``since``: the turn count when the turn began, if before now (see ``TurnRecord.since``).
        """
        self.check_writable()
        return TurnInProgress(self, self.store.journal(session, redact.kept_title(self, title), self.redacted), since)

    def commit_turn(self, session: str, title: str, messages: Iterable[Message],
                    status: str = COMPLETED, status_text: str | None = None,
                    tid: str | None = None, sync: bool = True, since: int | None = None) -> TurnInfo | None:
        """Log one whole turn in one record; returns where it landed (None: it was there already)."""
        infos = self.commit_turns([TurnRecord(session, title, list(messages), status, status_text, tid,
                                              since=since)], sync=sync)
        return infos[0] if infos else None

    def commit_turns(self, records: Sequence[TurnRecord], sync: bool = True, plan: bool = True,
                     index: bool = True) -> list[TurnInfo]:
        """Commit several turns in one write (one fsync); a live turn (``since`` set) leaves out the
        messages an import logged meanwhile.  ``plan=False`` leaves the views to :meth:`plan_views`
        (each plan walks the whole view); whoever opens the memory next appends them anyway.
        ``index=False`` as for :meth:`bulk_commit`."""
        return self._commit(lambda: _records_ready(self, records), sync, plan, index)

    def bulk_commit(self, admit: Callable[["Memory"], Sequence[EncodedTurn]], *, index: bool = True,
                    sync: bool = True) -> list[TurnInfo]:
        """The importers' one way in: commit a batch of prepared turns in one write (one fsync),
        leaving the views to :meth:`plan_views`.

        ``admit(memory)``, called under the lock once caught up, returns the turns not logged yet
        (:class:`endless.core.store.Presence` decides).  They come prepared by the store's own
        encoder (``store.record_tail``, ``store.with_tid``) and redacted: only their places are
        added, and their free lines are put together from their bytes.  ``index=False``: the
        full-text index is caught up elsewhere from the files (an import's helper process runs
        ``endless.core.search.upkeep.follow``), so this commit does not feed it."""
        return self._commit(lambda: _encoded_ready(self, admit(self)), sync, False, index)

    def _commit(self, ready: Callable[[], "_Ready"], sync: bool, plan: bool, index: bool = True
                ) -> list[TurnInfo]:
        """Log what ``ready()`` makes under the lock (caught up), then its free lines, the index and the views."""
        self.check_writable()
        with self.lock:
            self.catch_up(locked=True)
            commit = ready()
            if not commit.lines:
                return []
            for info in commit.infos:  # before the turns exist: a crash must not leave them unrecorded
                self.note_session(info.session)
            if self._redactions:
                redact.add_counts(self.folder, self._redactions)
                self._redactions = Counter()
            before = (self.log.end, self.tree.end)
            self.log.add(commit.lines, commit.infos, sync)
            commit.store_free()
            if index:
                mark = search_index.Watermark(len(self.log.offsets), self.log.end, self.total, self.tree.end, "")
                index_upkeep.after_commit(self.search_index, before, commit.infos, commit.messages(), mark)
            if plan:
                self.views.update(self.total, save=True, sync=sync and self.store.views_synced)
        self.store.durable()  # (after the lock: processes committing at once share the store's flush)
        self.notify_waiters()
        return commit.infos

    def index_sources(self) -> index_upkeep.Sources:
        """What a search catches the full-text index up from (this process's view of the files)."""
        return index_upkeep.Sources(self.log, self.log.end, self.tree, self.tree.end,
                                    index_upkeep.node_size(self.tree))

    def redacted(self, message: Message) -> Message:
        """The message as the memory keeps it: secrets redacted (``redact_secrets``), counted."""
        return self.redacted_all([message])[0]

    def count_redactions(self, kinds: Counter) -> None:
        """Secrets redacted outside :meth:`redacted_all` (an import's planner), counted at the next commit."""
        self._redactions.update(kinds)

    def redacted_all(self, messages: list[Message]) -> list[Message]:
        """:meth:`redacted` for many messages (a commit's batch): their needles looked for at once."""
        if not self.settings.redact_secrets:
            return messages
        clean, kinds = redact.messages(messages)
        self._redactions.update(kinds)
        return clean

    def plan_views(self, sync: bool = True) -> None:
        """Run both views' sawtooths over everything committed (after ``commit_turns(plan=False)``)."""
        self.check_writable()
        with self.lock:
            self.catch_up(locked=True)
            self.views.update(self.total, save=True, sync=sync and self.store.views_synced)
        self.notify_waiters()

    def note_session(self, session: str) -> None:
        """Record, once per process, that ``session`` has turns in this memory."""
        if session in self._noted_sessions:
            return
        sessions.note_turns(self.root, session, self.key)
        self._noted_sessions.add(session)

    def check_writable(self) -> None:
        if self.readonly:
            raise MemoryUseError("this memory was opened read-only")

    # -- the tree --------------------------------------------------------------------

    def is_built(self, level: int, index: int) -> bool:
        return self.tree.built(level, index)

    def node_text(self, level: int, index: int) -> str | None:
        return self.tree.cached_text(level, index)

    @property
    def lines_built(self) -> int:
        """How many lines the tree holds (moves whenever any process stores one)."""
        return self.tree.count

    def built_slots(self) -> list:
        """Per level, the tree's slot array: nonzero where a node is built (read it, never change it)."""
        return self.tree.slots

    def on_built(self, listener: BuiltListener) -> None:
        """Call ``listener(part)`` for every line this process stores or learns of from now on."""
        self.built.listeners.append(listener)

    def on_free_stretch(self, listener: StretchListener) -> None:
        """Call ``listener`` with each stretch of the tree file this process fills with free lines alone."""
        self.built.stretch_listeners.append(listener)

    def store_line(self, level: int, index: int, text: str, sync: bool = True) -> bool:
        """Store a written line; False if it already existed (the first one wins)."""
        return self.store_lines([(level, index, text)], sync)[0]

    def store_lines(self, lines: list[tuple[int, int, str]], sync: bool = True) -> list[bool]:
        """Store several written ``(level, index, text)`` lines in one write, children before parents."""
        self.check_writable()
        for _, _, text in lines:
            if not isinstance(text, str):
                raise MemoryUseError("a line's text must be a string")
        stored: list[bool] = []
        with self.lock:
            self.catch_up(locked=True)
            encoded, parts, texts = [], [], []
            pending: set[Part] = set()
            for level, index, text in lines:
                part = (level, index)
                if tiling.parse_name(tiling.first(part), tiling.count(part), self.total) is None:
                    raise MemoryUseError(f"no line {tiling.name(part)} can exist with {self.total} messages")
                if self.tree.built(level, index) or part in pending:
                    stored.append(False)
                    continue
                if level > 0 and not all(self.tree.built(*c) or c in pending
                                         for c in tiling.children(part)):
                    raise MemoryUseError(f"line {tiling.name(part)} cannot be stored before both halves")
                src = self.views.source_size(index) if level == 0 else None
                encoded.append(self.tree.encode(level, index, text, src))
                parts.append(part)
                texts.append(text)
                pending.add(part)
                stored.append(True)
            if encoded:
                tree_before = self.tree.end
                added = self.tree.add(encoded, parts, texts, sync)
                self.built.after_stored(added, self.total, sync, dict(zip(parts, texts)))
                index_upkeep.after_store(self.search_index, tree_before,
                                         [(p[0], p[1], t) for p, t in zip(parts, texts)], self.tree.end)
                self.views.update(self.total, save=True, sync=sync and self.store.views_synced)
        self.store.durable()
        if encoded:
            self.notify_waiters()
        return stored

    def tell_built(self, part: Part, text: str | None = None) -> None:
        """A line this process learned of (stored here or read from another process's writes)."""
        self.built.tell(part, text)

    # -- catching up -----------------------------------------------------------------

    def catch_up(self, locked: bool = False) -> bool:
        """Read other processes' writes; True if anything changed.  ``locked``: the caller holds the
        change lock (a torn tail may then be repaired); without it nothing is written."""
        before = (self.total, self.tree.count, self.log.forgets)
        forget.catch_up(self)
        new_nodes = self.tree.catch_up(locked and not self.readonly)
        self.log.catch_up(locked and not self.readonly)
        for part in new_nodes:
            self.tell_built(part)
        changed = self.views.reload_if_changed(self.total)
        self.views.append(self.total)
        return changed or before != (self.total, self.tree.count, self.log.forgets)

    def notify_waiters(self) -> None:
        """Wake whoever settles on this memory in this process: something was stored."""
        self._waiters.notify()

    # -- settle: waiting across processes ----------------------------------------------

    async def settle(self, predicate: Callable[["Memory"], bool], timeout: float, poll: float | None = None) -> bool:
        """Until ``predicate(memory)`` holds across processes (False: timeout); woken by stores here and, if the
        store tells (``LISTEN``), elsewhere, else polling.  ``poll``: that often anyway (a stop button)."""
        return await self._waiters.settle(self.catch_up, lambda: predicate(self), timeout,
                                          self.settings.settle_poll_seconds,
                                          lambda: self.store.watch(self.notify_waiters), poll)

    # -- the lease -------------------------------------------------------------------

    @property
    def holds_lease(self) -> bool:  # this process took the writer lease (and has not released it)
        return self.lease.token is not None

    def take_lease(self, want: bool = False) -> bool:
        """Try to run this memory's writer pool; ``want``: else say this process waits (``Lease.want``)."""
        self.check_writable()
        with self.lock:
            taken = self.lease.try_acquire()
        if not taken and want:
            self.lease.want()
        return taken

    def renew_lease(self) -> bool:
        with self.lock:  # else a takeover between the renewal's read and write is undone
            return self.lease.renew()

    async def keep_lease(self, stop: asyncio.Event) -> bool:
        """Renew the lease every few seconds until ``stop`` is set; False once it was lost."""
        import asyncio

        while not stop.is_set():
            if not self.renew_lease():
                durable.log("memory", f"{self.memory_id}: lost the writer lease to another process")
                return False
            try:
                await asyncio.wait_for(stop.wait(), self.settings.lease_renew_seconds)
            except (asyncio.TimeoutError, TimeoutError):
                pass
        return True


class _Ready(NamedTuple):
    """A commit's log lines and where they land, ready under the lock (see ``Memory._commit``)."""

    lines: list[bytes]
    infos: list[TurnInfo]
    store_free: Callable[[], None]  # stores their free lines, once they are logged
    messages: Callable[[], dict[int, Message]]  # their messages by id (for an index fed here)


def _records_ready(memory: Memory, records: Sequence[TurnRecord]) -> _Ready:
    lines, infos, in_hand = _encode(memory, records)
    return _Ready(lines, infos, lambda: memory.built.store_free_leaves(memory.total, in_hand), lambda: in_hand)


def _encoded_ready(memory: Memory, turns: Sequence[EncodedTurn]) -> _Ready:
    if memory.tree.free_upto < memory.total:  # a commit whose free lines a crash cut short
        memory.built.store_free_leaves(memory.total, {})
    placed = place_encoded(turns, memory.total, memory.turns, memory.granularity)
    memory.count_redactions(placed.redacted)
    first = placed.infos[0].first if placed.infos else memory.total
    return _Ready(placed.lines, placed.infos,
                  lambda: memory.built.store_free_encoded(first, placed.turns, memory.total),
                  lambda: decoded(placed.turns, placed.infos))


def _encode(memory: Memory, records: Sequence[TurnRecord]) -> tuple[list[bytes], list[TurnInfo], dict[int, Message]]:
    """The log lines of ``records`` (under the lock, caught up), where they land, their messages by id."""
    lines: list[bytes] = []
    infos: list[TurnInfo] = []
    first = memory.total
    turn_no = memory.turns
    at_now = memory.clock()
    in_hand: dict[int, Message] = {}
    clean = iter(memory.redacted_all([m for record in records for m in record.messages]))
    for record in records:
        at_turn = record.at if record.at is not None else at_now
        if record.status not in STATUSES:
            raise MemoryUseError(f"turn status must be one of {', '.join(STATUSES)}, "
                                 f"not {record.status!r}")
        messages = [next(clean) for _ in record.messages]
        for m in messages:
            check_kind(m.kind, memory.granularity)
        if record.since is not None and messages:
            held = identity.imported_copy(memory, record.session, [m.to_record() for m in messages],
                                          record.since)
            if held:
                messages = [m for m in messages if (m.kind, m.text) not in held]
                durable.log("memory", f"{memory.memory_id}: a turn of {record.session!r} was imported while "
                                      f"it ran; {len(messages)} of its messages were not there yet")
                if not messages:
                    continue
        note = record.closing_note()
        if note is not None:
            messages.append(Message("status", note, at_turn))
        if not messages:
            continue
        tid = record.tid or secrets.token_hex(8)
        title = redact.kept_title(memory, record.title)
        lines.append(memory.log.encode(tid=tid, session=record.session, title=title,
                                       status=record.status, at=at_turn, messages=messages,
                                       turn=turn_no, first=first))
        infos.append(TurnInfo(turn_no, first, len(messages), record.session, title,
                              record.status, at_turn, tid))
        for k, m in enumerate(messages):
            in_hand[first + k] = m
        first += len(messages)
        turn_no += 1
    return lines, infos, in_hand
