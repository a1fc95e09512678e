"""The PostgreSQL store beyond the shared contract (issue 31): several machines, the lease, errors, the setting.

Against a real PostgreSQL server (the ``pg_cluster`` fixture of tests/conftest.py); each
"machine" is a store handle with a local folder of its own (its copy of the log and the
tree, its journals), as two hosts with different ``ENDLESS_HOME``s on one database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from endless.core.memory import Memory
from endless.core.settings import Settings, describe, load_settings, masked_store
from endless.core.store import Message, TurnInfo, workspace_key
from endless.core.store.turns import COMPLETED

psycopg = pytest.importorskip("psycopg")

from endless.core.store.pg_db import StoreConflict, StoreUnavailable  # noqa: E402
from endless.core.store.postgres import PostgresStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _machine(tmp_path: Path, url: str, name: str, clock=time.time, memory: str = "memory") -> PostgresStore:
    folder = tmp_path / name / "memories" / memory
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = PostgresStore(folder, "turn", Settings(store=url), clock)
    store.load()
    return store


def _commit(store: PostgresStore, words: list[str], session: str) -> TurnInfo:
    """One turn committed as ``Memory`` does: under the lock, caught up, placed after what is there."""
    with store.lock:
        store.log.catch_up(True)
        turn, first = store.log.turns, store.log.total
        at = 1_700_000_000.0 + turn
        tid = os.urandom(8).hex()
        messages = [Message("user" if k % 2 == 0 else "reply", w, at) for k, w in enumerate(words)]
        line = store.log.encode(tid=tid, session=session, title="Chat", status=COMPLETED, at=at,
                                messages=messages, turn=turn, first=first)
        info = TurnInfo(turn, first, len(messages), session, "Chat", COMPLETED, at, tid)
        store.log.add([line], [info], True)
    return info


def _read_all(store: PostgresStore) -> list[tuple[int, str, str]]:
    store.log.catch_up(False)
    return [(m.id, m.text, store.log.info(store.log.turn_of(m.id)).tid)
            for m in (store.log.message(i) for i in range(store.log.total))]


def test_two_machines_committing_alternately_read_every_turn_once_in_one_order(tmp_path, pg_store_url):
    laptop, desktop = _machine(tmp_path, pg_store_url, "laptop"), _machine(tmp_path, pg_store_url, "desktop")
    made = []
    for k in range(6):
        machine, session = (laptop, "on-laptop") if k % 2 == 0 else (desktop, "on-desktop")
        made.append(_commit(machine, [f"question {k}", f"answer {k}"], session).tid)
    seen_laptop, seen_desktop = _read_all(laptop), _read_all(desktop)
    assert seen_laptop == seen_desktop
    assert [i for i, _, _ in seen_laptop] == list(range(12))  # gap-free, no duplicate id
    assert [text for _, text, _ in seen_laptop][::2] == [f"question {k}" for k in range(6)]
    turns = [tid for k, (_, _, tid) in enumerate(seen_laptop) if k % 2 == 0]
    assert turns == made  # each turn once, in the order they were committed
    assert laptop.log.offsets == desktop.log.offsets  # the same byte addresses on both machines
    laptop.close()
    desktop.close()


def test_machines_committing_at_once_never_interleave_and_lose_nothing(tmp_path, pg_store_url):
    machines = [_machine(tmp_path, pg_store_url, f"host-{k}") for k in range(3)]
    made: list[list[str]] = [[] for _ in machines]

    def work(k: int) -> None:
        for n in range(8):
            made[k].append(_commit(machines[k], [f"host {k} turn {n}"], f"s{k}").tid)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(machines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    views = [_read_all(machine) for machine in machines]
    assert views[0] == views[1] == views[2]
    tids = [tid for _, _, tid in views[0]]
    assert sorted(tids) == sorted(t for host in made for t in host) and len(set(tids)) == 24
    for k, host in enumerate(made):  # each machine's turns land in the order it committed them
        assert [t for t in tids if t in set(host)] == host
    for machine in machines:
        machine.close()


def test_an_append_from_a_stale_end_stores_nothing(tmp_path, pg_store_url):
    """The lock's connection lost mid-change: the stream's end check keeps ids gap-free and unique."""
    one, two = _machine(tmp_path, pg_store_url, "one"), _machine(tmp_path, pg_store_url, "two")
    _commit(one, ["first"], "s")
    two.log.catch_up(False)
    _commit(one, ["second"], "s")
    stale = two.log.encode(tid="00000000000000aa", session="s", title="Chat", status=COMPLETED, at=1.0,
                           messages=[Message("user", "from a stale end", 1.0)])
    with pytest.raises(StoreConflict, match="nothing was stored"):
        two.log.append_bytes([stale], sync=True)
    assert [text for _, text, _ in _read_all(two)] == ["first", "second"]
    one.close()
    two.close()


def test_the_lease_has_one_holder_among_many_and_a_dead_holder_is_replaced_at_once(tmp_path, pg_store_url):
    hosts = [_machine(tmp_path, pg_store_url, f"host-{k}") for k in range(4)]
    start = threading.Barrier(len(hosts))
    won: list[bool] = [False] * len(hosts)

    def race(k: int) -> None:
        start.wait()
        won[k] = hosts[k].lease.try_acquire()  # (no change lock: the takeover itself is a compare-and-set)

    threads = [threading.Thread(target=race, args=(k,)) for k in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(won) == 1
    holder = won.index(True)
    others = [h for k, h in enumerate(hosts) if k != holder]
    assert not any(h.lease.try_acquire() for h in others)  # fresh and alive
    # The holder's process dies: its connection goes, and its liveness lock with it.
    pid = hosts[holder].db.rows("SELECT pg_backend_pid()")[0][0]
    others[0].db.rows("SELECT pg_terminate_backend(%s)", (pid,))
    assert others[0].lease.try_acquire()  # at once, long before the 30 s expiry
    assert not others[1].lease.try_acquire()
    rows = others[1].db.rows("SELECT holder, expires_at > now() + interval '25 seconds' FROM endless_leases")
    assert rows == [(others[0].lease.token, True)]  # the expiry is on the database's clock
    for host in hosts:
        host.close()


def test_an_expired_lease_is_taken_over_on_the_databases_clock(tmp_path, pg_store_url):
    clock_now = [time.time()]

    def clock() -> float:
        return clock_now[0]

    one = _machine(tmp_path, pg_store_url, "one", clock)
    two = _machine(tmp_path, pg_store_url, "two", clock)
    assert one.lease.try_acquire() and not two.lease.try_acquire()
    assert one.lease.renew()
    clock_now[0] += 29.0
    assert not two.lease.try_acquire()  # renewed 29 s ago: still held
    clock_now[0] += 2.0
    assert two.lease.try_acquire()
    assert not one.lease.renew() and one.lease.token is None  # the old holder stops writing
    two.lease.release()
    assert one.lease.try_acquire()
    one.close()
    two.close()


def test_a_refused_connection_names_the_setting_and_never_the_password(tmp_path, pg_cluster):
    url = f"postgresql://postgres:s3cret-pw@127.0.0.1:{pg_cluster.port + 1}/postgres?connect_timeout=3"
    folder = tmp_path / "memory"
    folder.mkdir()
    with pytest.raises(StoreUnavailable) as caught:
        PostgresStore(folder, "turn", Settings(store=url), time.time)
    said = str(caught.value)
    assert "ENDLESS_STORE" in said and "s3cret-pw" not in said
    assert f"postgresql://postgres:***@127.0.0.1:{pg_cluster.port + 1}/postgres" in said


def test_the_store_setting_is_loaded_like_the_others_and_shown_masked(tmp_path):
    url = "postgresql://team:hunter2@db.example:5432/endless?sslmode=require"
    settings = load_settings(environ={"ENDLESS_STORE": url}, path=tmp_path / "none.toml")
    assert settings.store == url and settings.source("store") == "env ENDLESS_STORE"
    shown = dict((name, value) for name, value, _ in describe(settings))
    assert shown["store"] == "postgresql://team:***@db.example:5432/endless"
    assert "hunter2" not in masked_store(url)
    (tmp_path / "endless.toml").write_text('store = "sqlite:///x"\n')
    with pytest.raises(ValueError, match="postgresql:// URL"):
        load_settings(environ={}, path=tmp_path / "endless.toml")
    assert load_settings(environ={}, path=tmp_path / "none.toml").store == ""


def test_a_files_memory_never_loads_the_driver(tmp_path):
    code = ("import sys, time; from pathlib import Path; from endless.core.memory import Memory; "
            "from endless.core.settings import Settings; from endless.core.store import Message, workspace_key; "
            f"m = Memory.open(workspace_key(None, {str(tmp_path)!r}), root=Path({str(tmp_path / 'root')!r}), "
            "settings=Settings()); m.commit_turn('s', 'Chat', [Message('user', 'hello', 1.0)]); m.close(); "
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('psycopg', 'psycopg_pool')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_memory_committed_on_one_machine_is_read_and_searched_on_another(tmp_path, pg_store_url, monkeypatch):
    for name in list(os.environ):
        if name.startswith("ENDLESS_"):
            monkeypatch.delenv(name)
    key = workspace_key(None, str(tmp_path / "project"))
    settings = Settings(store=pg_store_url)
    laptop, desktop = tmp_path / "laptop-home", tmp_path / "desktop-home"
    with Memory.open(key, root=laptop, settings=settings) as memory:
        for k in range(3):
            memory.commit_turn("s1", "Garden", [Message("user", f"how deep for tulip bulbs, try {k}?", 1e9 + k),
                                                Message("reply", f"about {k + 15} cm, pointed end up", 1e9 + k),
                                                Message("user", "thanks", 1e9 + k)])
        texts = [memory.message(i).text for i in range(memory.total)]
    assert len(texts) == 9
    with Memory.open(key, root=desktop, settings=settings) as other:  # another ENDLESS_HOME: another machine
        assert other.total == 9
        assert [other.message(i).text for i in range(9)] == texts
        other.commit_turn("s2", "Garden", [Message("user", "and daffodils? zebracrossing", 2e9)])
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_HOME": str(desktop), "ENDLESS_STORE": pg_store_url,
           "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    found = subprocess.run([sys.executable, "-m", "endless.cli", "search", "tulip", "--memory", key.memory_id,
                            "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert found.returncode == 0, found.stderr
    assert sorted(hit["id"] for hit in orjson.loads(found.stdout)["hits"]) == [0, 3, 6]
    assert pg_store_url not in found.stderr  # (no connection string in what it says)
    with Memory.open(key, root=laptop, settings=settings) as memory:  # the laptop reads the desktop's turn
        assert memory.total == 10 and memory.message(9).text.endswith("zebracrossing")
    env["ENDLESS_HOME"] = str(laptop)
    found = subprocess.run([sys.executable, "-m", "endless.cli", "search", "zebracrossing", "--memory",
                            key.memory_id, "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert found.returncode == 0, found.stderr
    assert [hit["id"] for hit in orjson.loads(found.stdout)["hits"]] == [9]


def test_a_memory_kept_in_files_is_refused_by_the_database_store_with_what_to_do(tmp_path, pg_store_url):
    key = workspace_key(None, str(tmp_path / "project"))
    with Memory.open(key, root=tmp_path / "home", settings=Settings()) as memory:
        memory.commit_turn("s", "Chat", [Message("user", "kept in files", 1.0)])
    with pytest.raises(StoreUnavailable, match="Unset ENDLESS_STORE") as caught:
        Memory.open(key, root=tmp_path / "home", settings=Settings(store=pg_store_url))
    assert "keeps its history in files" in str(caught.value)
    with Memory.open(key, root=tmp_path / "home", settings=Settings()) as memory:  # untouched
        assert memory.total == 1 and memory.message(0).text == "kept in files"


def test_a_server_crash_mid_session_says_so_and_loses_nothing_acknowledged(tmp_path, pg_cluster, pg_store_url):
    one, two = _machine(tmp_path, pg_store_url, "one"), _machine(tmp_path, pg_store_url, "two")
    _commit(one, ["before the crash"], "s")
    pg_cluster.stop("immediate")  # the server dies: no shutdown checkpoint, recovery at the next start
    try:
        with pytest.raises(StoreUnavailable) as caught:
            _commit(one, ["while it is down"], "s")
        assert "ENDLESS_STORE" in str(caught.value) and "Check that the server is running" in str(caught.value)
    finally:
        pg_cluster.start()
    _commit(one, ["after the restart"], "s")  # both connections are opened again, nothing to do by hand
    assert [text for _, text, _ in _read_all(two)] == ["before the crash", "after the restart"]
    assert [i for i, _, _ in _read_all(one)] == [0, 1]
    one.close()
    two.close()


def test_a_forget_is_refused_until_it_reaches_every_machine(tmp_path, pg_store_url):
    from endless.core.errors import MemoryUseError
    from endless.core.privacy import forget

    key = workspace_key(None, str(tmp_path / "project"))
    settings = Settings(store=pg_store_url)
    with Memory.open(key, root=tmp_path / "laptop", settings=settings) as memory:
        memory.commit_turn("s", "Chat", [Message("user", "my locker code is 4417", 1.0)])
    with Memory.open(key, root=tmp_path / "desktop", settings=settings) as other:
        assert other.message(0).text == "my locker code is 4417"  # the desktop has it in its search index too
    with Memory.open(key, root=tmp_path / "laptop", settings=settings) as memory:
        with pytest.raises(MemoryUseError, match="nothing was forgotten"):
            forget.forget(memory, [0])
        assert memory.message(0).text == "my locker code is 4417" and not memory.log.forgotten
        with Memory.open(key, root=tmp_path / "laptop", settings=settings.replace(forget_after_days=1.0)) as aged:
            assert forget.retention(aged) is None and aged.message(0).text.endswith("4417")


def test_machines_as_real_processes_commit_at_once_into_one_order(tmp_path, pg_store_url):
    """Three processes, each its own ENDLESS_HOME (three machines), commit at the same moment."""
    project = str(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_STORE": pg_store_url,
           "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    env.pop("ENDLESS_HOME", None)
    child = REPO / "tests" / "procs" / "pg_committer.py"
    procs = [subprocess.Popen([sys.executable, str(child), str(tmp_path / f"home-{k}"), project, f"m{k}", "10"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for k in range(3)]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:  # every machine starts committing now
            proc.stdin.write("go\n")
            proc.stdin.flush()
        said = [proc.communicate(timeout=120)[0].split("\n") for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert all(proc.returncode == 0 for proc in procs)
    made = [[line.split()[1] for line in lines if line.startswith("tid ")] for lines in said]
    assert [len(m) for m in made] == [10, 10, 10]
    with Memory.open(workspace_key(None, project), root=tmp_path / "reader", settings=Settings(store=pg_store_url)) as m:
        assert m.total == 60
        tids = [m.turn(t).tid for t in range(m.turns)]
        texts = [m.message(i).text for i in range(m.total)]
    assert sorted(tids) == sorted(t for host in made for t in host)  # each turn once
    for k, host in enumerate(made):  # each machine's turns in its own order, both messages side by side
        mine = [t for t in tids if t in set(host)]
        assert mine == host
    for i in range(0, 60, 2):
        tag, n = texts[i].split(" asks ")
        assert texts[i + 1] == f"{tag} hears {n}"


def test_a_local_copy_of_another_stream_is_made_again_and_a_longer_one_is_refused(tmp_path, pg_store_url):
    one = _machine(tmp_path, pg_store_url, "one")
    _commit(one, ["first life"], "s")
    one.close()
    admin = psycopg.connect(pg_store_url, autocommit=True)
    for table in ("endless_bytes", "endless_streams"):  # the memory removed and made again in the database
        admin.execute(f"DELETE FROM {table} WHERE memory = 'memory'")
    again = _machine(tmp_path, pg_store_url, "one")  # the same local folder, a new stream
    assert again.log.total == 0 and again.log.replica.size() == 0
    _commit(again, ["second life"], "s")
    assert [text for _, text, _ in _read_all(again)] == ["second life"]
    again.close()
    # The database restored from an older backup: the copy holds more than it. Nothing is thrown away.
    admin.execute("UPDATE endless_streams SET end_offset = 0 WHERE memory = 'memory' AND stream = 'log'")
    admin.execute("DELETE FROM endless_bytes WHERE memory = 'memory' AND stream = 'log'")
    with pytest.raises(StoreUnavailable, match="holds .* bytes more than"):
        _machine(tmp_path, pg_store_url, "one")
    admin.close()


def test_endless_import_into_the_database_is_read_on_another_machine(tmp_path, pg_store_url):
    source = tmp_path / "chat.jsonl"
    with open(source, "wb") as handle:
        for k in range(300):
            handle.write(orjson.dumps({"role": "user", "content": f"question {k} about tulips", "at": 1.76e9 + 60 * k,
                                       "session": f"s{k % 3}"}) + b"\n")
            handle.write(orjson.dumps({"role": "assistant", "content": f"answer {k}", "at": 1.76e9 + 60 * k + 1,
                                       "session": f"s{k % 3}"}) + b"\n")
    workspace = tmp_path / "project"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_HOME": str(tmp_path / "laptop"),
           "ENDLESS_STORE": pg_store_url, "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    done = subprocess.run([sys.executable, "-m", "endless.cli", "import", "--workspace", str(workspace), str(source)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    with Memory.open(workspace_key(None, str(workspace)), root=tmp_path / "desktop",
                     settings=Settings(store=pg_store_url)) as other:
        assert other.total == 600
        assert other.message(598).text == "question 299 about tulips" and other.message(599).text == "answer 299"
        assert sorted({other.turn(t).session for t in range(other.turns)}) == ["s0", "s1", "s2"]
        # Its free lines are read through the log on this machine too: the tree in the database holds
        # references, never a copy of the words.
        assert other.node_text(1, 299) == "you: question 299 about tulips\nAssistant: answer 299"
        admin = psycopg.connect(pg_store_url, autocommit=True)
        tree = b"".join(bytes(row[0]) for row in admin.execute(
            "SELECT data FROM endless_bytes WHERE stream = 'tree' ORDER BY at"))
        admin.close()
        assert b'"ref":"you: "' in tree and b"tulips" not in tree


def test_a_machine_copy_of_the_older_tree_format_is_copied_again(tmp_path, pg_store_url):
    """A machine's local copy named by tree format 1 is removed at open and the stream (readable by format 2
    as it is) copied again: every line reads as before."""
    key = workspace_key(None, str(tmp_path / "project"))
    settings = Settings(store=pg_store_url)
    with Memory.open(key, root=tmp_path / "laptop", settings=settings) as memory:
        memory.commit_turn("s1", "Garden", [Message("user", "how deep for tulip bulbs?", 1e9),
                                            Message("reply", "about 15 cm", 1e9 + 1)])
        local, texts = memory.tree.path, {(0, 0): memory.node_text(0, 0), (1, 0): memory.node_text(1, 0)}
    old = local.with_name("tree.turn.v1.jsonl")
    os.rename(local, old)
    os.rename(local.with_name(local.name + ".pg.json"), old.with_name(old.name + ".pg.json"))
    with Memory.open(key, root=tmp_path / "laptop", settings=settings) as memory:
        assert not old.exists() and not old.with_name(old.name + ".pg.json").exists()
        assert {part: memory.node_text(*part) for part in texts} == texts
        assert texts[(1, 0)] == "you: how deep for tulip bulbs?\nAssistant: about 15 cm"
