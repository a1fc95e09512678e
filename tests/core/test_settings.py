"""Settings: defaults, the TOML file, ENDLESS_* variables, the harness layer (DESIGN §7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory, MemoryUseError
from endless.core.settings import (MEANINGS, Settings, SettingsError, config_path, describe, load_settings,
                                   setting_names)

# DESIGN §7, as numbers.
DESIGN_DEFAULTS = {
    "line_budget": 512,
    "line_accept_ratio": 1.25,
    "line_retry_ratio": 0.75,
    "view_ceiling": 128_000,
    "view_floor": 64_000,
    "writer_view_floor": 16_000,
    "writer_view_ceiling": 32_000,
    "writer_calls": 8,
    "unwritten_ahead": 8,
    "tries_per_line": 3,
    "content_rounds": 3,
    "lines_per_call": 6,
    "retry_seconds": 10.0,
    "spend_cap_per_day": None,
    "turn_wait_seconds": 15.0,
    "turn_stall_seconds": 5.0,
    "reply_room_tokens": 8_192,
    "recent_block_bytes": 16_384,
    "long_turn_fraction": 0.25,
    "result_cap_chars": 15_000,
    "trace_cap_chars": 30_000,
    "message_split_chars": 30_000,
    "zoom_page_chars": 25_000,
    "regex_seconds": 2.0,
    "search_hits_tool": 20,
    "search_hits_rpc": 50,
    "smallest_window_tokens": 32_768,
    "lease_renew_seconds": 5.0,
    "lease_expiry_seconds": 30.0,
    "agent_name": "Assistant",
    "person_tag": "you",
    "granularity": "turn",
    "recall_search": True,
    "writer_route": "",          # the chat's own route
    "reasoning_effort": "lowest",
    "home": "",                  # XDG data dir + /endless
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No ENDLESS_* or XDG variable of the person running the tests leaks in."""
    for name in list(os.environ):
        if name.startswith("ENDLESS_") or name.startswith("XDG_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, harness=None, environ=None, toml: str | None = None) -> Settings:
    path = tmp_path / "config.toml"
    if toml is not None:
        write(path, toml)
    return load_settings(harness, environ={} if environ is None else environ, path=path)


# -- defaults ----------------------------------------------------------------------------


def test_defaults_are_the_design(tmp_path):
    for settings in (Settings(), load(tmp_path), load_settings()):
        for name, value in DESIGN_DEFAULTS.items():
            assert getattr(settings, name) == value, name
        assert all(settings.source(name) == "default" for name in setting_names())


def test_defaults_pass_their_own_checks():
    assert Settings().replace() == Settings()


def test_every_setting_is_described(tmp_path):
    rows = describe(load(tmp_path))
    assert [r[0] for r in rows] == setting_names()
    assert list(MEANINGS) == setting_names() and all(MEANINGS.values())
    assert "sources" not in setting_names()
    assert set(DESIGN_DEFAULTS) <= set(setting_names())


def test_memory_root(tmp_path, monkeypatch):
    assert Settings().memory_root() == tmp_path / "home" / ".local" / "share" / "endless"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert Settings().memory_root() == tmp_path / "data" / "endless"
    s = load(tmp_path, environ={"ENDLESS_HOME": str(tmp_path / "mine")})
    assert s.memory_root() == tmp_path / "mine"
    assert s.source("home") == "env ENDLESS_HOME"
    assert Settings(home="~/x").memory_root() == tmp_path / "home" / "x"


# -- the TOML file --------------------------------------------------------------------------


def test_toml_file_in_a_table(tmp_path):
    s = load(tmp_path, toml="""
[endless]
line_budget = 600
regex_seconds = 0.5
recall_search = false
agent_name = "Hermes"
granularity = "step"
spend_cap_per_day = 2.5
""")
    assert (s.line_budget, s.regex_seconds, s.recall_search, s.agent_name, s.granularity,
            s.spend_cap_per_day) == (600, 0.5, False, "Hermes", "step", 2.5)
    where = f"file {tmp_path / 'config.toml'}"
    for name in ("line_budget", "regex_seconds", "recall_search", "agent_name", "granularity"):
        assert s.source(name) == where
    assert s.source("view_ceiling") == "default"


def test_toml_file_top_level_and_dashed_names(tmp_path):
    s = load(tmp_path, toml='line-budget = 700\nperson_tag = "Du"\nregex_seconds = 1\n')
    assert s.line_budget == 700 and s.person_tag == "Du"
    assert s.regex_seconds == 1.0 and isinstance(s.regex_seconds, float)


def test_missing_file_is_fine(tmp_path):
    s = load_settings(environ={}, path=tmp_path / "nowhere" / "config.toml")
    assert s == Settings()


def test_default_config_path_is_xdg(tmp_path, monkeypatch):
    assert config_path() == tmp_path / "home" / ".config" / "endless" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert config_path() == tmp_path / "cfg" / "endless" / "config.toml"
    write(tmp_path / "cfg" / "endless" / "config.toml", "line_budget = 640\n")
    s = load_settings()
    assert s.line_budget == 640
    assert s.source("line_budget") == f"file {tmp_path / 'cfg' / 'endless' / 'config.toml'}"


def test_endless_config_overrides_the_path(tmp_path, monkeypatch):
    write(tmp_path / "cfg" / "endless" / "config.toml", "line_budget = 640\n")
    chosen = write(tmp_path / "elsewhere.toml", "line_budget = 800\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENDLESS_CONFIG", str(chosen))
    assert config_path() == chosen
    s = load_settings()
    assert s.line_budget == 800 and s.source("line_budget") == f"file {chosen}"


def test_endless_config_from_a_given_environment(tmp_path):
    """``environ=`` stands for the whole environment, ENDLESS_CONFIG included."""
    chosen = write(tmp_path / "elsewhere.toml", "line_budget = 800\n")
    s = load_settings(environ={"ENDLESS_CONFIG": str(chosen)})
    assert s.line_budget == 800
    xdg = write(tmp_path / "x" / "endless" / "config.toml", "line_budget = 900\n")
    assert load_settings(environ={"XDG_CONFIG_HOME": str(tmp_path / "x")}).line_budget == 900
    assert load_settings(environ={}).source("line_budget") == "default"
    assert xdg.exists()


# -- environment variables ------------------------------------------------------------------


def test_environment_variables(tmp_path):
    s = load(tmp_path, environ={
        "ENDLESS_LINE_BUDGET": "600",
        "ENDLESS_REGEX_SECONDS": "0.25",
        "ENDLESS_RECALL_SEARCH": "off",
        "ENDLESS_AGENT_NAME": "Hermes",
        "ENDLESS_SPEND_CAP_PER_DAY": "1.5",
        "ENDLESS_GRANULARITY": "step",
        "ENDLESS_VIEW_CEILING": "100_000",
        "ENDLESS_NOT_A_SETTING": "ignored",   # other tools may share the prefix
        "OTHER_LINE_BUDGET": "1",
    })
    assert (s.line_budget, s.regex_seconds, s.recall_search, s.agent_name,
            s.spend_cap_per_day, s.granularity, s.view_ceiling) == (
        600, 0.25, False, "Hermes", 1.5, "step", 100_000)
    assert s.source("line_budget") == "env ENDLESS_LINE_BUDGET"
    assert s.source("recall_search") == "env ENDLESS_RECALL_SEARCH"
    assert s.source("view_floor") == "default"


@pytest.mark.parametrize("text, value", [("1", True), ("true", True), ("Yes", True), ("ON", True),
                                         ("0", False), ("false", False), ("no", False), ("off", False)])
def test_environment_booleans(tmp_path, text, value):
    assert load(tmp_path, environ={"ENDLESS_RECALL_SEARCH": text}).recall_search is value


@pytest.mark.parametrize("text", ["", "none", "off", "None"])
def test_environment_clears_the_spend_cap(tmp_path, text):
    s = load(tmp_path, environ={"ENDLESS_SPEND_CAP_PER_DAY": text},
             toml="spend_cap_per_day = 3.0\n")
    assert s.spend_cap_per_day is None
    assert s.source("spend_cap_per_day") == "env ENDLESS_SPEND_CAP_PER_DAY"


def test_os_environ_is_the_default_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDLESS_LINE_BUDGET", "555")
    s = load_settings(path=tmp_path / "none.toml")
    assert s.line_budget == 555 and s.source("line_budget") == "env ENDLESS_LINE_BUDGET"
    assert load_settings(environ={}, path=tmp_path / "none.toml").line_budget == 512


# -- the harness layer and precedence ---------------------------------------------------------


def test_harness_layer(tmp_path):
    s = load(tmp_path, {"agent_name": "Nous", "granularity": "step"})
    assert s.agent_name == "Nous" and s.source("agent_name") == "harness"
    t = s.replace(line_budget=600)
    assert t.line_budget == 600 and t.source("line_budget") == "harness"
    assert t.agent_name == "Nous" and t.source("agent_name") == "harness"
    assert s.line_budget == 512 and s.source("line_budget") == "default"   # s is unchanged


def test_order_of_precedence(tmp_path):
    toml = "line_budget = 600\nregex_seconds = 1.0\nagent_name = \"FromFile\"\nzoom_page_chars = 1000\n"
    env = {"ENDLESS_LINE_BUDGET": "700", "ENDLESS_REGEX_SECONDS": "1.5"}
    s = load(tmp_path, {"line_budget": 800}, environ=env, toml=toml)
    where = f"file {tmp_path / 'config.toml'}"
    assert (s.line_budget, s.source("line_budget")) == (800, "harness")
    assert (s.regex_seconds, s.source("regex_seconds")) == (1.5, "env ENDLESS_REGEX_SECONDS")
    assert (s.agent_name, s.source("agent_name")) == ("FromFile", where)
    assert (s.zoom_page_chars, s.source("zoom_page_chars")) == (1000, where)
    assert (s.person_tag, s.source("person_tag")) == ("you", "default")
    # each layer, the next one taken away
    assert load(tmp_path, environ=env).line_budget == 700
    assert load(tmp_path).line_budget == 600
    assert load(tmp_path, {"line_budget": 900}).source("line_budget") == "harness"
    # replace() is the harness layer too: it wins over everything
    assert s.replace(regex_seconds=3.0).source("regex_seconds") == "harness"


def test_describe_reports_values_and_sources(tmp_path):
    s = load(tmp_path, {"agent_name": "Nous"}, environ={"ENDLESS_LINE_BUDGET": "600"},
             toml="regex_seconds = 1.0\n")
    rows = {name: (value, source) for name, value, source in describe(s)}
    assert rows["agent_name"] == ("Nous", "harness")
    assert rows["line_budget"] == (600, "env ENDLESS_LINE_BUDGET")
    assert rows["regex_seconds"] == (1.0, f"file {tmp_path / 'config.toml'}")
    assert rows["view_ceiling"] == (128_000, "default")


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("toml, words", [
    ("line_budget = -1\n", "line_budget must be positive"),
    ("line_budget = 0\n", "line_budget must be positive"),
    ('line_budget = "big"\n', "line_budget"),
    ("line_budget = 1.5\n", "whole number"),
    ("line_budget = true\n", "whole number"),
    ('recall_search = "maybe"\n', "true or false"),
    ('granularity = "word"\n', "granularity must be 'turn' or 'step'"),
    ("view_floor = 200000\n", "view_floor must be below view_ceiling"),
    ("writer_view_floor = 40000\n", "writer_view_floor must be below writer_view_ceiling"),
    ("spend_cap_per_day = -1.0\n", "spend_cap_per_day must not be negative"),
    ("long_turn_fraction = 0.0\n", "long_turn_fraction"),
    ("agent_name = 5\n", "expected text"),
    ("regex_seconds = -1.0\n", "regex_seconds"),
    ("regex_seconds = 0.0\n", "regex_seconds"),
    ("regex_seconds = nan\n", "regex_seconds"),
    ("turn_wait_seconds = inf\n", "turn_wait_seconds"),
    ("retry_seconds = -10.0\n", "retry_seconds"),
    ("rpc_port = 70000\n", "rpc_port"),
])
def test_bad_values_in_the_file(tmp_path, toml, words):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, toml=toml)
    message = str(caught.value)
    assert words in message
    assert str(tmp_path / "config.toml") in message     # says where the bad value came from


