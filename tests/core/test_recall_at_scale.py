"""Recall that tells the truth at scale (issue 32): every word ranks, a partial answer says so.

The ranked test builds an index past ``SEARCH_POSTINGS_MAX`` (the real cap,
not a lowered one): its commonest words hold more rows than the cap, so a
search that ranked only the rarest word under it would bury the messages
holding every word under thousands holding one.  The pattern tests force
the time limit with ``regex_seconds`` (the CLI) or a clock that moves only
when read (the tool), so the partial case is the same on any machine.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import orjson
import pytest

from endless.core import lookback
from endless.core.memory import Memory
from endless.core.settings import SEARCH_POSTINGS_MAX, Settings
from endless.core.store.keys import workspace_key
from endless.core.store.messages import Message
from endless.core.store.turns import TurnRecord
from tests.commands import endless_command, fresh_home

QUERY = "database billing export queue"
FILLER = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _fill(memory: Memory, texts: list[str]) -> None:
    for start in range(0, len(texts), 5_000):
        memory.commit_turns([TurnRecord("s1", "Ops", [Message("user", text, 1_700_000_000.0 + start + k)])
                             for k, text in enumerate(texts[start:start + 5_000])], sync=False, plan=False)
    memory.plan_views(sync=False)


def _scaled_texts(size: int, every: list[int]) -> list[str]:
    """``size`` messages: each common word in more than the cap's rows, "export" in fewer, and the
    messages at ``every`` holding all four words amid more filler than the rest."""
    rng = random.Random(32)
    texts = []
    for k in range(size):
        words = rng.sample(FILLER, 3)
        if k in every:
            words = ["database", "billing", "export", "queue"] + rng.sample(FILLER, 8)
        else:
            # "export" alone in short messages (what BM25 of that one word ranks first), the others often
            if k % 4 == 0:
                words.append("export")
            for word, share in (("database", 0.6), ("billing", 0.6), ("queue", 0.6)):
                if k % 4 != 0 and rng.random() < share:
                    words.append(word)
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """A memory of 40,000 messages in a fresh home, and the ids of the five holding every query word."""
    tmp_path = tmp_path_factory.mktemp("scaled")
    home, workspace, env = fresh_home(tmp_path)
    every = [3_001, 11_002, 19_003, 27_004, 35_005]
    texts = _scaled_texts(40_000, every)
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)))
    _fill(memory, texts)
    docs = memory.search_index.term_docs(QUERY.split())
    assert docs["export"] < SEARCH_POSTINGS_MAX < min(docs["database"], docs["billing"], docs["queue"]), docs
    memory.close()
    return memory.memory_id, env, every


def test_messages_holding_every_word_rank_first_past_the_cap(scaled):
    """`endless search --json database billing export queue`: the five with all four words come first."""
    memory_id, env, every = scaled
    done = subprocess.run([*endless_command(), "search", "--json", "--memory", memory_id, "--limit", "20",
                           *QUERY.split()], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    ids = [hit["id"] for hit in orjson.loads(done.stdout)["hits"]]
    assert sorted(ids[:5]) == every, ids
    # and the rest of the page is still found: messages holding some of the words
    assert len(ids) == 20, ids


def test_the_tool_ranks_every_word_and_a_missing_one_next(scaled, tmp_path):
    """The tool's first hits hold all the words; a query with a word held by none still ranks the rest."""
    memory_id, env, every = scaled
    memory = Memory.open(memory_id=memory_id, settings=Settings(home=env["ENDLESS_HOME"]))
    try:
        text = lookback.recall_search(memory, QUERY)
        listed = [int(line.split("+", 1)[0]) for line in text.splitlines()[1:6]]
        assert sorted(listed) == every, text
        # three of the words and one no message holds: the messages with the three come first
        text = lookback.recall_search(memory, "database billing export zeppelin")
        shown = text.splitlines()[1:6]
        assert all(all(w in line for w in ("database", "billing", "export")) for line in shown), text
    finally:
        memory.close()
