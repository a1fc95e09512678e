"""The host RPC (DESIGN §6): answer shapes, error codes, refusals, paging, limits.

Most checks go through Starlette's TestClient (the app in-process, a loopback
peer and Host given explicitly); the checks that depend on real HTTP (Host,
Origin, the listening address, concurrency) run a real uvicorn server on an
ephemeral port and call it with httpx.
"""

from __future__ import annotations

import concurrent.futures
import socket
from importlib import resources
from pathlib import Path

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from endless.faces.kit import answers
from endless.core.store import sessions
from endless.core.store.keys import Key, workspace_key
from endless.core.memory import Memory
from endless.core.store.turns import TurnRecord
from endless.core.store.messages import Message
from endless.faces.rpc import create_app, credential, start_in_thread

import rpc_fixtures as F  # noqa: E402

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("rpc")
    memory = F.build(root)
    mid = memory.memory_id
    memory.close()
    return root, mid


_shared: dict[Path, TestClient] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_shared():
    yield
    for shared in _shared.values():
        shared.__exit__(None, None, None)
    _shared.clear()


class _Kept:
    """A client kept open for the whole module (its app's worker process starts once)."""

    def __init__(self, c: TestClient) -> None:
        self.c = c

    def __enter__(self) -> TestClient:
        return self.c

    def __exit__(self, *exc: object) -> None:
        pass


def client(root: Path, settings=None, peer: str = "127.0.0.1"):
    """A TestClient on the app as a loopback peer; with default settings, one per root for the module."""
    if settings is None and peer == "127.0.0.1":
        if root not in _shared:
            app = create_app(F.small_settings(), root=root)
            c = TestClient(app, base_url=BASE, client=(peer, 50000), headers=credential.auth_headers(root))
            _shared[root] = c.__enter__()
        return _Kept(_shared[root])
    app = create_app(settings or F.small_settings(), root=root)
    return TestClient(app, base_url=BASE, client=(peer, 50000), headers=credential.auth_headers(root))


def envelope(method: str, rpc_id=7, **args) -> dict:
    return {"type": "client-request", "rpcId": rpc_id, "method": f"endless.{method}", "payload": {"args": args}}


def call(c, method: str, expect_ok: bool | None = True, **args):
    response = c.post(f"/api/endless.{method}", json=envelope(method, **args))
    body = response.json()
    assert body["type"] == "server-response"
    if expect_ok is True:
        assert response.status_code == 200 and body["result"]["ok"], body
        assert body["rpcId"] == 7
        return body["result"]["value"]
    return response.status_code, body


def error_of(c, method: str, **args) -> tuple[int, str, str]:
    status, body = call(c, method, expect_ok=None, **args)
    assert body["result"]["ok"] is False
    error = body["result"]["error"]
    assert set(error) == {"code", "message"} and "Traceback" not in error["message"]
    return status, error["code"], error["message"]


LINE_KEYS = {"id", "n", "text", "from", "to"}


# -- answer shapes -----------------------------------------------------------------------