def test_unknown_key_in_the_file(tmp_path):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, toml="line_budgett = 600\n")
    message = str(caught.value)
    assert "'line_budgett'" in message and str(tmp_path / "config.toml") in message
    assert "line_budget" in message                      # lists what is known
    with pytest.raises(SettingsError, match="'typo'"):
        load(tmp_path, toml="[endless]\ntypo = 1\n")


@pytest.mark.parametrize("toml", ["line_budget = \n", "[endless\n", "a = 1\na = 2\n", 'x = "unclosed\n'])
def test_bad_toml(tmp_path, toml):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, toml=toml)
    assert str(tmp_path / "config.toml") in str(caught.value)
    assert "TOML" in str(caught.value)


def test_file_that_is_not_utf8(tmp_path):
    (tmp_path / "config.toml").write_bytes(b"agent_name = \"\xff\xfe\"\n")
    with pytest.raises(SettingsError, match="config.toml"):
        load(tmp_path)


def test_endless_key_that_is_not_a_table(tmp_path):
    with pytest.raises(SettingsError, match="endless"):
        load(tmp_path, toml='endless = "on"\n')


@pytest.mark.parametrize("env, words", [
    ({"ENDLESS_LINE_BUDGET": "big"}, "ENDLESS_LINE_BUDGET"),
    ({"ENDLESS_LINE_BUDGET": "1.5"}, "ENDLESS_LINE_BUDGET"),
    ({"ENDLESS_REGEX_SECONDS": "soon"}, "ENDLESS_REGEX_SECONDS"),
    ({"ENDLESS_REGEX_SECONDS": "nan"}, "regex_seconds"),
    ({"ENDLESS_RECALL_SEARCH": "maybe"}, "ENDLESS_RECALL_SEARCH"),
    ({"ENDLESS_GRANULARITY": "word"}, "granularity"),
    ({"ENDLESS_VIEW_FLOOR": "128000"}, "view_floor must be below view_ceiling"),
])
def test_bad_environment_values(tmp_path, env, words):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, environ=env)
    assert words in str(caught.value)


