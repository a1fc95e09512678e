"""Search over the full-text index (issue 16, DESIGN §5): ranking, phrase, pattern, filters, scopes,
paging while turns arrive, two processes, and a SIGKILL in the middle of a catch-up.

The index is derived data: every test that damages or removes it checks that
the next search finds exactly what the log holds, each message once.  The
tests of what a search finds run on both stores (``store``: the files' SQLite
index, and a PostgreSQL memory's ``tsvector`` rows); those of the SQLite file
itself run on the files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings as hsettings, strategies as st

from endless.core import lookback
from endless.core.search import finder as search, index as search_index
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.store.turns import TurnRecord
from endless.core.settings import INDEX_PARSE_GROUP, Settings

BASE = 1_764_000_000.0  # 2025-11-24 16:00 UTC; each test's messages are BASE + seconds
DAY = 86_400.0
REPO = Path(__file__).resolve().parents[2]


def _open(root: Path, settings: Settings | None = None, store: str = "") -> Memory:
    settings = (settings or Settings()).replace(store=store)
    return Memory.open(workspace_key(None, root / "ws"), root=root / "root", settings=settings)


def _add(memory: Memory, text: str, kind: str = "user", title: str = "Chat", session: str = "s1",
         at: float | None = None, reply: str | None = None, index: bool = True) -> int:
    first = memory.total
    when = BASE + first if at is None else at
    messages = [Message(kind, text, when)] + ([Message("reply", reply, when + 1)] if reply else [])
    memory.commit_turns([TurnRecord(session, title, messages)], sync=False, index=index)
    return first


def _ids(memory: Memory, query: str, **filters) -> list[int]:
    result = search.search(search.corpus_of(memory), query, 0, 50, 5.0, **filters)
    return [h.id for h in result.hits]


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(params=["files", "postgres"])
def store(request) -> str:
    """The store setting of each backend (the search behaviour is the same on both)."""
    return "" if request.param == "files" else request.getfixturevalue("pg_store_url")


@pytest.fixture
def project(tmp_path, store):
    """A small project history with the facts a person would later ask about, among distractors."""
    memory = _open(tmp_path, store=store)
    facts = {
        "db": _add(memory, "For billing we settled on Postgres, because we need real transactions "
                           "and the team already runs it."),
        "deploy": _add(memory, "Next step: deploy code for the metrics dashboard once the tests pass."),
        "tabs": _add(memory, "Rule for this repo: indent with four spaces, never tabs."),
    }
    for k in range(30):
        _add(memory, f"Status note {k}: the build is green and the queue is empty.", kind="reply")
    facts["late"] = _add(memory, "The dashboard deployment failed at 02:00 with a port clash on 8080.",
                         title="Night shift", session="s2")
    yield memory, facts
    memory.close()


def test_words_rank_the_message_that_answers_first(project):
    memory, facts = project
    assert _ids(memory, "which database did we choose for billing?")[0] == facts["db"]
    assert _ids(memory, "deploy dashboard")[:2] == [facts["deploy"], facts["late"]]  # any order, stemmed
    assert _ids(memory, "DASHBOARD deploying")[:2] == [facts["deploy"], facts["late"]]
    assert _ids(memory, "what did I say about tabs or spaces")[0] == facts["tabs"]
    assert _ids(memory, "nothing here matches zebra") == []


def test_a_phrase_is_exact_and_newest_first(project):
    memory, facts = project
    assert _ids(memory, '"metrics dashboard"') == [facts["deploy"]]
    assert _ids(memory, '"dashboard metrics"') == []
    assert _ids(memory, '"the build is green"')[:3] == [32, 31, 30]  # newest first
    assert _ids(memory, '"port clash on 8080"') == [facts["late"]]
    # words with a phrase: ranked, the phrase required
    assert _ids(memory, 'failed "port clash"') == [facts["late"]]


def test_a_pattern_is_newest_first_and_filtered(project):
    memory, facts = project
    assert _ids(memory, r"/status note \d+:/")[:2] == [32, 31]
    assert _ids(memory, r"/\d\d:\d\d/") == [facts["late"]]
    assert _ids(memory, r"/dashboard/", kind="person") == [facts["late"], facts["deploy"]]
    assert _ids(memory, r"/dashboard/", chat="night") == [facts["late"]]


def test_kind_and_chat_filters(project):
    memory, facts = project
    assert _ids(memory, "build green", kind="person") == []
    assert len(_ids(memory, "build green", kind="agent")) == 30
    assert _ids(memory, "dashboard", chat="NIGHT SHIFT") == [facts["late"]]  # any part of the title, any case
    assert _ids(memory, "dashboard", chat="s2") == [facts["late"]]  # or the session id
    assert _ids(memory, "dashboard", chat="no such chat") == []
    assert _ids(memory, "dashboard", kind="person,agent")[:2] == [facts["deploy"], facts["late"]]
    with pytest.raises(search.SearchError, match="kind 'robot' is not one of person, agent, tool, status"):
        _ids(memory, "dashboard", kind="robot")


def test_time_filters_take_dates_and_times(tmp_path, utc, store):
    memory = _open(tmp_path, store=store)
    old = _add(memory, "the kiwi harvest plan", at=BASE)
    mid = _add(memory, "the kiwi harvest moved", at=BASE + 2 * DAY)
    new = _add(memory, "the kiwi harvest is done", at=BASE + 5 * DAY)
    assert sorted(_ids(memory, "kiwi", since="2025-11-26")) == [mid, new]
    assert _ids(memory, "kiwi", before="2025-11-26") == [old]
    assert _ids(memory, "kiwi", since="2025-11-26", before="2025-11-27T00:00") == [mid]
    assert _ids(memory, "kiwi", since="2025-11-29T15:59:59Z") == [new]
    assert _ids(memory, '"kiwi harvest"', before="2025-11-25") == [old]
    assert _ids(memory, "/kiwi/", since="2025-11-26", before="2025-11-28") == [mid]
    with pytest.raises(search.SearchError, match="since 'last week' is not a date or time; write it as 2026-11-30"):
        _ids(memory, "kiwi", since="last week")
    with pytest.raises(search.SearchError, match="must come before"):
        _ids(memory, "kiwi", since="2025-11-27", before="2025-11-26")
    memory.close()


def test_summary_lines_are_their_own_scope(tmp_path, store):
    memory = _open(tmp_path, Settings(line_budget=96), store)
    long_one = "word " * 60 + "about the aviary"
    first = _add(memory, long_one)
    second = _add(memory, "filler " * 40 + "nothing more")
    # Two written leaves whose join does not fit a line, so their parent is written too.
    memory.store_lines([(0, first, "the aviary needs a new roof before winter, says the keeper"),
                        (0, second, "filler talk about nothing in particular, for a long while")])
    memory.store_lines([(1, 0, "roof of the aviary, then filler talk")])
    assert _ids(memory, "aviary") == [first]
    lines = search.search(search.corpus_of(memory), "aviary roof", 0, 10, 5.0, scope="lines").hits
    assert sorted((h.kind, h.id, h.count) for h in lines) == [("line", 0, 1), ("line", 0, 2)]
    both = search.search(search.corpus_of(memory), "aviary", 0, 10, 5.0, scope="both").hits
    assert {(h.kind, h.count) for h in both} == {("user", 1), ("line", 1), ("line", 2)}
    # a free line (a short message as it is) is not indexed again as a line
    short = _add(memory, "a short aviary note")
    assert [h.kind for h in search.search(search.corpus_of(memory), "short aviary", 0, 10, 5.0,
                                          scope="lines").hits if h.id == short] == []
    # Rebuilt from the files (not from what the commits had in hand): the same lines, no free ones.
    before = [(h.id, h.count) for h in search.search(search.corpus_of(memory), "aviary short", 0, 10, 5.0,
                                                     scope="lines").hits]
    memory.search_index.close()
    memory.search_index.set_aside()
    rebuilt = [(h.id, h.count) for h in search.search(search.corpus_of(memory), "aviary short", 0, 10, 5.0,
                                                      scope="lines").hits]
    assert rebuilt == before and len(before) == 2
    assert len(memory.search_index.line_keys()) == 3
    # a pattern over summary lines: the written ones, latest first; with both, messages too
    lines = search.search(search.corpus_of(memory), "/aviary\\W+\\w+/", 0, 10, 5.0, scope="lines").hits
    assert [(h.kind, h.id, h.count, h.snippet[h.marks[0][0]:h.marks[0][1]]) for h in lines] == [
        ("line", 0, 2, "aviary, then"), ("line", 0, 1, "aviary needs")]
    both = search.search(search.corpus_of(memory), "/aviary/", 0, 10, 5.0, scope="both").hits
    assert sorted((h.kind, h.count) for h in both) == [("line", 1), ("line", 2), ("user", 1), ("user", 1)]
    assert search.search(search.corpus_of(memory), "/aviary/", 0, 10, 5.0, scope="lines",
                         before="2000-01-01").hits == []
    answer = lookback.recall_search(memory, "aviary roof", scope="lines")
    assert "0+2 · from " in answer and "summary line: " in answer and "**aviary**" in answer
    with pytest.raises(search.SearchError, match="kind and chat filter messages"):
        search.search(search.corpus_of(memory), "aviary", 0, 10, 5.0, scope="lines", kind="person")
    memory.close()


def test_hits_say_which_view_line_covers_them(tmp_path, store):
    memory = _open(tmp_path, Settings(line_budget=96), store)
    for k in range(8):
        _add(memory, f"pelican sighting number {k}")
    hits = search.search(search.corpus_of(memory), "pelican", 0, 20, 5.0).hits
    parts = {h.id: h.line for h in hits}
    for mid, line in parts.items():
        first, n = (int(x) for x in line.split("+"))
        assert first <= mid < first + n
    memory.close()


def test_paging_stays_stable_while_turns_arrive(tmp_path, store):
    memory = _open(tmp_path, store=store)
    for k in range(60):
        _add(memory, f"orchard report {k}" + " apples" * (k % 7))
    corpus = search.corpus_of(memory)
    whole = [h.id for h in search.search(corpus, "orchard apples", 0, 60, 5.0).hits]
    first = search.search(corpus, "orchard apples", 0, 20, 5.0)
    for k in range(30):  # new matching turns, some ranking above everything so far
        _add(memory, "orchard apples apples apples", at=BASE + 1000 + k)
    second = search.search(search.corpus_of(memory), "orchard apples", 20, 20, 5.0, below=first.below)
    third = search.search(search.corpus_of(memory), "orchard apples", 40, 20, 5.0, below=first.below)
    paged = [h.id for h in first.hits + second.hits + third.hits]
    assert paged == whole and len(set(paged)) == 60
    assert not third.more


def test_the_index_heals_when_removed_or_damaged(tmp_path):
    memory = _open(tmp_path)
    for k in range(40):
        _add(memory, f"lighthouse log {k}")
    expected = _ids(memory, '"lighthouse log"')
    path = memory.search_index.path
    memory.close()
    path.write_bytes(b"this is not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    memory = _open(tmp_path)
    assert _ids(memory, '"lighthouse log"') == expected
    memory.close()
    path.unlink()
    memory = _open(tmp_path)
    _add(memory, "lighthouse log 40")  # a commit does not build a missing index (that is a search's work)
    assert not path.exists()
    assert _ids(memory, '"lighthouse log"') == [40] + expected
    memory.close()


def test_a_new_index_merges_its_segments_at_the_thresholds_of_the_settings(tmp_path):
    """The merge thresholds and the pending text's size are written into a new index's own config (FTS5
    reads them from there), for both tables; a rebuilt index gets them again."""
    import sqlite3

    from endless.core.settings import INDEX_AUTOMERGE, INDEX_CRISISMERGE, INDEX_PENDING_BYTES

    memory = _open(tmp_path)
    _add(memory, "lighthouse log")
    assert _ids(memory, "lighthouse")
    path = memory.search_index.path
    for rebuilt in (False, True):
        if rebuilt:
            memory.close()
            path.unlink()
            memory = _open(tmp_path)
            assert _ids(memory, "lighthouse")
        with sqlite3.connect(path) as db:
            for table in ("words", "line_words"):
                config = dict(db.execute(f"SELECT k, v FROM {table}_config").fetchall())
                assert (config["automerge"], config["crisismerge"]) == (INDEX_AUTOMERGE, INDEX_CRISISMERGE)
                assert config["hashsize"] == INDEX_PENDING_BYTES
    memory.close()


def test_a_replaced_log_rebuilds_the_index(tmp_path):
    memory = _open(tmp_path)
    _add(memory, "the first life of this memory")
    assert _ids(memory, "first life") == [0]
    folder, log_path = memory.folder, memory.log.path
    memory.close()
    # Another memory's log copied over this one (a restore from backup): ids mean other messages now.
    other = _open(tmp_path / "other")
    _add(other, "a different history entirely")
    other.close()
    log_path.write_bytes(other.log.path.read_bytes())
    for index in (folder / "index").glob("turns*"):
        index.unlink()
    memory = _open(tmp_path)
    assert _ids(memory, "first life") == []
    assert _ids(memory, "different history") == [0]
    memory.close()


_CHILD = r"""
import sys
from endless.core.search import finder as search, index as search_index, upkeep as index_upkeep
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.settings import Settings
from pathlib import Path

