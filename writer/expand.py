"""Query expansion by the writer's model: other words for a question recall_search is asked.

A question and its answer often share no word ("which datastore did we pick?"
against "we settled on Postgres").  When the person set a writer model
(``writer_route``), a question searched by ``recall_search`` is first sent to
that model, which answers with words the answering messages may hold; the
search ranks those too, weighed lower (:mod:`endless.core.search.ranking`).

The call never holds a search up for long and never fails it: it runs in its
own thread with its own event loop and its own client (the caller may be the
writer pool's loop itself, as in Hermes), gets ``SEARCH_EXPANSION_SECONDS``,
and any error, a timeout or the day's spend cap gives no words.  Each call is
logged in the usage log like a writer call (job ``search``), so it counts
toward the spend cap.  A question asked again is answered from a small cache.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import Callable, Sequence

from endless import prompts
from endless.core.settings import SEARCH_EXPANSION_SECONDS, Settings
from endless.core.store import durable
from endless.llm.client import Completion
from endless.llm.request import Msg, Request
from endless.llm.routes import Route
from endless.writer.interface import WriterMemory
from endless.writer.spend import is_paused
from endless.writer.usage import UsageLog

_KEPT = 64  # questions whose words are kept


def expander(memory: WriterMemory, providers: Callable[[Route], object], route: Route, usage: UsageLog,
             settings: Settings, wall: Callable[[], float]) -> Callable[[str], Sequence[str]]:
    """A function from a question to the model's other words for it (empty when it cannot say)."""
    known: OrderedDict[str, tuple[str, ...]] = OrderedDict()
    lock = threading.Lock()

    def expand(question: str) -> Sequence[str]:
        with lock:
            if question in known:
                known.move_to_end(question)
                return known[question]
        cap = settings.spend_cap_per_day
        if cap is not None and is_paused(memory, usage.spent_today(wall()), cap, wall()):
            return ()
        completion, seconds, outcome = _ask(providers, route, question)
        usage.record(wall(), route, "search", completion.usage if completion else None, seconds, outcome)
        if completion is None:
            durable.log("writer", f"no other words for a search ({outcome}); it ran on the question's own")
            return ()
        words = tuple(w.strip() for w in completion.text.replace("\n", ",").split(",") if w.strip())[:24]
        with lock:
            known[question] = words
            while len(known) > _KEPT:
                known.popitem(last=False)
        return words

    return expand


def _ask(providers: Callable[[Route], object], route: Route, question: str
         ) -> tuple[Completion | None, float, str]:
    """The model's answer (or None), the seconds it took, and the outcome as the usage log words it."""
    request = Request(system=prompts.text("search/expand.txt"), tools=[],
                      messages=[Msg("user", [f"Question: {question[:2000]}"])], tool_choice="none", max_tokens=120)
    box: dict[str, object] = {}

    async def call() -> Completion:
        provider = providers(route)
        try:
            return await asyncio.wait_for(provider.complete(request), SEARCH_EXPANSION_SECONDS)  # type: ignore[attr-defined]
        finally:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    def work() -> None:
        try:
            box["done"] = asyncio.run(call())
        except (asyncio.TimeoutError, TimeoutError):
            box["outcome"] = "timeout"
        except Exception as exc:  # a provider's error of any kind: the search goes on without words
            box["outcome"] = getattr(exc, "kind", None) or type(exc).__name__

    started = time.monotonic()
    thread = threading.Thread(target=work, name="endless-expand", daemon=True)
    thread.start()
    thread.join(SEARCH_EXPANSION_SECONDS + 1.0)
    seconds = time.monotonic() - started
    done = box.get("done")
    if isinstance(done, Completion) and done.text.strip():
        return done, seconds, "ok"
    return None, seconds, str(box.get("outcome", "timeout" if thread.is_alive() else "empty"))