def test_bad_harness_values(tmp_path):
    with pytest.raises(SettingsError, match="unknown setting 'nonsense' in harness"):
        load(tmp_path, {"nonsense": 1})
    with pytest.raises(SettingsError, match="line_budget must be positive"):
        Settings().replace(line_budget=0)
    with pytest.raises(SettingsError, match="unknown setting 'sources'"):
        Settings().replace(sources={})
    with pytest.raises(SettingsError, match="whole number"):
        Settings().replace(writer_calls=True)


def test_settings_error_is_a_value_error():
    assert issubclass(SettingsError, ValueError)


# -- window scaling ----------------------------------------------------------------------------


@pytest.mark.parametrize("window, limits", [
    (None, (128_000, 64_000)),
    (1_000_000, (128_000, 64_000)),
    (128_000, (128_000, 64_000)),
    (100_000, (100_000, 50_000)),
    (32_768, (32_768, 16_384)),
])
def test_window_limits(window, limits):
    assert Settings().window_limits(window) == limits


def test_serves_window():
    s = Settings()
    assert s.serves_window(None)
    assert s.serves_window(32_768)
    assert not s.serves_window(32_767)
    assert not s.serves_window(8_192)
    assert Settings(smallest_window_tokens=8_000).serves_window(8_192)


def test_memory_scales_its_view_to_the_window(tmp_path):
    smallest = Memory.open(workspace_key(None, tmp_path), settings=Settings(), root=tmp_path,
                           window_tokens=32_768)
    assert (smallest.views.chat_saw.ceiling, smallest.views.chat_saw.floor) == (32_768, 16_384)
    with pytest.raises(MemoryUseError, match="32767"):
        smallest.set_window(32_767)
    smallest.close()


