"""Which of a source's sessions belong to a memory's folder (an import of Hermes or Codex history is scoped).

A session names the folder it ran in (Hermes's ``sessions.cwd``, a Codex
rollout's ``cwd``).  It belongs to the memory when it ran in the workspace the
import was given, or in any folder whose identity names the same memory: a clone
of the same repository at another path, on this machine or the one the history
was copied from (:mod:`endless.core.store.folder_keys`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Scope:
    """The memory's workspace folder (None: chosen by ``--memory``) and the projects that name it."""

    folder: str | None
    projects: frozenset[str]
    _seen: dict[str, bool] = field(default_factory=dict, repr=False)

    @property
    def shown(self) -> str:
        """The folder as an error names it."""
        if self.folder is not None:
            return self.folder
        return next(iter(sorted(self.projects)), "?")

    def holds(self, cwd: str) -> bool:
        """Whether a session run in ``cwd`` belongs to the memory (each folder judged once)."""
        if cwd not in self._seen:
            self._seen[cwd] = self._judge(cwd)
        return self._seen[cwd]

    def _judge(self, cwd: str) -> bool:
        from endless.core.store import IdFileError, folder_identity

        real = str(Path(cwd).resolve(strict=False))
        if real == self.folder or real in self.projects:
            return True
        try:
            identity = folder_identity(real)
        except (IdFileError, OSError):
            return False
        return identity.project in self.projects


def scope_of(memory_key_project: str | None, workspace: Path | None, workspace_project: str | None) -> Scope:
    """The scope of an import into the memory under ``memory_key_project`` (None: not made yet), chosen
    by ``workspace`` (None: by ``--memory``) whose key's project is ``workspace_project``."""
    projects = {p for p in (memory_key_project, workspace_project) if p}
    folder = str(workspace.resolve(strict=False)) if workspace is not None else None
    if folder is None and memory_key_project and memory_key_project.startswith("/"):
        folder = memory_key_project  # a memory keyed by its path: that folder
    return Scope(folder, frozenset(projects))
