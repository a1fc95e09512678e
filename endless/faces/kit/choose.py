"""Which memory a command is about: ``--memory``, else ``--workspace``, else the current folder.

Shared by the command-line faces of this module's siblings (``mcp``, ``import``,
``chat``, ``doctor``) so every command picks a memory the same way and says the
same thing when there is none.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from endless.core.store import InvalidKey, Key, check_memory_id, workspace_key
from endless.core.memory import Memory, MemoryUseError, NoMemory
from endless.core.settings import Settings, load_settings

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and something went wrong (or doctor found an error)
EXIT_USAGE = 2  # bad arguments, no such memory, unusable settings: nothing was done


class ChoiceError(RuntimeError):
    """No memory matches what the command was given; the message says what to do."""


_HEX_ID = re.compile(r"[0-9a-fA-F]{16}")


def memory_id_word(text: str) -> str:
    """``--memory``'s value as a memory id: 16 hex digits in any case (folders are named in lowercase)."""
    word = text.strip()
    if not _HEX_ID.fullmatch(word):
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory id: give the 16 hex digits "
                                         "`endless memories` prints")
    return word.lower()


def add_memory_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--memory", metavar="ID", type=memory_id_word,
                       help="a memory id (16 hex digits; `endless memories` lists them)")
    group.add_argument("--workspace", metavar="DIR",
                       help="the workspace folder whose memory to use (default: the current folder)")


def workspace_of(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "workspace", None) or ".").resolve()


def key_of(args: argparse.Namespace, profile: str | None = None) -> Key:
    return workspace_key(profile, workspace_of(args))


def folder_memory_id(settings: Settings, workspace: Path, profile: str | None = None,
                     root: Path | None = None) -> str:
    """The id of ``workspace``'s memory: the one found under any of its names (its path from before
    identities, its identity, an alias of it), else the id a memory made there would get."""
    from endless.core.store import find_memory

    key = workspace_key(profile, workspace)
    found = find_memory(key, settings, root)
    return found.memory_id if found is not None else key.memory_id


def choose(args: argparse.Namespace, *, readonly: bool, create: bool = False,
           settings: Settings | None = None, root: Path | None = None, **open_kwargs) -> Memory:
    """Open the memory ``args`` names; :class:`ChoiceError` when there is none (or it cannot be used)."""
    settings = settings or load_settings()
    try:
        if getattr(args, "memory", None):
            return Memory.open(memory_id=check_memory_id(args.memory), settings=settings, root=root,
                               readonly=readonly, create=False, **open_kwargs)
        key = key_of(args)
        return Memory.open(key, settings=settings, root=root, readonly=readonly,
                           create=create and not readonly, **open_kwargs)
    except InvalidKey as exc:
        raise ChoiceError(f"{exc}; `endless memories` lists the memories there are") from None
    except NoMemory as exc:
        if getattr(args, "memory", None):
            raise ChoiceError(str(exc)) from None
        raise ChoiceError(f"the workspace {workspace_of(args)} has no memory yet under "
                          f"{settings.memory_root()}; chat there first, or pick one with --memory "
                          "(`endless memories` lists them)") from None
    except MemoryUseError as exc:
        raise ChoiceError(str(exc)) from None
