"""What forgetting works on, written down so that the privacy floor never imports ``Memory``.

A forget changes the log, the tree, the views and the index under the
memory's own lock, and tells the memory what it stored; ``Memory`` is the one
implementation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from endless.core.search import WordIndex
    from endless.core.settings import Settings
    from endless.core.store import ChangeLock, OrderLog, Store, Stored, TreeStore, TurnInfo
    from endless.core.view import Part, ViewKeeper


class Forgettable(Protocol):
    """What forgetting works on: an open memory (``endless.core.memory.Memory`` is one; this floor
    never imports it).  A forget changes the log, the tree, the views and the index under the
    memory's own lock, and tells the memory what it stored."""

    folder: Path
    memory_id: str
    settings: "Settings"
    agent_name: str
    readonly: bool
    clock: Callable[[], float]
    log: "OrderLog"
    tree: "TreeStore"
    views: "ViewKeeper"
    search_index: "WordIndex"
    lock: "ChangeLock"
    store: "Store"

    @property
    def total(self) -> int: ...

    @property
    def turns(self) -> int: ...

    def message(self, message_id: int) -> Stored | None: ...

    def turn(self, turn: int) -> "TurnInfo | None": ...

    def catch_up(self, locked: bool = False) -> bool: ...

    def check_writable(self) -> None: ...

    def store_line(self, level: int, index: int, text: str, sync: bool = True) -> bool: ...

    def tell_built(self, part: "Part", text: str | None = None) -> None: ...

    def notify_waiters(self) -> None: ...

    def report(self, what: str) -> None: ...
