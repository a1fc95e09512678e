"""``scripts/simulate.py`` end to end on a few turns: the table, the JSON and the baselines come out.

Not a timed test: it checks that the benchmark still runs through the real
turn protocol, writer and SDK clients and reports every column it promises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


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