root, when = Path(sys.argv[1]), sys.argv[2]
index_upkeep.INDEX_BATCH_MESSAGES = 50
original = index_upkeep._index_turns
calls = 0

def stall(index, sources, mark, ahead=None):
    global calls
    ahead = original(index, sources, mark, ahead)
    calls += 1
    if calls == 3 and when == "inside":
        print("inside", flush=True)   # the third batch is written, its transaction not committed
        sys.stdin.readline()
    return ahead

index_upkeep._index_turns = stall
original_write = search_index.SearchIndex.write
memory = Memory.open(workspace_key(None, root / "ws"), root=root / "root", settings=Settings())
class After:
    def __init__(self, inner): self.inner = inner
    def __enter__(self): return self.inner.__enter__()
    def __exit__(self, *exc):
        self.inner.__exit__(*exc)
        if calls == 3 and when == "after":
            print("after", flush=True)   # three batches committed
            sys.stdin.readline()
search_index.SearchIndex.write = lambda self, wait=True: After(original_write(self, wait))
search.search(search.corpus_of(memory), "marker", 0, 20, 60.0)
print("done", flush=True)
"""


@pytest.mark.parametrize("when", ["inside", "after"])
def test_a_kill_during_catch_up_loses_and_repeats_nothing(tmp_path, when):
    memory = _open(tmp_path)
    for k in range(100):
        memory.commit_turn("s", "T", [Message("user", f"marker {k} a", BASE + k),
                                      Message("reply", f"marker {k} b", BASE + k)], sync=False)
    memory.search_index.close()
    memory.search_index.path.unlink()  # the index is built by the next search, in batches of 50
    memory.close()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), when], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline().strip() == when
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    memory = _open(tmp_path)
    index = memory.search_index
    # Batches of 50 messages: killed inside the third, two stand; killed after it, three.
    assert index.watermark().messages == (150 if when == "after" else 100)
    result = search.search(search.corpus_of(memory), '"marker"', 0, 50, 10.0)
    assert result.indexed is None
    everything = []
    offset = 0
    while True:
        page = search.search(search.corpus_of(memory), '"marker"', offset, 50, 10.0)
        everything += [h.id for h in page.hits]
        offset += 50
        if not page.more:
            break
    assert sorted(everything) == list(range(200))
    rows = index.db().execute("SELECT count(*) FROM msg").fetchone()[0]
    assert rows == 200
    memory.close()


_COMMITTER = r"""
import sys
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.store.turns import TurnRecord
from endless.core.settings import Settings
from pathlib import Path

