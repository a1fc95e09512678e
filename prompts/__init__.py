"""Every text a model reads, kept as plain files beside this module."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import orjson


@lru_cache(maxsize=None)
def text(name: str) -> str:
    """The prompt file ``name`` (relative to this package), exactly as stored."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def data(name: str) -> object:
    return orjson.loads(text(name))


def names(folder: str) -> list[str]:
    """The text files of ``folder`` (``"writer"``), as names :func:`text` reads, sorted."""
    found = resources.files(__name__).joinpath(folder).iterdir()
    return sorted(f"{folder}/{entry.name}" for entry in found if entry.name.endswith(".txt"))
