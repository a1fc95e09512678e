"""Forgetting messages: their words leave every file of the memory, their ids stay.

Why it is done this way:

* **In place, same length.**  The turn index holds byte offsets and ids never
  shift, and rewriting a gigabyte log per forget is not acceptable at a
  million messages.  So the JSON string of a forgotten message's text (and of
  its writer text) is overwritten where it lies by ``""`` and spaces (JSON
  allows whitespace between tokens: the record still parses, every other byte
  stays where it was).  A tree line written from it (its level-0 line and
  every built ancestor up to the top) is overwritten by an *erased* line,
  ``{"gone":[l,i]}`` and spaces, which the tree skips: the node is unwritten
  again and the writer writes it once more, from the tombstone.  This is the
  one documented exception to "a line is written once".
* **The fact and its time live in ``forgotten.jsonl``**, one line per
  forget (ids, when, the erased nodes and where they were): a message's
  record has no room for a date (a two-letter message has two bytes to
  give), and every reader (zoom, history, the page, the writer) shows a
  forgotten id as the tombstone text, never what it said.
* **Crash-atomic by a redo record** (``forget.<op>.redo``), written and fsynced
  first.  It holds only ids, offsets, lengths and node names (the tombstone
  bytes follow from them), never the text.  Once it is on disk the forget is
  decided: the registry line is appended, the full-text rows are deleted and
  the files patched, the slot files cleared, then the redo is removed.
  Whoever opens the memory next under its lock replays a redo left behind;
  every step is idempotent.  Before the redo exists nothing visible changed.
* **The full-text index is contentless**: a row's 'delete' needs the old
  text, so the rows are deleted inside the same SQLite write transaction as
  the file patches (a concurrent catch-up reads the log inside its own write
  transaction, so it sees the text and its rows are deleted, or sees the
  patched log).  Deleted terms stay in old FTS segments until they merge,
  so both tables are then ``optimize``d with ``secure_delete`` on (freed
  pages zeroed) and the WAL checkpointed and truncated
  (:mod:`endless.core.privacy.copies`).  That merge rewrites the whole index
  (about a minute at a million messages), so it runs after the memory's
  lock is released, under the index's own; a marker file stands for it
  until it is done, and the next open finishes it after a crash.  A crash after the
  patches but before that commit leaves rows whose text is gone: the index
  is derived, so it is removed and rebuilt from the log.
* **Copies elsewhere in the folder** (``pending/kept.jsonl``, torn lines in
  ``damaged.jsonl``, in-flight journals) are blanked in place, and set-aside
  index files removed, before the redo is written, while the text is in hand:
  a crash then leaves the memory as before, only without a redundant copy.

* **A memory kept in PostgreSQL** forgets in one transaction of the database
  instead of the redo file's steps (:func:`_apply_at_once`): the registry
  entry, the patches of the log and the tree, and the search index's rows
  (deleted by id: its ``tsvector`` rows need no old text).  Killed before its
  commit, nothing changed; after it, every machine takes the patches and the
  entry at its next catch-up, which every answer begins with, and first blanks
  its own side copies with the words its copy of the log still held there
  (:func:`_scrub_before`).  Then ``VACUUM FULL`` rewrites the tables it changed
  (:func:`purge_index`): PostgreSQL keeps an updated row's old version, its
  TOAST chunks and its index keys in its files until a rewrite, and a mark in
  the database has the next open finish it after a crash.

Everything runs under the memory's change lock; readers never lock, and read
the registry before the log, so once the registry line exists no reader shows
the text.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import orjson

from endless import prompts
from endless.core.store import durable
from endless.core.privacy import copies as copies, derived as derived
from endless.core.store import node_part
from endless.core.view import tiling
from endless.core.errors import MemoryUseError
from endless.core.store import Stored
from endless.core.store import REGISTRY
from endless.core.search import is_damage, line_key
from endless.core.privacy import spans
from endless.core.privacy.host import Forgettable
from endless.core.words import count

REDO, PURGE = "forget.{op}.redo", "forget.{op}.purge"  # one of each per forget, by its op (files)
_log = logging.getLogger("endless.forget")

# Set by the crash test's child to report each durable step (and so be killed between them).
step: Callable[[str], None] = lambda name: None  # noqa: E731


def unreachable() -> str:
    """What forgetting cannot reach, in the person's words."""
    return prompts.text("forget/unreachable.txt").strip()


