"""The writer's queue after a forget erased lines: it never offers a merge whose half is gone."""

from __future__ import annotations

from pathlib import Path

from endless.core.memory import Memory
from endless.core.privacy import forget
from endless.core.settings import Settings
from endless.core.store.keys import workspace_key
from endless.core.store.messages import Message
from endless.writer.queue import ready_work

SMALL = Settings(view_ceiling=3000, view_floor=1500, writer_view_ceiling=1400, writer_view_floor=700,
                 view_shrink_slack=800)
# Found by a hypothesis run (tests/core/test_memory_views.py): the second time through, the forget erased
# lines under a merge the queue held as ready, and storing it failed ("cannot be stored before both halves").
PROGRAM = [("turn", [5]), ("turn", [5, 5, 444]), ("turn", [5, 5, 334]), ("write", 0), ("turn", [5]),
           ("forget", 200), ("turn", [5, 5]), ("write", 0)]


def test_after_a_forget_the_queue_offers_only_merges_whose_halves_are_built(tmp_path: Path) -> None:
    kinds = ["user", "reply", "trace"]
    offered = 0
    for _ in range(2):
        memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=SMALL, root=tmp_path)
        for op, arg in PROGRAM:
            if op == "turn":
                memory.commit_turn("s", "T", [Message(kinds[k % 3], "w" * size, 1.0) for k, size in enumerate(arg)],
                                   sync=False)
            elif op == "forget":
                forget.forget(memory, forget.select(memory, ids=[arg % memory.total]))
            else:
                for job in ready_work(memory):
                    if job.level:
                        offered += 1
                        assert all(memory.is_built(job.level - 1, 2 * job.index + k) for k in (0, 1)), job.name
                for job in ready_work(memory)[:arg + 1]:
                    memory.store_line(job.level, job.index, f"line {job.name} " + "z" * 60, sync=False)
        memory.close()
    assert offered
