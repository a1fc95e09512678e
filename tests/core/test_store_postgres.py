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
    """One turn committed as ``Memory`` does: under the lock, caught up, placed after what is there,
    then made durable once the lock is released."""
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
    store.durable()  # (after the lock, as Memory does: acknowledged once on the server's disk)
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
    # The holder's process dies: its connection goes, and its liveness lock with it.  The server ends a
    # backend asynchronously: the timeout form returns once that backend is gone (or says it is not).
    pid = hosts[holder].db.rows("SELECT pg_backend_pid()")[0][0]
    assert others[0].db.rows("SELECT pg_terminate_backend(%s, 20000)", (pid,)) == [(True,)]
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


SMALL = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
         "writer_view_ceiling": 1000, "writer_view_floor": 500}


def _pieces(text: str) -> set[bytes]:
    return {text[k:k + 12].encode("utf-8") for k in range(len(text) - 11)}


def _found(paths, text: str) -> list[str]:
    """The files among ``paths`` holding any 12-character piece of ``text``."""
    wanted = _pieces(text)
    return [str(path) for path in paths if path.is_file() and any(p in path.read_bytes() for p in wanted)]


def _relation_files(pg_cluster, url: str) -> list[Path]:
    """Every file of the database's relations (heaps, TOAST, indexes), written out first (a checkpoint)."""
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute("CHECKPOINT")
        oid = admin.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
    return sorted((pg_cluster.data / "base" / str(oid)).glob("*"))


def _built(tmp_path: Path, url: str, secret: str, name: str = "laptop") -> Memory:
    """A memory of 24 turns on one machine, every line written (the offline writer), turn 9 holding ``secret``."""
    import asyncio

    from endless.core.store.turns import TurnRecord
    from endless.writer.pool import WriterPool

    memory = Memory.open(workspace_key(None, str(tmp_path / "project")), root=tmp_path / name,
                         settings=Settings(store=url, **SMALL))
    memory.commit_turns([TurnRecord("c1", "Garden", [
        Message("user", secret if t == 9 else f"turn {t}: the tomatoes in bed {t % 7} need water", 1.79e9 + t),
        Message("reply", f"noted for bed {t % 7}, turn {t}", 1.79e9 + t)], at=1.79e9 + t) for t in range(24)])
    asyncio.run(WriterPool(memory, lambda route: None).run(until_idle=True))
    return memory


def test_a_forget_reaches_every_machine_and_the_databases_own_files(tmp_path, pg_cluster, pg_store_url):
    """One transaction forgets on the laptop; the desktop, open all along, answers with the tombstone at once,
    its copy of the log and its side copies hold no piece of the words, and neither does any file of the
    database (heaps, TOAST, the GIN index) once the forget's VACUUM FULL ran."""
    from endless.core import lookback
    from endless.core.privacy import forget
    from endless.core.search import finder

    secret = f"my locker code is {os.urandom(4).hex()} and the alarm word is Wombat-{os.urandom(3).hex()}"
    laptop = _built(tmp_path, pg_store_url, secret)
    target = 18
    assert laptop.message(target).text == secret
    desktop = Memory.open(laptop.key, root=tmp_path / "desktop", settings=laptop.settings)
    assert [h.id for h in finder.search(finder.corpus_of(desktop), "Wombat locker", 0, 5, 10.0).hits] == [target]
    turn = desktop.journal("c9", "Desktop chat")  # a turn in progress on the desktop quotes it
    turn.add("user", f"remember: {secret}", 2e9)
    assert _found((desktop.folder / "pg").rglob("*"), secret) and _found(desktop.folder.rglob("*.jsonl"), secret)
    assert _found(_relation_files(pg_cluster, pg_store_url), secret)  # (the test sees it before)

    outcome = forget.forget(laptop, forget.select(laptop, query="alarm word is wombat"))
    assert outcome.ids == [target] and outcome.nodes >= 3

    for machine in (laptop, desktop):  # each answers after catching up, as every answer begins
        assert lookback.zoom(machine, target, 1).startswith(f"{target}+0|you: (forgotten on ")
        assert finder.search(finder.corpus_of(machine), "Wombat", 0, 5, 10.0).hits == []
        assert finder.search(finder.corpus_of(machine), "tomatoes", 0, 5, 10.0).hits
        assert _found(machine.folder.rglob("*"), secret) == [], machine.folder
    assert _found(_relation_files(pg_cluster, pg_store_url), secret) == []
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:  # nor the planner's statistics
        assert admin.execute("SELECT count(*) FROM pg_statistic s JOIN pg_class c ON c.oid = s.starelid "
                             "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                             "s.stakind1 + s.stakind2 + s.stakind3 + s.stakind4 + s.stakind5 > 0 AND "
                             "(s.stavalues1::text ILIKE '%%wombat%%' OR s.stavalues2::text ILIKE '%%wombat%%' OR "
                             "s.stavalues3::text ILIKE '%%wombat%%')", (laptop.store.db.schema,)).fetchone()[0] == 0
    turn.commit()
    desktop.close()
    laptop.close()
    with Memory.open(laptop.key, root=tmp_path / "laptop", settings=laptop.settings) as again:
        assert again.message(target).text.startswith("(forgotten on ") and again.reports == []


