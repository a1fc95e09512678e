"""Which store keeps a memory: the files of its folder (the default) or a PostgreSQL database (issue 31);
and which memory a key names in it (store.directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from endless.core.errors import MemoryUseError, NoMemory
from endless.core.settings import Settings, is_postgres_url
from endless.core.store import durable, keyfile
from endless.core.store.contract import Store
from endless.core.store.directory import Directory, Found, adopt, find
from endless.core.store.keys import Key, check_memory_id


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


def open_directory(settings: Settings, root: Path) -> Directory:
    """What the store holds as a whole (memories' keys, aliases): the files under ``root``, or the database
    (connected only when a question needs it)."""
    if is_postgres_url(settings.store):
        from endless.core.store.pg_keys import PgDirectory

        return PgDirectory(root, settings)
    from endless.core.store.directory import FileDirectory

    return FileDirectory(root)


def find_memory(key: Key, settings: Settings, root: Path | None = None) -> Found | None:
    """Where ``key``'s memory is, under any of its names, without opening it (None: it has none yet);
    found under another name, the key's own becomes an alias of it (as :func:`memory_folder` does)."""
    root = Path(root) if root is not None else settings.memory_root()
    durable.guard_root(root)
    directory = open_directory(settings, root)
    try:
        found = find(directory, key)
        if found is not None:
            _adopt(directory, key, found, root / "memories" / found.memory_id / "key.json")
        return found
    finally:
        directory.close()


def memory_folder(settings: Settings, root: Path, key: Key | None, memory_id: str | None, *, create: bool,
                  readonly: bool, agent_name: str | None, clock: Callable[[], float]) -> Path:
    """The folder of the memory to open, with its ``key.json``: ``memory_id``'s, else the one ``key`` names
    under any of its names (a writable open makes the key's own name an alias of it: store.directory),
    else (``create``) a new one under the key's own id, or the alias made meanwhile.  A memory another
    machine made (a database store has its key record) gets its folder here.  ``NoMemory`` otherwise.

    The alias is made by a read-only open too: it changes nothing of the memory, and the sooner a memory
    made under a folder's path is found by the folder's identity, the sooner another machine finds it."""
    durable.guard_root(root)
    making = create and not readonly
    directory = open_directory(settings, root)
    try:
        if key is None:
            mid = check_memory_id(memory_id)
        elif (found := find(directory, key)) is not None:
            _adopt(directory, key, found, root / "memories" / found.memory_id / "key.json")
            mid = found.memory_id
        elif making:
            mid = directory.claim(key, keyfile.record(key, settings.granularity, agent_name, clock))
        else:
            mid = key.memory_id
        folder = root / "memories" / mid
        durable.refuse_linked_subfolders(folder)  # before anything is read or made through one
        key_path = folder / "key.json"
        if not key_path.exists():
            record = directory.key_record(mid)
            if record is None:
                if not making or key is None or mid != key.memory_id:
                    raise NoMemory(f"no memory {mid} under {root / 'memories'}; list them with `endless memories`")
                record = keyfile.record(key, settings.granularity, agent_name, clock)
            keyfile.create(key_path, record)
    finally:
        directory.close()
    return folder


def _adopt(directory: Directory, key: Key, found: Found, key_path: Path) -> None:
    """``adopt``, never failing the open: an alias that cannot be written now is written by a later open."""
    if found.name == key.project:
        return
    try:
        record = keyfile.read(key_path, found.memory_id) if key_path.exists() else None
        adopt(directory, key, found, record)
    except (OSError, MemoryUseError) as exc:
        durable.log("directory", f"memory {found.memory_id} could not be given the alias {key.project!r} now "
                                 f"({exc}); a later open tries again")
