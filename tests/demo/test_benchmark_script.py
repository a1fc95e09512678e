"""The benchmark scripts end to end on a few turns: each prints its table (simulate.py its JSON too).

Not a timed test: it checks that the benchmark still runs through the real
turn protocol, writer and SDK clients and reports every column it promises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from paths import REPO

ROOT = REPO


def test_simulate_prints_the_table_and_writes_json(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "simulate.py"), "--turns", "12", "--passes", "auto", "spec",
         "--jobs", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    assert "### 12 turns" in table
    for row in ("| deepseek |", "| openai-auto |", "input tokens per turn", "planted facts reachable"):
        assert row in table, row
    assert "[endless." not in table  # logs go to stderr only
    record = orjson.loads((tmp_path / "simulate-12.json").read_bytes())
    assert set(record["passes"]) == {"auto", "spec"}
    assert set(record["baselines"]) == {"harness", "drop"}
    auto = record["passes"]["auto"]
    assert auto["turns"] == 12 and len(auto["view_sizes"]) == 12
    deepseek = auto["models"]["deepseek"]
    assert deepseek["agent_input"] > 0 and deepseek["writer_input"] >= deepseek["writer_uncached"]
    assert record["baselines"]["harness"]["input_per_turn"] > 0
    assert (tmp_path / "simulate-12.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_catch_up_benchmark_prints_both_settings_side_by_side():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_catchup.py"), "--sizes", "600",
                           "--each-max", "600"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 600 |")]
    assert len(rows) == 1, done.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    stores, changes, ratio = int(cells[1]), cells[2].split(" / "), cells[4]
    assert stores > 100 and int(changes[0]) <= int(changes[1]) <= stores and ratio.endswith("×")
    assert "[endless." not in done.stdout  # logs go to stderr only


def test_the_engine_benchmark_builds_a_small_memory_and_prints_both_tables():
    """The bulk path, the small-batch tail, the reopens and every measured row, on 2,000 messages."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_engine.py"), "--sizes", "2000",
                           "--tail", "200", "--batch", "500", "--reopen-every", "1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    for row in ("| open (new process", "| zoom(id, 1)", "| literal search, hit", "| total build time",
                "|   tail commit_turns", "| messages / turns | 2,000 /"):
        assert row in table, row
    assert "[endless." not in table


def test_the_writer_benchmark_prints_its_table():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_writer.py"), "--turns", "12"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| calls per model-written line |" in done.stdout, done.stdout
    assert "| cached share of writer input |" in done.stdout


def test_the_recall_benchmark_prints_quality_speed_and_whole_process():
    """Every table of scripts/bench_recall.py on 2,000 messages; the quality rows are real measurements."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_recall.py"), "--sizes", "2000",
                           "--runs", "1"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    rows = [line for line in table.splitlines() if "| new (ranked words) |" in line]
    assert len(rows) == 2, table
    share = float(rows[0].split("|")[3].strip().rstrip("%"))
    assert 0 < share <= 100
    assert "| old (literal scan of the question) | 0.0% |" in table  # a question is never a phrase
    assert "| 2,000 |" in table and "msg/s" in table
    for command in ("`python -c pass`", "`endless --version`", "`endless search WORD`"):
        assert command in table, command
    assert "exited" not in done.stderr  # every timed command succeeded
    assert "[endless." not in table


def test_the_recall_benchmark_compares_two_installations_at_scale():
    """--scale with --compare: rows for this code and the other Python's in turn, twice, on the same memory."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_recall.py"), "--skip-quality",
                           "--skip-speed", "--scale", "3000", "--compare", sys.executable],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 3,000 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["this", "compare", "this", "compare"], done.stdout
    for row in rows:
        cells = [c.strip() for c in row.split("|")]
        assert cells[5] == "100%" and cells[7] == "3 3 3", row  # all-words first; every pattern match found
