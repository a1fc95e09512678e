"""Shared test helpers live beside this file (and the child processes in ``procs/``); every test
folder below, ``e2e`` too, imports them by name."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
for folder in (HERE / "procs", HERE):
    sys.path.insert(0, str(folder))
