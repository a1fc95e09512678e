"""The Endless of before folders' identities, run from this repository's history (its keys are paths).

``old_code`` lays out commit :data:`PATH_KEYS_COMMIT` as an importable ``endless``
package (its ``writer/`` and ``prompts/`` folders placed as the installed package
has them); a child Python with it first on ``PYTHONPATH`` runs that code, with
this environment's libraries.  Without the repository's history the caller skips.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATH_KEYS_COMMIT = "7fc70e4"  # the last commit whose workspace keys were real paths

# A turn committed into the workspace's memory, as a chat there did (argv: workspace, words...).
COMMIT_TURN = """
import sys, time
from endless.core.memory import Memory
from endless.core.settings import load_settings
from endless.core.store import Message
from endless.core.store.keys import workspace_key
with Memory.open(workspace_key(None, sys.argv[1]), settings=load_settings()) as memory:
    for words in sys.argv[2:]:
        memory.commit_turn("old-chat", "Before identities", [Message("user", words, time.time()),
                                                              Message("reply", "noted: " + words, time.time())])
    print(memory.memory_id)
"""


def old_code(folder: Path) -> Path | None:
    """The old code laid out under ``folder`` (None: this checkout has no history to take it from)."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", PATH_KEYS_COMMIT, "endless", "writer", "prompts"],
                             capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    (folder / "writer").rename(folder / "endless" / "writer")
    (folder / "prompts").rename(folder / "endless" / "prompts")
    return folder


def run_old(code: Path, env: dict[str, str], *args: str) -> str:
    """Run :data:`COMMIT_TURN` with the old code; returns what it printed (the memory id)."""
    done = subprocess.run([sys.executable, "-c", COMMIT_TURN, *args], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(code)}, timeout=120, cwd=code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
