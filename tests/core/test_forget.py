"""Forgetting messages (issue #19 item 1): the words leave every file, the id stays as a tombstone.

The memories here are real: turns committed through ``Memory``, every line
written by the writer pool (its offline writer), the full-text index built
by searches.  "Gone" is checked the hard way: every file under the memory
folder is read and searched for every 12-character piece of the text.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path

import pytest

from endless.core.privacy import forget
from endless.core import lookback
from endless.core.search import finder as search
from endless.core.view import tiling
from endless.core.errors import MemoryUseError
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from endless.faces.kit import answers
from endless.writer.pool import WriterPool

import harness  # noqa: E402

SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}
SECRET = ("My bank PIN is 8841 and the vault password is Quokka-Ninety-Seven; "
          "tell nobody about the Hollowell account at all")


def pieces(text: str) -> set[bytes]:
    return {text[k:k + 12].encode("utf-8") for k in range(len(text) - 11)}


def found_in_folder(folder: Path, text: str) -> list[str]:
    """Files of the memory folder holding any 12-character piece of ``text``."""
    wanted = pieces(text)
    hits = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(p in data for p in wanted):
                hits.append(str(path.relative_to(folder)))
    return hits


def write_all(memory: Memory) -> None:
    asyncio.run(WriterPool(memory, lambda route: None).run(until_idle=True))


def build(root: Path, turns: int, secret_turn: int, settings: dict = SMALL) -> Memory:
    memory = Memory.open(workspace_key(None, root / "ws"), settings=Settings(**settings), root=root)
    at = 1_790_000_000.0
    batch = []
    from endless.core.store.turns import TurnRecord
    for t in range(turns):
        text = SECRET if t == secret_turn else f"turn {t}: the tomatoes in bed {t % 7} need water and shade"
        batch.append(TurnRecord("c1", "Garden", [Message("user", text, at + t),
                                                  Message("reply", f"noted for bed {t % 7}, turn {t}", at + t)],
                                at=at + t))
        if len(batch) == 500:
            memory.commit_turns(batch, plan=False)
            batch = []
    if batch:
        memory.commit_turns(batch, plan=False)
    memory.plan_views()
    write_all(memory)
    search.search(search.corpus_of(memory), "tomatoes", 0, 5, 10.0)  # the index is caught up
    return memory


def view_text(memory: Memory) -> str:
    return memory.views.render().text


def test_forget_one_message_in_ten_thousand(tmp_path: Path) -> None:
    memory = build(tmp_path, 5000, 2121)
    target = 2 * 2121
    assert memory.message(target).text == SECRET
    ancestors = []
    part = (0, target)
    while memory.is_built(*part):
        ancestors.append(part)
        part = tiling.parent(part)
    assert len(ancestors) >= 10  # many written levels above it
    assert found_in_folder(memory.folder, SECRET)  # the test can see it before
    before = view_text(memory)

    dry = forget.forget(memory, forget.select(memory, query="quokka-ninety"), dry_run=True)
    assert dry.ids == [target] and dry.dry_run and dry.previews[0].text == SECRET
    assert memory.message(target).text == SECRET  # a dry run changes nothing

    outcome = forget.forget(memory, [target])
    assert outcome.ids == [target] and outcome.nodes == len(ancestors)
    assert found_in_folder(memory.folder, SECRET) == []

    tomb = memory.message(target).text
    assert tomb.startswith("(forgotten on ") and "Quokka" not in tomb
    assert lookback.zoom(memory, target, 1).startswith(f"{target}+0|you: (forgotten on ")
    page = answers.history(memory, {"memoryId": memory.memory_id, "before": 2122, "limit": 1}, memory.settings)
    entry = page["turns"][0]["entries"][0]
    assert entry["id"] == target and entry["text"] == tomb and entry["forgottenAt"] > 0
    assert search.search(search.corpus_of(memory), "Quokka", 0, 5, 10.0).hits == []
    other = search.search(search.corpus_of(memory), "tomatoes", 0, 5, 10.0).hits
    assert other  # the rest is still found

    # Until the writer writes them again, the view stops before the first erased line.
    after = view_text(memory)
    first_changed = next(k for k, (a, b) in enumerate(zip(before.splitlines(), after.splitlines())) if a != b)
    assert before.splitlines()[:first_changed] == after.splitlines()[:first_changed]
    assert SECRET[:20] not in after

    write_all(memory)
    for level, index in ancestors:
        assert memory.is_built(level, index), (level, index)
        text = memory.node_text(level, index)
        assert not any(p.decode() in text for p in pieces(SECRET)), (level, index, text)
    for state in (memory.views.chat, memory.views.wview):
        tiling.validate(state, memory.total, memory.tree.built)
    rewritten = view_text(memory)
    covering = next(k for k, p in enumerate(memory.views.chat.parts) if tiling.first(p) <= target < tiling.end(p))
    lines_before, lines_after = before.splitlines(), rewritten.splitlines()
    # <chat> is line 0: view part k is line k + 1.  Everything before the covering line is byte-identical.
    assert lines_before[:covering + 1] == lines_after[:covering + 1]
    assert len(lines_before) == len(lines_after)
    assert not any(p.decode() in rewritten for p in pieces(SECRET))
    memory.commit_turn("c1", "Garden", [Message("user", "one more turn", memory.clock())])
    assert view_text(memory).startswith(rewritten.rsplit("</chat>", 1)[0])  # stable again after
    assert found_in_folder(memory.folder, SECRET) == []
    memory.close()

    reopened = Memory.open(memory_id=memory.memory_id, settings=memory.settings, root=tmp_path)
    assert reopened.message(target).text == tomb and reopened.reports == []
    reopened.close()


def test_bad_input_changes_nothing(tmp_path: Path) -> None:
    memory = build(tmp_path, 16, 3)
    for call in (lambda: forget.select(memory, ids=[10_000]), lambda: forget.select(memory, turns=[99]),
                 lambda: forget.select(memory, query="  ")):
        with pytest.raises(MemoryUseError):
            call()
    assert memory.message(6).text == SECRET and not (memory.folder / forget.REGISTRY).exists()
    assert forget.select(memory, turns=[3]) == [6, 7]
    assert forget.select(memory, since=1_790_000_003.0, before=1_790_000_004.0) == [6, 7]
    forget.forget(memory, [6])
    assert forget.select(memory, turns=[3]) == [7]  # a forgotten message is not chosen again
    memory.close()


# -- crashes ----------------------------------------------------------------------------------------------

KILLS = 50


def test_sigkill_at_fifty_points_is_before_or_after(tmp_path: Path) -> None:
    template = tmp_path / "template"
    memory = build(template, 64, 21)
    mid, settings = memory.memory_id, memory.settings
    memory.close()
    target = 42
    rng = random.Random(19)
    steps = None
    outcomes = {"before": 0, "after": 0, "replayed": 0}
    for kill in range(KILLS):
        root = tmp_path / f"k{kill}"
        shutil.copytree(template, root)
        exact = kill % 2 == 0
        stop = rng.randrange(steps) if steps else 0
        proc = harness.spawn("forget_child.py", "forget", str(root), mid, json.dumps(SMALL), str(target),
                             str(stop if exact else -1), stderr_path=tmp_path / f"k{kill}.err")
        reader = harness.LineReader(proc.stdout.fileno())
        seen = 0
        while True:
            line = reader.readline(60)
            if line is None:
                break
            answer = json.loads(line)
            if "done" in answer:
                break
            seen += 1
            if (exact and answer["n"] == stop) or (not exact and seen > stop):
                break
        proc.kill()
        proc.wait()
        if steps is None:  # the first run (stop 0 exact) only counts the steps of a whole forget
            steps = 20
        reopened = Memory.open(memory_id=mid, settings=settings, root=root)
        folder = reopened.folder
        text = reopened.message(target).text
        if text == SECRET:
            outcomes["before"] += 1
            assert target not in reopened.log.forgotten
            leftovers = [p for p in folder.rglob("*") if p.is_file() and (p.name.endswith(".tmp")
                                                                         or p.name.startswith("forget."))]
            assert all(not any(x in p.read_bytes() for x in pieces(SECRET)) for p in leftovers)
            forget.forget(reopened, [target])  # and forgetting again completes
        else:
            outcomes["after"] += 1
            outcomes["replayed"] += any("finished forgetting" in r for r in reopened.reports)
            assert text.startswith("(forgotten on ")
        assert found_in_folder(folder, SECRET) == [], (kill, stop, exact)
        assert list(folder.glob("forget.*")) == []  # no redo, no merge left to do
        for state in (reopened.views.chat, reopened.views.wview):
            tiling.validate(state, reopened.total, reopened.tree.built_or_erased)
        assert search.search(search.corpus_of(reopened), "Quokka", 0, 5, 10.0).hits == []
        assert search.search(search.corpus_of(reopened), "tomatoes", 0, 5, 10.0).hits
        write_all(reopened)
        assert all(reopened.is_built(*p) for p in [(0, target), (1, target // 2), (6, 0)])
        reopened.close()
        shutil.rmtree(root)
    assert outcomes["before"] and outcomes["after"] and outcomes["replayed"] >= 10, outcomes
    print(outcomes)


TITLE_WORDS = "Quokka-Ninety-Seven"


def test_sigkill_in_a_forget_by_match_leaves_no_title_behind(tmp_path: Path) -> None:
    """A forget that erases chat titles (issue #33) is crash-atomic like one of messages: killed at any
    step, the reopened memory has forgotten the title everywhere, or not at all (and forgets it then)."""
    from endless.core.store.turns import TurnRecord

    template = tmp_path / "template"
    memory = Memory.open(workspace_key(None, template / "ws"), settings=Settings(**SMALL), root=template)
    at, title = 1_790_000_000.0, f"Vault {TITLE_WORDS} notes"
    memory.commit_turns([TurnRecord("c2" if 10 <= t < 16 else "c1", title if 10 <= t < 16 else "Garden",
                                    [Message("user", f"turn {t}: the tomatoes in bed {t % 7} need water", at + t),
                                     Message("reply", f"noted for bed {t % 7}, turn {t}", at + t)], at=at + t)
                         for t in range(32)], plan=False)
    memory.plan_views()
    write_all(memory)
    search.search(search.corpus_of(memory), "tomatoes", 0, 5, 10.0)  # the index is caught up
    mid = memory.memory_id
    memory.close()
    rng = random.Random(33)
    outcomes = {"before": 0, "after": 0}
    for kill in range(12):
        root = tmp_path / f"k{kill}"
        shutil.copytree(template, root)
        stop = 0 if kill == 0 else rng.randrange(18)
        proc = harness.spawn("forget_child.py", "forget", str(root), mid, json.dumps(SMALL), "0", str(stop),
                             TITLE_WORDS, stderr_path=tmp_path / f"k{kill}.err")
        reader = harness.LineReader(proc.stdout.fileno())
        while True:
            line = reader.readline(60)
            if line is None or "done" in json.loads(line) or json.loads(line)["n"] == stop:
                break
        proc.kill()
        proc.wait()
        reopened = Memory.open(memory_id=mid, settings=Settings(**SMALL), root=root)
        titles = {reopened.turn(t).title for t in range(10, 16)}
        if titles == {title}:
            outcomes["before"] += 1
            forget.forget(reopened, [], query=TITLE_WORDS)  # and forgetting again completes
        else:
            outcomes["after"] += 1
        assert {reopened.turn(t).title for t in range(10, 16)} == {""}, (kill, stop)
        assert found_in_folder(reopened.folder, TITLE_WORDS) == [], (kill, stop)
        hits = search.search(search.corpus_of(reopened), "Vault", 0, 5, 10.0).hits
        assert hits == [], (kill, stop, hits)
        assert search.search(search.corpus_of(reopened), "Garden", 0, 5, 10.0).hits[0].kind == "title"
        reopened.close()
        shutil.rmtree(root)
    assert outcomes["before"] and outcomes["after"], outcomes


# -- other processes -----------------------------------------------------------------------------------------

def test_forget_while_another_commits_and_a_third_searches(tmp_path: Path) -> None:
    memory = build(tmp_path, 200, 50)
    target = 100
    committer = harness.spawn("forget_child.py", "commit", str(tmp_path), memory.memory_id, json.dumps(SMALL),
                              "150", stderr_path=tmp_path / "commit.err")
    searcher = harness.spawn("forget_child.py", "search", str(tmp_path), memory.memory_id, json.dumps(SMALL),
                             "60", "Quokka tomatoes", stderr_path=tmp_path / "search.err")
    watcher = harness.spawn("forget_child.py", "read", str(tmp_path), memory.memory_id, json.dumps(SMALL),
                            "400", str(target), stderr_path=tmp_path / "read.err")
    readers = [harness.LineReader(p.stdout.fileno()) for p in (committer, searcher, watcher)]
    assert all(r.readline(60) is not None for r in readers)  # all three running
    neighbour = memory.message(target + 1).text
    forget.forget(memory, [target])
    committed = [json.loads(x) for x in readers[0].drain(120)]
    hits = [json.loads(x)["hits"] for x in readers[1].drain(120)]
    seen = [json.loads(x) for x in readers[2].drain(120)]
    assert committer.wait(60) == 0 and searcher.wait(60) == 0, (tmp_path / "commit.err").read_text()
    assert watcher.wait(60) == 0, (tmp_path / "read.err").read_text()
    # The reader never saw a torn state: the message whole, then only its tombstone; its neighbour intact.
    texts = [s["text"] for s in seen]
    assert all(t == SECRET or t.startswith("(forgotten on ") for t in texts), set(texts)
    assert texts == sorted(texts, key=lambda t: t != SECRET)  # once gone, gone
    assert all(s["neighbour"] == neighbour for s in seen)
    assert committed  # commits went on around the forget
    memory.catch_up()
    assert memory.total == 400 + 150
    for k in range(150):
        assert memory.message(400 + k).text == f"later turn {k} about tulips"
    assert memory.message(target).text.startswith("(forgotten on ")
    assert hits and all(isinstance(h, list) for h in hits)
    assert search.search(search.corpus_of(memory), "Quokka", 0, 5, 10.0).hits == []
    assert found_in_folder(memory.folder, SECRET) == []
    memory.close()


# -- retention -----------------------------------------------------------------------------------------------

def test_retention_forgets_what_is_older_than_the_setting(tmp_path: Path) -> None:
    """``forget_after_days``: the writer's process forgets old messages with the same machinery."""
    now = [1_790_000_000.0]
    settings = Settings(**SMALL, forget_after_days=2.0)
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), settings=settings, root=tmp_path, clock=lambda: now[0])
    for day in range(5):
        now[0] = 1_790_000_000.0 + day * 86_400
        memory.commit_turn("c1", "Days", [Message("user", f"day {day}: {SECRET}" if day == 0 else f"day {day} notes",
                                                  now[0])])
    write_all(memory)  # the pool runs retention as it starts: days 0 and 1 are more than 2 days old
    assert [memory.message(k).text.startswith("(forgotten on ") for k in range(5)] == [True, True, False, False, False]
    assert found_in_folder(memory.folder, SECRET) == []
    assert forget.retention(memory) is None  # nothing more to do until time moves on
    now[0] += 86_400
    assert forget.retention(memory).ids == [2]
    memory.close()
    with pytest.raises(Exception, match="forget_after_days must be a positive"):
        Settings(forget_after_days=0.0).replace(forget_after_days=-1.0)


