"""A child process that opens a memory and does what the parent test says.

Commands arrive as one JSON object per line on stdin; every command gets one
JSON answer line on stdout (``{"error": ...}`` when it raised).  Some commands
also send an ``{"event": ...}`` line first, so the parent knows the child has
reached a point (settle: "waiting" once the predicate was seen false).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path

from endless.core.view import tiling as views
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.writer.queue import ready_work

memory: Memory | None = None
offset = [0.0]


def say(**answer) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def clock() -> float:
    return time.time() + offset[0]


coarser_or_equal = views.covers  # nothing merged is split again


def line_text(level: int, index: int, tag: str) -> str:
    return f"{tag} line {level}/{index} " + "x" * ((level * 7 + index) % 23 + 30)


def pause(where: str) -> None:
    """Tell the parent we reached ``where`` and block until it sends a line."""
    say(event="paused", where=where)
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(1)


def op_open(c: dict) -> dict:
    global memory
    offset[0] = float(c.get("clock_offset", 0.0))
    if c.get("pause_tree_index"):
        # Stop while reading the tree index, after the level-0 slots and before the rest.
        from endless.core.store.tree import TreeStore
        original = TreeStore.slot_path

        def slot_path(self, level):
            if level == 1 and not getattr(self, "_paused", False):
                self._paused = True
                pause("tree index")
            return original(self, level)

        TreeStore.slot_path = slot_path
    if c.get("pause_at_journal_beacon"):
        # Stop between opening a journal's beacon file and locking it (probing for orphans).
        import fcntl
        original_flock = fcntl.flock

        def flock(fd, operation):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if "/journal/" in target and ".alive" in target and not paused_once:
                paused_once.append(target)
                pause("journal beacon")
            return original_flock(fd, operation)

        paused_once: list[str] = []
        fcntl.flock = flock
    memory = Memory.open(workspace_key(None, c["ws"]), settings=Settings(**c.get("settings", {})),
                         root=Path(c["root"]), readonly=bool(c.get("readonly")), clock=clock)
    return {"ok": True, "pid": os.getpid(), "total": memory.total, "reports": memory.reports}


def op_commit(c: dict) -> dict:
    """Commit ``count`` turns named ``name``-i, half through the journal, storing ready lines."""
    name, count, pad = c["name"], int(c["count"]), int(c.get("pad", 0))
    seen = list(memory.views.chat.parts)
    splits = []
    stored = 0
    for i in range(count):
        texts = [f"{name}-{i}-{k}|" + "y" * ((i * 13 + k * 5) % 90 + pad) for k in range((i % 3) + 1)]
        if i % 2:
            turn = memory.journal(f"{name}-session", f"{name} title")
            turn.add("user", texts[0])
            for text in texts[1:]:
                turn.add("reply", text)
            turn.commit()
        else:
            memory.commit_turn(f"{name}-session", f"{name} title",
                               [Message("user" if k == 0 else "reply", t, time.time())
                                for k, t in enumerate(texts)])
        if not coarser_or_equal(memory.views.chat.parts, seen):
            splits.append([seen, list(memory.views.chat.parts)])
        seen = list(memory.views.chat.parts)
        if c.get("store"):
            for job in ready_work(memory)[:2]:
                stored += bool(memory.store_line(job.level, job.index, line_text(job.level, job.index, name)))
        if c.get("refresh"):
            memory.catch_up()
            if not coarser_or_equal(memory.views.chat.parts, seen):
                splits.append([seen, list(memory.views.chat.parts)])
            seen = list(memory.views.chat.parts)
    return {"ok": True, "total": memory.total, "stored": stored, "splits": splits[:3],
            "reports": memory.reports}


def op_state(c: dict) -> dict:
    memory.catch_up()
    texts = []
    for message_id in range(memory.total):
        stored = memory.message(message_id)
        texts.append(None if stored is None else stored.text.split("|")[0])
    problems = []
    for state in (memory.views.chat, memory.views.wview):
        try:
            views.validate(state, memory.total, memory.tree.built)
        except views.ViewError as exc:
            problems.append(str(exc))
    chain = 0
    for t in range(memory.turns):
        info = memory.turn(t)
        if info is None or info.first != chain:
            problems.append(f"turn {t} does not start at {chain}: {info}")
            break
        chain += info.count
    return {"ok": True, "total": memory.total, "turns": memory.turns, "chat_total": memory.views.chat.total,
            "wview_total": memory.views.wview.total, "texts": texts, "problems": problems,
            "chain": chain, "reports": memory.reports, "damage": [str(d) for d in memory.damage]}


def op_read_loop(c: dict) -> dict:
    """Read messages and views until the stop file exists; every read must be whole."""
    stop = Path(c["stop"])
    reads = rounds = 0
    seen_total = memory.total
    while True:
        stopping = stop.exists()
        memory.catch_up()
        total = memory.total
        if total < seen_total:
            return {"error": f"the total went back from {seen_total} to {total}"}
        seen_total = total
        try:
            views.validate(memory.views.chat, total, memory.tree.built)
            views.validate(memory.views.wview, total, memory.tree.built)
        except views.ViewError as exc:
            return {"error": f"a reader saw an invalid view: {exc}"}
        for part in memory.views.chat.parts:
            if memory.tree.built(*part) and memory.node_text(*part) is None:
                return {"error": f"line {views.name(part)} is built but unreadable"}
        for message_id in {0, total - 1, (rounds * 7919) % max(total, 1), total // 2}:
            if message_id < 0 or message_id >= total:
                continue
            stored = memory.message(message_id)
            if stored is None or "|" not in stored.text or stored.text.count("-") < 2:
                return {"error": f"message {message_id} of {total} read as {stored!r}"}
            info = memory.turn(stored.turn)
            if info is None or not info.first <= message_id < info.first + info.count:
                return {"error": f"message {message_id} lies outside its turn {info!r}"}
            reads += 1
        rounds += 1
        if stopping:
            break
    return {"ok": True, "reads": reads, "rounds": rounds, "total": memory.total,
            "chat_total": memory.views.chat.total, "wview_total": memory.views.wview.total}


def op_settle(c: dict) -> dict:
    level, index, timeout = int(c["level"]), int(c["index"]), float(c["timeout"])
    announced = []

    def predicate(m: Memory) -> bool:
        built = m.is_built(level, index)
        if not built and not announced:
            announced.append(time.monotonic())
            say(event="waiting")
        return built

    async def run() -> bool:
        return await memory.settle(predicate, timeout=timeout)

    result = asyncio.run(run())
    waited = time.monotonic() - announced[0] if announced else 0.0
    return {"ok": result, "announced": bool(announced), "waited": waited}


def op_refresh_paused(c: dict) -> dict:
    """A refresh that stops after it has read the order log, before it reads the view."""
    log = memory.log
    original = log.catch_up

    def catch_up(write_index):
        found = original(write_index)
        log.catch_up = original
        pause("after the order log")
        return found

    log.catch_up = catch_up
    memory.catch_up()
    return {"ok": True, "total": memory.total, "chat_total": memory.views.chat.total}


def op_die_after_log_append(c: dict) -> dict:
    """Commit a turn and die by SIGKILL the moment its record is in the order log."""
    import signal
    log = memory.log
    original = log.add

    def add(lines, infos, sync=True):
        original(lines, infos, sync)
        os.kill(os.getpid(), signal.SIGKILL)

    log.add = add
    memory.commit_turn(c["session"], "doomed", [Message("user", c["text"], time.time())])
    return {"error": "still alive after the commit"}


def op_die_in_turn(c: dict) -> dict:
    """Journal a turn's first message, then die by SIGKILL before the turn ends."""
    import signal
    turn = memory.journal(c["session"], "doomed")
    turn.add("user", c["text"])
    os.kill(os.getpid(), signal.SIGKILL)
    return {"error": "still alive"}