def test_forget_after_days_forgets_the_old_turns_on_every_machine(tmp_path, pg_store_url):
    from endless.core.privacy import forget
    from endless.core.search import finder

    now = [2_000_000_000.0]
    settings = Settings(store=pg_store_url, forget_after_days=1.0)
    key = workspace_key(None, str(tmp_path / "project"))
    with Memory.open(key, root=tmp_path / "laptop", settings=settings, clock=lambda: now[0]) as memory:
        start = now[0]
        for k, at in enumerate((start - 5 * 86_400, start - 3 * 86_400, start - 3600)):
            now[0] = at  # (a turn's time is the memory's clock at its commit)
            memory.commit_turn("s", "Chat", [Message("user", f"turn {k} about the heron pond", at)])
        now[0] = start
        outcome = forget.retention(memory)
        assert outcome is not None and outcome.ids == [0, 1]
    with Memory.open(key, root=tmp_path / "desktop", settings=settings, clock=lambda: now[0]) as other:
        assert [other.message(i).text.startswith("(forgotten on ") for i in range(3)] == [True, True, False]
        assert [h.id for h in finder.search(finder.corpus_of(other), "heron", 0, 5, 10.0).hits] == [2]


@pytest.mark.parametrize("stop", ["in-transaction", "committed"])
def test_a_forget_killed_inside_its_transaction_changed_nothing_and_after_it_is_whole(tmp_path, pg_cluster,
                                                                                       pg_store_url, stop):
    """SIGKILL of the forgetting process inside its transaction: nothing forgotten (the database rolled it
    back), and forgetting again works; after its commit: forgotten everywhere, and the next open runs the
    rewrite the dead process left due."""
    import harness
    from endless.core.privacy import forget
    from endless.core.search import finder

    secret = f"the safe opens with {os.urandom(4).hex()} then Pelican-{os.urandom(3).hex()}"
    memory = _built(tmp_path, pg_store_url, secret)
    mid, key, settings, target = memory.memory_id, memory.key, memory.settings, 18
    memory.close()
    proc = harness.spawn("forget_child.py", "forget", str(tmp_path / "laptop"), mid,
                         orjson.dumps({"store": pg_store_url, **SMALL}).decode(), str(target), stop,
                         stderr_path=tmp_path / "child.err")
    reader = harness.LineReader(proc.stdout.fileno())
    try:
        while True:
            line = reader.readline(60)
            assert line is not None, (tmp_path / "child.err").read_text()
            if orjson.loads(line).get("step") == stop:
                break
    finally:
        proc.kill()
        proc.wait()
    with Memory.open(key, settings=settings, root=tmp_path / "desktop") as other:
        hits = [h.id for h in finder.search(finder.corpus_of(other), "Pelican", 0, 5, 10.0).hits]
        if stop == "in-transaction":
            assert other.message(target).text == secret and hits == [target]
            assert forget.forget(other, [target]).ids == [target]
        else:
            assert other.message(target).text.startswith("(forgotten on ") and hits == []
    assert _found(_relation_files(pg_cluster, pg_store_url), secret) == []
    with Memory.open(memory_id=mid, settings=settings, root=tmp_path / "laptop") as laptop:
        assert laptop.message(target).text.startswith("(forgotten on ")
        assert _found(laptop.folder.rglob("*"), secret) == []


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
    admin.execute(f"SET search_path TO {one.db.schema}")  # (the memory's own schema)
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
            f"SELECT data FROM {other.store.db.schema}.endless_bytes WHERE stream = 'tree' ORDER BY at"))
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