# -- endless config ---------------------------------------------------------------------------


def run_config(tmp_path: Path, *args: str, extra: dict[str, str] | None = None,
               command: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ENDLESS_") and not k.startswith("XDG_")}
    env["HOME"] = str(tmp_path / "home")
    env.update(extra or {})
    base = command or [sys.executable, "-m", "endless.cli"]
    return subprocess.run([*base, "config", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)


def test_endless_config_json_subprocess(tmp_path):
    cfg = write(tmp_path / "my.toml", "[endless]\nregex_seconds = 1.5\n")
    done = run_config(tmp_path, "--json", extra={"ENDLESS_CONFIG": str(cfg),
                                                 "ENDLESS_LINE_BUDGET": "600"})
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["name"] for r in rows] == setting_names()
    by_name = {r["name"]: r for r in rows}
    assert by_name["line_budget"] == {"name": "line_budget", "value": 600,
                                      "source": "env ENDLESS_LINE_BUDGET", "meaning": "bytes of one summary line"}
    assert by_name["regex_seconds"] == {"name": "regex_seconds", "value": 1.5,
                                        "source": f"file {cfg}", "meaning": "seconds a pattern search may run"}
    assert by_name["spend_cap_per_day"]["value"] is None
    assert by_name["writer_route"]["value"] is None and by_name["recall_search"]["value"] is True
    assert by_name["home"]["value"] == str(tmp_path / "home" / ".local" / "share" / "endless")
    for name, value in DESIGN_DEFAULTS.items():
        if name not in ("line_budget", "regex_seconds", "writer_route", "home"):  # both as they take effect
            assert {k: by_name[name][k] for k in ("name", "value", "source")} == \
                {"name": name, "value": value, "source": "default"}


def test_endless_config_console_script(tmp_path):
    script = Path(sys.executable).parent / "endless"
    if not script.exists():
        pytest.skip("the console script is not installed in this environment")
    done = run_config(tmp_path, "--json", command=[str(script)])
    assert done.returncode == 0, done.stderr
    assert {r["name"]: r["value"] for r in json.loads(done.stdout)}["line_budget"] == 512


def test_endless_config_table(tmp_path):
    done = run_config(tmp_path, extra={"ENDLESS_AGENT_NAME": "Hermes"})
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("agent_name "))
    assert line.split() == ['agent_name', '"Hermes"', "ENDLESS_AGENT_NAME", "the", "agent's", "name", "in", "the",
                            "lines"]


def test_endless_config_bad_settings(tmp_path):
    cfg = write(tmp_path / "bad.toml", "line_budget = [\n")
    done = run_config(tmp_path, "--json", extra={"ENDLESS_CONFIG": str(cfg)})
    assert done.returncode == 2
    assert done.stdout == ""
    assert str(cfg) in done.stderr and done.stderr.startswith("[endless]")