root = Path(sys.argv[1])
memory = Memory.open(workspace_key(None, root / "ws"), root=root / "root", settings=Settings())
for k in range(300):
    memory.commit_turn("s", "T", [Message("user", f"heron {k} landed", 1.0 + k)], sync=False)
    if k == 20:
        print("started", flush=True)
memory.close()
print("done", flush=True)
"""


def test_two_processes_one_committing_one_searching(tmp_path):
    memory = _open(tmp_path)
    _add(memory, "heron start")
    child = subprocess.Popen([sys.executable, "-c", _COMMITTER, str(tmp_path)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline().strip() == "started"
        seen_counts = []
        while child.poll() is None:
            memory.catch_up()
            ids = _ids(memory, '"heron"')
            assert len(ids) == len(set(ids)) and ids == sorted(ids, reverse=True)
            seen_counts.append(memory.total)
        assert child.stdout.read().strip().endswith("done")
    finally:
        if child.poll() is None:
            child.kill()
    memory.catch_up()
    page, found = 0, []
    while True:
        result = search.search(search.corpus_of(memory), '"heron"', page * 50, 50, 10.0)
        found += [h.id for h in result.hits]
        page += 1
        if not result.more:
            break
    assert sorted(found) == list(range(301))
    assert memory.search_index.db().execute("SELECT count(*) FROM msg").fetchone()[0] == 301
    memory.close()


def test_a_busy_index_never_blocks_a_commit(tmp_path):
    memory = _open(tmp_path)
    _add(memory, "egret one")
    other = search_index.SearchIndex(memory.folder)
    with other.write():  # another process holds the index's write lock
        started = time.monotonic()
        _add(memory, "egret two")
        assert time.monotonic() - started < search_index.INDEX_BUSY_SECONDS
    other.close()
    assert _ids(memory, "egret") == [1, 0]  # the search caught up what the commit left
    memory.close()


def test_the_tools_pages_stay_stable_while_turns_arrive(tmp_path):
    memory = _open(tmp_path)
    for k in range(30):
        _add(memory, f"walnut harvest note {k}")
    first = lookback.recall_search(memory, '"walnut harvest"')
    for k in range(5):  # newer matches arrive between the two pages (another chat of the memory)
        _add(memory, f"walnut harvest late note {k}")
    second = lookback.recall_search(memory, '"walnut harvest"', page=2)
    ids = [int(line.split("+")[0]) for line in (first + "\n" + second).splitlines() if "+0 · " in line]
    assert ids == list(range(29, -1, -1))  # newest first, as the first page saw them: none twice, none lost
    memory.close()


def test_an_index_that_cannot_be_used_says_so_and_phrases_still_work(tmp_path):
    memory = _open(tmp_path)
    _add(memory, "the otter swims at dawn")
    memory.search_index.close()
    path = memory.search_index.path
    for old in path.parent.glob("search.*"):
        old.unlink()
    # A folder where the index file should be, and one where it would be set aside: SQLite cannot
    # open it and it cannot be moved away (what a read-only or foreign-owned folder does to us).
    path.mkdir()
    (path.parent / (path.name + ".damaged")).mkdir()
    (path.parent / (path.name + ".damaged") / "keep").write_text("x")
    _add(memory, "the otter sleeps at noon")  # the commit goes on without the index
    assert memory.total == 2
    assert [h.id for h in search.search(search.corpus_of(memory), '"otter sleeps"', 0, 10, 5.0).hits] == [1]
    with pytest.raises(search.SearchError, match='cannot be used .*search for a "quoted phrase" or a /pattern/'):
        search.search(search.corpus_of(memory), "otter", 0, 10, 5.0)
    answer = lookback.recall_search(memory, "otter")
    assert answer.startswith("Cannot search: the search index ") and "/pattern/" in answer
    memory.close()


@pytest.mark.parametrize("named", ["nothing", "the written line", "past the file's end"])
def test_only_a_stretch_named_free_is_stepped_over_unread(tmp_path, named):
    """The index leaves out free lines; a stretch its writer names free is not even read (an import's helper)."""
    import math

    from endless.core.search import upkeep as index_upkeep

    memory = _open(tmp_path)
    # the index is caught up below, from the files alone
    _add(memory, "short question", reply="short answer", index=False)
    long = _add(memory, "pasted " + "row " * 200, index=False)
    before = memory.tree.end
    memory.store_line(0, long, "The person pasted a long zanzibar table of rows.")
    after = memory.tree.end
    ends = {"nothing": None, "the written line": after, "past the file's end": after + 1}
    index = search_index.SearchIndex(memory.folder)
    sources = index_upkeep.Sources(memory.log, memory.log.end, memory.tree, memory.tree.end,
                                   index_upkeep.node_size(memory.tree),
                                   lambda offset: ends[named] if offset == before else None)
    assert index_upkeep.catch_up(index, sources, math.inf)
    assert index.watermark().tree_end == memory.tree.end
    rows = index.db().execute("SELECT rowid FROM line_words WHERE line_words MATCH 'zanzibar'").fetchall()
    assert len(rows) == (0 if named == "the written line" else 1)
    index.close()
    memory.close()


# -- reading the log a group of lines at a time ---------------------------------------------------------


_LOG_LINES = st.one_of(
    st.builds(lambda i, n: ("whole", i, n), st.integers(0, 3), st.integers(0, 3)),  # a record of its place
    st.builds(lambda i, n: orjson.dumps({"id": i, "tid": "t", "m": [{"k": "user", "x": f"m{j}"} for j in range(n)]}),
              st.integers(0, 10**6), st.integers(0, 3)),
    st.sampled_from([b'{"id": 1, "m": [', b"not json", b"[1, 2]", b'{"id": "7", "m": []}', b'{"id": 3}',
                     b'{"id": true, "m": []}', b"", b'"text"', b'{"id": 4, "m": {}}']),
)


def _placed_lines(kinds: list) -> list[bytes]:
    """Each ``("whole", skip, n)`` as the log writes a record at its place (ids running on, ``skip`` ids
    past the last one), the rest as given."""
    from endless.core.store.records import placed, record_tail

    out, next_id = [], 0
    for turn, kind in enumerate(kinds):
        if isinstance(kind, bytes):
            out.append(kind)
            continue
        _, skip, n = kind
        messages = [{"k": "user", "x": f"m{j}", "at": 1.0} for j in range(n)]
        out.append(placed(turn, next_id + skip, record_tail("%016x" % (turn + 1), "s", "t", "completed", 1.0,
                                                            messages))[:-1])
        next_id += skip + n
    return out


@hsettings(max_examples=60, deadline=None)
@given(lines=st.lists(_LOG_LINES, max_size=40), repeat=st.integers(1, 40), start_line=st.integers(0, 5))
@example(lines=[("whole", 0, 1), b"not json"], repeat=INDEX_PARSE_GROUP, start_line=0)
def test_turns_read_a_group_at_a_time_are_the_lines_read_alone(tmp_path_factory, lines, repeat, start_line):
    """Records are parsed a group of lines at a time; a damaged line in a group is skipped alone, every
    other line of the group is read, and each record keeps its turn number and the byte where it ends.
    A record is whole as the log itself reads it (``examine``), and its ids come after the last one read."""
    from endless.core.store.byte_ranges import records
    from endless.core.store.records import examine, shape

    every = _placed_lines((lines * repeat)[:3 * INDEX_PARSE_GROUP])
    path = tmp_path_factory.mktemp("log") / "turns.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in every))
    start = sum(len(line) + 1 for line in every[:start_line])
    expected, pos, next_id = [], start, 0
    for turn, line in enumerate(every[start_line:], start=start_line):
        pos += len(line) + 1
        record, _ = examine(line, turn)
        if record is not None and record["id"] >= next_id:
            expected.append((turn, pos, record))
            next_id = record["id"] + len(record["m"])
    assert list(records(path, start, path.stat().st_size, start_line, shape)) == expected


@pytest.mark.parametrize("store", ["files", "postgresql"])
def test_a_batch_read_ahead_is_used_and_one_a_forget_patched_meanwhile_is_read_again(tmp_path, monkeypatch, store,
                                                                                      request):
    """A long catch-up reads the next batch while the one before is written; a forget made in between
    (it patches the log inside its own write transaction) makes that read stale: it is read again, and
    the forgotten words never reach the index."""
    from endless.core.privacy import forget
    from endless.core.search import upkeep as index_upkeep

    monkeypatch.setattr(index_upkeep, "INDEX_BATCH_MESSAGES", 50)
    url = request.getfixturevalue("pg_store_url") if store == "postgresql" else ""
    memory = _open(tmp_path, store=url)
    for k in range(100):
        secret = " quokka-ninety" if k == 40 else ""
        memory.commit_turn("s", "T", [Message("user", f"marker {k} a{secret}", BASE + k),
                                      Message("reply", f"marker {k} b", BASE + k)], sync=False)
    index = memory.search_index
    if store == "postgresql":  # the index is built again from the log, in batches of 50
        index.clear()
    else:
        memory.search_index.close()
        memory.search_index.path.unlink()
        memory.close()
        memory = _open(tmp_path)
        index = memory.search_index
    sources = memory.index_sources()
    with index.write():
        ahead = index_upkeep._index_turns(index, sources, index.watermark())  # messages 0-49, 50-99 read ahead
    assert ahead is not None
    twin = index_upkeep._Ahead(index, sources, ahead.start, ahead.turn)
    with index.write():
        got = twin.take(index.watermark())
    assert got is not None and [r[0] for r in got[0]] == list(range(25, 50))  # the read ahead is taken
    assert forget.forget(memory, forget.select(memory, query="quokka")).ids == [80]
    with index.write():
        assert ahead.take(index.watermark()) is None  # read before the forget: stale
    assert index_upkeep.catch_up(index, memory.index_sources(), time.monotonic() + 60)
    assert search.search(search.corpus_of(memory), "quokka", 0, 10, 10.0).hits == []
    found = {h.id for h in search.search(search.corpus_of(memory), '"marker"', 0, 500, 10.0).hits}
    assert found == set(range(200)) - {80}  # every other message indexed once, the forgotten one not
    memory.close()
