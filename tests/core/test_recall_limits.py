"""No search can hang or exhaust the process (issue 16): each adversarial input, bounded in time.

A search that does not come back within the bound fails the test (it runs on a
daemon thread, so a hang cannot stall the suite); the memory-bomb pattern runs
in a child process under an address-space limit, so compiling it would crash
the child instead of the machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from endless.core import lookback
from endless.core.search import scan as recall, finder as search
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.search.pattern_guard import PatternTooLarge, check, weigh
from endless.core.settings import Settings

BOUND = 30.0  # seconds: far above what each search needs, far below a hang


def _open(tmp_path: Path) -> Memory:
    return Memory.open(workspace_key(None, tmp_path / "ws"), root=tmp_path / "root", settings=Settings())


def _within(fn, *args):
    """``fn(*args)``, failing the test if it has not returned after ``BOUND`` seconds."""
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # handed back to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), f"{fn.__name__} did not return within {BOUND:.0f} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _search(memory: Memory, query: str, seconds: float):
    return search.search(search.corpus_of(memory), query, 0, 20, seconds)


def test_a_record_over_four_mebibytes_is_searched_past(tmp_path):
    """One 5.6 MB message (one turn record over the 4 MiB chunk): every scan moves past it.

    Ranked words, a phrase, a pattern, and the literal scan of the log behind
    a phrase without words; ``férry`` is found by the ranked search (accents
    folded) and not by the literal scan.
    """
    memory = _open(tmp_path)
    memory.commit_turn("s", "Before", [Message("user", "the ferry leaves at dawn", 1.0)])
    big = ("word " * 1_120_000)[:5_600_000] + " pelican-4242 " + "tail " * 10
    memory.commit_turn("s", "Paste", [Message("user", big, 2.0)])
    memory.commit_turn("s", "After", [Message("user", "a short note after the paste", 3.0)])
    record_bytes = memory.log.lengths[1]
    assert record_bytes > 4 << 20, record_bytes
    for query in ("ferry", "pelican-4242", '"pelican-4242"', "férry", "/ferry|pelican-\\d+/",
                  "nothing-like-this"):
        result = _within(_search, memory, query, 5.0)
        ids = [hit.id for hit in result.hits]
        if query in ("ferry", "/ferry|pelican-\\d+/", "férry"):
            assert 0 in ids, (query, ids)
        if query in ("pelican-4242", '"pelican-4242"', "/ferry|pelican-\\d+/"):
            assert any(memory.message(i).text.find("pelican-4242") >= 0 for i in ids), (query, ids)
        if query == "nothing-like-this":
            assert ids == [], (query, ids)
        assert result.stopped_at is None, query
    for text, expected in (("ferry", [0]), ("pelican-4242", [1]), ("férry", []), ("-4242 tail", [1])):
        result = _within(recall.scan_literal, memory.log, text, 0, 20, 5.0)
        assert [hit.id for hit in result.hits] == expected, text
        assert result.stopped_at is None, text
    memory.close()


def test_a_long_literal_against_a_long_run_is_linear(tmp_path):
    """``'a' * 4096`` against 200 KB of ``A``: half a minute before; now well within the bound."""
    memory = _open(tmp_path)
    memory.commit_turn("s", "Run", [Message("user", "A" * 200_000, 1.0)])
    result = _within(recall.scan_literal, memory.log, "a" * 4096, 0, 20, 60.0)
    assert result.stopped_at is None
    assert [hit.id for hit in result.hits] == [0]
    # A quoted phrase is whole words in a row: the run is one word, so it is no hit, found as fast.
    result = _within(_search, memory, '"' + "a" * 4096 + '"', 60.0)
    assert result.stopped_at is None and result.hits == []
    answer = _within(lookback.recall_search, memory, "a" * 2048)
    assert answer.startswith("No hits for aaaa")
    answer = _within(lookback.recall_search, memory, "/a{2048}/")
    assert answer.startswith("Hits 1–1 for /a{2048}/, newest first:")
    memory.close()


BOMB = "(?:(?:a{1000}){1000}){10}"  # 25 characters; compiling it took 2.8 GB in 5 s


def test_the_pattern_bomb_is_refused_before_compiling(tmp_path):
    assert len(BOMB) == 25 and weigh(BOMB) == 10_000_000
    with pytest.raises(PatternTooLarge, match="repeats too much"):
        check(BOMB)
    memory = _open(tmp_path)
    memory.commit_turn("s", "T", [Message("user", "a" * 100, 1.0)])
    answer = _within(lookback.recall_search, memory, f"/{BOMB}/")
    assert answer.startswith("Cannot search: the regular expression repeats too much")
    with pytest.raises(recall.SearchError):
        _search(memory, "/" + "x" * 3000 + "/", 2.0)
    memory.close()


def test_the_pattern_bomb_stays_small_under_a_memory_limit():
    """In a child limited to 1 GiB of address space: the refusal comes back, no MemoryError, no kill."""
    code = ("from endless.core.search import scan as recall\n"
            "try:\n"
            f"    recall.compile_pattern({BOMB!r})\n"
            "except recall.SearchError as exc:\n"
            "    print('refused:', exc)\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=BOUND,
                          preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: the regular expression repeats too much")


@pytest.mark.parametrize("pattern", [r"\d{4}-\d{2}-\d{2}", r"[A-Z]{2,3}-\d{4}", "port (\\d+)", "(?i)deploy.{0,200}code",
                                     r"\bx{1,50}\b", "a{19999}"])
def test_ordinary_patterns_pass_the_guard(pattern):
    check(pattern)


@pytest.mark.parametrize("pattern,weight", [("a{1000}", 1000), ("(ab){10}", 20), ("[xyz]{3}", 3), ("a{,50}", 50),
                                            ("a{5,}", 5), ("a{}b", 4), ("x*y+z?", 3), ("(?:a{10}|b{20}){3}", 90)])
def test_weights_count_each_expanded_piece(pattern, weight):
    assert weigh(pattern) == weight