# -- what is known of past forgets (every process, caught up like the log) ----------------------

@dataclass
class _Known:
    end: int = 0  # the registry's position read to
    ops: set[str] = field(default_factory=set)
    kept_from: int = 0  # retention: the first turn not known to be past the cutoff


_known: "weakref.WeakKeyDictionary[Forgettable, _Known]" = weakref.WeakKeyDictionary()


def catch_up(memory: Forgettable) -> None:
    """Learn of forgets other processes made: tombstones, and erased nodes cleared from the slots."""
    known = _known.get(memory)
    if known is None:
        known = _known.setdefault(memory, _Known())
        ref = weakref.ref(memory)
        if memory.log.recheck is None:
            memory.log.recheck = lambda: catch_up(ref()) if ref() is not None else None  # type: ignore[arg-type]
        if memory.store.forgets_at_once:  # (files: the one copy is patched by the process that forgets)
            memory.store.before_patch = lambda spans: _scrub_before(ref(), spans)
    lines, known.end = memory.store.forgets.read(known.end)
    for line in lines:
        try:
            entry = orjson.loads(line)
            _learn(memory, entry, known)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            _log.warning("%s: a damaged line in %s was skipped", memory.memory_id, REGISTRY)


def _scrub_before(memory: Forgettable | None, spans: list[tuple[bytes, bytes]]) -> None:
    """A forget made on another machine reaches this machine's side copies (journals, kept messages,
    the quarantine) before its copy of the log takes the patches: the words are read from the copy's
    old bytes, the only place this machine still has them."""
    texts = copies.patched_texts(spans)
    if memory is not None and texts:
        copies.scrub(memory.folder, texts)


def _learn(memory: Forgettable, entry: dict, known: _Known) -> None:
    if entry["op"] in known.ops:
        return
    known.ops.add(entry["op"])
    memory.log.forgets += 1
    at = float(entry["at"])
    for mid in entry["ids"]:
        memory.log.forgotten[int(mid)] = at
        memory.views.forget_source(int(mid))
    tree = memory.tree
    cleared = []
    for level, index, offset, *_ in entry["nodes"]:
        part = (int(level), int(index))
        tree.erased.add(part)
        if tree.built(*part) and tree.slots[part[0]][part[1]] == int(offset) + 1:
            tree.slots[part[0]][part[1]] = 0
            tree.count -= 1
            cleared.append(part)
        tree.drop_text(part)
        memory.views.forget_size(part)
    if cleared:
        tree.merged += 1
        memory.views.mark_needed_stale()
        _relearn(memory, int(entry.get("tree_end", tree.end)), set(cleared))


def _relearn(memory: Forgettable, start: int, parts: set) -> None:
    """Nodes written again after the forget that this process read while their old slot still stood."""
    tree = memory.tree
    if start >= tree.end:
        return
    for offset, line in tree.lines(start):
        part = node_part(line)
        if part in parts and tree.set_slot(part[0], part[1], offset):
            memory.tell_built(part)


# -- choosing what to forget -----------------------------------------------------------------------

def select(memory: Forgettable, *, ids: Iterable[int] = (), turns: Iterable[int] = (),
           since: float | None = None, before: float | None = None, query: str | None = None) -> list[int]:
    """The message ids a forget would remove, sorted; bad input raises and changes nothing.

    Ids and turns are checked against the memory.  A time range takes every
    message whose time is in ``[since, before)``; a query every message
    whose text (or the writer's text for it) holds it, case folded (a
    literal match, not the ranked search: what the person sees in the dry
    run is exactly what goes).  Chat titles and summary lines holding the
    query are :func:`endless.core.privacy.derived.matching`'s, which :func:`forget` erases with them.
    Both scan the log, which is fine for an operation this rare.
    """
    chosen: set[int] = set()
    for mid in ids:
        if not isinstance(mid, int) or isinstance(mid, bool) or not 0 <= mid < memory.total:
            raise MemoryUseError(f"there is no message {mid}: this memory holds messages 0 to "
                                 f"{memory.total - 1}; look them up with `endless history`")
        chosen.add(mid)
    for turn in turns:
        info = memory.turn(turn) if isinstance(turn, int) and not isinstance(turn, bool) else None
        if info is None:
            raise MemoryUseError(f"there is no turn {turn}: this memory has turns 0 to {memory.turns - 1}")
        chosen.update(range(info.first, info.first + info.count))
    if since is not None or before is not None or query:
        if query is not None and not query.strip():
            raise MemoryUseError("the query to forget by is empty; give the words whose messages should go")
        needle = query.casefold() if query else None
        for _, _, record in memory.log.records():
            for k, m in enumerate(record["m"]):
                at, text = m.get("at"), m.get("x")
                if not isinstance(text, str):
                    continue
                if since is not None and not (isinstance(at, (int, float)) and at >= since):
                    continue
                if before is not None and not (isinstance(at, (int, float)) and at < before):
                    continue
                # The writer's words for a message (a look-back call names its chat's title) are its words.
                writer = m.get("w") if isinstance(m.get("w"), str) else ""
                if needle is not None and needle not in text.casefold() and needle not in writer.casefold():
                    continue
                chosen.add(record["id"] + k)
    return sorted(m for m in chosen if m not in memory.log.forgotten and m < memory.total)


