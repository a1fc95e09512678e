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
import re
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


# -- a pattern search: complete, or saying what it covered -------------------------------------------

PELICANS = (12, 250, 489)


def _pelican_memory(home: Path, workspace: Path) -> Memory:
    """500 messages, one a turn; the pattern /PELICAN-[0-9]+/ matches three of them."""
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)))
    _fill(memory, [f"note {k} about the harbour" + (f" PELICAN-{k}" if k in PELICANS else "")
                   for k in range(500)])
    return memory


class _Ticks:
    """A clock that moves only when read: a search's time limit falls after so many reads, on any machine."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_the_tool_says_what_a_cut_pattern_search_covered_and_goes_on(tmp_path):
    """Cut by its time limit, the tool's answer names the messages it searched and the below that goes on;
    following it, call after call, finds every match once and covers every message once."""
    home, workspace, _ = fresh_home(tmp_path)
    memory = _pelican_memory(home, workspace)
    try:
        seconds = memory.settings.regex_seconds
        found: list[int] = []
        covered: list[tuple[int, int]] = []
        below = None
        for _ in range(100):
            args = {} if below is None else {"below": below}
            text = lookback.recall_search(memory, "/PELICAN-[0-9]+/", clock=_Ticks(seconds / 30), **args)
            found += [int(line.split("+", 1)[0]) for line in text.splitlines() if "PELICAN" in line
                      and line[:1].isdigit()]
            cut = re.search(r"searched messages (\d+) to (\d+).*?below=(\d+)", text)
            if cut is None:
                assert "PARTIAL" not in text, text
                covered.append((0, below if below is not None else 500))
                break
            assert text.startswith("PARTIAL ANSWER"), text
            start, end, go_on = map(int, cut.groups())
            assert go_on == start and end == (499 if below is None else below - 1), text
            covered.append((start, end + 1))
            below = go_on
        assert len(covered) > 2, covered  # the limit did cut it, more than once
        assert sorted(found) == list(PELICANS), (found, covered)
        assert [c[1] for c in covered[1:]] == [c[0] for c in covered[:-1]], covered  # no gap, no overlap
    finally:
        memory.close()


def test_the_cli_exits_3_and_says_partial_on_stdout(tmp_path):
    """`endless search '/PELICAN-[0-9]+/'` cut by its limit: exit 3, a [partial] line on stdout, --json's
    range and goOn; with --below it searches only older messages, and complete it exits 0."""
    home, workspace, env = fresh_home(tmp_path)
    _pelican_memory(home, workspace).close()
    base = [*endless_command(), "search", "--workspace", str(workspace)]
    tiny = {**env, "ENDLESS_REGEX_SECONDS": "0.000000001"}
    done = subprocess.run([*base, "/PELICAN-[0-9]+/"], capture_output=True, text=True, env=tiny, timeout=120)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("[partial]") and "--below 500" in last, done.stdout
    assert "Traceback" not in done.stderr
    done = subprocess.run([*base, "--json", "/PELICAN-[0-9]+/"], capture_output=True, env=tiny, timeout=120)
    assert done.returncode == 3, done.stderr
    value = orjson.loads(done.stdout)
    assert value["partial"] is True and value["goOn"] == {"below": 500}, value
    assert value["searched"] == {"from": 500, "to": 500}, value  # it searched no message, and says so
    # complete: exit 0, no [partial]; with --below, only the older matches
    done = subprocess.run([*base, "--json", "/PELICAN-[0-9]+/"], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    value = orjson.loads(done.stdout)
    assert "partial" not in value and sorted(h["id"] for h in value["hits"]) == list(PELICANS), value
    done = subprocess.run([*base, "--below", "250", "/PELICAN-[0-9]+/"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split("+")[0] for line in done.stdout.splitlines()] == ["12"], done.stdout


@pytest.mark.parametrize("body", ["^end", "start$", "^only line$", "end\\s+start", "t$\\n^o", "\\bdel", "[^q]{3}ta$",
                                  "(?<![a-z])delta", "\\Aonly", "^\\s*$", "é", "(?:mid){2}", "PELICAN-[0-9]+",
                                  "kelvin", "colou?r", "port \\d{4}", "start of", "a\"quote", "back\\\\slash"])
def test_a_pattern_finds_what_it_matches_message_by_message(tmp_path, body):
    """The scan skips a stretch of the log whose bytes lack the pattern's plain start, or when one search
    over its messages joined finds nothing: it must find exactly the messages the pattern matches one by
    one (anchors at a message's ends, lines inside one, lookbehinds that would see the neighbour, the
    Kelvin sign and the long s that match k and s in any case, characters JSON escapes)."""
    import regex

    home, workspace, _ = fresh_home(tmp_path)
    texts = ["start of it", "it ends at the end", "only line", "two\nlines end", "delta", "x delta",
             "midmid", "Résumé", "  ", "start\nonly line\nend", "beta", "theta", "pelican-12", "PELİCAN-3",
             "\u212aelvin", "color", "port 8080", "ſtart of it", 'a"quote', "back\\slash"]
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)))
    try:
        _fill(memory, texts)
        pattern = regex.compile(body, regex.IGNORECASE | regex.MULTILINE)
        expected = sorted(k for k, text in enumerate(texts) if pattern.search(text))
        result = lookback.search.search(lookback.search.corpus_of(memory), f"/{body}/", 0, 50, 10.0)
        assert sorted(h.id for h in result.hits if h.kind != "title") == expected, body
    finally:
        memory.close()