def test_two_machines_alternating_turns_see_each_others_lines_and_keep_their_views_cached(tmp_path, pg_store_url):
    """Two processes, two ENDLESS_HOMEs, one memory: each machine's head stays a byte prefix of its next one
    (DESIGN §4) except at a batch, every turn sees every turn before it, and each reads the other's lines."""
    project = str(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_STORE": pg_store_url, "ENDLESS_VIEW_CEILING": "16000",
           "ENDLESS_VIEW_FLOOR": "8000", "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    env.pop("ENDLESS_HOME", None)
    child = REPO / "tests" / "procs" / "pg_machine.py"
    names = ("laptop", "desktop")
    procs = {name: subprocess.Popen([sys.executable, str(child), str(tmp_path / name), project, name],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for name in names}
    said: dict[str, list[dict]] = {name: [] for name in names}
    try:
        for name in names:
            assert procs[name].stdout.readline().strip() == "ready"
        for turn in range(60):
            name = names[turn % 2]
            procs[name].stdin.write(f"turn {turn}\n")
            procs[name].stdin.flush()
            said[name].append(orjson.loads(procs[name].stdout.readline()))
        for proc in procs.values():
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            assert proc.communicate(timeout=60)[0].strip() == "done"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for name in names:
        seen = said[name]
        assert [s["seen"] for s in seen] == [2 * s["turn"] for s in seen]  # every earlier turn, of both, once
        assert all(s["prefix"] or s["batched"] for s in seen), [s for s in seen if not s["prefix"]]
        batches = sum(s["batched"] for s in seen)
        assert 1 <= batches <= 6, batches  # the sawtooth ran, and rarely: every other head read the cache
        assert sum(s["prefix"] for s in seen) >= len(seen) - batches
        assert seen[-1]["others"] > 0, name  # lines the other machine wrote, in this machine's view


def test_a_machine_waiting_for_a_turn_is_woken_by_the_database_not_by_polling(tmp_path, pg_store_url):
    """Machine B settles on "a new turn" with polling set to every 600 s; machine A's commit wakes it at once
    (LISTEN/NOTIFY): the wait takes a fraction of a second, far below the poll and the 120 s timeout."""
    project = str(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_STORE": pg_store_url,
           "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    env.pop("ENDLESS_HOME", None)
    key = workspace_key(None, project)
    settings = Settings(store=pg_store_url)
    with Memory.open(key, root=tmp_path / "machine-a", settings=settings) as memory:
        memory.commit_turn("s", "Chat", [Message("user", "the first turn", 1.0)])
        waiter = subprocess.Popen([sys.executable, str(REPO / "tests" / "procs" / "pg_waiter.py"),
                                   str(tmp_path / "machine-b"), project], stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert waiter.stdout.readline().split() == ["waiting", "1"]
            memory.commit_turn("s", "Chat", [Message("user", "a turn from machine A", 2.0),
                                             Message("reply", "heard on machine B", 2.0)])
            said, _ = waiter.communicate(timeout=120)
        finally:
            if waiter.poll() is None:
                waiter.kill()
    assert waiter.returncode == 0
    word, total, seconds = said.split()
    assert (word, total) == ("woke", "3")
    assert float(seconds) < 10.0  # (a poll would have taken 600 s: the test's timeout ends it first)


def _turns_child(tmp_path: Path, url: str, home: str, project: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_STORE": url, "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    env.pop("ENDLESS_HOME", None)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "procs" / "pg_turns.py"), str(tmp_path / home),
                             project], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _say(proc: subprocess.Popen, line: str) -> None:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def test_the_server_killed_mid_commit_loses_nothing_acknowledged_and_the_turn_is_committed_after(
        tmp_path, pg_cluster, pg_store_url):
    """A real machine's chat commits; the server is killed while a commit's transaction has written the
    turn's bytes and not committed (held there by a trigger the test adds), then restarted.  The chat gets
    a clear error naming the store (its password masked) and what to do; every acknowledged turn is there,
    the cut one is not half there; the chat's next open commits it from its journal, once."""
    url = pg_store_url.replace("postgres@", "postgres:pw-s3cr3t@")  # (trust: the password is not checked)
    project = str(tmp_path / "project")
    chat = _turns_child(tmp_path, url, "chat-home", project)
    acknowledged = []
    for k in range(3):
        _say(chat, f"turn before the crash {k}")
        word, tid = chat.stdout.readline().split()
        assert word == "ok"
        acknowledged.append(tid)
    schema = PostgresStore(tmp_path / "probe" / "memories" / workspace_key(None, project).memory_id, "turn",
                           Settings(store=url), time.time).db.schema
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE FUNCTION {schema}.stall() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$")
        admin.execute(f"CREATE TRIGGER stall AFTER INSERT ON {schema}.endless_bytes FOR EACH ROW "
                      f"WHEN (NEW.stream = 'log') EXECUTE FUNCTION {schema}.stall()")
        admin.execute("SELECT pg_advisory_lock(4242)")
        _say(chat, "turn the turn cut by the crash")
        waiting = []
        for _ in range(600):  # until the chat's transaction waits inside the trigger (its bytes written)
            waiting = admin.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 "
                                    "AND NOT granted").fetchall()
            if waiting:
                break
            admin.execute("SELECT pg_sleep(0.05)")
        assert waiting
        pg_cluster.stop("immediate")  # the server dies mid-commit: no shutdown, recovery at the next start
    try:
        said = chat.stdout.readline().strip()
    finally:
        pg_cluster.start()
    assert said.startswith("error the memory store postgresql://postgres:***@127.0.0.1:") and "pw-s3cr3t" not in said
    assert "Nothing that was acknowledged is lost" in said
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP TRIGGER stall ON {schema}.endless_bytes")
    with Memory.open(workspace_key(None, project), root=tmp_path / "other-machine", settings=Settings(store=url)) as m:
        assert [m.turn(t).tid for t in range(m.turns)] == acknowledged  # each once, in order; nothing of the cut one
    _say(chat, "quit")  # the chat stops (its turn's journal stays, as a process killed mid-turn leaves it)
    _, err = chat.communicate(timeout=60)
    assert chat.returncode == 0 and "pw-s3cr3t" not in err
    chat = _turns_child(tmp_path, url, "chat-home", project)  # its next start commits the cut turn, once
    _say(chat, "turn after the restart")
    word, tid = chat.stdout.readline().split()
    assert word == "ok"
    _say(chat, "quit")
    chat.communicate(timeout=60)
    with Memory.open(workspace_key(None, project), root=tmp_path / "other-machine", settings=Settings(store=url)) as m:
        turns = [m.turn(t) for t in range(m.turns)]
        assert [t.tid for t in turns[:3]] == acknowledged and turns[4].tid == tid and len(turns) == 5
        assert turns[3].status == "interrupted"
        assert [m.message(turns[3].first + k).text for k in range(2)] == ["the turn cut by the crash",
                                                                          "noted: the turn cut by the crash"]


def test_a_memory_is_readable_only_by_its_own_role(tmp_path, pg_cluster, pg_store_url):
    """Alice's memory lives in a schema only her role can use: Bob, who may make memories of his own in the
    same database, is refused hers with what to do, and reads nothing of it directly either, until an admin
    grants him her role."""
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        for role in ("alice", "bob"):
            admin.execute(f"DROP ROLE IF EXISTS {role}_{tmp_path.name[-6:]}")
        alice, bob = f"alice_{tmp_path.name[-6:]}", f"bob_{tmp_path.name[-6:]}"
        for role in (alice, bob):
            admin.execute(f"CREATE ROLE {role} LOGIN")
            admin.execute(f"GRANT CREATE ON DATABASE postgres TO {role}")
    as_alice = pg_store_url.replace("postgres@", f"{alice}@")
    as_bob = pg_store_url.replace("postgres@", f"{bob}@")
    key = workspace_key(None, str(tmp_path / "project"))
    with Memory.open(key, root=tmp_path / "alice", settings=Settings(store=as_alice)) as memory:
        memory.commit_turn("s", "Chat", [Message("user", "alice's private plan", 1.0)])
        schema = memory.store.db.schema
    with pytest.raises(StoreUnavailable) as caught:
        Memory.open(key, root=tmp_path / "bob", settings=Settings(store=as_bob))
    said = str(caught.value)
    assert f"refused {bob}" in said and f"GRANT {alice} TO {bob}" in said and schema in said
    with psycopg.connect(as_bob, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT data FROM {schema}.endless_bytes")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT tsv FROM {schema}.endless_words")
        # The directory of keys is every role's, each row its own: Bob sees no key naming Alice's folder.
        directory = f"{schema[:-17]}_directory"
        assert conn.execute(f"SELECT count(*) FROM {directory}.endless_keys").fetchone()[0] == 0
    with Memory.open(workspace_key(None, str(tmp_path / "bobs")), root=tmp_path / "bob",
                     settings=Settings(store=as_bob)) as own:  # his own memories work
        own.commit_turn("s", "Chat", [Message("user", "bob's own", 1.0)])
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f"GRANT {alice} TO {bob}")
    with Memory.open(key, root=tmp_path / "bob", settings=Settings(store=as_bob)) as memory:
        assert memory.message(0).text == "alice's private plan"
    with psycopg.connect(as_bob, autocommit=True) as conn:  # a member of her role reads her rows too
        assert conn.execute(f"SELECT count(*) FROM {directory}.endless_keys WHERE memory = %s",
                            (key.memory_id,)).fetchone()[0] == 1


def test_no_command_shows_or_logs_the_stores_password(tmp_path, pg_cluster, pg_store_url):
    """The password of ENDLESS_STORE appears in no output and no file of any command a person runs on a
    memory kept in PostgreSQL (trust authentication: the server takes the password without checking it),
    nor when the server refuses the connection."""
    secret = "Pw-9f2c7e1d-kestrel"
    url = pg_store_url.replace("postgres@", f"postgres:{secret}@")
    refused = f"postgresql://postgres:{secret}@127.0.0.1:{pg_cluster.port + 1}/postgres?connect_timeout=3"
    workspace = tmp_path / "project"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "ENDLESS_HOME": str(tmp_path / "home"), "ENDLESS_STORE": url,
           "ENDLESS_CONFIG": str(tmp_path / "none.toml")}
    source = tmp_path / "chat.jsonl"
    source.write_bytes(orjson.dumps({"role": "user", "content": "plant the tulips in october", "at": 1.76e9}) + b"\n")
    mid = workspace_key(None, str(workspace)).memory_id
    said = []
    for args, store, code in ((["import", "--workspace", str(workspace), str(source)], url, 0),
                              (["config"], url, 0), (["memories"], url, 0), (["memories", "--json"], url, 0),
                              (["search", "tulips", "--memory", mid], url, 0), (["history", "--memory", mid], url, 0),
                              (["doctor"], url, None), (["search", "tulips", "--memory", mid], refused, None),
                              (["memories"], refused, None), (["doctor"], refused, None)):
        done = subprocess.run([sys.executable, "-m", "endless.cli", *args], capture_output=True, text=True,
                              timeout=120, env={**env, "ENDLESS_STORE": store})
        assert code is None or done.returncode == code, (args, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        said.append((args, done.stdout + done.stderr))
    assert [args for args, text in said if secret in text] == []
    assert any("postgres:***@" in text for _, text in said)  # the store is named, masked
    assert _found((tmp_path / "home").rglob("*"), secret) == [] and _found(tmp_path.glob("*.log"), secret) == []


def test_a_common_word_is_ranked_a_stretch_of_the_newest_messages_at_a_time(tmp_path, pg_store_url):
    """Past the OR tier's cap a word's rows are ranked newest stretch first (PgSearchIndex.ranked): the
    messages holding every word still come first, the rest of a page comes from the newest messages, and
    pages of a longer list are the same hits in the same order (the pin to the first page's messages)."""
    from endless.core.search import finder
    from endless.core.search.pg_words import STRETCH
    from endless.core.settings import STORE_SEARCH_WINDOW_ROWS
    from endless.core.store.turns import TurnRecord

    size = 2 * STRETCH + 3000
    planted = {1_000, 9_000, 17_000}
    # (older messages say "heron" twice: ranked whole, they would come first; by stretches, the newest do)
    texts = [("pelican heron " if k in planted else ("heron heron " if k < 2 * STRETCH else "heron pond ")
              if k % 3 == 0 else "") + f"note {k}" for k in range(size)]
    with Memory.open(workspace_key(None, str(tmp_path / "ws")), root=tmp_path / "home",
                     settings=Settings(store=pg_store_url)) as memory:
        for start in range(0, size, 5_000):
            memory.commit_turns([TurnRecord("s", "Birds", [Message("user", text, 1.7e9 + start + k)])
                                 for k, text in enumerate(texts[start:start + 5_000])], sync=False, plan=False)
        docs = memory.search_index.term_docs(["heron"])
        assert docs["heron"] > STORE_SEARCH_WINDOW_ROWS  # (so its rows are ranked a stretch at a time)
        whole = finder.search(finder.corpus_of(memory), "heron pelican", 0, 60, 30.0)
        ids = [h.id for h in whole.hits]
        assert sorted(ids[:3]) == sorted(planted)  # every word first, wherever they are
        rest = ids[3:]
        assert all(texts[i].startswith("heron") for i in rest) and len(rest) == 57
        assert min(rest) >= 2 * STRETCH  # the rest of the page from the newest stretch
        first = finder.search(finder.corpus_of(memory), "heron pelican", 0, 20, 30.0)
        second = finder.search(finder.corpus_of(memory), "heron pelican", 20, 20, 30.0, below=first.below)
        third = finder.search(finder.corpus_of(memory), "heron pelican", 40, 20, 30.0, below=first.below)
        assert [h.id for h in first.hits + second.hits + third.hits] == ids  # the same hits, the same order