def retention(memory: Forgettable) -> Outcome | None:
    """Forget every message older than ``forget_after_days`` (the same forget, with its guarantees).

    Turns are committed in time order (an import sorts its own), so the scan
    starts at the first turn not yet past the cutoff and stops at the first
    turn inside it: a look that finds nothing reads one record.
    """
    days = memory.settings.forget_after_days
    if days is None or memory.readonly:
        return None
    cutoff = memory.clock() - days * 86_400
    known = _known.setdefault(memory, _Known())
    ids: list[int] = []
    turn = known.kept_from
    if turn < memory.turns:
        start = memory.log.offsets[turn]
        for turn, _, record in memory.log.records(start, first_turn=turn):
            at = record.get("at")
            if isinstance(at, (int, float)) and at >= cutoff:
                break
            ids += [record["id"] + k for k in range(len(record["m"])) if record["id"] + k not in memory.log.forgotten]
            known.kept_from = turn + 1
    if not ids:
        return None
    _log.info("%s: forgetting %s older than %g days (forget_after_days)", memory.memory_id,
              count(len(ids), "message"), days)
    return forget(memory, ids)


# -- the plan: where the words are ------------------------------------------------------------------

@dataclass
class _Plan:
    op: str
    at: float
    ids: list[int]
    log_patches: list[tuple[int, int]] = field(default_factory=list)  # (offset, length) of a JSON string
    nodes: list[tuple[int, int, int, int]] = field(default_factory=list)  # (level, index, offset, length)
    texts: dict[int, str] = field(default_factory=dict)  # in memory only: what the index rows hold
    line_texts: dict[tuple[int, int], str] = field(default_factory=dict)
    tree_end: int = 0
    titled: list[int] = field(default_factory=list)  # turns whose recorded title is erased
    titles: list[str] = field(default_factory=list)  # in memory only: those titles, for the index's rows
    seals: list[tuple[int, str]] = field(default_factory=list)  # (offset, checksum) of each patched record

    def to_json(self) -> dict:
        return {"op": self.op, "at": self.at, "ids": self.ids, "log": self.log_patches,
                "nodes": self.nodes, "tree_end": self.tree_end, "titled": self.titled, "seals": self.seals}


