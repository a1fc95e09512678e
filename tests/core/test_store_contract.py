"""The storage seam's contract (``endless.core.store.contract.Store``), run against every backend.

Each backend is listed in ``BACKENDS`` with a way to open two handles on one
memory (two processes of one machine, or two machines on one database): what
one handle writes, the other reads after catching up.  A second backend is
added to the list and must pass the same tests unchanged.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import pytest

from endless.core.settings import Settings
from endless.core.store import Batch, FileStore, Message, Store, TurnInfo, contract, journal
from endless.core.store.turns import COMPLETED

Opener = Callable[[Callable[[], float]], Store]


def _file_backend(tmp_path: Path) -> Opener:
    folder = tmp_path / "memory"
    folder.mkdir(mode=0o700)
    def open_one(clock: Callable[[], float]) -> Store:
        store = FileStore(folder, "turn", Settings(), clock)
        store.load()
        return store

    return open_one


BACKENDS = {"files": _file_backend}


@pytest.fixture(params=sorted(BACKENDS))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    return BACKENDS[request.param](tmp_path)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class _Batch:
    def __init__(self, lines: list[bytes], infos: list[TurnInfo]) -> None:
        self.lines, self.infos = lines, infos


def _batch(store: Store, texts: list[list[str]], session: str = "s1") -> Batch:
    """Turn records placed after what ``store`` holds, as a commit prepares them under the lock."""
    lines, infos = [], []
    turn, first = store.log.turns, store.log.total
    for k, words in enumerate(texts):
        at = 1_700_000_000.0 + turn
        messages = [Message("user" if j % 2 == 0 else "reply", w, at) for j, w in enumerate(words)]
        tid = f"{0xA000 + turn:016x}"
        lines.append(store.log.encode(tid=tid, session=session, title="Chat", status=COMPLETED, at=at,
                                      messages=messages, turn=turn, first=first))
        infos.append(TurnInfo(turn, first, len(messages), session, "Chat", COMPLETED, at, tid))
        turn, first = turn + 1, first + len(messages)
    return _Batch(lines, infos)


def test_a_backend_is_a_store(opener: Opener) -> None:
    store = opener(_Clock())
    assert isinstance(store, contract.Store)
    assert isinstance(store.log, contract.LogStore) and isinstance(store.tree, contract.LineStore)
    assert isinstance(store.lease, contract.LeaseStore)
    store.close()


def test_a_bulk_commit_lands_whole_in_order_and_is_read_by_another_handle(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    with one.lock:
        one.log.catch_up(True)
        one.bulk_commit(_batch(one, [["first question", "first answer"], ["second question"]]))
    assert (one.log.total, one.log.turns) == (3, 2)
    assert two.log.total == 0  # nothing is read before catching up
    two.log.catch_up(False)
    assert (two.log.total, two.log.turns) == (3, 2)
    assert [two.log.message(i).text for i in range(3)] == ["first question", "first answer", "second question"]
    assert two.log.turn_of(2) == 1 and two.log.info(1).first == 2
    assert two.log.has_tid(f"{0xA001:016x}") and not two.log.has_tid(f"{0xA007:016x}")
    with two.lock:  # the other handle goes on where the first stopped: no gap, no duplicate id
        two.log.catch_up(True)
        two.bulk_commit(_batch(two, [["third question", "third answer"]], session="s2"))
    one.log.catch_up(False)
    assert [one.log.message(i).id for i in range(one.log.total)] == [0, 1, 2, 3, 4]
    assert one.log.read_record(2)["s"] == "s2"
    one.close()
    two.close()


def test_a_line_is_stored_once_and_the_first_one_wins(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    with one.lock:
        one.log.catch_up(True)
        one.bulk_commit(_batch(one, [["a question", "an answer"]]))
        landed = one.tree.add([one.tree.encode(0, 0, "you: a question", None)], [(0, 0)], ["you: a question"], True)
    assert landed == [(0, 0)] and one.tree.built(0, 0) and not one.tree.built(0, 1)
    two.log.catch_up(False)
    assert two.tree.catch_up(False) == [(0, 0)]
    with two.lock:
        two.tree.catch_up(True)
        again = two.tree.add([two.tree.encode(0, 0, "a second try", None)], [(0, 0)], ["a second try"], True)
    assert again == []
    one.tree.catch_up(False)
    assert one.tree.cached_text(0, 0) == "you: a question" and one.tree.count == 1
    one.close()
    two.close()


def test_the_change_lock_admits_one_holder_at_a_time(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    held, entered, release = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with one.lock:
            held.set()
            release.wait(30)

    def enter() -> None:
        with two.lock:
            entered.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    waiter = threading.Thread(target=enter)
    waiter.start()
    assert not entered.wait(0.3)  # (a bounded look that it is still waiting, not a synchronisation)
    release.set()
    assert entered.wait(30)
    holder.join()
    waiter.join()
    one.close()
    two.close()


def test_the_writers_lease_has_one_holder_and_is_taken_over_after_its_expiry(opener: Opener) -> None:
    clock = _Clock()
    one, two = opener(clock), opener(clock)
    with one.lock:
        assert one.lease.try_acquire()
    with two.lock:
        assert not two.lease.try_acquire()  # held and fresh
    clock.now += 31.0  # not renewed for longer than the lease's expiry (30 s)
    with two.lock:
        assert two.lease.try_acquire()
    with one.lock:
        assert not one.lease.renew()  # the old holder learns it lost the lease, it never writes on
    two.lease.release()
    one.close()
    two.close()


def test_a_durable_mark_is_whole_and_a_bad_name_changes_nothing(opener: Opener) -> None:
    store = opener(_Clock())
    assert store.read_mark("import-progress") is None
    store.durable_mark("import-progress", b'{"turn": 12}')
    store.durable_mark("import-progress", b'{"turn": 40}')
    assert store.read_mark("import-progress") == b'{"turn": 40}'
    for bad in ("", "../escape", ".hidden", "a/b"):
        with pytest.raises(ValueError):
            store.durable_mark(bad, b"x")
    store.close()


def test_a_journal_keeps_a_turn_in_progress_message_by_message(opener: Opener) -> None:
    store = opener(_Clock())
    turn = store.journal("s1", "Chat", lambda m: Message(m.kind, m.text.replace("hunter2", "[secret]"), m.at))
    turn.add([Message("user", "my password is hunter2", 1.0)])
    turn.add([Message("reply", "noted", 2.0)])
    found = [journal.read(path) for path, beacon in journal.orphans(store.folder)]
    assert found == []  # its process is alive: not an orphan
    pending = journal.read(journal.paths(store.folder, "s1")[0])
    assert [m.text for m in pending.messages] == ["my password is [secret]", "noted"]
    turn.finish()
    assert not journal.paths(store.folder, "s1")[0].exists()
    store.close()
