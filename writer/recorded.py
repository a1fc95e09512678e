"""The route, system prompt and tools each chat last used, kept for its writer calls (DESIGN §3.4).

A writer call opens with the same system prompt and tools as the chat whose
lines it writes, so it reads the prefix that chat's turns already cached.
The lease holder may be another process than the chat's, so the records live
in the memory folder (``routes.jsonl``, a line only when they change).  A
route never holds a key, only the name of the variable that does.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from endless.core.store import durable
from endless.core.errors import MemoryUseError
from endless.writer.interface import PerMemory, WriterMemory

ROUTES_FILE = "routes.jsonl"


@dataclass(frozen=True)
class RecordedRoute:
    route: dict
    system: str
    tools: list[dict]


class RecordedRoutes:
    """The records of one memory, read incrementally from its file."""

    def __init__(self, memory: WriterMemory) -> None:
        self.memory = memory
        self._end = 0
        self._records: dict[str, RecordedRoute] = {}

    def record(self, session: str, route: dict, system_prompt: str, tools: list[dict] | None = None) -> None:
        """Remember what ``session`` used last; written only when it changed."""
        if self.memory.readonly:
            raise MemoryUseError("this memory was opened read-only")
        self._read()
        record = RecordedRoute(route, system_prompt, tools or [])
        if self._records.get(session) == record:
            return
        with self.memory.lock:
            durable.append_lines(self.memory.folder / ROUTES_FILE, [durable.dumps_line(
                {"s": session, "route": route, "system": system_prompt, "tools": record.tools,
                 "at": self.memory.clock()})])
        self._records[session] = record

    def get(self, session: str | None) -> RecordedRoute | None:
        """What ``session`` last used, or None."""
        if session is None:
            return None
        self._read()
        return self._records.get(session)

    def routes(self) -> list[dict]:
        """The routes chats of the memory last recorded, one per chat (for ``endless doctor``)."""
        self._read()
        return [record.route for record in self._records.values() if record.route]

    def any(self) -> bool:
        """Whether any chat of the memory recorded a route."""
        self._read()
        return any(record.route for record in self._records.values())

    def _read(self) -> None:
        data, tail = durable.read_complete(self.memory.folder / ROUTES_FILE, self._end)
        for _, line in durable.iter_lines(data, self._end):
            try:
                raw = orjson.loads(line)
                self._records[raw["s"]] = RecordedRoute(raw["route"], raw["system"], raw.get("tools", []))
            except (orjson.JSONDecodeError, KeyError, TypeError):
                self.memory.report(f"skipped a damaged line of {ROUTES_FILE}")
        self._end = tail.complete_end


recorded_routes = PerMemory(RecordedRoutes)  # recorded_routes(memory): the records of an open memory
