"""``endless hermes install|uninstall``: switch Endless on or off in a Hermes home.

Install edits ``<home>/config.yaml``: it adds the plugin to
``plugins.enabled``, selects its context engine (``context.engine``), turns
off the background memory and skill review forks (they reuse the parent's
session id and would look like turns of the chat) and asks Hermes to compact
its own transcript in place (the session id stays).  Every other setting is
kept.  What it changed, and the file as it was, are remembered in
``<home>/endless-install.json``; uninstall puts back exactly that: the old
bytes when nobody touched the file since, else each changed key's old value
(a key the person changed since is left alone, and said so).  Uninstall also
makes each session transcript Endless compacted in ``state.db`` whole again
(``transcripts.py``), so ``hermes --resume`` sees every earlier message.

Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from endless.core.store import durable
from endless.core.words import count
from endless.faces.kit.hermes_files import PLUGIN_NAME, STATE_FILE, hermes_home

ENGINE_NAME = "endless"
ABSENT = {"absent": True}
# What a Hermes home holds once Hermes has run there (``hermes_cli.config.ensure_hermes_home`` makes the
# folders and SOUL.md; the session store and the settings follow), or once Endless was installed in it.
HOME_MARKS = ("config.yaml", "state.db", "SOUL.md", "sessions", STATE_FILE)

# (key path, value) pairs install sets; plugins.enabled is handled as a list.
SETTINGS: list[tuple[tuple[str, ...], Any]] = [
    (("context", "engine"), ENGINE_NAME),
    (("memory", "nudge_interval"), 0),
    (("skills", "creation_nudge_interval"), 0),
    (("compression", "in_place"), True),
]


class InstallError(RuntimeError):
    """The Hermes home cannot be changed as asked; the message says why and what to do."""


def is_hermes_home(home: Path) -> bool:
    """Whether ``home`` is a folder Hermes has used (or Endless was installed in), not just any folder."""
    return home.is_dir() and any((home / mark).exists() for mark in HOME_MARKS)


def _yaml():
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - PyYAML is a dependency
        raise InstallError("PyYAML is needed to edit Hermes's config.yaml: pip install pyyaml") from exc
    return yaml


def _load(data: bytes, path: Path) -> dict:
    if not data.strip():
        return {}
    try:
        value = _yaml().safe_load(data.decode("utf-8"))
    except Exception as exc:
        raise InstallError(f"{path} is not valid YAML ({exc}); fix it (or move it away) and try again") from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InstallError(f"{path} holds a {type(value).__name__}, not a mapping of settings; fix it first")
    return value


def _dump(config: dict) -> bytes:
    return _yaml().safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False).encode()


def _get(config: dict, path: tuple[str, ...]) -> Any:
    node: Any = config
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def _set(config: dict, path: tuple[str, ...], value: Any) -> None:
    node = config
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


def _delete(config: dict, path: tuple[str, ...]) -> None:
    """Remove a key, and the mappings it leaves empty that did not exist before."""
    chain = [config]
    for part in path[:-1]:
        nxt = chain[-1].get(part)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(path[-1], None)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install(home: Path) -> list[str]:
    """Enable Endless in ``home``; returns what changed (empty when it already was)."""
    config_path = home / "config.yaml"
    state_path = home / STATE_FILE
    original = config_path.read_bytes() if config_path.exists() else None
    config = _load(original or b"", config_path)
    state = _read_state(state_path)
    changes: list[dict] = list(state.get("changes", [])) if state else []
    changed_paths = {tuple(c["path"]) for c in changes}
    said: list[str] = []
    for path, value in SETTINGS:
        before = _get(config, path)
        if before == value:
            continue
        if path not in changed_paths:
            changes.append({"path": list(path), "before": before, "after": value})
        _set(config, path, value)
        said.append(f"{'.'.join(path)}: {_show(before)} -> {value!r}")
    enabled = _get(config, ("plugins", "enabled"))
    if enabled is ABSENT or not isinstance(enabled, list):
        enabled_list: list = []
    else:
        enabled_list = list(enabled)
    if PLUGIN_NAME not in enabled_list:
        if not any(c.get("enabled_added") for c in changes):
            changes.append({"path": ["plugins", "enabled"], "before": enabled,
                            "enabled_added": PLUGIN_NAME})
        _set(config, ("plugins", "enabled"), enabled_list + [PLUGIN_NAME])
        said.append(f"plugins.enabled: added {PLUGIN_NAME!r}")
    if not said:
        return []
    new = _dump(config)
    if state:  # installed before (then partly undone by hand): keep the first original
        keep_original, existed = state.get("original"), state.get("existed", False)
    else:
        keep_original = base64.b64encode(original).decode() if original is not None else None
        existed = original is not None
    durable.make_dir(home)
    durable.write_json(state_path, {"format": 1, "existed": existed, "original": keep_original,
                                    "written": _sha(new), "changes": changes})
    durable.replace_file(config_path, new)
    return said


def uninstall(home: Path) -> list[str]:
    """Undo what :func:`install` changed in ``home``; returns what was done."""
    config_path = home / "config.yaml"
    state_path = home / STATE_FILE
    state = _read_state(state_path)
    if not state:
        raise InstallError(f"Endless was not installed in {home} by `endless hermes install` "
                           f"(no {state_path.name}); nothing to undo")
    said = _restore_transcripts(home)  # first: should it fail, nothing is undone yet and a retry does all
    current = config_path.read_bytes() if config_path.exists() else None
    if current is not None and _sha(current) == state.get("written"):
        # Nobody touched the file since: put back the very bytes.
        if state.get("existed"):
            durable.replace_file(config_path, base64.b64decode(state["original"]))
            said.append(f"restored {config_path} as it was before install")
        else:
            config_path.unlink()
            durable.fsync_dir(home)
            said.append(f"removed {config_path} (install had created it)")
    else:
        config = _load(current or b"", config_path)
        for change in reversed(state.get("changes", [])):
            path = tuple(change["path"])
            if "enabled_added" in change:
                enabled = _get(config, path)
                if isinstance(enabled, list) and change["enabled_added"] in enabled:
                    enabled = [p for p in enabled if p != change["enabled_added"]]
                    if change["before"] == ABSENT and not enabled:
                        _delete(config, path)
                    else:
                        _set(config, path, enabled)
                    said.append(f"plugins.enabled: removed {change['enabled_added']!r}")
                continue
            now = _get(config, path)
            if now != change["after"]:
                said.append(f"{'.'.join(path)}: left at {_show(now)} (changed since install)")
                continue
            if change["before"] == ABSENT:
                _delete(config, path)
            else:
                _set(config, path, change["before"])
            said.append(f"{'.'.join(path)}: back to {_show(change['before'])}")
        _prune_empty(config, [tuple(c["path"][:-1]) for c in state.get("changes", [])])
        durable.replace_file(config_path, _dump(config))
    state_path.unlink()
    durable.fsync_dir(home)
    return said


def _restore_transcripts(home: Path) -> list[str]:
    """Hermes's transcripts Endless compacted, whole again in ``state.db`` (see ``transcripts.py``)."""
    import sqlite3

    from endless.faces.hermes.transcripts import restore

    try:
        done = restore(home)
    except sqlite3.Error as exc:
        raise InstallError(f"could not put back the chats Endless shortened in {home / 'state.db'} ({exc}); "
                           "close every Hermes using this home and run uninstall again") from exc
    return [f"session {r.session}: {count(r.put_back, 'earlier message')} back in Hermes's transcript "
            f"({r.messages} in all; `hermes --resume {r.session}` sees the whole chat)" for r in done]


