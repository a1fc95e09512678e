"""Which memory a chat belongs to (DESIGN §2.1).

A memory is named by the first 16 hex digits of sha256(agent + "\\n" + project).
CLI chats use their workspace's identity (:mod:`endless.core.store.folder_keys`:
an id file, else the repository's remote, else the real path, so a symlink and its
target share one memory and a checkout at another path on another machine finds
it); gateway chats use ``platform:conversation-id``, so two people's chats never meet.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

MEMORY_ID = re.compile(r"^[0-9a-f]{16}$")
DEFAULT_PROFILE_AGENT = "endless"
IDENTITY_KINDS = ("repo", "id")  # the prefixes of a folder identity's project (endless.core.store.folder_keys)


class InvalidKey(ValueError):
    """A key or memory id that cannot name a memory."""


@dataclass(frozen=True)
class Key:
    agent: str
    project: str
    # Every project this key's memory may already be under, in the order they are looked for (a
    # workspace's path before its identity: see FolderIdentity.names); empty: only ``project``.
    names: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def memory_id(self) -> str:
        return memory_id(self.agent, self.project)

    @property
    def lookups(self) -> tuple[str, ...]:
        return self.names or (self.project,)


def memory_id(agent: str, project: str) -> str:
    if not agent or not project:
        raise InvalidKey("a memory key needs a non-empty agent and project")
    if "\n" in agent:  # the hash joins agent and project with a newline
        raise InvalidKey(f"an agent name cannot contain a line break: {agent!r}")
    return hashlib.sha256(f"{agent}\n{project}".encode("utf-8")).hexdigest()[:16]


def check_memory_id(value: object) -> str:
    """Accept only 16 lowercase hex digits, never a path."""
    if not isinstance(value, str) or not MEMORY_ID.fullmatch(value):
        raise InvalidKey(f"{value!r} is not a memory id (16 hex digits, lowercase)")
    return value


def agent_for_profile(profile: str | None) -> str:
    """Hermes's default profile maps to ``endless``; a named profile keeps its name."""
    if not profile or profile == "default":
        return DEFAULT_PROFILE_AGENT
    return profile


def workspace_key(profile: str | None, workspace: str | os.PathLike[str]) -> Key:
    """The key of a workspace folder's memory: its identity, with its path (the key before identities)
    among the names it is looked for by; a bad ``.endless-id`` raises ``IdFileError``."""
    from endless.core.store.folder_keys import IdFileError, folder_identity

    try:
        identity = folder_identity(workspace)
    except IdFileError as exc:
        raise InvalidKey(str(exc)) from None
    return Key(agent_for_profile(profile), identity.project, identity.names)


def path_key(profile: str | None, workspace: str | os.PathLike[str]) -> Key:
    """The key a workspace had before identities: its real path (a memory made then is found by it)."""
    return Key(agent_for_profile(profile), str(Path(workspace).resolve(strict=False)))


def gateway_key(profile: str | None, platform: str, conversation_id: str) -> Key:
    if not platform or not conversation_id:
        raise InvalidKey("a gateway chat needs its platform and conversation id")
    if ":" in platform or platform.startswith("/"):
        # Else "a:b" + "c" and "a" + "b:c" would share a memory, or a platform could name a folder.
        raise InvalidKey(f"a gateway platform name cannot contain ':' or start with '/': {platform!r}")
    if platform in IDENTITY_KINDS:  # "repo:…" and "id:…" name folders' identities
        raise InvalidKey(f"a gateway platform cannot be named {platform!r}: that name is kept for folders' keys")
    return Key(agent_for_profile(profile), f"{platform}:{conversation_id}")


def session_file_name(session_id: str) -> str:
    """A file name for a session id that may hold any characters."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:24]
