"""A floor's public surface, loaded on first use (DESIGN §1: a floor's ``__init__`` names what others use).

Each floor's ``__init__`` lists its public names and the module holding each;
this makes the module ``__getattr__`` that imports a name's module only when
the name is first asked for, so a read command still loads only what it uses.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of floor ``package``: ``where`` maps each public name to its module
    (a module names itself); the value found is kept on the package, so it is looked up once."""
    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"{package} has no public name {name!r}")
        value = importlib.import_module(f"{package}.{module}")
        if name != module:
            value = getattr(value, name)
        setattr(sys.modules[package], name, value)
        return value

    return getattr_
