"""The writer's spend cap (DESIGN §3.5): when the pool pauses, and the person's lift for today.

The pause is shared across processes through ``writer-pause.json`` in the
memory folder, so ``endless writer resume`` in one terminal lets the pool of
another go on.  One rule decides "paused" for the pool, ``endless writer
status`` and ``endless doctor`` alike: :func:`is_paused`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from endless.core.store import durable

PAUSE_FILE = "writer-pause.json"


class HasFolder(Protocol):
    folder: Path


def day_of(wall: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(wall))


def is_paused(memory: HasFolder, spent_today: float, cap: float | None, wall: float) -> bool:
    """Paused once today's spending reaches the cap, unless the person lifted it today."""
    return cap is not None and spent_today >= cap and not lifted_today(memory, wall)


def read_pause(memory: HasFolder) -> dict:
    try:
        value = durable.read_json(memory.folder / PAUSE_FILE)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def write_pause(memory: HasFolder, wall: float, spent: float, cap: float) -> None:
    state = read_pause(memory)
    state.update({"paused": day_of(wall), "spent": spent, "cap": cap})
    durable.write_json(memory.folder / PAUSE_FILE, state)


def lifted_today(memory: HasFolder, wall: float) -> bool:
    return read_pause(memory).get("lifted") == day_of(wall)


def lift_pause(memory: HasFolder, wall: float | None = None) -> None:
    """Let the pool spend past the cap for the rest of today (the `resume` command)."""
    state = read_pause(memory)
    state["lifted"] = day_of(wall if wall is not None else time.time())
    durable.write_json(memory.folder / PAUSE_FILE, state)
