"""A 30-turn scripted run in every cache model: no avoidable miss, and turns do not wait (simulated clock)."""

from __future__ import annotations

import pytest

from endless.memory import Memory
from endless.recall_check import reachable
from endless.replay import Replay, ReplayConfig, percentile
from endless.settings import Settings
from endless.sim.script import make_script

PASSES = {"openai-automatic": ReplayConfig(caches=("deepseek", "openai-auto")),
          "openai-breakpoints": ReplayConfig(caches=("openai-breakpoints",)),
          "anthropic": ReplayConfig(api="anthropic", caches=("anthropic",))}


@pytest.mark.parametrize("name", sorted(PASSES))
def test_thirty_turns_without_avoidable_misses_or_waits(tmp_path, name):
    config = PASSES[name]
    config.settings = Settings(settle_poll_seconds=1.0)
    script = make_script(30, seed=11, facts=5)
    result = Replay(tmp_path, script, config).run()
    assert len(result.turns) == 30 and not any(t.refused for t in result.turns)
    assert [t.steps for t in result.turns] == [len(s.results) + 1 for s in script], "the agent followed the script"
    assert any(s.results for s in script)
    models = list(result.requests[0].read)
    assert models == (["anthropic"] if name == "anthropic" else list(config.caches))
    for model in models:
        missed = [(r.turn, r.step, r.avoidable[model]) for r in result.requests if r.avoidable.get(model)]
        assert missed == [], f"{model}: avoidable misses (turn, step, tokens): {missed}"
        later = [t.first.read[model] / t.first.tokens for t in result.turns[6:] if t.first and not t.batch]
        assert sorted(later)[len(later) // 2] > 0.85, f"{model}: turns read their prefix from the cache"
    compared = sum(1 for r in result.requests if r.avoidable)
    assert compared >= 40, "most requests were compared with their chat's previous one"
    waits = [t.wait for t in result.turns]
    assert percentile(waits, 0.9) <= 1.0, f"wait p90 over 1 s: {sorted(waits)[-5:]}"
    assert result.stats.calls > 0 and result.writer_calls == result.stats.calls
    facts = [f for t in script for f in t.facts]
    with Memory.open(memory_id=result.memory_id, settings=config.settings, root=tmp_path, readonly=True) as memory:
        assert len(facts) == 5 and all(reachable(memory, f) for f in facts)