def _plan(memory: Forgettable, ids: list[int], at: float, matched: derived.Matched = derived.Matched()) -> _Plan:
    plan = _Plan(secrets.token_hex(8), at, ids, tree_end=memory.tree.end, titles=list(matched.titles))
    by_turn: dict[int, list[int]] = {}
    for mid in ids:
        turn = memory.log.turn_of(mid)
        if turn is None:
            raise MemoryUseError(f"message {mid} cannot be read (a damaged line); run `endless doctor`")
        by_turn.setdefault(turn, []).append(mid)
    patches: dict[int, list[tuple[int, int]]] = {}  # each record's JSON strings to blank
    for turn, mids in sorted(by_turn.items()):
        for span in spans.message_spans(memory, turn):
            if span.ident not in mids:
                continue
            m = span.message
            plan.texts[span.ident] = m["x"]
            for key in ("x", "w"):
                if not isinstance(m.get(key), str) or not m[key]:
                    continue
                token = orjson.dumps(m[key])
                inner = span.encoded.find(b'"' + key.encode() + b'":' + token)
                patches.setdefault(turn, []).append((span.offset + inner + 4, len(token)))
    for turn, offset, length in derived.title_spans(memory, set(matched.titles)):
        patches.setdefault(turn, []).append((offset, length))
        plan.titled.append(turn)
    for turn in sorted(patches):  # a record's checksum is worked out once, over all its blanked strings
        plan.log_patches.extend(patches[turn])
        seal = memory.log.seal_after(turn, patches[turn])
        if seal is not None:
            plan.seals.append(seal)
    seen: set[tuple[int, int]] = set()
    for start in [(0, mid) for mid in ids] + list(matched.lines):
        for part in _written_from(memory, start):
            if part in seen:
                continue  # an ancestor two forgotten messages share
            seen.add(part)
            offset = memory.tree.slots[part[0]][part[1]] - 1
            raw = memory.tree.line_at(offset)
            record = orjson.loads(raw)
            plan.nodes.append((part[0], part[1], offset, len(raw)))
            if isinstance(record.get("text"), str):  # (a free line of format 2 holds no words: none indexed)
                plan.line_texts[part] = record["text"]
    return plan


def _written_from(memory: Forgettable, start: int | tuple[int, int]) -> list[tuple[int, int]]:
    """The built lines holding words of message ``start`` (or of line ``start``): its own line and each
    ancestor up to the top."""
    found = []
    part = (0, start) if isinstance(start, int) else start
    while memory.tree.built(*part):
        found.append(part)
        part = tiling.parent(part)
    return found


def _erased_line(level: int, index: int, length: int) -> bytes:
    body = orjson.dumps({"gone": [level, index]})
    return body + b" " * (length - len(body))


# -- forgetting ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What a forget did (or, dry, would do)."""

    ids: list[int]
    previews: list[Stored]
    nodes: int  # tree lines erased, to be written again
    bytes_rewritten: int
    seconds: float
    dry_run: bool
    unreachable: str
    titles: tuple[str, ...] = ()  # chat titles erased (or, dry, that would be)


def forget(memory: Forgettable, ids: list[int], *, dry_run: bool = False, purge: bool = True,
           query: str | None = None) -> Outcome:
    """Forget messages ``ids`` (from :func:`select`); ``dry_run`` only lists what would go.

    ``query``: the words of a forget by match; the chat titles and summary
    lines holding them (:func:`endless.core.privacy.derived.matching`) are erased too, the lines written
    again from what is left.  ``purge=False`` leaves the index's merge (about
    a minute at a million messages) to the caller's :func:`purge_index`, on a
    thread of its own.
    """
    memory.check_writable()
    start = time.monotonic()
    with memory.lock:
        memory.catch_up(locked=True)
        ids = sorted(set(i for i in ids if i not in memory.log.forgotten))
        if ids and not 0 <= ids[0] <= ids[-1] < memory.total:
            raise MemoryUseError(f"there is no message {ids[0] if ids[0] < 0 else ids[-1]}; nothing was forgotten")
        previews = [s for s in (memory.message(i) for i in ids) if s is not None]
        matched = derived.matching(memory, query)
        if dry_run or not (ids or matched):
            starts = [(0, i) for i in ids] + list(matched.lines)
            nodes = len({part for p in starts for part in _written_from(memory, p)})
            return Outcome(ids, previews, nodes, 0, time.monotonic() - start, dry_run, unreachable(),
                           matched.titles)
        plan = _plan(memory, ids, memory.clock(), matched)
        copies.scrub(memory.folder, list(plan.texts.values()) + plan.titles)
        step("scrubbed")
        if memory.store.forgets_at_once:
            written = _apply_at_once(memory, plan)
        else:
            durable.replace_file(_marker(memory, REDO, plan.op), orjson.dumps(plan.to_json()))
            step("redo")
            written = _apply(memory, plan)
        for mid in ids:  # the tombstones' own lines, and the free parents above them
            stored = memory.message(mid)
            if stored is not None and not memory.tree.built(0, mid):
                memory.store_line(0, mid, stored.writer_source(memory.settings, memory.agent_name))
        memory.views.update(memory.total, save=True)
    memory.notify_waiters()
    step("unlocked")
    if purge and not purge_index(memory):
        memory.report("the search index was busy; its old pages are merged away when the memory is next opened")
    _log.info("%s: forgot %s and %s, erased %s, %s rewritten", memory.memory_id, count(len(ids), "message"),
              count(len(plan.titles), "chat title"), count(len(plan.nodes), "line"),
              count(written, "byte", grouped=True))
    return Outcome(ids, previews, len(plan.nodes), written, time.monotonic() - start, False, unreachable(),
                   matched.titles)