def test_memories_shape(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        value = call(c, "memories")
    assert list(value) == ["memories"]
    (entry,) = value["memories"]
    assert set(entry) == {"memoryId", "agent", "project", "keyedBy", "alsoBy", "turns", "firstAt", "lastAt",
                          "writerUsage"}
    assert entry["keyedBy"] == {"kind": "path", "value": entry["project"], "folder": None}
    assert entry["alsoBy"] == []
    assert entry["memoryId"] == mid and entry["turns"] == 60
    assert entry["firstAt"] == F.START and entry["lastAt"] > entry["firstAt"]
    assert set(entry["writerUsage"]) == {"calls", "cacheRead", "miss", "output", "cost"}
    with client(root) as c:
        assert call(c, "memories", agent="nobody") == {"memories": []}
        assert len(call(c, "memories", agent="endless")["memories"]) == 1


def test_view_shape_tiles_the_history(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        value = call(c, "view", memoryId=mid)
    assert list(value) == ["lines"]
    lines = value["lines"]
    expected = 0
    with Memory.open(memory_id=mid, root=root, readonly=True, settings=F.small_settings()) as memory:
        parts = memory.views.chat.parts
        for line, (level, index) in zip(lines, parts, strict=True):
            assert set(line) == LINE_KEYS
            assert line["id"] == expected == index << level and line["n"] == 1 << level
            assert line["text"] == memory.node_text(level, index)
            assert line["from"] == memory.message(line["id"]).at
            assert line["to"] == memory.message(line["id"] + line["n"] - 1).at
            expected += line["n"]
        assert expected == memory.total
    assert any(line["n"] > 1 for line in lines)


def test_zoom_halves_and_message_pages(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        view = call(c, "view", memoryId=mid)["lines"]
        top = next(line for line in view if line["n"] > 1)
        halves = call(c, "zoom", memoryId=mid, id=top["id"], n=top["n"])["lines"]
        assert [(h["id"], h["n"]) for h in halves] == [(top["id"], top["n"] // 2),
                                                      (top["id"] + top["n"] // 2, top["n"] // 2)]
        assert all(set(h) == LINE_KEYS and h["text"] for h in halves)
        message = call(c, "zoom", memoryId=mid, id=11, n=1)["message"]
        assert set(message) == {"id", "kind", "text", "at", "sessionId", "sessionTitle", "page", "pages"}
        assert message["id"] == 11 and message["text"] == "Please keep this verbatim: " + F.SCRIPT
        assert (message["page"], message["pages"], message["kind"]) == (1, 1, "user")
        # The long paste (turn 12) is paged at zoom_page_chars (1000 in the fixture).
        long_id = next(e["id"] for t in call(c, "history", memoryId=mid, before=13, limit=1)["turns"]
                       for e in t["entries"] if e["kind"] == "user")
        first = call(c, "zoom", memoryId=mid, id=long_id, n=1)["message"]
        assert first["pages"] > 1 and len(first["text"]) == 1000
        pages = [call(c, "zoom", memoryId=mid, id=long_id, n=1, page=p)["message"]["text"]
                 for p in range(1, first["pages"] + 1)]
        assert "".join(pages).startswith("A long paste follows. line0 line1") and pages[-1].endswith("line699")


def test_history_pages_backwards_oldest_first_inside(fixture_root):
    root, mid = fixture_root
    seen = []
    with client(root) as c:
        before = None
        while True:
            args = {"memoryId": mid, "limit": 7}
            if before is not None:
                args["before"] = before
            value = call(c, "history", **args)
            turns = [t["turn"] for t in value["turns"]]
            assert turns == sorted(turns) and len(turns) <= 7
            for turn in value["turns"]:
                assert set(turn) == {"turn", "at", "sessionId", "sessionTitle", "status", "entries"}
                assert all(set(e) == {"id", "kind", "text"} for e in turn["entries"])
            seen = turns + seen
            if "next" not in value:
                break
            assert value["next"] == turns[0]
            before = value["next"]
    assert seen == list(range(60))
    with client(root) as c:
        turn9 = call(c, "history", memoryId=mid, before=10, limit=1)["turns"][0]
    assert turn9["status"] == "stopped" and turn9["entries"][-1]["kind"] == "status"
    assert turn9["sessionTitle"] == F.TITLES[0] and turn9["sessionId"] == "chat-0"
    ids = [e["id"] for e in turn9["entries"]]
    assert ids == list(range(ids[0], ids[0] + len(ids)))


def test_history_pages_forward_from_a_turn_and_from_a_day(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        oldest = call(c, "history", memoryId=mid, **{"from": 0}, limit=7)
        assert [t["turn"] for t in oldest["turns"]] == list(range(7))
        assert "next" not in oldest and oldest["later"] == 7
        seen, start = [], 0
        while start is not None:
            value = call(c, "history", memoryId=mid, **{"from": start}, limit=25)
            seen += [t["turn"] for t in value["turns"]]
            start = value.get("later")
        assert seen == list(range(60))
        # A backward page names the newer turns beyond it too; the newest page has none.
        assert call(c, "history", memoryId=mid, before=30, limit=5)["later"] == 30
        assert "later" not in call(c, "history", memoryId=mid, limit=5)
        # since: the first turn at or after a moment (turn t is at START + t * 72 minutes).
        step = 3 * F.DAY / 60
        value = call(c, "history", memoryId=mid, since=F.START + 20 * step - 1, limit=3)
        assert [t["turn"] for t in value["turns"]] == [20, 21, 22]
        assert value["next"] == 20 and value["later"] == 23
        assert all(t["at"] >= F.START + 20 * step - 1 for t in value["turns"])
        day = answers.moments.local(F.START + 2 * F.DAY, "%Y-%m-%d")
        first = call(c, "history", memoryId=mid, since=day, limit=1)["turns"][0]
        assert answers.moments.local(first["at"], "%Y-%m-%d") == day
        before_it = call(c, "history", memoryId=mid, before=first["turn"], limit=1)["turns"][0]
        assert answers.moments.local(before_it["at"], "%Y-%m-%d") < day
        past = call(c, "history", memoryId=mid, since=F.START + 10 * F.DAY)
        assert past["turns"] == [] and past["next"] == 60 and "later" not in past
        code, message = error_of(c, "history", memoryId=mid, before=5, since=day)[1:]
        assert code == answers.BAD_REQUEST and "before and since" in message
        assert "not a date" in error_of(c, "history", memoryId=mid, since="soon")[2]


def test_history_default_and_largest_limit(fixture_root, tmp_path):
    root, mid = fixture_root
    with client(root, F.small_settings(history_limit=5, history_limit_max=20)) as c:
        assert len(call(c, "history", memoryId=mid)["turns"]) == 5
        assert len(call(c, "history", memoryId=mid, limit=20)["turns"]) == 20
        assert error_of(c, "history", memoryId=mid, limit=21)[1] == answers.BAD_REQUEST
    with client(root) as c:
        assert len(call(c, "history", memoryId=mid, limit=200)["turns"]) == 60
        assert error_of(c, "history", memoryId=mid, limit=201)[1] == answers.BAD_REQUEST


def test_history_page_stops_before_2mb(tmp_path):
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), root=tmp_path, settings=F.small_settings())
    big = "x" * 290_000 + " end"
    for t in range(10):
        memory.commit_turn("s", "Big pastes", [Message("user", f"paste {t} " + big, 1.0)], sync=False)
    huge = "h" * 2_500_000
    memory.commit_turn("s", "Huge", [Message("user", huge, 2.0), Message("reply", "noted", 2.0)], sync=False)
    mid = memory.memory_id
    memory.close()
    with client(tmp_path) as c:
        response = c.post("/api/endless.history", json=envelope("history", memoryId=mid, limit=10, before=10))
        assert len(response.content) < 2_000_000
        value = response.json()["result"]["value"]
        turns = [t["turn"] for t in value["turns"]]
        assert 3 <= len(turns) < 10 and turns == list(range(10 - len(turns), 10))
        assert value["next"] == turns[0]
        assert not any(e.get("truncated") for t in value["turns"] for e in t["entries"])
        # Paging on from ``next`` reaches turn 0 without losing a turn.
        rest = call(c, "history", memoryId=mid, limit=10, before=value["next"])
        assert [t["turn"] for t in rest["turns"]] == list(range(0, value["next"]))
        # A turn larger than a page alone comes alone, its texts cut and marked.
        response = c.post("/api/endless.history", json=envelope("history", memoryId=mid, limit=5))
        assert len(response.content) < 2_000_000
        alone = response.json()["result"]["value"]
        assert [t["turn"] for t in alone["turns"]] == [10] and alone["next"] == 10
        entries = alone["turns"][0]["entries"]
        assert any(e.get("truncated") for e in entries)
        assert entries[-1] == {"id": entries[-1]["id"], "kind": "reply", "text": "noted"}


def test_search_newest_first_and_limits(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        hits = call(c, "search", memoryId=mid, query=F.MARKER.upper())["hits"]
        assert [h["turn"] for h in hits] == [41, 7]
        for hit in hits:
            assert set(hit) == {"id", "n", "at", "sessionTitle", "kind", "snippet", "marks", "line", "turn"}
            assert F.MARKER in hit["snippet"] and hit["kind"] == "user" and hit["n"] == 1
            (start, end), = hit["marks"]
            assert hit["snippet"][start:end] == F.MARKER
        assert hits[0]["id"] > hits[1]["id"] and hits[0]["at"] > hits[1]["at"]
        many = call(c, "search", memoryId=mid, query='"question"')["hits"]
        assert len(many) == 50
        assert [h["id"] for h in many] == sorted((h["id"] for h in many), reverse=True)
        ranked = call(c, "search", memoryId=mid, query="question")
        assert ranked["mode"] == "words" and len(ranked["hits"]) == 50 and ranked["more"]
        assert len(call(c, "search", memoryId=mid, query="question", limit=3)["hits"]) == 3
        assert error_of(c, "search", memoryId=mid, query="question", limit=51)[1] == answers.BAD_REQUEST
        assert error_of(c, "search", memoryId=mid, query="question", limit=0)[1] == answers.BAD_REQUEST
        pattern = call(c, "search", memoryId=mid, query="/zebra\\w+ near/")["hits"]
        assert [h["turn"] for h in pattern] == [41, 7]
        assert call(c, "search", memoryId=mid, query="nowhere-to-be-found")["hits"] == []
        assert error_of(c, "search", memoryId=mid, query="/(unclosed/")[1] == answers.BAD_REQUEST


def test_bind_writes_the_binding_and_refuses_a_session_with_turns_elsewhere(tmp_path):
    with client(tmp_path) as c:
        value = call(c, "bind", sessionId="host-7", agent="hostapp", project="proj-a", agentName="Ada")
        key = Key("hostapp", "proj-a")
        assert value == {"memoryId": key.memory_id}
        record = sessions.lookup(tmp_path, "host-7")
        assert record.bound and record.memory_id == key.memory_id and record.agent_name == "Ada"
        # Rebinding to the same key is fine; a session whose turns are in another memory is refused.
        assert call(c, "bind", sessionId="host-7", agent="hostapp", project="proj-a") == value
        memory = Memory.open(workspace_key(None, tmp_path / "elsewhere"), root=tmp_path)
        memory.commit_turn("taken", "T", [Message("user", "hi", 1.0)])
        memory.close()
        status, code, message = error_of(c, "bind", sessionId="taken", agent="hostapp", project="proj-a")
        assert (status, code) == (200, answers.ALREADY_BOUND) and memory.memory_id in message
        assert sessions.lookup(tmp_path, "taken").memory_id == memory.memory_id
        assert error_of(c, "bind", sessionId="x", agent="a\nb", project="p")[1] == answers.BAD_REQUEST
        assert error_of(c, "bind", sessionId="", agent="a", project="p")[1] == answers.BAD_REQUEST


# -- error codes and bad arguments ------------------------------------------------------------


def test_error_codes(fixture_root):
    root, mid = fixture_root
    with client(root) as c:
        assert error_of(c, "view", memoryId="0123456789abcdef")[:2] == (200, answers.UNKNOWN_MEMORY)
        assert error_of(c, "zoom", memoryId=mid, id=3, n=2)[:2] == (200, answers.NO_LINE)  # 3 % 2 != 0
        assert error_of(c, "zoom", memoryId=mid, id=10_000, n=1)[:2] == (200, answers.NO_LINE)
        assert error_of(c, "zoom", memoryId=mid, id=0, n=3)[:2] == (200, answers.NO_LINE)
        assert error_of(c, "zoom", memoryId=mid, id=0, n=1, page=2)[:2] == (200, answers.NO_LINE)
        assert error_of(c, "zoom", memoryId=mid, id=0, n=1024)[:2] == (200, answers.NO_LINE)


@pytest.mark.parametrize("method,args", [
    ("view", {"memoryId": "../../etc/passwd"}),
    ("view", {"memoryId": "0123456789ABCDEF"}),
    ("view", {"memoryId": "0123456789abcdef\n"}),
    ("view", {"memoryId": 1234567890123456}),
    ("view", {}),
    ("view", {"memoryId": "MID", "extra": 1}),
    ("zoom", {"memoryId": "MID", "id": "4", "n": 1}),
    ("zoom", {"memoryId": "MID", "id": 4.5, "n": 1}),
    ("zoom", {"memoryId": "MID", "id": -1, "n": 1}),
    ("zoom", {"memoryId": "MID", "id": True, "n": 1}),
    ("zoom", {"memoryId": "MID", "id": 0, "n": 0}),
    ("zoom", {"memoryId": "MID", "id": 0, "n": 1, "page": 0}),
    ("zoom", {"memoryId": "MID", "id": 0}),
    ("history", {"memoryId": "MID", "before": -1}),
    ("history", {"memoryId": "MID", "limit": "10"}),
    ("search", {"memoryId": "MID", "query": ""}),
    ("search", {"memoryId": "MID", "query": ["a"]}),
    ("search", {"memoryId": "MID", "query": "q" * 5000}),
    ("memories", {"agent": 3}),
    ("bind", {"sessionId": "s", "agent": "a"}),
])
def test_bad_arguments_are_refused(fixture_root, method, args):
    root, mid = fixture_root
    args = {k: (mid if v == "MID" else v) for k, v in args.items()}
    with client(root) as c:
        status, body = call(c, method, expect_ok=None, **args)
    error = body["result"]["error"]
    assert body["result"]["ok"] is False and error["code"] == answers.BAD_REQUEST
    assert status in (200, 400) and error["message"]


@pytest.mark.parametrize("body,why", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (orjson.dumps({"type": "client-request", "rpcId": 1, "method": "endless.zoom", "payload": {"args": {}}}),
     "method must be"),
    (orjson.dumps({"type": "request", "rpcId": 1, "method": "endless.view", "payload": {"args": {}}}), "type"),
    (orjson.dumps({"type": "client-request", "rpcId": {"a": 1}, "method": "endless.view"}), "rpcId"),
    (orjson.dumps({"type": "client-request", "rpcId": 1, "method": "endless.view", "payload": []}), "payload"),
    (orjson.dumps({"type": "client-request", "rpcId": 1, "method": "endless.view",
                   "payload": {"args": "x"}}), "args"),
])
def test_malformed_envelopes(fixture_root, body, why):
    root, _ = fixture_root
    with client(root) as c:
        response = c.post("/api/endless.view", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    result = response.json()["result"]
    assert result["error"]["code"] == answers.BAD_REQUEST and why in result["error"]["message"]


def test_unknown_method_and_body_size(fixture_root):
    root, mid = fixture_root
    settings = F.small_settings(rpc_body_bytes=1024)
    with client(root, settings) as c:
        response = c.post("/api/endless.drop", json=envelope("drop"))
        assert response.status_code == 404 and "endless.view" in response.json()["result"]["error"]["message"]
        response = c.post("/api/endless.search", json=envelope("search", memoryId=mid, query="a" * 2000))
        assert response.status_code == 413
        assert response.json()["result"]["error"]["code"] == answers.BAD_REQUEST

        def chunks():  # no Content-Length: the limit holds on the bytes actually read
            yield orjson.dumps(envelope("search", memoryId=mid, query="b" * 600))[:-2]
            yield b" " * 900 + b"}}"
        response = c.post("/api/endless.search", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert call(c, "search", memoryId=mid, query="a" * 500)["hits"] == []


def test_only_loopback_peers(fixture_root):
    root, mid = fixture_root
    with client(root, peer="192.168.1.20") as c:
        response = c.post("/api/endless.view", json=envelope("view", memoryId=mid))
        assert response.status_code == 403 and "loopback" in response.json()["result"]["error"]["message"]
        assert c.get("/").status_code == 403
    with client(root, peer="::1") as c:
        assert call(c, "view", memoryId=mid)["lines"]


# -- time limits and the search pool -------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_root(tmp_path_factory) -> tuple[Path, str]:
    """A memory where ``/(a|aa)+$/``-style patterns take seconds (catastrophic backtracking)."""
    root = tmp_path_factory.mktemp("slow")
    memory = Memory.open(workspace_key(None, root / "ws"), root=root, settings=F.small_settings())
    memory.commit_turns([TurnRecord("s", "T", [Message("user", "a" * 40 + "!", 1.0)]) for _ in range(50)],
                        sync=False)
    mid = memory.memory_id
    memory.close()
    return root, mid


SLOW_PATTERN = "/(a|aa)+$/"


def test_a_request_past_its_time_limit_is_answered_timeout(slow_root):
    root, mid = slow_root
    with client(root, F.small_settings(rpc_request_seconds=0.3, regex_seconds=3.0)) as c:
        status, code, message = error_of(c, "search", memoryId=mid, query=SLOW_PATTERN)
    assert (status, code) == (200, "endless/timeout") and "0.3 s" in message


def test_pattern_search_stops_at_its_own_limit(slow_root):
    root, mid = slow_root
    with client(root, F.small_settings(regex_seconds=0.3)) as c:
        value = call(c, "search", memoryId=mid, query=SLOW_PATTERN)
    assert value["hits"] == [] and "stoppedAt" in value


def test_a_cut_pattern_search_answers_its_range_and_how_to_go_on(slow_root):
    """The RPC (the History page's answer) names the messages searched and the below that goes on; passing
    it searches only the older messages, pinned there."""
    root, mid = slow_root
    with client(root, F.small_settings(regex_seconds=0.3)) as c:
        value = call(c, "search", memoryId=mid, query=SLOW_PATTERN)
        assert value["partial"] is True and value["searched"]["to"] == 50, value
        assert value["goOn"] == {"below": value["searched"]["from"]}, value
        below = value["goOn"]["below"]
        later = call(c, "search", memoryId=mid, query=SLOW_PATTERN, below=below)
    assert later["partial"] is True and later["below"] == below and later["searched"]["to"] == below, later
    assert later["goOn"]["below"] <= below, later


def test_searches_cannot_starve_view_and_zoom(slow_root):
    """Two slow pattern searches fill the search pool; view and zoom still answer at once."""
    root, mid = slow_root
    # (The regex engine overshoots its own time limit on a busy machine: the request limit is wide.)
    settings = F.small_settings(regex_seconds=2.0, rpc_search_workers=2, rpc_search_queue=2,
                                rpc_request_seconds=60.0)
    served = start_in_thread(settings, 0, root=root)
    try:
        with httpx.Client(base_url=served.base, timeout=30, headers=credential.auth_headers(root)) as http, \
                concurrent.futures.ThreadPoolExecutor(4) as pool:
            slow = [pool.submit(http.post, "/api/endless.search",
                                json=envelope("search", memoryId=mid, query=SLOW_PATTERN)) for _ in range(2)]
            core = served.app.state.endless
            _wait_for(lambda: core._slow_waiting == 2)
            busy = http.post("/api/endless.search", json=envelope("search", memoryId=mid, query="a"))
            assert busy.json()["result"]["error"]["code"] == "endless/busy"
            view = http.post("/api/endless.view", json=envelope("view", memoryId=mid))
            zoom = http.post("/api/endless.zoom", json=envelope("zoom", memoryId=mid, id=0, n=1))
            assert view.json()["result"]["ok"] and zoom.json()["result"]["ok"]
            assert not any(f.done() for f in slow), "view and zoom answered while both searches still ran"
            assert view.elapsed.total_seconds() < 1.0 and zoom.elapsed.total_seconds() < 1.0
            for f in slow:
                assert f.result().json()["result"]["ok"], f.result().json()
    finally:
        served.stop()


def _wait_for(predicate, timeout: float = 10.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


# -- a real server: Host, Origin, listening address -----------------------------------------------


@pytest.fixture
def served(fixture_root):
    root, mid = fixture_root
    s = start_in_thread(F.small_settings(), 0, root=root, current=mid)
    yield s, mid
    s.stop()


def test_listens_on_loopback_only(served):
    s, _ = served
    assert s.url.startswith(f"http://127.0.0.1:{s.port}/?token=")
    with socket.create_connection(("127.0.0.1", s.port), timeout=2):
        pass
    addresses = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    for address in addresses - {"127.0.0.1", "127.0.1.1"}:
        with pytest.raises(OSError):
            socket.create_connection((address, s.port), timeout=1).close()


@pytest.mark.parametrize("host,ok", [
    ("127.0.0.1:{port}", True), ("localhost:{port}", True),
    ("evil.example:{port}", False), ("127.0.0.1", False), ("127.0.0.1:1", False),
    ("localhost.evil.example:{port}", False), ("", False),
])
def test_host_header_must_be_loopback_and_port(served, host, ok):
    s, mid = served
    headers = {"host": host.format(port=s.port), **credential.auth_headers(s.app.state.endless.root)}
    with httpx.Client(base_url=s.base, timeout=10) as http:
        response = http.post("/api/endless.view", json=envelope("view", memoryId=mid), headers=headers)
        page = http.get("/static/app.js", headers=headers)
    if ok:
        assert response.status_code == 200 and response.json()["result"]["ok"]
        assert page.status_code == 200
    else:
        assert response.status_code in (400, 403) and page.status_code in (400, 403)
        if response.status_code == 403:
            assert "Host" in response.json()["result"]["error"]["message"]


@pytest.mark.parametrize("origin", [f"http://127.0.0.1:{PORT}", "http://evil.example", "null", ""])
def test_rpc_refuses_any_origin(served, origin):
    s, mid = served
    with httpx.Client(base_url=s.base, timeout=10, headers=credential.auth_headers(s.app.state.endless.root)) as http:
        response = http.post("/api/endless.view", json=envelope("view", memoryId=mid), headers={"origin": origin})
        plain = http.post("/api/endless.view", json=envelope("view", memoryId=mid))
    assert response.status_code == 403
    assert "Origin" in response.json()["result"]["error"]["message"]
    assert plain.status_code == 200


def test_page_routes_need_the_cookie_and_the_page_origin(served):
    s, mid = served
    own = s.base
    with httpx.Client(base_url=s.base, timeout=10) as browser:
        body = envelope("view", memoryId=mid)
        assert browser.get("/").status_code == 403  # no token, no cookie
        assert browser.post("/api/endless-ui.view", json=body, headers={"origin": own}).status_code == 403
        landing = browser.get(s.url.replace(s.base, ""))
        assert landing.status_code == 303 and landing.headers["location"] == f"/?memory={mid}"
        cookie = landing.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert browser.get("/").status_code == 200
        # The token works once.
        with httpx.Client(base_url=s.base, timeout=10) as other:
            assert other.get(s.url.replace(s.base, "")).status_code == 403
        ok = browser.post("/api/endless-ui.view", json=body, headers={"origin": own})
        assert ok.status_code == 200 and ok.json()["result"]["value"]["lines"]
        for origin in (None, "http://evil.example", f"http://localhost:{s.port}"):
            headers = {} if origin is None else {"origin": origin}
            refused = browser.post("/api/endless-ui.view", json=body, headers=headers)
            assert refused.status_code == 403, origin
        # bind is not a page route.
        bind = browser.post("/api/endless-ui.bind", json=envelope("bind", sessionId="s", agent="a", project="p"),
                            headers={"origin": own})
        assert bind.status_code == 404
        # The RPC routes stay closed to the page (it sends an Origin).
        assert browser.post("/api/endless.view", json=body, headers={"origin": own}).status_code == 403
    with httpx.Client(base_url=s.base, timeout=10) as stranger:
        stranger.cookies.set(f"endless_page_{s.port}", "guessed")
        assert stranger.post("/api/endless-ui.view", json=envelope("view", memoryId=mid),
                             headers={"origin": own}).status_code == 403


def test_the_page_and_its_files_are_served_with_a_strict_policy(served):
    s, _ = served
    with httpx.Client(base_url=s.base, timeout=10) as browser:
        browser.get(s.url.replace(s.base, ""))
        page = browser.get("/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "<script src=\"/static/app.js\"" in page.text
        assert browser.get("/static/app.css").headers["content-type"].startswith("text/css")
        assert browser.get("/static/../answers.py").status_code == 404
        assert browser.get("/static/index.html").status_code == 404
    js = resources.files("endless.faces.rpc").joinpath("static", "app.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "outerHTML" not in js


def test_a_browser_turned_away_is_told_how_to_open_the_page(served):
    s, _ = served
    token = s.url.split("token=")[1]
    with httpx.Client(base_url=s.base, timeout=10) as browser:
        answers_seen = {"no cookie": browser.get("/"), "unknown path": browser.get("/history"),
                        "bad token": browser.get("/?token=guessed")}
        for why, answer in answers_seen.items():
            assert answer.status_code in (403, 404), why
            assert answer.headers["content-type"].startswith("text/html"), why
            assert "default-src 'none'" in answer.headers["content-security-policy"], why
            assert "<code>endless serve</code>" in answer.text and "<code>/endless history</code>" in answer.text, why
            assert token not in answer.text and "<script" not in answer.text, why
        assert answers_seen["unknown path"].status_code == 404
        assert "used already" in answers_seen["bad token"].text


# -- reading while another process writes ----------------------------------------------------------


def test_reads_while_a_writer_process_commits_turns(tmp_path):
    """A child process commits turns and stores lines; every answer read meanwhile is whole and consistent."""
    import re
    import time

    import harness

    small = {"line_budget": 96, "view_ceiling": 2500, "view_floor": 1250, "view_shrink_slack": 600,
             "writer_view_ceiling": 1000, "writer_view_floor": 500}
    from endless.core.settings import Settings
    root, workspace = tmp_path / "root", tmp_path / "ws"
    workspace.mkdir()
    Memory.open(workspace_key(None, workspace), settings=Settings(**small), root=root).close()
    mid = workspace_key(None, workspace).memory_id
    child = harness.Agent(tmp_path, "writer")
    served = start_in_thread(Settings(**small), 0, root=root)
    text = re.compile(r"w-(\d+)-(\d+)\|y*")
    reads = {"view": 0, "history": 0, "zoom": 0, "search": 0}
    try:
        assert child.call(op="open", root=str(root), ws=str(workspace), settings=small)["ok"]
        child.send(op="commit", name="w", count=200, store=True)
        answer = None
        with httpx.Client(base_url=served.base, timeout=30, headers=credential.auth_headers(root)) as http:
            def value(method, **args):
                body = http.post(f"/api/endless.{method}", json=envelope(method, memoryId=mid, **args)).json()
                assert body["result"]["ok"], body
                reads[method] += 1
                return body["result"]["value"]

            deadline = time.monotonic() + 120
            while answer is None or reads["history"] < 3:
                assert time.monotonic() < deadline
                lines = value("view")["lines"]
                total = 0
                for line in lines:  # the view tiles [0, T) and every merged line is written
                    assert line["id"] == total and (line["n"] == 1 or line["text"])
                    total += line["n"]
                history = value("history", limit=200)["turns"]
                next_id = None
                for number, turn in enumerate(history):
                    assert turn["turn"] == history[0]["turn"] + number and turn["status"] == "completed"
                    for k, entry in enumerate(turn["entries"]):
                        match = text.fullmatch(entry["text"])
                        assert match and int(match.group(2)) == k, entry
                        assert next_id is None or entry["id"] == next_id
                        next_id = entry["id"] + 1
                if total:
                    last = value("zoom", id=total - 1, n=1)["message"]
                    assert text.fullmatch(last["text"])
                for hit in value("search", query='"w-1"', limit=50)["hits"]:
                    assert hit["snippet"].startswith("w-1-")
                if answer is None:
                    try:
                        line = child.reader.readline(0.001)
                    except TimeoutError:
                        continue
                    answer = orjson.loads(line)
                    assert answer.get("ok"), answer
                    during = dict(reads)
        assert during["view"] >= 3 and during["history"] >= 3, during  # reads overlapped the commits
        final = Memory.open(memory_id=mid, root=root, readonly=True, settings=Settings(**small))
        assert final.total == answer["total"] and final.damage == []
        final.close()
    finally:
        served.stop()
        child.close()


def test_a_record_without_a_time_is_damage_in_words_never_a_stack_trace(tmp_path, capfd):
    """A log record the reader cannot turn into a message (no time) once made zoom fail inside
    (endless/internal); every field is now checked where the log is read (issue #33), so the caller
    gets the damage in a plain sentence, and nothing fails inside."""
    memory = Memory.open(workspace_key(None, tmp_path / "ws"), root=tmp_path, settings=F.small_settings())
    mid = memory.memory_id
    path = memory.log.path
    memory.close()
    record = {"turn": 0, "id": 0, "tid": "ab12", "s": "s", "t": "T", "st": "completed", "at": 1.0,
              "m": [{"k": "user", "x": "no time here"}]}
    with open(path, "ab") as handle:
        handle.write(orjson.dumps(record) + b"\n")
    with client(tmp_path, F.small_settings()) as c:
        status, code, message = error_of(c, "zoom", memoryId=mid, id=0, n=1)
    assert (status, code) == (200, "endless/no-line")
    assert "damaged" in message, message
    assert "KeyError" not in message and "File " not in message and str(tmp_path) not in message
    assert "Traceback" not in capfd.readouterr().err
