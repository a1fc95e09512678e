"""``endless doctor``'s line for forgets: how many messages a memory forgot, and what of a forget is unfinished.

Read from the files alone (``forgotten.jsonl``, the ``forget.<op>.redo`` and
``forget.<op>.purge`` markers of :mod:`endless.core.privacy.forget`), or for a memory kept
in PostgreSQL from its registry in the database, so it works on a memory opened read-only and
never changes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from endless.core.privacy import PURGE, REDO, REGISTRY
from endless.core.words import count


def forget_findings(report: Any, folder: Path, mid: str, entries: list[bytes] | None = None) -> None:
    """One ok line for past forgets; a warning for each kind of unfinished step, with what to do.
    ``entries``: the registry as the memory's store keeps it (a database's; else its file is read)."""
    ids: set[int] = set()
    forgets, latest = 0, None
    if entries is None:
        try:
            entries = (folder / REGISTRY).read_bytes().splitlines()
        except FileNotFoundError:
            entries = []
    for line in entries:
        try:
            entry = orjson.loads(line)
            ids.update(int(i) for i in entry["ids"])
            latest = max(float(entry["at"]), latest or 0.0)
            forgets += 1
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue  # a torn last line: the forget it began is replayed from its redo
    if forgets:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(latest))
        report.add("memory.forget", "ok", f"memory {mid}: {count(len(ids), 'message')} forgotten "
                                          f"(in {count(forgets, 'forget')}, the latest on {when})", memory=mid)
    redos = sorted(p.name for p in folder.glob(REDO.format(op="*")))
    if redos:
        report.add("memory.forget", "warning",
                   f"memory {mid}: a forget was interrupted before it finished ({', '.join(redos)}); "
                   "its messages may still be readable", "`endless doctor --repair` finishes it now "
                                                         "(so does the memory's next chat turn)", mid)
    purges = sorted(p.name for p in folder.glob(PURGE.format(op="*")))
    if purges:
        report.add("memory.forget", "warning",
                   f"memory {mid}: the search index's merge after a forget is still pending ({', '.join(purges)}); "
                   "its old pages may still hold the forgotten words",
                   "`endless doctor --repair` merges them now, unless a search is using the index (then the memory's next chat turn or forget does)", mid)