def _apply_at_once(memory: Forgettable, plan: _Plan) -> int:
    """A store that forgets in one transaction (PostgreSQL): the registry entry, the patches and the
    search index's rows commit together or not at all, so no redo file is needed; the rewrite of the
    tables that frees the old row versions (:func:`purge_index`) is marked due in the same transaction."""
    keys = [line_key(level, index) for level, index, _, _ in plan.nodes]
    index = memory.search_index
    memory.store.forget_at_once(  # type: ignore[attr-defined]
        plan.op, orjson.dumps(plan.to_json()), memory.log.patch_writes(plan.log_patches, plan.seals),
        [(o, _erased_line(lv, i, n)) for lv, i, o, n in plan.nodes],
        lambda conn: index.forget_rows(conn, plan.ids, keys, plan.titles), step)  # type: ignore[attr-defined]
    step("committed")
    catch_up(memory)
    _clear_slots(memory, plan)
    return sum(n for _, n in plan.log_patches) + sum(n for _, _, _, n in plan.nodes)


def _apply(memory: Forgettable, plan: _Plan, replay: bool = False) -> int:
    """Every step after the redo is durable; each may run again after a crash.  Returns bytes patched."""
    entry = plan.to_json()
    known = _known.setdefault(memory, _Known())
    if plan.op not in known.ops and not memory.store.forgets.holds(plan.op):
        memory.store.forgets.add(plan.op, durable.dumps_line(entry))
    step("registry")
    written = _index_and_patch(memory, plan, replay)
    step("patched")
    _clear_slots(memory, plan)
    catch_up(memory)
    step("slots")
    # What is left, merging the index's segments, is long at a million messages (a minute): it runs
    # after the memory's lock is released, under the index's own, and a crash leaves it to the next open.
    durable.replace_file(_marker(memory, PURGE, plan.op), b"{}\n")
    _marker(memory, REDO, plan.op).unlink()
    durable.fsync_dir(memory.folder)
    step("purge-pending")
    return written


def purge_index(memory: "Forgettable | Path", wait: bool = True) -> bool:
    """Merge deleted words out of the memory's search index, for every forget waiting for it (a memory
    kept in files: also given by its folder).  A store that forgets in one transaction rewrites the
    tables the forgets changed instead (PostgreSQL keeps a changed row's old version in its files until
    then).  False if busy: the memory's next open, forget or ``doctor --repair`` does it."""
    if isinstance(memory, Path):
        return copies.purge_pending(memory, PURGE.format(op="*"), step, wait)
    if memory.store.forgets_at_once:
        done = memory.store.purge(memory.search_index.TABLES, wait)  # type: ignore[attr-defined]
        if done:
            step("vacuumed")
        return done
    return copies.purge_pending(memory.folder, PURGE.format(op="*"), step, wait)


def _marker(memory: Forgettable, form: str, op: str) -> Path:
    return memory.folder / form.format(op=op)


def _patch_files(memory: Forgettable, plan: _Plan) -> int:
    """Blank the texts and erase the lines; returns the bytes erased (each write is a step a crash may cut)."""
    written = sum(n for _, n in plan.log_patches)
    memory.log.patch(memory.log.patch_writes(plan.log_patches, plan.seals), step)
    memory.tree.patch([(o, _erased_line(l, i, n)) for l, i, o, n in plan.nodes], step)
    written += sum(n for _, _, _, n in plan.nodes)
    return written


def _index_and_patch(memory: Forgettable, plan: _Plan, replay: bool) -> int:
    """Delete the index rows and patch the files in one index write transaction, then purge old pages.

    A damaged index never stops a forget (it would stop every write after it,
    each replaying this redo): it is removed, to be built again from the
    patched log, and the files are patched all the same (patches are
    idempotent, so patching again after a failed commit changes nothing).
    """
    index = memory.search_index
    if not index.exists():
        return _patch_files(memory, plan)
    try:
        return _index_rows_and_patch(memory, plan)
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        index.discard(exc)
        return _patch_files(memory, plan)


