"""``endless claude install|uninstall|status``: Endless's hooks and MCP server in Claude Code's own files.

Project scope (the default) writes the hooks into the folder's
``.claude/settings.local.json`` and the server into this folder's entry of
``~/.claude.json`` (what ``claude mcp add --scope local`` writes): both are the
person's own, never committed, which suits commands naming this machine's
interpreter (a server in a shared ``.mcp.json`` also waits for an approval that
headless runs never give).  User scope writes ``~/.claude/settings.json`` and the
user's servers in ``~/.claude.json``.  Every command names this interpreter (``python -m
endless``), so no PATH is needed, and carries ``ENDLESS_HOME`` and
``ENDLESS_CONFIG`` when they were set at install, so the hooks reach the same memories.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import orjson

from endless.faces.agents import edits

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
SERVER = "endless"  # the MCP server's name in Claude Code
ALLOW = f"mcp__{SERVER}"  # the permission rule for every tool of that server (they only read the memory)
MARK = "-m endless hook "  # how Endless's own hook commands are known again (Claude Code's and Codex's)
HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook (ours return in under one)
CARRIED_ENV = ("ENDLESS_HOME", "ENDLESS_CONFIG")


class SetupError(Exception):
    """A settings file that cannot be read or changed; the message says which and what to do."""


def _prefix() -> str:
    carried = [f"{name}={shlex.quote(os.environ[name])}" for name in CARRIED_ENV if os.environ.get(name)]
    return (f"env {' '.join(carried)} " if carried else "") + f"{shlex.quote(sys.executable)} "


def hook_command(event: str, agent: str = "claude") -> str:
    return f"{_prefix()}-m endless hook {agent} {event}"


def server_entry(workspace: Path | None) -> dict[str, Any]:
    args = ["-m", "endless", "mcp"] + (["--workspace", str(workspace)] if workspace is not None else [])
    entry: dict[str, Any] = {"type": "stdio", "command": sys.executable, "args": args}
    env = {name: os.environ[name] for name in CARRIED_ENV if os.environ.get(name)}
    if env:
        entry["env"] = env
    return entry


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def files_for(scope: str, workspace: Path) -> tuple[Path, Path]:
    """(the settings file for the hooks, the file for the MCP server) of a scope."""
    if scope == "user":
        return _home() / ".claude" / "settings.json", _home() / ".claude.json"
    return workspace / ".claude" / "settings.local.json", _home() / ".claude.json"


def load_json(path: Path) -> dict[str, Any]:
    data = edits.read_bytes(path)
    if data is None or not data.strip():
        return {}
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SetupError(f"{path} is not valid JSON ({exc}); fix it (or move it away) and run the command again; "
                         "nothing was changed") from None
    if not isinstance(value, dict):
        raise SetupError(f"{path} does not hold a JSON object; fix it and run the command again; nothing was changed")
    return value


def json_object(data: bytes) -> dict[str, Any] | None:
    """A file's bytes as the JSON object they hold, or None (what uninstall finds changed may be anything)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def dump_json(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARK in str(hook.get("command", ""))


def with_hooks(settings: dict[str, Any], agent: str = "claude", events: tuple[str, ...] = EVENTS,
               timeouts: dict[str, int] | None = None) -> dict[str, Any]:
    """The settings with Endless's hook on each event (an older one of ours replaced): Claude Code's
    settings and Codex's ``hooks.json`` share this shape (event, matcher groups, command hooks)."""
    out = without_ours(settings)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SetupError("the settings' \"hooks\" is not an object; fix it and run the command again")
    for event in events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SetupError(f"the settings' hooks.{event} is not a list; fix it and run the command again")
        timeout = (timeouts or {}).get(event, HOOK_TIMEOUT)
        groups.append({"hooks": [{"type": "command", "command": hook_command(event, agent), "timeout": timeout}]})
    return out


