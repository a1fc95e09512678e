"""Every head fits the window, in every state of the memory (issue 14, DESIGN §4).

Random memories (history length, how much of it is written, message sizes up
to the caps, windows from 32k to 1M tokens, harness prompts of any size): the
head built for the next turn is counted with o200k (the simulator's own
tokenizer, the one it enforces windows with) and must leave the reply's room;
the view must tile the history; and every message must be reachable from the
head: inside a view line ``zoom`` opens, named by a note line, or shown in
the recent block.
"""

from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

from endless.core import lookback
from endless.core.view import tiling
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.core.store.turns import TurnRecord
from endless.llm import tokens
from endless.sim.tokens import default_tokenizer
from endless.llm.request import Msg, Request
from endless.turn.head import HeadTooLarge, build_request, head_room, system_prompt, turn_tools

HARNESS_TOOLS = [{"name": "terminal", "description": "run a shell command and return its output",
                  "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
WINDOWS = [32_768, 65_536, 131_072, 200_000, 1_000_000]
LINE = re.compile(r"^(\d+)\+(\d+)\|(.*)$")
NOTE = re.compile(r"^(\d+)\+0\|note: \(.*?messages (\d+) to (\d+) ")


def _text(rng: random.Random, size: int) -> str:
    words = ["deploy", "cache", "port", "5433", "Ada", "the", "build", "queue", "YS-8032", "retry", "été",
             "数据", "a1b2c3", "{\"k\": 1}", "line\nbreak"]
    out, n = [], 0
    while n < size:
        w = rng.choice(words)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def _memory(tmp_path, window: int, count: int, big_share: float, rng: random.Random) -> Memory:
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), root=tmp_path / "root",
                         settings=Settings(), window_tokens=window)
    records, made = [], 0
    while made < count:
        kinds = ["user", "reply"] if made + 1 < count else ["user"]
        messages = []
        for kind in kinds:
            size = rng.randint(20, 30_000) if rng.random() < big_share else rng.randint(5, 1_500)
            messages.append(Message(kind, f"m{made} " + _text(rng, size), 1.0))
            made += 1
        records.append(TurnRecord("s", "Chat", messages))
    for k in range(0, len(records), 2_000):
        memory.commit_turns(records[k:k + 2_000], sync=False)
    return memory


def _write(memory: Memory, share: float, rng: random.Random) -> None:
    """Write about ``share`` of the leaves, then about ``share`` of each level's possible merges."""
    total = memory.total
    leaves = [(0, i, f"line of {i}: " + "w" * rng.randint(10, 500)) for i in range(total)
              if rng.random() < share and not memory.is_built(0, i)]
    if leaves:
        memory.store_lines(leaves, sync=False)
    level = 1
    while (1 << level) <= total:
        merges = [(level, j, f"merge {level}/{j}") for j in range(total >> level)
                  if memory.is_built(level - 1, 2 * j) and memory.is_built(level - 1, 2 * j + 1)
                  and not memory.is_built(level, j) and rng.random() < share]
        if merges:
            memory.store_lines(merges, sync=False)
        level += 1


def _check_head(memory: Memory, harness: str, reply: int) -> None:
    system = system_prompt(harness)
    args = (system, turn_tools(HARNESS_TOOLS), ["AGENTS.md: be brief"], "Now: 2027-01-03 09:12 UTC",
            "What is the port?")
    try:
        head = build_request(memory, *args, reply_tokens=reply)
    except HeadTooLarge:
        # Refused only when the harness's own parts, with no memory at all, leave no room.
        bare = Request(system, args[1], [Msg("user", [args[2][0]]), Msg("user", [args[3] + "\n" + args[4]])])
        assert tokens.estimate(bare) > head_room(memory, reply) - 2 * 2_048, tokens.estimate(bare)
        return
    window = memory.window_tokens
    counted = sum(default_tokenizer().count(t) for t in tokens._texts(head))
    assert counted + reply <= window, (counted, reply, window)
    assert tokens.estimate(head) <= head_room(memory, reply) or tokens.byte_bound(head) <= head_room(memory, reply)
    tiling.validate(memory.views.chat, memory.total, memory.tree.built)
    assert tiling.check_tiling(memory.views.chat.parts, memory.total) == memory.total
    # every message id is reachable from the head
    text = "".join(head.messages[-1].blocks)
    covered = [False] * memory.total
    view_names, noted = [], []
    for line in text.split("\n"):
        note = NOTE.match(line)
        if note:
            first, last = int(note.group(2)), int(note.group(3))
            assert int(note.group(1)) == first
            noted.append((first, last))
            for i in range(first, last + 1):
                covered[i] = True
            continue
        found = LINE.match(line)
        if not found:
            continue
        ident, n = int(found.group(1)), int(found.group(2))
        if n == 0:
            covered[ident] = True
        else:
            view_names.append((ident, n))
            for i in range(ident, ident + n):
                covered[i] = True
    assert all(covered), [i for i, c in enumerate(covered) if not c][:10]
    for ident, n in view_names[:3] + view_names[-3:]:
        answer = lookback.zoom(memory, ident, n)
        assert not answer.startswith("No line"), (ident, n, answer)
    for first, last in noted:
        for i in {first, last}:
            assert lookback.zoom(memory, i, 1).startswith(f"{i}+0|"), i


@hsettings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(count=st.sampled_from([0, 1, 2, 31, 400, 3_000]), share=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
       big=st.sampled_from([0.0, 0.05, 0.5]), window=st.sampled_from(WINDOWS),
       harness=st.integers(0, 60_000), reply=st.sampled_from([1_024, 8_192]), seed=st.integers(0, 10**6))
# The states that must cut the view, then the recent block (a small window, a large harness prompt):
@example(count=3_000, share=1.0, big=0.5, window=32_768, harness=30_000, reply=8_192, seed=1)
@example(count=3_000, share=0.9, big=0.05, window=32_768, harness=24_000, reply=8_192, seed=2)
@example(count=400, share=0.0, big=0.5, window=32_768, harness=33_000, reply=8_192, seed=3)
@example(count=400, share=1.0, big=0.5, window=32_768, harness=60_000, reply=8_192, seed=4)
def test_every_head_fits_the_window_and_reaches_every_message(tmp_path_factory, count, share, big, window,
                                                               harness, reply, seed):
    rng = random.Random(seed)
    memory = _memory(tmp_path_factory.mktemp("head"), window, count, big, rng)
    try:
        _write(memory, share, rng)
        _check_head(memory, _text(rng, harness), reply)
    finally:
        memory.close()


def test_two_hundred_thousand_unwritten_messages_in_a_small_window(tmp_path):
    """The state right after a long import, at the size the issue names, half written and not at all."""
    rng = random.Random(14)
    memory = _memory(tmp_path, 32_768, 200_000, 0.0, rng)
    try:
        assert memory.views.chat.shrinking
        _check_head(memory, "You are a helpful agent.", 8_192)
        _write(memory, 0.5, rng)
        _check_head(memory, "You are a helpful agent.", 8_192)
    finally:
        memory.close()
