"""How tests start the ``endless`` command line of the Python running them."""

from __future__ import annotations

import sys
from pathlib import Path


def endless_command() -> list[str]:
    """The installed console script beside this interpreter, else the CLI module through it."""
    script = Path(sys.executable).parent / "endless"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from endless.cli import main; sys.exit(main(sys.argv[1:]))"]
