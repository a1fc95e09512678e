"""A 30-turn scripted run in every cache model: no avoidable miss, and turns do not wait (simulated clock)."""

from __future__ import annotations

import pytest

from endless.core.memory import Memory
from endless.demo.recall_check import reachable
from endless.demo.replay import Replay, ReplayConfig, percentile
from endless.core.settings import Settings
from endless.sim.script import make_script

PASSES = {"openai-automatic": ReplayConfig(caches=("deepseek", "openai-auto")),
          "openai-breakpoints": ReplayConfig(caches=("openai-breakpoints",)),
          "anthropic": ReplayConfig(api="anthropic", caches=("anthropic",))}


@pytest.mark.parametrize("name", sorted(PASSES))
def test_thirty_turns_without_avoidable_misses_or_waits(tmp_path, name):
    config = PASSES[name]
    config.settings = Settings(settle_poll_seconds=1.0)
    script = make_script(30, seed=11, facts=5)
    script[15].gap = 20 * 60.0  # a pause past Anthropic's 5-minute entries and OpenAI's 10-minute ones
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


def test_a_batch_turn_misses_only_from_the_first_merged_line(tmp_path):
    """A small view ceiling makes merge batches happen; the cache still reads everything before them."""
    config = ReplayConfig(caches=("deepseek",), settings=Settings(settle_poll_seconds=1.0, view_ceiling=24_000,
                                                                   view_floor=12_000, view_shrink_slack=4_000))
    script = make_script(45, seed=5, facts=0)
    result = Replay(tmp_path, script, config).run()
    batches = [t for t in result.turns if t.batch]
    assert batches, "the view passed its ceiling and merged"
    for turn in batches:
        first = turn.first
        assert first.avoidable["deepseek"] == 0, f"turn {turn.number} missed before its first merged line"
        assert first.read["deepseek"] >= (first.common // 128) * 128 - 128
        assert first.common < first.tokens, "a batch really changes the view before its end"