def _prune_empty(config: dict, parents: list[tuple[str, ...]]) -> None:
    for parent in parents:
        if parent and _get(config, parent) == {}:
            _delete(config, parent)


def _show(value: Any) -> str:
    return "(absent)" if value == ABSENT else repr(value)


def _read_state(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InstallError(f"{path} is damaged ({exc}); restore config.yaml by hand and delete it") from exc
    return value if isinstance(value, dict) else None


# -- the command line ------------------------------------------------------------------------


def add_hermes_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``hermes install|uninstall`` to the ``endless`` command's subparsers."""
    parser = sub.add_parser("hermes", help="switch Endless on or off in a Hermes Agent home",
                            epilog="example:\n  endless hermes install --home ~/.hermes/profiles/work",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="hermes_command", required=True)
    for name, helptext, example in (
            ("install", "enable the Endless plugin in a Hermes home", "endless hermes install --home ~/.hermes"),
            ("uninstall", "undo exactly what `endless hermes install` changed", "endless hermes uninstall")):
        command = commands.add_parser(name, help=helptext, epilog=f"example:\n  {example}",
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_argument("--home", metavar="DIR", help="the Hermes home (default: $HERMES_HOME, else ~/.hermes)")
        if name == "install":
            command.add_argument("--create", action="store_true",
                                 help="install into DIR even if Hermes has not used it yet (making it if missing)")
        command.set_defaults(run=_run, action=name)


def _run(args: argparse.Namespace) -> int:
    home = hermes_home(args.home)
    if args.action == "install" and home.exists() and not home.is_dir():
        print(f"[endless.hermes] {home} is not a folder; check --home (or $HERMES_HOME)", file=sys.stderr)
        return 2
    if args.action == "install" and not args.create and not is_hermes_home(home):
        what = "does not exist" if not home.exists() else "is not a Hermes home (no config.yaml, state.db or sessions/)"
        print(f"[endless.hermes] {home} {what}; check --home (or $HERMES_HOME), run Hermes there once, "
              "or add --create to install into it anyway", file=sys.stderr)
        return 2
    try:
        said = install(home) if args.action == "install" else uninstall(home)
    except InstallError as exc:
        print(f"[endless.hermes] {exc}", file=sys.stderr)
        return 1
    if args.action == "install" and not said:
        print(f"[endless.hermes] Endless is already enabled in {home}", file=sys.stderr)
    for line in said:
        print(f"[endless.hermes] {line}", file=sys.stderr)
    return 0
