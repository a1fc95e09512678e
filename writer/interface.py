"""What the writer needs of a memory: the one seam between the writer layer and the core.

The pool, the work queue, the call builder and the route records reach a
memory only through these names; ``endless.core.memory.Memory`` provides
them.  Anything else of the memory (its files, indexes, private caches) is
the core's own business.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generic, Protocol, Sequence, TypeVar

from endless.core.store import ChangeLock
from endless.core.store import Stored
from endless.core.settings import Settings
from endless.core.view import Part
from endless.core.view import ViewKeeper

if TYPE_CHECKING:  # an annotation only: the commands that price a catch-up never start an event loop
    import asyncio


class WriterMemory(Protocol):
    memory_id: str
    folder: Path
    settings: Settings
    agent_name: str
    clock: Callable[[], float]
    readonly: bool
    lock: ChangeLock
    views: ViewKeeper  # the chat view's and writer view's parts, and the parents they wait for
    expand_query: Callable[[str], Sequence[str]] | None  # set by a pool with a writer model (writer.expand)

    @property
    def total(self) -> int: ...

    @property
    def lines_built(self) -> int: ...

    @property
    def window_tokens(self) -> int | None: ...

    @property
    def window(self) -> int: ...

    @property
    def holds_lease(self) -> bool: ...

    def message(self, message_id: int) -> Stored | None: ...

    def is_built(self, level: int, index: int) -> bool: ...

    def node_text(self, level: int, index: int) -> str | None: ...

    def built_slots(self) -> list: ...

    def on_built(self, listener: Callable[[Part], None]) -> None: ...

    def store_line(self, level: int, index: int, text: str, sync: bool = True) -> bool: ...

    def catch_up(self) -> bool: ...

    async def settle(self, predicate: Callable[["WriterMemory"], bool], timeout: float) -> bool: ...

    def take_lease(self, want: bool = False) -> bool: ...

    async def keep_lease(self, stop: asyncio.Event) -> bool: ...

    def report(self, what: str) -> None: ...


T = TypeVar("T")


class PerMemory(Generic[T]):
    """One ``make(memory)`` per open memory, made at first use and kept while the memory is.

    The writer's state about a memory (its work queue, its route records)
    must be shared by everyone who asks for it in one process, yet must not
    keep a closed memory alive.
    """

    def __init__(self, make: Callable[[WriterMemory], T]) -> None:
        self._make = make
        self._made: "weakref.WeakKeyDictionary[object, T]" = weakref.WeakKeyDictionary()

    def __call__(self, memory: WriterMemory) -> T:
        found = self._made.get(memory)
        if found is None:
            found = self._made[memory] = self._make(memory)
        return found
