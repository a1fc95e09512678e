"""The tree's lines as stored, and the migration of an older format (DESIGN §2.3, §2.5).

A line takes one of three forms (format 2):

* a written line holds its text: ``{"l","i","text","size"[,"src"]}``;
* a free leaf (a message short enough to be its own line) holds no copy of
  the message but the tag its line begins with: ``{"l":0,"i","ref":"you: ",
  "size","src"}``, its text being that tag and the message's words as the
  log keeps them (its writer text where it has one);
* a free parent (two lines whose join fits) holds neither: ``{"l","i",
  "join":1,"size"}``, its text being its halves' texts joined by a newline.

Why: an import of a million short messages made a tree file as large as the
log, every free line a copy of words the log holds already (DESIGN §2.5's
disk bound).  The text of a free line is read through the log
(:attr:`TreeStore.message_source`) and checked against the size the line
records, so a source that changed (a forget blanked it) never reads as the
old line: such a line counts as unwritten.  Format 1 files hold written
lines only, which format 2 reads unchanged: opening one renames it (and
its index) to format 2 (:meth:`TreeStore.migrate`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store import durable

FORMAT = 2
OLDER_FORMATS = (1,)  # read unchanged (written lines only): migrated by renaming the files


def tree_path(folder: Path, granularity: str, version: int = FORMAT) -> Path:
    return folder / f"tree.{granularity}.v{version}.jsonl"


def slot_path(index_dir: Path, level: int, version: int = FORMAT) -> Path:
    return index_dir / f"tree-L{level:02d}.v{version}.bin"


def pos_path(index_dir: Path, version: int = FORMAT) -> Path:
    return index_dir / f"tree-pos.v{version}.bin"


def encode_ref(index: int, prefix: str, size: int) -> bytes:
    """A free leaf's line: its message read from the log, after ``prefix`` (its tag and ``": "``, or
    nothing); ``size``: the whole text's utf-8 bytes (which is also its source's)."""
    return b'{"l":0,"i":%d,"ref":%s,"size":%d,"src":%d}\n' % (index, orjson.dumps(prefix), size, size)


def encode_join(level: int, index: int, size: int) -> bytes:
    """A free parent's line: its halves joined by a newline; ``size``: the join's utf-8 bytes."""
    return b'{"l":%d,"i":%d,"join":1,"size":%d}\n' % (level, index, size)


def is_erased_line(line: bytes) -> bool:
    """A node line a forget overwrote (``{"gone":[l,i]}`` and spaces): not damage, an unwritten node."""
    return line.startswith(b'{"gone":')


NODE_HEAD = re.compile(rb'\{"l":(\d+),"i":(\d+),')  # how every node line begins, as the tree writes it


def node_part(line: bytes) -> tuple[int, int] | None:
    """``(level, index)`` of a tree record as the tree writes them, read from its first bytes."""
    head = NODE_HEAD.match(line)
    return None if head is None else (int(head[1]), int(head[2]))


def parse_node(line: bytes) -> dict | None:
    """A node's record as stored (a free line's without its text: ``TreeStore.record`` reads it), or
    None when the line is not a node of any form this format knows."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if (not isinstance(record, dict) or not isinstance(record.get("l"), int)
            or not isinstance(record.get("i"), int) or record["l"] < 0 or record["i"] < 0 or record["l"] > 62):
        return None
    if isinstance(record.get("text"), str):
        return record
    if type(record.get("size")) is not int or record["size"] < 0:
        return None
    if record["l"] == 0 and isinstance(record.get("ref"), str):
        return record
    if record["l"] > 0 and record.get("join") == 1:
        return record
    return None


def migrate(folder: Path, granularity: str, index_dir: Path,
            on_problem: Callable[[str], None]) -> tuple[Path, str | None]:
    """The tree file to read (this format's, or an older one read in place), and what was done, in words.

    Format 1 holds written lines only, which format 2 reads as they are: its
    file is linked under the new name and the old name removed, the slot
    files renamed with it (same bytes, same offsets, so the search index's
    watermark still holds).  ``link`` never replaces a file, so two
    processes migrating at once cannot lose one's lines; a crash between the
    steps leaves both names on one file, finished by the next open.  A
    folder that cannot be written (a read-only copy) is read under the old
    name.
    """
    path = tree_path(folder, granularity)
    for version in OLDER_FORMATS:
        old = tree_path(folder, granularity, version)
        if not old.exists():
            continue
        try:
            _move_index(index_dir, version)
            try:
                os.link(old, path)
            except FileExistsError:
                if not os.path.samefile(old, path):
                    on_problem(f"both {old.name} and {path.name} exist; reading {path.name} (the older file is "
                               "left in place: move it aside once checked)")
                    return path, None
            old.unlink()
            durable.fsync_dir(folder)
        except durable.LinkRefused:
            raise
        except OSError as exc:  # a read-only folder: read the old file where it is
            durable.log("tree", f"{old.name} is of format {version} and could not be renamed to format {FORMAT} "
                                f"({exc.strerror or exc}); it is read in place")
            return old, None
        return path, f"the tree file {old.name} was renamed to {path.name} (format {FORMAT} reads it unchanged)"
    return path, None


def _move_index(index_dir: Path, version: int) -> None:
    """The older format's slot and position files under this format's names (derived: a missing or
    disagreeing one is rebuilt from the tree file anyway)."""
    if not index_dir.exists():
        return
    moves = [(pos_path(index_dir, version), pos_path(index_dir))]
    level = 0
    while slot_path(index_dir, level, version).exists():
        moves.append((slot_path(index_dir, level, version), slot_path(index_dir, level)))
        level += 1
    for old, new in moves:
        if old.exists():
            os.replace(old, new)
