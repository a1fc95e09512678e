"""How tests start the ``endless`` command line of the Python running them."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def endless_command() -> list[str]:
    """The installed console script beside this interpreter, else the CLI module through it."""
    script = Path(sys.executable).parent / "endless"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from endless.cli import main; sys.exit(main(sys.argv[1:]))"]


def fresh_home(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """``(ENDLESS_HOME, a workspace, the environment)`` for CLI runs as from a fresh home: no settings
    file, no writer route, times in UTC."""
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    (tmp_path / "xdg").mkdir()
    env = {**os.environ, "ENDLESS_HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TZ": "UTC"}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    return home, workspace, env
