"""The summary tree as stored: one JSONL line per node, written once (DESIGN §2.3, §2.5).

Nodes are appended to one file as they are built; per level, a binary slot
file maps node index to the line's offset, so "is it built?" and "its text"
are a lookup and a seek.  The slot files are derived and caught up from the
tree file; the first stored line for a node wins.

A line is written (it holds its text) or free (it names its message, or its
two halves, and is read through the log): :mod:`endless.core.store.tree_lines`
says what each form is and how an older format is migrated.
"""

from __future__ import annotations

import os
from array import array
from collections import OrderedDict
from itertools import accumulate, groupby
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterator

from endless.core.store import byte_ranges, durable, tree_lines
from endless.core.store.log import Damage
from endless.core.store.messages import utf8_size
from endless.core.store.tree_lines import (FORMAT, encode_join, encode_ref, is_erased_line, migrate, node_part,
                                           parse_node)

__all__ = ["FORMAT", "TreeStore", "is_erased_line", "parse_node"]

TEXT_CACHE = 8192  # node texts kept in memory: every view line and then some

MessageSource = Callable[[int], "str | None"]  # a message's words as a free leaf reads them (None: not readable)


def _no_source(message_id: int) -> str | None:
    return None


class _NotYet(Exception):
    """A free leaf of a message this process has not read of yet (the log is caught up after the tree)."""


