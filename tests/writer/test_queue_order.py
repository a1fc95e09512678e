"""The writer's queue keeps its order of ready merges across looks: it must give what a fresh look gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.core.store.keys import workspace_key
from endless.core.store.messages import Message
from endless.writer import queue
from endless.writer.queue import WorkQueue

SMALL = Settings(view_ceiling=3000, view_floor=1500, writer_view_ceiling=1400, writer_view_floor=700,
                 view_shrink_slack=800, unwritten_ahead=4)


@pytest.mark.parametrize("stale", [queue.STALE_ORDER_ENTRIES, 3])
def test_the_kept_order_gives_what_a_fresh_look_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      stale: int) -> None:
    monkeypatch.setattr(queue, "STALE_ORDER_ENTRIES", stale)
    rng = random.Random(7)
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SMALL, root=tmp_path)
    kinds = ["user", "reply", "trace"]
    for t in range(400):
        memory.commit_turn("s", "T", [Message(kinds[k], f"turn {t} part {k} " + "w" * rng.randint(20, 300), 1.0)
                                      for k in range(3)], sync=False)
    kept = WorkQueue(memory)
    # the first look writes every message's line the window allows, so merges become ready
    for _ in range(60):
        for job in kept.ready():
            if job.level == 0:
                memory.store_line(0, job.index, f"line {job.name} " + "z" * 40, sync=False)
    looks = kept_orders = 0
    while True:
        jobs = [job.part for job in kept.ready()]
        fresh = [job.part for job in WorkQueue(memory).ready()]
        assert jobs == fresh
        if not jobs:
            break
        looks += 1
        needed = [job for job in kept.ready() if job.needed]
        kept_orders += bool(needed) and kept._order_rank is memory.views.needed_rank
        # store the front, and a few further in (they stay in the kept order until passed or placed again)
        chosen = set(jobs[:rng.randint(1, 6)]) | set(rng.sample(jobs, min(len(jobs), rng.randint(0, 4))))
        for level, index in sorted(chosen):
            if memory.is_built(level, index):
                continue
            if level and not all(memory.is_built(level - 1, 2 * index + k) for k in (0, 1)):
                continue  # (a merge whose half is stored in this same round comes at the next look)
            memory.store_line(level, index, f"line {level}:{index} " + "z" * 40, sync=False)
    memory.close()
    assert looks > 50 and kept_orders > 10
