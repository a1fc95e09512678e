"""``endless hermes install|uninstall``: idempotent, keeps every other setting, undoes exactly what it did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from endless.faces.hermes.install import STATE_FILE, InstallError, install, uninstall

CONFIG = b"""# my Hermes settings
model:
  provider: custom
  base_url: http://127.0.0.1:9/v1   # local
  default: sim-model
plugins:
  enabled: [disk-cleanup]
memory:
  nudge_interval: 7
  memory_enabled: true
display: {compact: true}
"""


def test_install_then_uninstall_is_byte_identical(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(CONFIG)
    said = install(tmp_path)
    assert said
    data = yaml.safe_load(config.read_text())
    assert data["plugins"]["enabled"] == ["disk-cleanup", "endless"]
    assert data["context"]["engine"] == "endless"
    assert data["memory"] == {"nudge_interval": 0, "memory_enabled": True}
    assert data["skills"]["creation_nudge_interval"] == 0
    assert data["compression"]["in_place"] is True
    assert data["model"]["base_url"] == "http://127.0.0.1:9/v1" and data["display"] == {"compact": True}
    after_first = config.read_bytes()
    assert install(tmp_path) == []  # idempotent
    assert config.read_bytes() == after_first
    uninstall(tmp_path)
    assert config.read_bytes() == CONFIG
    assert not (tmp_path / STATE_FILE).exists()


def test_uninstall_after_other_edits_restores_only_what_install_changed(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(CONFIG)
    install(tmp_path)
    data = yaml.safe_load(config.read_text())
    data["display"]["compact"] = False  # the person changes something else meanwhile
    data["skills"]["creation_nudge_interval"] = 3  # and one of the keys install set
    config.write_text(yaml.safe_dump(data))
    said = uninstall(tmp_path)
    restored = yaml.safe_load(config.read_text())
    original = yaml.safe_load(CONFIG)
    assert restored["display"] == {"compact": False}
    assert restored["plugins"]["enabled"] == ["disk-cleanup"]
    assert restored["memory"] == original["memory"]
    assert "context" not in restored and "compression" not in restored
    assert restored["skills"] == {"creation_nudge_interval": 3}
    assert any("changed since install" in line for line in said), said


def test_install_into_an_empty_home_and_back(tmp_path: Path) -> None:
    install(tmp_path)
    assert (tmp_path / "config.yaml").exists()
    uninstall(tmp_path)
    assert not (tmp_path / "config.yaml").exists()


def test_bad_yaml_and_uninstall_without_install_say_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(InstallError, match="not valid YAML"):
        install(tmp_path)
    assert (tmp_path / "config.yaml").read_text() == "model: [unclosed\n"  # nothing lost
    with pytest.raises(InstallError, match="nothing to undo"):
        uninstall(tmp_path)


def test_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_bytes(CONFIG)
    run = [sys.executable, "-c", "import sys; from endless.cli import main; sys.exit(main(sys.argv[1:]))"]
    first = subprocess.run(run + ["hermes", "install", "--home", str(tmp_path)], capture_output=True, text=True)
    assert first.returncode == 0 and "plugins.enabled: added 'endless'" in first.stderr, first.stderr
    assert first.stdout == ""
    second = subprocess.run(run + ["hermes", "uninstall", "--home", str(tmp_path)], capture_output=True,
                            text=True)
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "config.yaml").read_bytes() == CONFIG


def test_a_home_installed_before_the_plugin_moved_keeps_working(tmp_path: Path) -> None:
    """A home as the version before the layers change left it (``fixtures/hermes-home-before-layers``,
    written by that version's ``endless hermes install``): the config names the plugin and the engine,
    never a module, so the moved plugin loads from it; install sees it enabled, uninstall undoes it."""
    from importlib.metadata import entry_points

    from paths import FIXTURES

    old = FIXTURES / "hermes-home-before-layers"
    for name in ("config.yaml", STATE_FILE):
        (tmp_path / name).write_bytes((old / name).read_bytes())
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    (point,) = [p for p in entry_points(group="hermes_agent.plugins") if p.name in config["plugins"]["enabled"]]
    assert callable(point.load().register)
    assert config["context"]["engine"] == "endless"
    assert install(tmp_path) == []
    said = uninstall(tmp_path)
    assert said and (tmp_path / "config.yaml").read_bytes() == (old / "config.before.yaml").read_bytes()
    assert not (tmp_path / STATE_FILE).exists()


def _state_db(home: Path, rows: list[tuple[str, str, int, int]]) -> None:
    """A ``state.db`` with the columns Hermes 0.19.0 uses here: (role, content, active, compacted) rows of one session."""
    import sqlite3

    with sqlite3.connect(home / "state.db") as db:
        db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, message_count INTEGER, tool_call_count INTEGER)")
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, "
                   "content TEXT, tool_calls TEXT, active INTEGER DEFAULT 1, compacted INTEGER DEFAULT 0)")
        db.execute("INSERT INTO sessions VALUES ('s1', 3, 0)")
        db.executemany("INSERT INTO messages (session_id, role, content, tool_calls, active, compacted) "
                       "VALUES ('s1', ?, ?, ?, ?, ?)",
                       [(role, content, '[{"id": "c1"}]' if "tool" in content else None, active, compacted)
                        for role, content, active, compacted in rows])


def test_uninstall_puts_back_the_transcripts_endless_compacted(tmp_path: Path) -> None:
    import sqlite3

    from endless.faces.hermes.transcripts import TRANSCRIPT_ACK, TRANSCRIPT_NOTE

    (tmp_path / "config.yaml").write_bytes(CONFIG)
    install(tmp_path)
    # what Hermes's in-place compaction leaves after a summary of its own, then two of Endless's
    _state_db(tmp_path, [
        ("user", "before the summary", 0, 1), ("assistant", "archived by Hermes's own summary", 0, 1),
        ("user", "[CONTEXT COMPACTION — REFERENCE ONLY] a summary", 0, 1),
        ("user", "one", 0, 1), ("assistant", "one, with a tool call", 0, 1), ("user", "taken back", 0, 0),
        ("user", TRANSCRIPT_NOTE, 0, 1), ("assistant", TRANSCRIPT_ACK, 0, 1),
        ("user", "two", 0, 1), ("assistant", "two back", 0, 1),
        ("user", TRANSCRIPT_NOTE, 1, 0), ("assistant", TRANSCRIPT_ACK, 1, 0),
        ("user", "three", 1, 0), ("assistant", "three back", 1, 0)])
    said = uninstall(tmp_path)
    with sqlite3.connect(tmp_path / "state.db") as db:
        live = [row[0] for row in db.execute("SELECT content FROM messages WHERE active = 1 ORDER BY id")]
        counts = db.execute("SELECT message_count, tool_call_count FROM sessions").fetchone()
        hidden = db.execute("SELECT count(*) FROM messages WHERE content = ? AND active = 0 AND compacted = 0",
                            (TRANSCRIPT_NOTE,)).fetchone()[0]
    assert live == ["[CONTEXT COMPACTION — REFERENCE ONLY] a summary", "one", "one, with a tool call",
                    "two", "two back", "three", "three back"], live
    assert counts == (7, 1) and hidden == 2
    assert any("session s1: 5 earlier messages back" in line for line in said), said
