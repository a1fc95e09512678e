"""What every face knows of Hermes Agent's own files: where its home is and what Endless leaves there.

The Hermes plugin, the CLI's ``endless forget --hermes`` and the History
page's forget all reach Hermes's session store; they share these names so
that no face imports another.
"""

from __future__ import annotations

import os
from pathlib import Path

PLUGIN_NAME = "endless"  # the name Hermes's config.yaml lists under plugins.enabled
STATE_FILE = "endless-install.json"  # what `endless hermes install` changed, kept for uninstall
BUSY_TIMEOUT = 30.0  # seconds to wait for a running Hermes's write to its state.db to finish


def hermes_home(given: str | None = None, environ: dict | None = None) -> Path:
    """``--home``, else ``$HERMES_HOME``, else ``~/.hermes`` (Hermes's own rule)."""
    environ = os.environ if environ is None else environ
    if given:
        return Path(given).expanduser()
    if environ.get("HERMES_HOME"):
        return Path(environ["HERMES_HOME"]).expanduser()
    return Path.home() / ".hermes"
