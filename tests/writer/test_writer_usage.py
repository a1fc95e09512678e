"""writer/usage.py: the fsynced usage log, totals across restarts, spend per day, prices."""

from __future__ import annotations

import datetime as dt
import json
import os

import orjson
import pytest

from endless.writer import usage as usage_module
from endless.llm.client import Usage
from endless.llm.routes import Route
from endless.writer.usage import LOG_NAME, SNAPSHOT_NAME, UsageLog, cost, find_price_entry, is_peak, price, price_table

DEEPSEEK = Route("openai", "deepseek-flash", base_url="https://api.deepseek.com")
SONNET = Route("anthropic", "claude-sonnet-4-5")
LINE_KEYS = {"time", "at", "provider", "flavour", "model", "jobs", "cached", "uncached", "cache_write", "output",
             "duration", "outcome", "cost"}


def utc(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.timezone.utc).timestamp()


def local(*parts: int) -> float:
    return dt.datetime(*parts).timestamp()  # naive: local time


# -- the log -------------------------------------------------------------------------------------


def test_lines_are_fsynced_and_well_formed(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    log = UsageLog(tmp_path)
    when = utc(2027, 1, 2, 12)  # a Saturday: DeepSeek off-peak
    before = len(synced)
    line = log.record(when, DEEPSEEK, jobs=["41+1", "42+1"], usage=Usage(cached=3840, uncached=212, output=96),
                      duration=2.4812, outcome="ok")
    assert len(synced) > before  # fsynced before record() returned
    on_disk = (tmp_path / LOG_NAME).read_bytes()
    assert on_disk.endswith(b"\n") and on_disk.count(b"\n") == 1
    assert orjson.loads(on_disk) == line
    assert set(line) == LINE_KEYS
    assert line["provider"] == "openai" and line["flavour"] == "deepseek" and line["model"] == "deepseek-flash"
    assert line["jobs"] == ["41+1", "42+1"] and line["outcome"] == "ok" and line["duration"] == 2.481
    assert line["at"] == "2027-01-02T12:00:00.000Z" and line["time"] == when
    assert line["cost"] == pytest.approx((3840 * 0.003 + 212 * 0.15 + 96 * 0.60) / 1e6)

    failed = log.record(when + 1, SONNET, jobs="43+1", usage=None, duration=20.0, outcome="timeout",
                        error="timeout: Request timed out.")
    assert failed["cost"] == 0 and failed["cached"] == failed["output"] == 0 and failed["jobs"] == ["43+1"]
    assert failed["error"].startswith("timeout")
    for raw in (tmp_path / LOG_NAME).read_bytes().splitlines():
        assert LINE_KEYS <= set(orjson.loads(raw))
    with pytest.raises(ValueError):
        log.record(None, SONNET, outcome="")


def test_totals_survive_a_restart(tmp_path):
    log = UsageLog(tmp_path, snapshot_every=3)
    when = utc(2027, 1, 2, 12)
    for i in range(7):
        log.record(when + i, SONNET, jobs=[f"{i}+1"],
                   usage=Usage(cached=1000, uncached=10, cache_write=100, output=50), duration=1.0)
    log.record(when + 7, SONNET, jobs=["7+1"], outcome="rate_limit")
    totals = log.totals()
    assert set(totals) == {"calls", "cacheRead", "miss", "output", "cost"}
    assert totals["calls"] == 8 and totals["cacheRead"] == 7000 and totals["miss"] == 7 * 110
    assert totals["output"] == 350
    one = (1000 * 0.30 + 10 * 3.00 + 100 * 3.75 + 50 * 15.00) / 1e6
    assert totals["cost"] == pytest.approx(7 * one, abs=1e-6)
    # No close(): as after a crash.  The snapshot (written every 3 lines) plus the tail give the same totals.
    assert (tmp_path / SNAPSHOT_NAME).exists()
    again = UsageLog(tmp_path, snapshot_every=3)
    assert again.opened_from == "snapshot" and again.totals() == totals
    assert 0 < again.read_bytes < (tmp_path / LOG_NAME).stat().st_size / 3
    again.record(when + 8, SONNET, jobs=["8+1"], usage=Usage(output=1))
    again.close()
    third = UsageLog(tmp_path)
    assert third.totals()["calls"] == 9 and third.read_bytes == 0
    # Without the snapshot the whole log is read once, with the same result, and a snapshot is written.
    (tmp_path / SNAPSHOT_NAME).unlink()
    rescanned = UsageLog(tmp_path)
    assert rescanned.opened_from == "scan" and rescanned.totals() == third.totals()
    assert (tmp_path / SNAPSHOT_NAME).exists()


def test_opening_a_long_log_reads_only_the_tail(tmp_path):
    log = UsageLog(tmp_path, sync=False, snapshot_every=64)
    for i in range(3000):
        log.record(1e9 + i, DEEPSEEK, jobs=[f"{i}+1"], usage=Usage(cached=128, uncached=5, output=3))
    size = (tmp_path / LOG_NAME).stat().st_size
    again = UsageLog(tmp_path)
    assert again.opened_from == "snapshot" and again.read_bytes < 64 * 300 < size / 10
    assert again.totals() == log.totals() and again.totals()["calls"] == 3000


def test_a_replaced_log_is_noticed(tmp_path, capsys):
    log = UsageLog(tmp_path, snapshot_every=1)
    for i in range(3):
        log.record(1e9 + i, SONNET, usage=Usage(output=10))
    (tmp_path / LOG_NAME).write_bytes((tmp_path / LOG_NAME).read_bytes().splitlines(keepends=True)[0] * 2)
    again = UsageLog(tmp_path)
    assert again.opened_from == "scan" and again.totals()["calls"] == 2
    assert "[endless.writer]" in capsys.readouterr().err


def test_a_torn_last_line_is_skipped_and_not_glued_to(tmp_path):
    log = UsageLog(tmp_path)
    log.record(1e9, SONNET, usage=Usage(output=10))
    with open(tmp_path / LOG_NAME, "ab") as handle:
        handle.write(b'{"time": 1000000001, "cost": 5, "out')  # a crash mid-write
    again = UsageLog(tmp_path)
    assert again.totals()["calls"] == 1
    again.record(1e9 + 2, SONNET, usage=Usage(output=20))
    assert again.totals()["calls"] == 2 and again.totals()["output"] == 30
    assert [line["output"] for line in again.lines()] == [10, 20]
    assert again.details()["skipped"] == 1
    assert UsageLog(tmp_path).totals() == again.totals()


def test_lines_from_another_process_are_counted(tmp_path):
    first = UsageLog(tmp_path)
    second = UsageLog(tmp_path)  # e.g. the writer lease's previous holder, still finishing a call
    first.record(1e9, SONNET, usage=Usage(output=1))
    second.record(1e9 + 1, SONNET, usage=Usage(output=2))
    first.record(1e9 + 2, SONNET, usage=Usage(output=4))
    assert first.totals()["output"] == 7 and first.totals()["calls"] == 3
    first.close()
    assert UsageLog(tmp_path).totals()["output"] == 7
    reader = UsageLog(tmp_path, readonly=True)
    assert reader.totals()["calls"] == 3
    with pytest.raises(PermissionError):
        reader.record(None, SONNET)


def test_spend_per_local_day(tmp_path):
    log = UsageLog(tmp_path)
    day1, day2 = local(2027, 3, 10, 9), local(2027, 3, 11, 9)
    log.record(day1, SONNET, usage=Usage(output=1000), cost=0.25)
    log.record(local(2027, 3, 10, 23, 59), SONNET, usage=Usage(output=1000), cost=0.5)
    log.record(day2, SONNET, usage=Usage(output=1000), cost=2.0)
    assert log.spent_today(local(2027, 3, 10, 0, 1)) == pytest.approx(0.75)
    assert log.spent_today(day2 + 3600) == pytest.approx(2.0)
    assert log.spent_today(local(2027, 3, 12, 9)) == 0.0
    assert UsageLog(tmp_path).spent_today(day1) == pytest.approx(0.75)  # across a restart
    clocked = UsageLog(tmp_path, clock=lambda: day2)
    assert clocked.spent_today() == pytest.approx(2.0)
    assert clocked.totals()["cost"] == pytest.approx(2.75)


# -- prices --------------------------------------------------------------------------------------


def test_price_file_shape():
    table = price_table()
    assert table["date"] and table["source"] and table["currency"] == "USD"
    for entry in table["models"]:
        assert entry["provider"] in ("deepseek", "openai", "anthropic") and entry["names"]
        assert entry["date"] and entry["source"]
        for key in ("input", "cached", "write", "output"):
            assert isinstance(entry[key], (int, float)) and entry[key] >= 0
    assert json.loads(json.dumps(table)) == table


def test_price_lookup():
    assert price(SONNET).model == "claude-sonnet-4-5" and price(SONNET).input == 3.0
    dated = price(Route("anthropic", "claude-sonnet-4-5-20250929"))
    assert dated.model == "claude-sonnet-4-5" and dated.write == 3.75
    assert price(Route("anthropic", "claude-sonnet-5-5")).cached == 0.10  # not Sonnet 5's 0.20
    assert price(Route("openai", "gpt-6.2-sol")).write == 2.50
    assert price(Route("openai", "gpt-4.1-2025-04-14")).model == "gpt-4.1"
    assert price(Route("openai", "deepseek-v4-pro-0813", base_url="https://api.deepseek.com")).model \
        == "deepseek-v4-pro"
    assert price(Route("openai", "openai/gpt-6-luna", base_url="https://openrouter.ai/api/v1")).input == 0.10
    assert find_price_entry("openai", "gpt-4o-mini") is None  # a different model, not a snapshot of gpt-4o
    local_route = Route("openai", "qwen3:8b", base_url="http://127.0.0.1:11434/v1")
    assert price(local_route).known and cost(local_route, Usage(uncached=10**6, output=10**6)) == 0.0


def test_unknown_model_costs_nothing_and_is_logged_once_never_shown(capsys, caplog):
    """Issue 15 item 4: not on the chat's screen; the log has it once; ``endless doctor`` names it."""
    import logging

    route = Route("openai", "gpt-4o-mini-unlisted-test-model")
    with caplog.at_level(logging.DEBUG, logger="endless"):
        assert cost(route, Usage(uncached=10**6, output=10**6)) == 0.0
        assert price(route).known is False
    assert capsys.readouterr().err == ""
    said = [r for r in caplog.records if "gpt-4o-mini-unlisted-test-model" in r.getMessage()]
    assert len(said) == 1 and said[0].name == "endless.writer" and said[0].levelno == logging.DEBUG


def test_deepseek_peak_hours_utc():
    monday_peak, monday_gap, monday_night, saturday = (utc(2027, 1, 4, 2, 30), utc(2027, 1, 4, 5),
                                                       utc(2027, 1, 4, 10), utc(2027, 1, 2, 2, 30))
    assert is_peak("deepseek", monday_peak) and is_peak("deepseek", utc(2027, 1, 8, 9, 59))
    assert not any(is_peak("deepseek", t) for t in (monday_gap, monday_night, saturday))
    assert not is_peak("anthropic", monday_peak)
    peak, off = price(DEEPSEEK, monday_peak), price(DEEPSEEK, saturday)
    assert (peak.input, peak.cached, peak.output, peak.peak) == (0.30, 0.006, 1.20, True)
    assert (off.input, off.cached, off.output, off.peak) == (0.15, 0.003, 0.60, False)


def test_cost_arithmetic():
    million = Usage(cached=10**6, uncached=10**6, cache_write=10**6, output=10**6)
    assert cost(DEEPSEEK, million, utc(2027, 1, 2, 12)) == pytest.approx(0.003 + 0.15 + 0 + 0.60)
    assert cost(SONNET, million) == pytest.approx(0.30 + 3.00 + 3.75 + 15.00)
    assert cost(Route("openai", "gpt-5.6-terra"), Usage(cached=500_000, uncached=1000, cache_write=20_000,
                                                         output=2000)) == pytest.approx(
        (500_000 * 0.20 + 1000 * 2.00 + 20_000 * 2.50 + 2000 * 12.00) / 1e6)
    haiku = Route("anthropic", "claude-haiku-5-5")
    assert cost(haiku, Usage(uncached=100_000, output=1000)) == pytest.approx((100_000 * 0.10 + 1000 * 0.50) / 1e6)
    assert cost(haiku, Usage(uncached=100_001, output=1000)) == pytest.approx((100_001 * 0.50 + 1000 * 2.50) / 1e6)
    assert price(haiku, prompt_tokens=200_000).long
    assert usage_module.Price("x", "y", input=1, output=2).cost({"uncached": 10**6, "output": 10**6}) == 3.0


def test_one_hour_cache_writes_are_billed_at_their_own_price():
    from endless.llm.anthropic_api import anthropic_usage
    from endless.llm.client import Usage
    from endless.writer.usage import cost, price

    route = {"provider": "anthropic", "flavour": "anthropic", "model": "claude-sonnet-5"}
    table = price(route)
    assert table.write_long > table.write > table.input
    short = cost(route, Usage(cache_write=1_000_000))
    long = cost(route, Usage(cache_write=1_000_000, cache_write_long=1_000_000))
    mixed = cost(route, Usage(cache_write=1_000_000, cache_write_long=250_000))
    assert short == pytest.approx(table.write) and long == pytest.approx(table.write_long)
    assert mixed == pytest.approx(0.75 * table.write + 0.25 * table.write_long)

    class Creation:
        ephemeral_1h_input_tokens = 300
        ephemeral_5m_input_tokens = 200

    class Raw:
        cache_read_input_tokens, input_tokens, cache_creation_input_tokens, output_tokens = 10, 20, 500, 7
        cache_creation = Creation()

    assert anthropic_usage(Raw()) == Usage(cached=10, uncached=20, cache_write=500, output=7, cache_write_long=300)
