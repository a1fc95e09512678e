"""Which store keeps a memory: the files of its folder (the default) or a PostgreSQL database (issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from endless.core.errors import MemoryUseError
from endless.core.settings import Settings, is_postgres_url
from endless.core.store.contract import Store


def open_store(folder: Path, granularity: str, settings: Settings, clock: Callable[[], float]) -> Store:
    """The memory's store as the ``store`` setting says: the files in ``folder`` when it is empty, a
    PostgreSQL database for a ``postgresql://`` URL (only then is the driver loaded)."""
    if is_postgres_url(settings.store):
        try:
            from endless.core.store.postgres import PostgresStore
        except ImportError:
            raise MemoryUseError("the store setting (ENDLESS_STORE) names a PostgreSQL database, but its driver "
                                 "is not installed: pip install 'endless-memory[postgres]'") from None
        return PostgresStore(folder, granularity, settings, clock)
    from endless.core.store.files import FileStore

    return FileStore(folder, granularity, settings, clock)
