"""No folder under the memory root is followed through a symbolic link (issue 33, item 10).

A link planted where Endless keeps a folder (``memories/``, a memory's own
folder, its ``index/``, ``journal/`` or ``pending/``, ``sessions/``) made
import, forget and search read and write wherever it pointed.  Each command
now refuses, naming the link and what to do, and nothing appears in (or
changes under) the folder it points to.  Driven through the CLI as a person
runs it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from commands import endless_command, fresh_home

BOUND = 120


def _run(work: Path, env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*endless_command(), *argv], cwd=work, env=env, capture_output=True, text=True,
                          timeout=BOUND)


def _chat(path: Path, words: str, first: int) -> Path:
    path.write_text("".join(json.dumps({"role": ("user", "assistant")[k % 2], "content": f"{words} {k}",
                                        "at": first + k}) + "\n" for k in range(4)))
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def imported(tmp_path):
    """A memory with one imported chat, made by the CLI: (home, its memory folder, the workspace, env)."""
    home, work, env = fresh_home(tmp_path)
    done = _run(work, env, "import", str(_chat(tmp_path / "first.jsonl", "apricot orchard", 1_760_000_000)),
                "--no-progress")
    assert done.returncode == 0, done.stderr
    (folder,) = (home / "memories").iterdir()
    return home, folder, work, env


# Where each folder lives, from the home and the memory folder.
PLACES = {
    "memories": lambda home, folder: home / "memories",
    "memory": lambda home, folder: folder,
    "index": lambda home, folder: folder / "index",
    "journal": lambda home, folder: folder / "journal",
    "pending": lambda home, folder: folder / "pending",
    "sessions": lambda home, folder: home / "sessions",
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_linked_folder_is_refused_by_every_command_and_nothing_lands_outside(imported, tmp_path, place):
    home, folder, work, env = imported
    linked = PLACES[place](home, folder)
    outside = tmp_path / "outside" / place
    outside.parent.mkdir()
    if linked.exists():
        linked.rename(outside)  # the real folder moved away, a link to it left in its place
    else:
        outside.mkdir()  # a link planted where the folder will be made
    linked.symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    second = _chat(tmp_path / "second.jsonl", "blueberry meadow", 1_760_100_000)
    commands = [("import", str(second), "--no-progress"), ("forget", "0"), ("search", "apricot"), ("view",)]
    if place == "sessions":  # only what notes a chat's session (an import's new turns) opens sessions/
        commands = commands[:1]
    for argv in commands:
        done = _run(work, env, *argv)
        said = f"endless {' '.join(argv)}: rc {done.returncode}\n{done.stderr}"
        assert done.returncode != 0, said
        assert "Traceback" not in done.stderr, said
        assert f"{linked} is a symbolic link where Endless keeps a folder" in done.stderr, said
        assert f"rm {linked}" in done.stderr and "endless doctor" in done.stderr, said
        assert "apricot" not in done.stdout and "blueberry" not in done.stdout, said
        assert _snapshot(outside) == before, f"{said}\nsomething changed in the folder the link points to"
