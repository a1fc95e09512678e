"""Query expansion by the writer's model (issue 32 item 5): through the real SDK and the simulator.

When a writer model is set, a question searched by recall_search is first
sent to it and the words it answers are ranked too; a failing, slow or capped
model changes nothing but the time, and typed words never ask it.
"""

from __future__ import annotations

import time

import orjson
import pytest

from endless.core import lookback
from endless.core.search import finder
from endless.core.store.messages import Message
from endless.sim.model import SimReply
from endless.sim.writer_model import ScriptedWriter
from endless.writer import expand as expansion
from endless.writer.pool import WriterPool
from endless.writer.usage import UsageLog
from writer_fixtures import DEEPSEEK, open_memory, providers, simulator

ANSWER = "For the invoices we settled on Postgres, mainly because we need real transactions."
QUESTION = "Which datastore did we choose for the invoices?"


def _history(memory) -> int:
    for k in range(40):
        memory.commit_turn("s1", "Chat", [Message("user", f"invoices batch {k} went out on time", 1.0e9 + k)])
    at = memory.total
    memory.commit_turn("s2", "Decisions", [Message("user", ANSWER, 1.0e9 + 100)])
    for k in range(10):
        memory.commit_turn("s3", "Other", [Message("user", f"the postgres upgrade note {k}", 1.0e9 + 200 + k)])
    return at


def _expansions(sim) -> list[dict]:
    return [r for r in sim.records if "search over a long conversation" in r["prompt"]]


@pytest.fixture
def setup(tmp_path):
    writer = ScriptedWriter(seed=3)
    sim = simulator(writer)
    memory = open_memory(tmp_path, time.time, writer_route=orjson.dumps(DEEPSEEK.to_json()).decode())
    answer = _history(memory)
    WriterPool(memory, providers(sim))  # a pool with a writer model sets the memory's expansion
    yield memory, writer, sim, answer
    memory.close()


def test_the_models_words_find_an_answer_the_question_shares_no_word_with(setup):
    memory, writer, sim, answer = setup
    assert memory.expand_query is not None
    hits = lambda: [h.id for h in finder.search(finder.corpus_of(memory), QUESTION, 0, 20, 5.0).hits]  # noqa: E731
    assert answer not in hits()  # without the model: "datastore" and "choose" are in no message
    writer.force(SimReply(text="Postgres, database, settled on, picked"))
    text = lookback.recall_search(memory, QUESTION)
    assert f"{answer}+0 · " in text.split("\n")[1], text  # the first hit
    assert len(_expansions(sim)) == 1
    # the call is in the usage log like a writer call, so the spend cap counts it
    assert [row["outcome"] for row in UsageLog(memory.folder).lines() if row["jobs"] == ["search"]] == ["ok"]
    # asked again: answered from the cache, no second call
    lookback.recall_search(memory, QUESTION)
    assert len(_expansions(sim)) == 1


def test_typed_words_never_ask_the_model(setup):
    memory, writer, sim, answer = setup
    lookback.recall_search(memory, "datastore invoices")
    assert _expansions(sim) == []


@pytest.mark.parametrize("reply", [SimReply(status=500, error="overloaded"), SimReply(stall=True),
                                   SimReply(text="")])
def test_a_failing_or_silent_model_leaves_the_search_as_it_was(setup, monkeypatch, reply):
    memory, writer, sim, answer = setup
    monkeypatch.setattr(expansion, "SEARCH_EXPANSION_SECONDS", 0.5)
    without = [h.id for h in finder.search(finder.corpus_of(memory), QUESTION, 0, 20, 5.0).hits]  # no model
    writer.force(reply, reply, reply)
    started = time.monotonic()
    text = lookback.recall_search(memory, QUESTION)
    assert time.monotonic() - started < 5.0
    assert [int(line.split("+")[0]) for line in text.split("\n")[1:]] == without
    assert len(_expansions(sim)) >= 1  # it was asked, and its failure is in the usage log
    assert [r["outcome"] for r in UsageLog(memory.folder).lines() if r["jobs"] == ["search"]][-1] != "ok"


def test_no_writer_model_no_expansion(tmp_path):
    memory = open_memory(tmp_path, time.time)
    WriterPool(memory, lambda route: None)
    assert memory.expand_query is None
    memory.close()