def _index_rows_and_patch(memory: Forgettable, plan: _Plan) -> int:
    index = memory.search_index
    db = index.db()
    db.execute("CREATE TABLE IF NOT EXISTS forgot(id INTEGER PRIMARY KEY)")
    stale = False
    with index.write():
        for mid in plan.ids:
            if db.execute("SELECT 1 FROM forgot WHERE id = ?", (mid,)).fetchone():
                continue
            if db.execute("SELECT 1 FROM msg WHERE id = ?", (mid,)).fetchone():
                text = plan.texts.get(mid)
                if text is None:
                    stale = True  # its text is gone from the log already: the rows cannot be told
                    break
                db.execute("INSERT INTO words(words, rowid, text) VALUES ('delete', ?, ?)", (mid, text))
            db.execute("INSERT INTO forgot(id) VALUES (?)", (mid,))
        for level, index_, _, _ in plan.nodes:
            key = line_key(level, index_)
            if db.execute("SELECT 1 FROM line WHERE key = ?", (key,)).fetchone():
                text = plan.line_texts.get((level, index_))
                if text is None:
                    stale = True
                    break
                db.execute("INSERT INTO line_words(line_words, rowid, text) VALUES ('delete', ?, ?)",
                           (key, text))
                db.execute("DELETE FROM line WHERE key = ?", (key,))
        if plan.titled and not plan.titles:
            stale = True  # a replay: the titles are gone from the log, the index's rows cannot be told
        derived.untitle_chats(db, plan.titles)
        index.forget_chats()
        step("index-rows")
        written = _patch_files(memory, plan)
    if stale:
        copies.drop_index(memory.search_index, memory.report)
        return written
    step("index-commit")
    return written


def _clear_slots(memory: Forgettable, plan: _Plan) -> None:
    """Zero the erased nodes' slots on disk (derived: the registry corrects a stale slot anyway)."""
    for level, index, offset, _ in plan.nodes:
        memory.tree.clear_stored_slot(level, index, offset)


# -- at open: finishing a forget a crash interrupted -----------------------------------------------------

def on_open(memory: Forgettable) -> None:
    """Under the lock at open: replay redos left behind, learn the registry, merge the index if due.

    The merge waits for nobody: if another process holds the index, it is
    the one merging (or it finishes its batch and a later open merges).
    """
    for redo in sorted(memory.folder.glob(REDO.format(op="*")), key=lambda p: p.stat().st_mtime):
        try:
            data = orjson.loads(redo.read_bytes())
        except orjson.JSONDecodeError:  # written to a sibling and renamed: a torn one never took effect
            memory.report(f"an unreadable {redo.name} was removed (the forget it began had not started)")
            redo.unlink()
            continue
        plan = _Plan(data["op"], float(data["at"]), [int(i) for i in data["ids"]],
                     [tuple(p) for p in data["log"]], [tuple(n) for n in data["nodes"]],
                     tree_end=int(data.get("tree_end", 0)), titled=[int(t) for t in data.get("titled", ())],
                     seals=[(int(o), str(seal)) for o, seal in data.get("seals", [])])
        _recover_texts(memory, plan)
        _apply(memory, plan, replay=True)
        memory.report(f"finished forgetting {count(len(plan.ids), 'message')} that a crash had interrupted")
    catch_up(memory)
    purge_index(memory, wait=False)


def _recover_texts(memory: Forgettable, plan: _Plan) -> None:
    """The old texts still in the files (if the crash came before the patches), for the index rows."""
    for offset, length in plan.log_patches:
        piece = memory.log.read_at(offset - 4, length + 4)
        key, token = piece[:4], piece[4:]
        if token.startswith(b'""') and not token[2:].strip():
            continue  # patched already
        if key == b'"t":':  # a chat's title: the index's chats named by it are renamed
            title = orjson.loads(token)
            if title not in plan.titles:
                plan.titles.append(title)
            continue
        if key != b'"x":':
            continue  # a writer text (the index holds the text only)
        mid = spans.id_at(memory, offset)
        if mid is not None and mid not in plan.texts:
            plan.texts[mid] = orjson.loads(token)
    for level, index, offset, length in plan.nodes:
        raw = memory.tree.line_at(offset)
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("text"), str):
            plan.line_texts[(level, index)] = record["text"]
