"""The full-text index caught up from a memory's files alone, pass after pass (a long import's helper).

A search catches the index up from the open memory it runs in.  A long import
instead leaves the index to a second process, which opens no memory: it reads
only the order log's and the tree's complete ends and, now and then, one
stored line's size (a whole read-only memory would hold every part of the
views: 520 MB at a million messages, measured).  The importer owns that
process and what it is told; this module is the index's side of it, so only
the search floor writes the index.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Mapping

from endless.core.search import upkeep
from endless.core.search.index import SearchIndex
from endless.core.search.word_index import WordIndex, open_index
from endless.core.settings import FOLLOWER_CACHE_KIB, FOLLOWER_POLL_SECONDS, Settings, is_postgres_url, store_url
from endless.core.store import OrderLog, TreeStore, open_store
from endless.core.view import FreeStretch


def follow(folder: Path, granularity: str, free: Mapping[int, FreeStretch], ended: threading.Event,
           poll: float | None = None, settings: Settings | None = None) -> None:
    """Catch ``folder``'s index up until ``ended`` is set, then once more to the files' ends.

    ``free``: the stretches of the tree file the import filled with free lines
    alone, by where they start (the index leaves free lines out, so they are
    stepped over unread).  Files that grew since the last pass are read again
    at once; otherwise a pass waits ``poll`` seconds or until ``ended``.
    ``settings``: a memory kept in PostgreSQL is read from this machine's copy
    of its log and tree, and its index is the database's (the import leaves
    the server's tokenizing to this process's connection, beside its own).
    """
    poll = FOLLOWER_POLL_SECONDS if poll is None else poll
    if settings is not None and is_postgres_url(settings.store):
        store = open_store(folder, granularity, settings, time.time)
        index: WordIndex = open_index(folder, store_url(settings), store)
        log, tree = store.log, store.tree
    else:
        store, index = None, SearchIndex(folder, cache_kib=FOLLOWER_CACHE_KIB)
        log, tree = OrderLog(folder, granularity), TreeStore(folder, granularity)
    loaded = False
    stored_size = upkeep.node_size(tree)

    def size_of(level: int, ix: int) -> int | None:  # a line before this pass: its slot, as last saved
        nonlocal loaded
        if not loaded:
            tree.load_index()
            loaded = True
        return stored_size(level, ix)

    read_to = (-1, -1)
    try:
        while True:
            ends = (log.stored_end(), tree.stored_end())
            # the import commits faster than the index keeps up: a pause here would leave the core idle
            last = ended.wait(0 if ends != read_to else poll)
            if last or ends == read_to:
                ends = (log.stored_end(), tree.stored_end())
            read_to = ends
            loaded = False
            inode = tree.stored_identity()

            def free_until(offset: int) -> int | None:
                stretch = free.get(offset)
                return stretch.end if stretch is not None and stretch.inode == inode else None

            sources = upkeep.Sources(log, ends[0], tree, ends[1], size_of, free_until)
            upkeep.catch_up(index, sources, math.inf)
            if last:
                return
    finally:
        log.close()
        tree.close()
        index.close()
        if store is not None:
            store.close()
