"""Writing the lines a memory still lacks, until none is left: ``endless catch-up`` and ``endless import``."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

PROGRESS_SECONDS = 0.5  # how often the bar is redrawn


def _no_provider(route: Any) -> Any:
    raise RuntimeError("the offline writer calls no model")


def catch_up(memory: Any, writer: str, show_progress: bool) -> dict:
    """Run the writer pool on ``memory`` until nothing is left; returns what it wrote."""
    from endless.writer.pace import lines_left
    from endless.writer.pool import WriterPool

    if writer == "model":
        from endless.llm.connect import make_provider

        providers: Any = make_provider
        pool = WriterPool(memory, providers)
    else:
        offline = dataclasses.replace(memory.settings, writer_route="")
        pool = WriterPool(memory, _no_provider, settings=offline)
    total = lines_left(memory.built_slots(), memory.total)
    started = time.monotonic()

    async def run() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(pool.run(stop, until_idle=True))
        progress = task_bar = None
        if show_progress and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn("writing lines"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            progress.start()
            task_bar = progress.add_task("lines", total=total)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=PROGRESS_SECONDS)
                if progress is not None:
                    progress.update(task_bar, completed=total - lines_left(memory.built_slots(), memory.total))
            task.result()
        finally:
            if progress is not None:
                progress.stop()
            if not task.done():
                stop.set()
                task.cancel()

    asyncio.run(run())
    left = lines_left(memory.built_slots(), memory.total)
    stats = pool.stats
    return {"memoryId": memory.memory_id, "writer": writer, "written": total - left, "left": left,
            "seconds": round(time.monotonic() - started, 2), "calls": stats.calls,
            "offlineLines": stats.offline_lines + stats.offline_fallbacks, "modelLines": stats.model_lines,
            "elsewhere": left > 0 and not memory.holds_lease and stats.calls == 0 and stats.offline_lines == 0}
