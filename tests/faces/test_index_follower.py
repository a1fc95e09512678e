"""The import's index helper (``endless.faces.importers.index_follower``) and what the import tells it.

The import names each stretch of the tree file it filled with free lines
alone; the helper steps over such a stretch unread, and only when it names
the tree file the helper is reading.  To see that it is not read, a line in
the stretch is changed into a written line (which the index would hold)
before the helper runs.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import orjson
import pytest

from endless.core.view.free_nodes import FreeStretch
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.search.index import SearchIndex
from endless.core.settings import Settings
from endless.core.store.turns import TurnRecord
from endless.core.search import follow
from endless.faces.importers import index_follower


def _run_helper(folder: Path, told: list[bytes], monkeypatch) -> int:
    """The helper's own loop, in this process, fed ``told`` and then the end of its input.

    Its poll is made longer than any test, so its one pass runs once the input
    has ended and every stretch in it is known (no race with the reading thread).
    """
    reading, writing = os.pipe()
    os.write(writing, b"".join(told))
    os.close(writing)
    monkeypatch.setattr(follow, "FOLLOWER_POLL_SECONDS", 3600.0)
    monkeypatch.setattr(sys, "stdin", os.fdopen(reading, "r"))
    ctrl_c = signal.getsignal(signal.SIGINT)
    try:
        return index_follower._follow(folder, "turn")
    finally:
        signal.signal(signal.SIGINT, ctrl_c)  # the helper ignores Ctrl-C (its import stops it)


@pytest.mark.parametrize("tell", ["the stretch", "another file's stretch", "nothing"])
def test_the_helper_steps_over_only_the_stretches_named_for_its_tree_file(tmp_path, monkeypatch, tell):
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), root=tmp_path, settings=Settings())
    stretches: list[FreeStretch] = []
    memory.on_free_stretch(stretches.append)
    memory.commit_turns([TurnRecord("s", "t", [Message("user", "question about alpha", 1.0),
                                               Message("reply", "answer about alpha", 2.0)], tid=f"{0:016x}")],
                        sync=False, plan=False, index=False)
    assert len(stretches) == 1 and stretches[0].end == memory.tree.end
    folder, tree_path = memory.folder, memory.tree.path
    memory.close()
    # The first leaf (a free one: a reference to its message) becomes, as long, a written leaf of other words.
    data = tree_path.read_bytes()
    first = data[:data.index(b"\n")]
    record = orjson.loads(first)
    assert record["l"] == 0 and record["src"] == record["size"] and "text" not in record
    written = b'{"l":0,"i":0,"text":"zanzibar","size":8}'
    changed = written + b" " * (len(first) - len(written))
    assert len(changed) == len(first)
    tree_path.write_bytes(changed + data[len(first):])
    stretch = stretches[0]
    told = {"the stretch": [b"%d %d %d\n" % stretch],
            "another file's stretch": [b"%d %d %d\n" % (stretch.inode + 1, stretch.start, stretch.end)],
            "nothing": []}[tell]
    assert _run_helper(folder, told, monkeypatch) == 0
    index = SearchIndex(folder)
    assert index.watermark().tree_end == len(data)
    rows = index.db().execute("SELECT rowid FROM line_words WHERE line_words MATCH 'zanzibar'").fetchall()
    index.close()
    assert len(rows) == (0 if tell == "the stretch" else 1)
