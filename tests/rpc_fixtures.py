"""A small memory for the RPC, page and CLI read tests: several chats over several days.

Turns are committed through ``commit_turn`` on an injected clock, and every
line the memory asks for is written by the offline writer, so the view has
merged lines to open down to messages.
"""

from __future__ import annotations

from pathlib import Path

from endless.core.store.keys import Key, workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.writer.offline import offline_leaf, offline_merge
from endless.writer.queue import ready_work
from endless.writer.task import job_input

START = 1_790_000_000.0  # a fixed moment, so days are the same on every run
DAY = 86_400.0
SCRIPT = "<script>window.__pwned = 1</script><b>not bold</b>"
MARKER = "zebracrossing"  # in exactly two messages
TITLES = ["Planning the trip", "Fix the build", "Garden notes"]


def small_settings(**values) -> Settings:
    """Small views, so a few dozen turns give merged lines; ``values`` override."""
    base = dict(view_ceiling=6000, view_floor=3000, writer_view_ceiling=2400, writer_view_floor=1200,
                view_shrink_slack=1500, zoom_page_chars=1000, rpc_search_workers=1)
    base.update(values)
    return Settings(**base)


def write_all(memory: Memory) -> int:
    """Write every line the memory asks for with the offline writer; returns how many."""
    written = 0
    while True:
        jobs = ready_work(memory)
        if not jobs:
            return written
        for job in jobs:
            if memory.is_built(job.level, job.index):
                continue
            if job.level == 0:
                text = offline_leaf(job_input(memory, job), memory.settings.line_budget)
            else:
                left, right = job_input(memory, job).split("\n", 1)
                text = offline_merge(left.split("|", 1)[1], right.split("|", 1)[1],
                                     memory.settings.line_budget)
            written += memory.store_line(job.level, job.index, text, sync=False)


def built_workspace(root: Path) -> tuple[Path, str]:
    """A workspace folder ``root/ws`` whose memory :func:`build` filled (closed); its path and memory id."""
    ws = root / "ws"
    ws.mkdir()
    memory = build(root, key=workspace_key(None, ws))
    memory.close()
    return ws, memory.memory_id


def build(root: Path, turns: int = 60, days: int = 3, settings: Settings | None = None,
          key: Key | None = None, write: bool = True) -> Memory:
    """A memory of ``turns`` turns spread over ``days`` days in three chats; left open (close it)."""
    now = [START]
    memory = Memory.open(key or workspace_key(None, root / "ws"), settings=settings or small_settings(),
                         root=root, clock=lambda: now[0])
    step = days * DAY / max(1, turns)
    for t in range(turns):
        now[0] = START + t * step
        title = TITLES[t % len(TITLES)]
        session = f"chat-{t % len(TITLES)}"
        question = f"Question {t} about {title.lower()}: what did we decide on item {t}?"
        if t == 5:
            question = "Please keep this verbatim: " + SCRIPT
        if t in (7, 41):
            question = f"Remember the {MARKER} near the station ({t})."
        if t == 12:
            question = "A long paste follows. " + " ".join(f"line{k}" for k in range(700))
        reply = f"Answer {t}: we settled item {t} and wrote it down in notes/{t}.md."
        messages = [Message("user", question, now[0]), Message("reply", reply, now[0])]
        if t % 4 == 3:
            messages.insert(1, Message("trace", f"did: shell ls notes\nresult: {t}.md", now[0]))
        status = "stopped" if t == 9 else "completed"
        memory.commit_turn(session, title, messages, status=status, sync=False)
        if write:
            write_all(memory)
    return memory