def with_permission(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings allowing Endless's MCP tools: they only read, and without the rule Claude Code asks
    before each call (and a headless ``claude -p`` refuses it)."""
    out = orjson.loads(orjson.dumps(settings))
    permissions = out.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise SetupError("the settings' \"permissions\" is not an object; fix it and run the command again")
    allow = permissions.setdefault("allow", [])
    if not isinstance(allow, list):
        raise SetupError("the settings' permissions.allow is not a list; fix it and run the command again")
    if ALLOW not in allow:
        allow.append(ALLOW)
    return out


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with none of Endless's entries (what uninstall leaves of a file edited since)."""
    out = orjson.loads(orjson.dumps(settings))
    permissions = out.get("permissions")
    if isinstance(permissions, dict) and isinstance(permissions.get("allow"), list) and ALLOW in permissions["allow"]:
        permissions["allow"] = [rule for rule in permissions["allow"] if rule != ALLOW]
        if not permissions["allow"]:
            del permissions["allow"]
        if not permissions:
            del out["permissions"]
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    inner = [h for h in group["hooks"] if not _ours(h)]
                    if not inner and group["hooks"]:
                        continue
                    group = {**group, "hooks": inner}
                kept.append(group)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
        if not hooks:
            del out["hooks"]
    return out


def _servers_of(config: dict[str, Any], project: Path | None, make: bool) -> dict[str, Any] | None:
    """The ``mcpServers`` object of the user (``project`` None) or of one project's entry."""
    holder: Any = config
    if project is not None:
        projects = config.setdefault("projects", {}) if make else config.get("projects")
        if not isinstance(projects, dict):
            if make:
                raise SetupError("its \"projects\" is not an object; fix it and run the command again")
            return None
        holder = projects.setdefault(str(project), {}) if make else projects.get(str(project))
        if not isinstance(holder, dict):
            return None
    servers = holder.setdefault("mcpServers", {}) if make else holder.get("mcpServers")
    if not isinstance(servers, dict):
        if make:
            raise SetupError("its \"mcpServers\" is not an object; fix it and run the command again")
        return None
    return servers


def with_server(config: dict[str, Any], project: Path | None) -> dict[str, Any]:
    out = orjson.loads(orjson.dumps(config))
    servers = _servers_of(out, project, make=True)
    assert servers is not None
    existing = servers.get(SERVER)
    if existing is not None and not is_our_server(existing):
        raise SetupError(f"an MCP server named {SERVER!r} that is not Endless's is configured there; "
                         "rename it and run the command again; nothing was changed")
    servers[SERVER] = server_entry(project)
    return out


def is_our_server(entry: Any) -> bool:
    args = entry.get("args") if isinstance(entry, dict) else None
    return isinstance(args, list) and args[:3] == ["-m", "endless", "mcp"]


def without_server(config: dict[str, Any], project: Path | None) -> dict[str, Any] | None:
    servers = _servers_of(config, project, make=False)
    if servers is None or not is_our_server(servers.get(SERVER)):
        return None
    out = orjson.loads(orjson.dumps(config))
    servers = _servers_of(out, project, make=False)
    assert servers is not None
    del servers[SERVER]
    return out


def status_of_hooks(settings: dict[str, Any], events: tuple[str, ...]) -> list[str]:
    """The events among ``events`` that carry one of Endless's hooks."""
    hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
    return sorted(event for event, groups in hooks.items() if event in events and isinstance(groups, list) and any(
        isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(_ours(h) for h in g["hooks"])
        for g in groups))


def _allowed(settings: dict[str, Any]) -> bool:
    permissions = settings.get("permissions")
    allow = permissions.get("allow") if isinstance(permissions, dict) else None
    return isinstance(allow, list) and ALLOW in allow


def install_name(scope: str, workspace: Path) -> str:
    return f"claude:{scope}" + (f":{workspace}" if scope == "project" else "")


EXCLUDE_MARK = "# endless claude install: this file names this machine's Python; never commit it"


def _git_exclude(settings_path: Path, workspace: Path) -> tuple[Path, str] | None:
    """The repository's own exclude file and the line keeping ``settings_path`` out of git, when the folder
    is in a repository that does not ignore the file yet (None: nothing to add)."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(workspace), *args], capture_output=True, text=True, timeout=10,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None

    found = git("rev-parse", "--path-format=absolute", "--show-toplevel", "--git-path", "info/exclude")
    if found is None or found.returncode != 0 or len(found.stdout.splitlines()) != 2:
        return None
    top, exclude = found.stdout.splitlines()
    try:
        relative = settings_path.resolve().relative_to(Path(top).resolve())
    except ValueError:
        return None
    ignored = git("check-ignore", "-q", "--no-index", "--", str(relative))
    if ignored is None or ignored.returncode == 0:
        return None
    return Path(exclude), f"/{relative.as_posix()}"


def with_exclude(data: bytes, line: str) -> bytes:
    text = data.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        text += "\n"
    return (text + f"{EXCLUDE_MARK}\n{line}\n").encode()


def without_exclude(data: bytes) -> bytes | None:
    """The exclude file without Endless's two lines (None: they are not there)."""
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    for k, line in enumerate(lines):
        if line.rstrip("\n") == EXCLUDE_MARK:
            return "".join(lines[:k] + lines[k + 2:]).encode()
    return None


def install(root: Path, scope: str, workspace: Path) -> list[str]:
    """Write the hooks and the server (and, in a repository, keep the folder's settings file out of git);
    returns the files changed. Every file is read (and checked) before any is written."""
    settings_path, servers_path = files_for(scope, workspace)
    project = workspace if scope == "project" else None
    settings = with_permission(with_hooks(load_json(settings_path)))
    servers = with_server(load_json(servers_path), project)
    name = install_name(scope, workspace)
    changes = [(settings_path, dump_json(settings)), (servers_path, dump_json(servers))]
    exclude = _git_exclude(settings_path, workspace) if scope == "project" else None
    if exclude is not None:
        changes.append((exclude[0], with_exclude(edits.read_bytes(exclude[0]) or b"", exclude[1])))
    for path, data in changes:
        if edits.read_bytes(path) != data:
            edits.write(root, name, path, data)
    return [str(path) for path, _ in changes]


def uninstall(root: Path, scope: str, workspace: Path) -> list[str]:
    name = install_name(scope, workspace)
    if not edits.installed(root, name):
        return []

    def strip(path: Path, data: bytes) -> bytes | None:
        if path.name == "exclude":
            return without_exclude(data)
        value = json_object(data)
        if value is None:
            return None
        if path.name.startswith("settings"):
            kept = without_ours(value)
            return None if kept == value else dump_json(kept)
        kept_servers = without_server(value, workspace if scope == "project" else None)
        return None if kept_servers is None else dump_json(kept_servers)

    return edits.undo(root, name, strip)


def status(root: Path, scope: str, workspace: Path) -> dict[str, Any]:
    """What is installed: the hooks found in the settings file, the server in its file."""
    settings_path, servers_path = files_for(scope, workspace)
    try:
        settings, servers = load_json(settings_path), load_json(servers_path)
    except SetupError as exc:
        return {"scope": scope, "error": str(exc)}
    found = status_of_hooks(settings, EVENTS)
    found_servers = _servers_of(servers, workspace if scope == "project" else None, make=False) or {}
    server = found_servers.get(SERVER)
    return {"scope": scope, "settings": str(settings_path), "hooks": found, "missingHooks":
            [e for e in EVENTS if e not in found], "toolsAllowed": _allowed(settings), "mcpFile": str(servers_path),
            "mcpServer": is_our_server(server),
            "recorded": bool(edits.installed(root, install_name(scope, workspace)))}