def op_renew_paused(c: dict) -> dict:
    """A renewal that stops right after it has read the lease file."""
    lease = memory.lease
    original = lease.read

    def read():
        info = original()
        lease.read = original
        pause("lease read")
        return info

    lease.read = read
    return {"ok": memory.renew_lease()}


turns: dict = {}


def op_turn_begin(c: dict) -> dict:
    turn = memory.journal(c["session"], "by hand")
    turn.add("user", c["text"])
    turns[c["session"]] = turn
    return {"ok": True, "tid": turn.journal.tid}


def op_turn_add(c: dict) -> dict:
    turns[c["session"]].add("reply", c["text"])
    return {"ok": True}


def op_turn_commit(c: dict) -> dict:
    """Commit a turn begun by hand; optionally stop after the commit, before the journal goes."""
    turn = turns.pop(c["session"])
    if c.get("pause_before_finish"):
        finish = turn.journal.finish

        def paused_finish():
            pause("before the journal is removed")
            finish()

        turn.journal.finish = paused_finish
    info = turn.commit()
    return {"ok": True, "turn": info.turn, "first": info.first, "count": info.count}


def op_release(c: dict) -> dict:
    with memory.lock:
        memory.lease.release()
    return {"ok": True}


def main() -> None:
    handlers = {
        "open": op_open,
        "commit": op_commit,
        "state": op_state,
        "read_loop": op_read_loop,
        "settle": op_settle,
        "take": lambda c: {"ok": memory.take_lease()},
        "renew": lambda c: {"ok": memory.renew_lease()},
        "held": lambda c: {"ok": memory.lease.held},
        "release": op_release,
        "clock": lambda c: (offset.__setitem__(0, float(c["offset"])), {"ok": True})[1],
        "refresh_paused": op_refresh_paused,
        "renew_paused": op_renew_paused,
        "turn_begin": op_turn_begin,
        "turn_add": op_turn_add,
        "turn_commit": op_turn_commit,
        "die_after_log_append": op_die_after_log_append,
        "die_in_turn": op_die_in_turn,
        "built": lambda c: {"ok": memory.is_built(int(c["level"]), int(c["index"]))},
        "refresh": lambda c: {"ok": True, "changed": memory.catch_up(), "total": memory.total,
                              "chat_total": memory.views.chat.total, "parts": list(memory.views.chat.parts)},
        "store": lambda c: {"ok": memory.store_line(int(c["level"]), int(c["index"]), c["text"])},
        "message": lambda c: {"ok": True, "text": getattr(memory.message(int(c["id"])), "text", None)},
        "ready": lambda c: {"ok": True, "jobs": [[j.level, j.index] for j in ready_work(memory)]},
    }
    for raw in sys.stdin:
        command = json.loads(raw)
        if command["op"] == "exit":
            if memory is not None:
                memory.close()
            return
        try:
            answer = handlers[command["op"]](command)
        except Exception:
            answer = {"error": traceback.format_exc()}
        say(**answer)


if __name__ == "__main__":
    main()
