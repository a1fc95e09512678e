"""Changes to another program's settings files that ``uninstall`` takes back exactly.

Install keeps, per file it changed, the bytes the file had before (or that it
did not exist) and a digest of the bytes it wrote, in ``agents/installs.json``
under the memory root.  Uninstall puts the old bytes back when the file still
holds what install wrote; when the person (or the host) changed the file since,
it takes out only Endless's own entries and leaves everything else as it is.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import orjson

from endless.core.store import durable

INSTALLS = "agents/installs.json"  # under the memory root


@dataclass
class FileEdit:
    path: str
    before: str | None  # the bytes before install, base64; None: there was no such file
    after: str  # sha256 of the bytes install wrote
    made_dirs: list[str] = field(default_factory=list)  # folders install made for it, innermost first


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _records(root: Path) -> dict[str, list[dict]]:
    try:
        raw = orjson.loads(durable.read_all(root / INSTALLS))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _save(root: Path, records: dict[str, list[dict]]) -> None:
    path = root / INSTALLS
    durable.make_dir(path.parent)
    durable.replace_file(path, orjson.dumps(records, option=orjson.OPT_INDENT_2))


def installed(root: Path, name: str) -> list[FileEdit]:
    """The files the install called ``name`` changed (empty: not installed)."""
    return [FileEdit(**item) for item in _records(root).get(name, [])]


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write(root: Path, name: str, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` for the install ``name``, remembering what the file held first."""
    records = _records(root)
    edits = [FileEdit(**item) for item in records.get(name, [])]
    known = next((e for e in edits if e.path == str(path)), None)
    made = []
    if known is None:
        old = read_bytes(path)
        here = path.parent
        while not here.exists():
            made.append(str(here))
            here = here.parent
        known = FileEdit(str(path), None if old is None else base64.b64encode(old).decode(), "", made)
        edits.append(known)
    if made:
        path.parent.mkdir(parents=True, exist_ok=True)
    durable_write(path, data)
    known.after = _digest(data)
    records[name] = [asdict(e) for e in edits]
    _save(root, records)


def undo(root: Path, name: str, strip: Callable[[Path, bytes], bytes | None]) -> list[str]:
    """Take back the install ``name``; returns what was done to each file, in words.

    ``strip(path, data)`` gives a changed file's bytes without Endless's entries (None: none there).
    """
    records = _records(root)
    said = []
    for edit in [FileEdit(**item) for item in records.get(name, [])]:
        path = Path(edit.path)
        now = read_bytes(path)
        if now is None:
            said.append(f"{path}: gone already")
        elif _digest(now) == edit.after:
            if edit.before is None:
                path.unlink()
                for folder in edit.made_dirs:
                    try:
                        os.rmdir(folder)
                    except OSError:
                        break  # not empty: something else lives there now
                said.append(f"{path}: removed (install made it)")
            else:
                durable_write(path, base64.b64decode(edit.before))
                said.append(f"{path}: restored as it was before install")
        else:
            stripped = strip(path, now)
            if stripped is None:
                said.append(f"{path}: changed since install and holds no Endless entry; left as it is")
            else:
                durable_write(path, stripped)
                said.append(f"{path}: changed since install; only Endless's entries taken out")
    records.pop(name, None)
    _save(root, records)
    return said


def durable_write(path: Path, data: bytes) -> None:
    """Replace the file whole (a sibling, fsynced, renamed over it), keeping its permissions."""
    mode = os.stat(path).st_mode & 0o777 if path.exists() else 0o644
    tmp = path.with_name(f".{path.name}.endless-{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