def test_the_change_lock_excludes_other_threads_of_the_process(tmp_path: Path) -> None:
    """A History page forgetting on its own ``Memory`` while the chat's thread commits: one at a time."""
    import threading

    from endless.core.store.locks import ChangeLock, LockBusy

    path = tmp_path / "lock"
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with ChangeLock(path):
            with ChangeLock(path):  # reentrant in its own thread
                held.set()
                release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(30)
    outcome: list[str] = []

    def other() -> None:
        try:
            with ChangeLock(path, timeout=0.2):
                outcome.append("entered")
        except LockBusy as exc:
            outcome.append(str(exc))

    second = threading.Thread(target=other)
    second.start()
    second.join(30)
    assert outcome and "another thread of this process" in outcome[0]
    release.set()
    thread.join(30)
    with ChangeLock(path, timeout=0.2):
        pass  # free again


def test_forgetting_two_neighbours_erases_their_shared_lines_once(tmp_path: Path) -> None:
    memory = build(tmp_path, 32, 5)
    mine = {p for m in (10, 11) for p in forget._written_from(memory, m)}
    each = [len(forget._written_from(memory, m)) for m in (10, 11)]
    outcome = forget.forget(memory, [10, 11])
    assert outcome.nodes == len(mine) < sum(each)
    assert found_in_folder(memory.folder, SECRET) == []
    assert search.search(search.corpus_of(memory), "tomatoes", 0, 5, 10.0).hits  # the index is sound
    memory.close()


def test_side_copies_are_blanked(tmp_path: Path) -> None:
    """A kept message (``pending/kept.jsonl``) and a torn line moved to ``damaged.jsonl`` hold the words too."""
    from endless.turn import pending

    memory = build(tmp_path, 8, 2)
    kept = pending.keep(memory, "c1", "Garden", SECRET + " (sent again)")
    memory.close()
    torn = json.dumps({"turn": 99, "m": [{"k": "user", "x": SECRET}]})[:-10].encode()
    with open(memory.log.path, "ab") as handle:
        handle.write(torn)  # a torn last line: moved aside at the next open
    memory = Memory.open(memory_id=memory.memory_id, settings=memory.settings, root=tmp_path)
    assert SECRET[:40].encode() in (memory.folder / "damaged.jsonl").read_bytes()
    assert forget.select(memory, query="Quokka") == [4, kept.ident]
    forget.forget(memory, forget.select(memory, query="Quokka"))
    assert found_in_folder(memory.folder, SECRET) == []
    for line in (memory.folder / "pending" / "kept.jsonl").read_bytes().splitlines():
        json.loads(line)  # still one JSON record a line
    assert pending.waiting(memory)[0].ident == kept.ident  # still waiting to be delivered, its words gone
    memory.close()