class TreeStore:
    def __init__(self, folder: Path, granularity: str) -> None:
        self.folder, self.granularity = folder, granularity
        self.path = self.path_of(FORMAT)
        self.index_dir = folder / "index"
        # The words of message ``id`` as the log keeps them (its writer text, else its text), or None when
        # it cannot be read or was forgotten: what a free leaf's text is made of.  Set by the store.
        self.message_source: MessageSource = _no_source
        self.messages_read: Callable[[], int] = lambda: 0  # how many messages the log has read (the store sets it)
        self.slots: list[array] = []
        self.end = 0
        self.damage: list[Damage] = []
        self.count = 0
        # Moves whenever this process learns of a node above level 0 (only these let a view merge);
        # only its changes matter, so it starts at 0 whatever the index holds.
        self.merged = 0
        self.free_upto = 0  # free leaves are known stored for every message below this id
        self._dirty: dict[int, set[int]] = {}  # per level, the slots changed since the slot files were written
        self._rewrite = False  # the slot files are written whole next time (after a rebuild)
        self._ino: int | None = None  # the tree file this index describes (it is replaced only to set lines aside)
        # The bytes this process's last ``add`` appended where it had left the file: what it
        # stored there, and nothing else (an import's index helper skips its free lines).
        self.appended: tuple[int, int] | None = None
        self.on_problem: Callable[[str], None] = lambda what: durable.log("tree", what)
        self._fd: int | None = None
        self._texts: OrderedDict[tuple[int, int], str] = OrderedDict()
        self.erased: set[tuple[int, int]] = set()  # erased by a forget (endless.core.privacy.forget)

    def path_of(self, version: int) -> Path:
        return tree_lines.tree_path(self.folder, self.granularity, version)

    def slot_path(self, level: int, version: int = FORMAT) -> Path:
        return tree_lines.slot_path(self.index_dir, level, version)

    def _pos_path(self, version: int = FORMAT) -> Path:
        return tree_lines.pos_path(self.index_dir, version)

    def migrate(self) -> str | None:
        """A tree of an older format becomes this format's, before its index is read (what was done, in
        words, or None); see :func:`endless.core.store.tree_lines.migrate`."""
        self.path, done = migrate(self.folder, self.granularity, self.index_dir, self.on_problem)
        return done

    @property
    def inode(self) -> int | None:
        """The tree file this process reads (another one after lines are set aside)."""
        return self._ino

    def load_index(self) -> None:
        # The position first: a writer updates it after the slot files, so every line
        # before it is in the slots read next (later ones are read again by catch_up).
        try:
            raw = durable.read_all(self._pos_path())[:24]
            pos = array("Q")
            pos.frombytes(raw[:len(raw) - len(raw) % 8])  # a cut file is read as far as it goes
            self.end, self.count = int(pos[0]), int(pos[1])
            self.free_upto = int(pos[2]) if len(pos) > 2 else 0
        except (FileNotFoundError, IndexError):
            self.end, self.count, self.free_upto = 0, 0, 0
        except durable.LinkRefused:
            raise
        except OSError as exc:  # derived data: read again from the tree file
            durable.log("tree", f"the tree index {self._pos_path()} cannot be read ({exc.strerror or exc}); "
                                "rebuilding it")
            self.end, self.count, self.free_upto = 0, 0, 0
        self.slots = []
        level = 0
        while True:
            path = self.slot_path(level)
            if not path.exists():
                break
            try:
                raw = durable.read_all(path)
            except durable.LinkRefused:
                raise
            except OSError as exc:  # derived data: read again from the tree file
                durable.log("tree", f"the tree index {path} cannot be read ({exc.strerror or exc}); rebuilding it")
                self.reset()
                return
            slots = array("Q")
            slots.frombytes(raw[:len(raw) - len(raw) % 8])
            self.slots.append(slots)
            level += 1
        self.merged += 1  # a reload may bring nodes of any level: a change for whoever compares
        size = self.path.stat().st_size if self.path.exists() else 0
        if self.end > size or not self._ends_line(self.end):
            durable.log("tree", f"the tree index disagrees with {self.path.name}; rebuilding it")
            self.reset()

    def reset(self) -> None:
        """Forget every slot: the index is read again from the tree file (and written whole)."""
        self.slots, self.end, self.count = [], 0, 0
        self.free_upto = 0
        self._dirty, self._rewrite = {}, True
        self._texts.clear()
        self.merged += 1
        self.close()

    def rebuild(self) -> list[tuple[int, int]]:
        """Index the tree file again from its start (in memory; a writer persists it whole)."""
        free_upto = self.free_upto
        self.reset()
        self.damage = []
        found = self.catch_up(False)
        self.free_upto = free_upto
        return found

    def _ends_line(self, offset: int) -> bool:
        if offset == 0:
            return True
        with durable.open_read(self.path) as handle:
            handle.seek(offset - 1)
            return handle.read(1) == b"\n"

    def parents_built(self) -> int:
        """How many lines above level 0 are built: a view's file keeps it with its last pass, so a reader
        knows whether a pass now could merge anything more (endless.core.view.keeper)."""
        return sum(len(row) - row.count(0) for row in self.slots[1:])

    def built_or_erased(self, level: int, index: int) -> bool:
        """Built, or erased by a forget and not written again yet: a view keeps such a part."""
        return self.built(level, index) or (level, index) in self.erased

    def built(self, level: int, index: int) -> bool:
        if level >= len(self.slots):
            return False
        slots = self.slots[level]
        return index < len(slots) and slots[index] != 0

    def _reserve(self, level: int, index: int) -> None:
        """Slot arrays up to ``level``, that one long enough for ``index``."""
        while len(self.slots) <= level:
            self.slots.append(array("Q"))
        slots = self.slots[level]
        if index >= len(slots):
            slots.frombytes(bytes(8 * (index + 1 - len(slots))))

    def drop_text(self, part: tuple[int, int]) -> None:
        """Forget the cached text of a line that was erased."""
        self._texts.pop(part, None)

    def set_slot(self, level: int, index: int, offset: int) -> bool:
        self._reserve(level, index)
        return self._set_reserved(level, index, offset)

    def _set_reserved(self, level: int, index: int, offset: int) -> bool:
        slots = self.slots[level]
        if slots[index] and slots[index] != offset + 1:
            return False  # the first line stored for a node wins
        # (equal: a slot file newer than our position already named this line; count it now)
        slots[index] = offset + 1
        self._dirty.setdefault(level, set()).add(index)
        self.count += 1
        if level:
            self.merged += 1
        return True

    def catch_up(self, write_index: bool) -> list[tuple[int, int]]:
        """Index nodes other processes stored; returns the newly known ``(level, index)``."""
        ino = durable.inode(self.path)
        if self.end and ino != self._ino and self._ino is not None:
            # The tree file was replaced (lines set aside past a shorter log's end): read the new one.
            self.on_problem(f"{self.path.name} was replaced (lines set aside past the log's end); indexing it again")
            free_upto = self.free_upto
            self.reset()
            self.free_upto = free_upto
        self._ino = ino
        data, tail = durable.read_complete(self.path, self.end)
        found = []
        for offset, line in durable.iter_lines(data, self.end):
            record = parse_node(line)
            if record is None and is_erased_line(line):
                continue  # a line erased by a forget: its node is unwritten again
            if record is None:
                self.damage.append(Damage(self.path.name, offset, len(line), "not a readable node"))
                durable.log("tree", f"damaged line at byte {offset} of {self.path.name}: skipped")
                continue
            if self.set_slot(record["l"], record["i"], offset):
                found.append((record["l"], record["i"]))
        self.end = tail.complete_end
        if write_index:
            self.write_index()
        return found

    def write_index(self, force: bool = False) -> None:
        """Persist the slots (derived data): one that cannot be written is said and left for the next
        write, never the failure of the line that was stored (no derived index blocks a write)."""
        if not self._dirty and not force and not self._rewrite:
            return
        try:
            self._write_index()
        except durable.LinkRefused:
            raise
        except OSError as exc:
            self._rewrite = True  # some slot files may be half written: all of them whole next time
            durable.log("tree", f"the tree index in {self.index_dir} was not saved ({exc.strerror or exc}"
                                f"{'' if exc.filename is None else ': ' + str(exc.filename)}); it is rebuilt from "
                                "the tree file as needed; `endless doctor` checks it")

    def _write_index(self) -> None:
        durable.make_dir(self.index_dir)
        if self._rewrite:  # after a rebuild: every slot file whole, none left from the old index
            for level, slots in enumerate(self.slots):
                durable.replace_file(self.slot_path(level), slots.tobytes(), sync=False)
            level = len(self.slots)
            while self.slot_path(level).exists():
                self.slot_path(level).unlink()
                level += 1
            self._dirty, self._rewrite = {}, False
        for level, changes in self._dirty.items():
            if not changes:
                continue
            fd = durable.open_fd(self.slot_path(level), os.O_WRONLY | os.O_CREAT)
            try:
                # One write per run of neighbouring slots: an import changes them by the thousand.
                slots = self.slots[level]
                low, high = min(changes), max(changes)
                if high - low + 1 == len(changes):  # one run (the usual: an import's new nodes)
                    os.pwrite(fd, slots[low:high + 1].tobytes(), low * 8)
                    continue
                ordered = sorted(changes)
                start = prev = ordered[0]
                for index in ordered[1:] + [-1]:
                    if index != prev + 1:
                        os.pwrite(fd, slots[start:prev + 1].tobytes(), start * 8)
                        start = index
                    prev = index
            finally:
                os.close(fd)
        self._dirty = {}
        fd = durable.open_fd(self._pos_path(), os.O_WRONLY | os.O_CREAT)
        try:
            os.pwrite(fd, array("Q", [self.end, self.count, self.free_upto]).tobytes(), 0)
        finally:
            os.close(fd)

    def encode(self, level: int, index: int, text: str, src: int | None, size: int | None = None) -> bytes:
        """The node's line; ``size``, the text's utf-8 bytes, when the caller knows it already."""
        if size is None:
            size = utf8_size(text)
        record: dict = {"l": level, "i": index, "text": text, "size": size}
        if src is not None:
            record["src"] = src
        return durable.dumps_line(record)

    encode_ref = staticmethod(encode_ref)
    encode_join = staticmethod(encode_join)

    def add(self, lines: list[bytes], parts: list[tuple[int, int]], texts: list[str] | None,
            sync: bool) -> list[tuple[int, int]]:
        """Append encoded nodes and index them from what is in hand (under the lock, caught up).

        Reading back what was just written costs a parse per node, which an
        import of a million messages pays twice over; the offsets are known.
        If the file did not end where this process last read it (a torn
        tail kept in place), it falls back to reading it.  Returns the
        parts newly indexed.  ``texts`` None: the lines' texts are not in hand (an import's free
        lines, put together from bytes), so they are not cached either.
        """
        offset = self.append_bytes(lines, sync)
        self.appended = None
        if offset != self.end:
            return self.catch_up(True)
        ats = list(accumulate(map(len, lines), initial=offset + 1))  # each line's slot: its offset + 1
        levels, indices = list(map(itemgetter(0), parts)), list(map(itemgetter(1), parts))
        dirty = self._dirty
        skipped: set[int] = set()  # positions whose node had a line already (the first one wins)
        merged = 0
        start = 0
        for level, run in groupby(levels):  # a level's run at once: an import stores two million lines
            stop = start + len(list(run))
            first, last = indices[start], indices[stop - 1]
            self._reserve(level, max(indices[start:stop]))
            slots = self.slots[level]
            changed = dirty.get(level) or dirty.setdefault(level, set())
            if (last - first == stop - start - 1 and indices[start:stop] == list(range(first, last + 1))
                    and not any(slots[first:last + 1])):  # neighbours in order, none held
                slots[first:last + 1] = array("Q", ats[start:stop])
                changed.update(range(first, last + 1))
            else:
                for k in range(start, stop):  # _set_reserved, inline
                    index = indices[k]
                    held = slots[index]
                    if held and held != ats[k]:
                        skipped.add(k)
                        continue
                    slots[index] = ats[k]
                    changed.add(index)
            if level:
                merged += stop - start - sum(1 for k in skipped if start <= k < stop)
            start = stop
        offset = ats[-1] - 1
        found = [p for k, p in enumerate(parts) if k not in skipped] if skipped else list(parts)
        if texts is None:
            kept = []
        elif skipped:
            kept = [(p, t) for k, (p, t) in enumerate(zip(parts, texts)) if k not in skipped]
        else:
            kept = list(zip(parts[-TEXT_CACHE:], texts[-TEXT_CACHE:]))
        self.count += len(found)
        self.merged += merged
        if self._ino is None:  # the file this process just made
            self._ino = durable.inode(self.path)
        self.appended = (self.end, offset)
        self.end = offset
        self._texts.update(kept[-TEXT_CACHE:])  # the cache ends as remembering each in turn leaves it
        while len(self._texts) > TEXT_CACHE:
            self._texts.popitem(last=False)
        self.write_index()
        return found

    def append_bytes(self, lines: list[bytes], sync: bool) -> int:
        """Store encoded lines after the last one; returns the address of the first (a backend that
        keeps the tree elsewhere stores them there first, see :mod:`endless.core.store.postgres`)."""
        return durable.append_lines(self.path, lines, sync)

    def _remember(self, part: tuple[int, int], text: str) -> None:
        self._texts[part] = text
        if len(self._texts) > TEXT_CACHE:
            self._texts.popitem(last=False)

    def is_derived(self, level: int, index: int) -> bool:
        """Whether the line is stored as a reference to the log or a join of such lines (a free line of
        format 2, read through the log): a free parent over it may be stored as a join too."""
        if not self.built(level, index):
            return False
        verdict, record = self.check_slot(level, index)
        return verdict == "ok" and record is not None and "text" not in record

    def text(self, level: int, index: int) -> str | None:
        record = self.record(level, index)
        return None if record is None else record["text"]

    def _resolve(self, record: dict) -> str | None:
        """The text of a free line read through the log and its halves (None: it cannot be any more;
        :class:`_NotYet` while it names a message past what the log has read)."""
        level, index = record["l"], record["i"]
        if (index + 1) << level > self.messages_read():
            raise _NotYet
        if level == 0:
            source = self.message_source(index)
            if source is None:
                return None
            text = record["ref"] + source
        else:
            left = self.cached_text(level - 1, 2 * index)
            right = self.cached_text(level - 1, 2 * index + 1) if left is not None else None
            if right is None:
                return None
            text = f"{left}\n{right}"
        return text if utf8_size(text) == record["size"] else None

    def cached_text(self, level: int, index: int) -> str | None:
        """``text``, from memory for the lines read lately (a node's text never changes)."""
        part = (level, index)
        text = self._texts.get(part)
        if text is not None:
            self._texts.move_to_end(part)
            return text
        text = self.text(level, index)
        if text is not None:
            self._remember(part, text)
        return text

    def record(self, level: int, index: int, resolve: bool = True) -> dict | None:
        """The node's record, its ``text`` read through the log for a free line (``resolve``); checked
        against its slot at every read (issue 17 item 4).

        A slot that does not point at the start of this node's line means the
        index is wrong: it is rebuilt from the tree file, loudly.  A line that
        no longer parses is damage: the node counts as unwritten from then on,
        so the writer writes it again.  So does a free line whose source no
        longer reads as it did (a forget blanked its message, or a half of it is
        unwritten again): not damage, the line's words are gone.
        """
        if not self.built(level, index):
            return None
        verdict, record = self.check_slot(level, index)
        if verdict == "mismatch":
            self.on_problem(f"the tree index does not match {self.path.name} at line {level}/{index}; "
                            "rebuilt it from the tree file")
            self.rebuild()
            if not self.built(level, index):
                return None
            verdict, record = self.check_slot(level, index)
        if verdict == "erased":  # a forget in another process erased it: unwritten again, not damage
            self.forget([(level, index)])
            return None
        if verdict == "damaged":
            offset = self.slots[level][index] - 1
            self.damage.append(Damage(self.path.name, offset, 0, f"line {level}/{index} is not a readable node"))
            self.on_problem(f"damaged line at byte {offset} of {self.path.name} (line {level}/{index}): "
                            "it counts as unwritten and is written again")
            self.forget([(level, index)])
            return None
        if resolve and record is not None and "text" not in record:
            try:
                text = self._resolve(record)
            except _NotYet:
                return None
            if text is None:
                self.on_problem(f"line {level}/{index} of {self.path.name} reads its words from "
                                f"{'message ' + str(index) if level == 0 else 'its halves'}, which no longer "
                                "read as they did: it counts as unwritten and is written again")
                self.forget([(level, index)])
                return None
            record["text"] = text
        return record

    def check_slot(self, level: int, index: int) -> tuple[str, dict | None]:
        """``ok`` (the record), ``damaged`` (its whole line does not parse), ``erased`` (by a forget) or
        ``mismatch`` (the slot is wrong)."""
        offset = self.slots[level][index] - 1
        if self._fd is None:
            self._fd = durable.open_fd(self.path, os.O_RDONLY)
        start = offset - 1 if offset else 0
        chunk = os.pread(self._fd, 4096, start)
        if offset and chunk[:1] != b"\n":
            return "mismatch", None
        chunk = chunk[offset - start:]
        nl = chunk.find(b"\n")
        while nl < 0:
            more = os.pread(self._fd, 65536, offset + len(chunk))
            if not more:
                return "mismatch", None
            chunk += more
            nl = chunk.find(b"\n")
        record = parse_node(chunk[:nl])
        if record is None:
            return ("erased" if is_erased_line(chunk[:nl]) else "damaged"), None
        if (record["l"], record["i"]) != (level, index):
            return "mismatch", None
        return "ok", record

    def forget(self, parts: list[tuple[int, int]]) -> None:
        """These nodes count as unwritten (their slots cleared; a writer persists it)."""
        for level, index in parts:
            if self.built(level, index):
                self.slots[level][index] = 0
                self._dirty.setdefault(level, set()).add(index)
                self.count -= 1
                self._texts.pop((level, index), None)
        self.merged += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the tree's address space (the storage seam: byte_ranges does the reading) ------------------

    def lines(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` of each stored line in ``[start, stop)`` (default: all this process has read),
        erased and superseded ones included: a line is current when its node's slot points at it."""
        return byte_ranges.lines(self.path, start, self.end if stop is None else stop)

    def parts_between(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The node of each line stored in ``[start, stop)`` (erased lines left out), read from its head
        alone: what was written between two moments this process knows the tree's end at."""
        return [part for _, line in self.lines(start, stop) if (part := node_part(line)) is not None]

    def backward(self, end: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of whole lines, from ``end`` back to the first (a pattern search of lines)."""
        return byte_ranges.backward(self.path, end)

    def line_at(self, offset: int) -> bytes:
        """The stored line starting at ``offset`` (without its newline)."""
        with durable.open_read(self.path) as handle:
            handle.seek(offset)
            return handle.readline().rstrip(b"\n")

    def stored_end(self) -> int:
        """Where the last whole line ends as stored now (another process's appends included)."""
        return byte_ranges.complete_end(self.path)

    @property
    def where(self) -> str:
        """Where the tree is stored, for a person reading a report (the file's name)."""
        return self.path.name

    def holds(self, end: int) -> bool:
        """Whether a reader's mark (read up to ``end``) still describes the tree as stored."""
        return end <= byte_ranges.size(self.path) and byte_ranges.ends_line(self.path, end)

    def stored_identity(self) -> int | None:
        """Which tree is stored now (another after lines are set aside): what a stretch told by an
        importer's helper is valid for."""
        return durable.inode(self.path)

    def patch(self, writes: list[byte_ranges.Write], step: Callable[[str], None] = lambda name: None) -> None:
        """A forget's same-length erasures, durable before it returns."""
        byte_ranges.patch(self.path, writes, step)

    def clear_stored_slot(self, level: int, index: int, offset: int) -> None:
        """Zero the stored slot of line ``level/index`` if it still points at ``offset`` (a forget erased it;
        derived: a stale slot is corrected anyway by the forget registry)."""
        try:
            fd = durable.open_fd(self.slot_path(level), os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            if os.pread(fd, 8, index * 8) == int(offset + 1).to_bytes(8, "little"):
                os.pwrite(fd, bytes(8), index * 8)
        finally:
            os.close(fd)

    def tail_state(self) -> durable.Tail:
        """What is stored after the last line this process read (a line being written, or torn)."""
        _, tail = durable.read_complete(self.path, self.end)
        return tail

    def repair_tail(self, quarantine: Path) -> str | None:
        return durable.repair_tail(self.path, self.end, quarantine,
                                   lambda raw: parse_node(raw) is not None)
