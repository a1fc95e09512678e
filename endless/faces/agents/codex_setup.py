"""``endless codex install|uninstall|status``: Endless's MCP server, hooks and notify program in Codex.

Codex keeps its settings in ``$CODEX_HOME`` (``~/.codex``): ``config.toml``
gets the MCP server (``[mcp_servers.endless]``), a startup grace for optional
MCP servers (``mcp_optional_startup_grace_ms``: without it Codex 0.171 sends a
session's first request before the server has listed its tools) and, when no
other is set, the ``notify`` program, which Codex runs after every turn even
where hooks are off or not yet trusted; ``hooks.json`` gets the hooks
(SessionStart hands over, the others capture; the ``hooks`` feature is on by
default in 0.171, so ``[features]`` is left alone).  Codex reads these for every
folder, so there is one scope: the user's; the hooks find each session's folder
from its own ``cwd``, and Codex starts the MCP server in that folder.

TOML is edited as text, each line Endless adds ending with :data:`LINE_MARK`
so uninstall can find them again, and the result is parsed (``tomllib``)
before anything is written.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import orjson

from endless.faces.agents import claude_setup, edits
from endless.core.settings import CODEX_MCP_GRACE_MS
from endless.faces.agents.claude_setup import CARRIED_ENV, SetupError

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd", "Interrupt")
# Codex 0.171 gives a SessionEnd or Interrupt hook 3 s at most (and warns on every run about a longer one).
TIMEOUTS = {"SessionEnd": 3, "Interrupt": 3}
SERVER = "endless"
LINE_MARK = "  # added by endless codex install"
NAME = "codex:user"
GRACE = "mcp_optional_startup_grace_ms"
HOOK_FEATURES = ("hooks", "codex_hooks")  # the hooks feature's name in 0.171, and before it


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path(os.environ.get("HOME") or Path.home()) / ".codex")


def _toml(value: Any) -> str:
    """A TOML value for a string or a list of strings (JSON's escapes are TOML's basic-string escapes)."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return orjson.dumps(str(value)).decode()


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{path} is not valid TOML ({exc}); fix it and run the command again; "
                         "nothing was changed") from None


def with_endless(text: str, path: Path) -> tuple[str, list[str]]:
    """config.toml's text with Endless's entries (those missing), and notes on what was left alone."""
    config = _parse(text, path)
    notes: list[str] = []
    lines = text.splitlines()
    head: list[str] = []
    if "notify" not in config:
        carried = [f"{name}={os.environ[name]}" for name in CARRIED_ENV if os.environ.get(name)]
        command = (["env", *carried] if carried else []) + [sys.executable, "-m", "endless", "hook", "codex", "notify"]
        head.append(f"notify = {_toml(command)}{LINE_MARK}")
    elif not _our_notify(config.get("notify")):
        notes.append("your own notify program stays; Endless captures through the Stop hook instead")
    if GRACE not in config:
        head.append(f"{GRACE} = {CODEX_MCP_GRACE_MS}{LINE_MARK}")
    elif not isinstance(config[GRACE], int) or config[GRACE] < 2000:
        notes.append(f"your {GRACE} = {config[GRACE]!r} stays; below about 2000 a session's first request may "
                     "go out before Endless's tools are listed")
    tail: list[str] = []
    if not hooks_on(config):
        notes.append("hooks are turned off in [features]; left so: the notify program captures, but no session is "
                     "handed over until hooks are on")
    servers = config.get("mcp_servers")
    existing = servers.get(SERVER) if isinstance(servers, dict) else None
    if existing is not None and not claude_setup.is_our_server(existing):
        raise SetupError(f"{path} already has an MCP server named {SERVER!r} that is not Endless's; rename it "
                         "and run the command again; nothing was changed")
    if existing is None:
        tail += ["", f"[mcp_servers.{SERVER}]{LINE_MARK}", f"command = {_toml(sys.executable)}{LINE_MARK}",
                 f"args = {_toml(['-m', 'endless', 'mcp'])}{LINE_MARK}"]
        env = {name: os.environ[name] for name in CARRIED_ENV if os.environ.get(name)}
        if env:
            tail.append(f"[mcp_servers.{SERVER}.env]{LINE_MARK}")
            tail += [f"{name} = {_toml(value)}{LINE_MARK}" for name, value in env.items()]
    out = "\n".join(head + lines + tail) + "\n" if (head or tail or lines) else ""
    _parse(out, path)  # what is written must read back
    return out, notes


def hooks_on(config: dict[str, Any]) -> bool:
    """Whether Codex runs hooks: on unless ``[features]`` turns them off (by either name)."""
    features = config.get("features")
    return not (isinstance(features, dict) and any(features.get(name) is False for name in HOOK_FEATURES))


def _our_notify(value: Any) -> bool:
    return isinstance(value, list) and value[-4:] == ["endless", "hook", "codex", "notify"]


def without_endless(text: str) -> str | None:
    """config.toml's text with every line Endless added taken out (None: it holds none)."""
    lines = text.splitlines()
    kept = [line for line in lines if not line.endswith(LINE_MARK)]
    if len(kept) == len(lines):
        return None
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + "\n" if kept else ""


def files() -> tuple[Path, Path]:
    home = codex_home()
    return home / "config.toml", home / "hooks.json"


def install(root: Path, scope: str, workspace: Path) -> list[str]:
    config_path, hooks_path = files()
    text = (edits.read_bytes(config_path) or b"").decode("utf-8")
    config_text, notes = with_endless(text, config_path)
    hooks = claude_setup.with_hooks(claude_setup.load_json(hooks_path), "codex", EVENTS, TIMEOUTS)
    for path, data in ((config_path, config_text.encode()), (hooks_path, claude_setup.dump_json(hooks))):
        if edits.read_bytes(path) != data:
            edits.write(root, NAME, path, data)
    for note in notes:
        print(f"[endless.codex] {note}", file=sys.stderr)
    return [str(config_path), str(hooks_path)]


def uninstall(root: Path, scope: str, workspace: Path) -> list[str]:
    if not edits.installed(root, NAME):
        return []

    def strip(path: Path, data: bytes) -> bytes | None:
        if path.suffix == ".toml":
            kept = without_endless(data.decode("utf-8", "replace"))
            return None if kept is None else kept.encode()
        value = claude_setup.json_object(data)
        if value is None:
            return None
        kept_hooks = claude_setup.without_ours(value)
        return None if kept_hooks == value else claude_setup.dump_json(kept_hooks)

    return edits.undo(root, NAME, strip)


def status(root: Path, scope: str, workspace: Path) -> dict[str, Any]:
    config_path, hooks_path = files()
    try:
        config = _parse((edits.read_bytes(config_path) or b"").decode("utf-8", "replace"), config_path)
        hooks = claude_setup.load_json(hooks_path)
    except SetupError as exc:
        return {"scope": "user", "error": str(exc)}
    found = claude_setup.status_of_hooks(hooks, EVENTS)
    servers = config.get("mcp_servers") if isinstance(config.get("mcp_servers"), dict) else {}
    return {"scope": "user", "config": str(config_path), "hooksFile": str(hooks_path), "hooks": found,
            "missingHooks": [e for e in EVENTS if e not in found], "hooksFeature": hooks_on(config),
            "mcpGraceMs": config.get(GRACE),
            "notify": _our_notify(config.get("notify")), "mcpServer": claude_setup.is_our_server(servers.get(SERVER)),
            "recorded": bool(edits.installed(root, NAME))}
