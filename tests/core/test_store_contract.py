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


def _postgres_backend(tmp_path: Path, request: pytest.FixtureRequest) -> Opener:
    """Each handle a machine of its own: its own local folder (the copy of the log and the tree, the journals),
    one database between them."""
    url = request.getfixturevalue("pg_store_url")
    from endless.core.store.postgres import PostgresStore

    handles = iter(range(1_000))

    def open_one(clock: Callable[[], float]) -> Store:
        folder = tmp_path / f"machine-{next(handles)}" / "memory"
        folder.mkdir(mode=0o700, parents=True)
        store = PostgresStore(folder, "turn", Settings(store=url), clock)
        store.load()
        return store

    return open_one


BACKENDS = {"files": lambda tmp_path, request: _file_backend(tmp_path), "postgres": _postgres_backend}


@pytest.fixture(params=sorted(BACKENDS))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    return BACKENDS[request.param](tmp_path, request)


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


def test_the_forget_registry_is_read_by_another_handle_in_order_each_entry_once(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    assert one.forgets.read(0) == ([], 0)
    one.forgets.add("op-a", b'{"op":"op-a","ids":[3]}\n')
    one.forgets.add("op-b", b'{"op":"op-b","ids":[5,6]}\n')
    assert one.forgets.holds("op-a")
    entries, after = two.forgets.read(0)
    assert [e.strip() for e in entries] == [b'{"op":"op-a","ids":[3]}', b'{"op":"op-b","ids":[5,6]}']
    assert two.forgets.holds("op-b") and not two.forgets.holds("op-c")
    assert two.forgets.read(after) == ([], after)  # nothing new since
    one.forgets.add("op-c", b'{"op":"op-c","ids":[9]}\n')
    more, _ = two.forgets.read(after)
    assert [e.strip() for e in more] == [b'{"op":"op-c","ids":[9]}']
    one.close()
    two.close()


def test_an_append_made_durable_is_read_whole_and_a_telling_store_wakes_the_other_handle(opener: Opener) -> None:
    """What ``Memory`` does around a commit: append under the lock, ``durable()`` after it; the batch is
    then read whole by another handle.  A store that tells of changes (``watch``) wakes the other
    handle's waiter at the append; the files tell nobody (their waiters poll)."""
    one, two = opener(_Clock()), opener(_Clock())
    told = threading.Event()
    listening = two.watch(told.set)
    if isinstance(two, FileStore):
        assert listening is False
    else:
        assert listening or told.wait(30)  # (told once its listening starts)
        assert two.watch(told.set)
        told.clear()
    with one.lock:
        one.log.catch_up(True)
        batch = _batch(one, [["durable, then acknowledged"]])
        one.log.add(batch.lines, batch.infos, True)
    one.durable()
    if not isinstance(two, FileStore):
        assert told.wait(30)
    two.log.catch_up(False)
    assert two.log.total == 1 and two.log.message(0).text == "durable, then acknowledged"
    one.close()
    two.close()


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


# -- the address space: what search, forget and the checks read and patch through the seam -------------


def test_records_are_read_by_range_forwards_and_backwards_at_their_addresses(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    with one.lock:
        one.log.catch_up(True)
        one.bulk_commit(_batch(one, [["alpha one", "alpha two"], ["beta"], ["gamma one", "gamma two"]]))
    two.log.catch_up(False)
    log = two.log
    assert log.stored_end() == log.end > 0
    read = list(log.records())
    assert [(turn, record["id"]) for turn, _, record in read] == [(0, 0), (1, 2), (2, 3)]
    assert [end for _, end, _ in read] == [log.offsets[t] + log.lengths[t] + 1 for t in range(3)]
    for turn in range(3):  # a record read at its address is the record the range gave
        line = log.read_at(log.offsets[turn], log.lengths[turn])
        assert line.startswith(b"{") and f'"turn":{turn}'.encode() in line
    later = list(log.records(log.offsets[1], first_turn=1))
    assert [turn for turn, _, _ in later] == [1, 2]
    back = b"".join(data for _, data in reversed(list(log.backward(log.end))))
    assert back == b"".join(log.read_at(log.offsets[t], log.lengths[t]) + b"\n" for t in range(3))
    with log.reading() as read_at:
        assert read_at is not None and read_at(log.offsets[2], log.lengths[2]) == log.read_at(log.offsets[2],
                                                                                              log.lengths[2])
    assert log.holds(log.end, log.first_tid()) and log.holds(0, "")
    assert not log.holds(log.end + 1, log.first_tid())
    assert not log.holds(log.end, "0000000000000bad")  # another log
    one.close()
    two.close()


def test_a_patch_is_durable_same_length_and_read_by_another_handle(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    with one.lock:
        one.log.catch_up(True)
        one.bulk_commit(_batch(one, [["a secret word", "the answer"]]))
        log = one.log
        line = log.read_at(log.offsets[0], log.lengths[0])
        at = log.offsets[0] + line.index(b'"a secret word"')
        patches = [(at, len(b'"a secret word"'))]
        seals = [seal for seal in [log.seal_after(0, patches)] if seal is not None]
        log.patch(log.patch_writes(patches, seals))
    two.log.catch_up(False)
    assert two.log.lengths[0] == len(line) and two.log.end == one.log.end
    assert two.log.message(0).text == "" and two.log.message(1).text == "the answer"
    assert two.log.read_record(0) is not None  # its checksum was written with the blanked text
    one.close()
    two.close()


def test_tree_lines_are_read_by_range_and_an_erasure_is_patched_in_place(opener: Opener) -> None:
    one, two = opener(_Clock()), opener(_Clock())
    stamp = two.stamp()
    with one.lock:
        one.log.catch_up(True)
        one.bulk_commit(_batch(one, [["q", "a"]]))
        one.tree.add([one.tree.encode(0, 0, "you: q", None), one.tree.encode(0, 1, "agent: a", None)],
                     [(0, 0), (0, 1)], ["you: q", "agent: a"], True)
    assert two.stamp() != stamp  # a reader that compares stamps sees that something was stored
    two.tree.catch_up(False)
    lines = list(two.tree.lines())
    assert [two.tree.slots[0][k] - 1 for k in range(2)] == [offset for offset, _ in lines]
    assert two.tree.line_at(lines[1][0]) == lines[1][1] and b"agent: a" in lines[1][1]
    assert b"".join(d for _, d in reversed(list(two.tree.backward(two.tree.end)))) == b"".join(
        line + b"\n" for _, line in lines)
    assert two.tree.holds(two.tree.end) and not two.tree.holds(two.tree.end + 1)
    offset, old = lines[0]
    gone = b'{"gone":[0,0]}'
    with one.lock:
        one.tree.patch([(offset, gone + b" " * (len(old) - len(gone)))])
        one.tree.clear_stored_slot(0, 0, offset)
    assert two.tree.line_at(offset).startswith(gone) and len(two.tree.line_at(offset)) == len(old)
    one.close()
    two.close()
