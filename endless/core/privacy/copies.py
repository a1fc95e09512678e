"""Where a forgotten message's words are outside the log and the tree: the search index, side copies.

Split from :mod:`endless.core.privacy.forget` (which says why each step is done as it
is); these are the steps that need no plan: merging the full-text index's
segments so deleted words leave its file (long at a million messages, so run
after the memory's lock is released, under the index's own), checkpointing
its write-ahead file, and blanking copies in the folder's side files.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store import durable
from endless.core.search import ZEROED, IndexBusy, SearchIndex, is_damage
from endless.core.settings import FORGET_CHECKPOINT_TRIES



def purge_pending(folder: Path, pattern: str, step: Callable[[str], None], wait: bool = True) -> bool:
    """Merge the index's segments so deleted words leave its file; False if the index was busy.

    One merge serves every forget waiting for it (the markers ``pattern``
    names).  Deleted rows' terms stay in the old FTS segments until they
    merge (SQLite 3.42's FTS5 ``secure-delete`` would remove them in place;
    Python's SQLite may be older).  It uses a connection of its own, so a
    host may run it on another thread while the memory goes on: commits
    meanwhile leave their rows to the next search (the index is busy), and
    searches read the index as it was.
    """
    markers = sorted(folder.glob(pattern))
    if not markers:
        return True
    index = SearchIndex(folder)
    try:
        try:
            done = _merge(index, step, wait)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            index.discard(exc)  # removed: nothing of the forgotten words is left in it to merge away
            done = True
        if not done:
            return False
    finally:
        index.close()
    for marker in markers:
        marker.unlink(missing_ok=True)
    durable.fsync_dir(folder)
    step("done")
    return True


def _merge(index: SearchIndex, step: Callable[[str], None], wait: bool) -> bool:
    """The merge itself; False if the index was busy."""
    if not index.exists():
        return True
    try:
        with index.write(wait=wait):
            db = index.db()
            for table in ("words", "line_words"):
                db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                step("optimized")
    except IndexBusy:
        return False
    if not db.execute("SELECT 1 FROM state WHERE name = ?", (ZEROED,)).fetchone():
        # Pages freed before secure_delete was on may still hold words: rewrite the file once.
        db.execute("VACUUM")
        db.execute("INSERT OR IGNORE INTO state(name, value) VALUES (?, 1)", (ZEROED,))
        step("vacuumed")
    if not _checkpoint(db, step):
        durable.log("forget", "the search index's old pages stay in its write-ahead file until its "
                              "next checkpoint (another process was reading it)")
    return True


def _checkpoint(db: sqlite3.Connection, step: Callable[[str], None]) -> bool:
    for _ in range(FORGET_CHECKPOINT_TRIES):
        if not db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            step("checkpoint")
            return True
    return False


def drop_index(index: SearchIndex, report: Callable[[str], None]) -> None:
    """The index holds rows whose text is gone: remove it (derived data, rebuilt by the next search)."""
    index.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(index.path.with_name(index.path.name + suffix))
        except FileNotFoundError:
            pass
    report("the search index was removed after an interrupted forget; the next search rebuilds it")


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BLANKED = re.compile(rb'""\s*\Z')


def patched_texts(spans: list[tuple[bytes, bytes]]) -> list[str]:
    """The texts a forget's patches blank, from the bytes they overwrite: ``(old, new)`` per span of the
    log (a JSON string whose new bytes are ``""`` and spaces) or of the tree (a whole line erased)."""
    found: list[str] = []
    for old, new in spans:
        if new.startswith(b'{"gone":'):
            try:
                text = orjson.loads(old).get("text")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            if isinstance(text, str) and text:
                found.append(text)
            continue
        for token in _JSON_STRING.finditer(old):
            if token.group() != b'""' and _BLANKED.match(new[token.start():token.end()]):
                try:
                    text = orjson.loads(token.group())
                except orjson.JSONDecodeError:
                    continue
                if isinstance(text, str):
                    found.append(text)
    return found


def scrub(folder: Path, texts: list[str]) -> None:
    """Blank the texts in the folder's side copies in place: each occurrence (as written, JSON-escaped,
    or escaped twice in a quarantined line) becomes spaces, so a JSON string stays one and a line another
    process appends meanwhile (a kept message, a journal line) is never lost to a rewrite."""
    forms: set[bytes] = set()
    for text in texts:
        if not text:
            continue
        escaped = orjson.dumps(text)[1:-1]
        forms |= {text.encode("utf-8"), escaped, orjson.dumps(escaped.decode("utf-8"))[1:-1]}
    if not forms:
        return
    candidates = [folder / "damaged.jsonl", folder / "pending" / "kept.jsonl"]
    candidates += sorted((folder / "journal").glob("*.jsonl")) if (folder / "journal").exists() else []
    for path in candidates:
        try:
            data = durable.read_all(path)
        except FileNotFoundError:
            continue
        spans = [(at, len(form)) for form in forms for at in _occurrences(data, form)]
        if path.name == "damaged.jsonl":  # a torn line holds pieces: blank every line holding one
            spans += _torn_lines(data, forms)
        if not spans:
            continue
        fd = durable.open_fd(path, os.O_WRONLY)
        try:
            for at, length in spans:
                os.pwrite(fd, b" " * length, at)
            os.fsync(fd)
        finally:
            os.close(fd)
    for damaged in (folder / "index").glob("*.damaged"):
        damaged.unlink()  # an index set aside: derived data, and it may hold the words


def _occurrences(data: bytes, form: bytes) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(form), data)]


def _torn_lines(data: bytes, forms: set[bytes], piece: int = 12) -> list[tuple[int, int]]:
    """(offset, length) of each quarantined line holding any ``piece`` bytes of a form."""
    pieces = {form[k:k + piece] for form in forms for k in range(max(1, len(form) - piece + 1))}
    return [(at, len(line)) for at, line in durable.iter_lines(data, 0) if any(p in line for p in pieces)]
