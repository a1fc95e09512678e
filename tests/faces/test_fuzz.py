"""Fuzzing the three ways text from outside gets in: import files, RPC bodies, the tools' arguments.

Whatever hypothesis sends, the answer is a result or a refusal in words (an
exit code and a line on stderr, a JSON error, a tool's refusal), never an
exception or a stack trace, and a refusal writes nothing: every file under
the memory root is as it was.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings as hsettings, strategies as st
from starlette.testclient import TestClient

from endless.cli import main
from endless.core import lookback
from endless.core.memory import Memory
from endless.faces.rpc import create_app, credential
from endless.faces.rpc.app import METHODS as app_methods

import rpc_fixtures as F

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                      HealthCheck.too_slow])


def encode(value: object) -> bytes:
    """JSON as a sender might write it: any integer, and NaN or Infinity where a float is one."""
    return json.dumps(value).encode()


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


# -- values from outside -------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                    st.text(max_size=40), st.sampled_from(["", "0", "-1", "1e309", "NaN", "2026-03-02T09:00:00Z",
                                                           "\x00", "../../etc/passwd", "a" * 300]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)
ROLES = ["user", "assistant", "tool", "system", "note", "", None, 3]


@st.composite
def generic_record(draw) -> dict:
    record = {"role": draw(st.sampled_from(ROLES)), "content": draw(st.one_of(st.text(max_size=60), values))}
    for name in ("at", "session", "title", "name"):
        if draw(st.booleans()):
            record[name] = draw(values)
    return record


@st.composite
def claude_record(draw) -> dict:
    return {"type": draw(st.sampled_from(["user", "assistant", "summary", "system", "x"])),
            "sessionId": draw(st.one_of(st.text(max_size=10), values)),
            "timestamp": draw(st.one_of(st.just("2026-04-10T14:00:00.000Z"), values)),
            "message": draw(st.one_of(values, st.fixed_dictionaries(
                {"role": st.sampled_from(ROLES), "content": st.one_of(st.text(max_size=40), values)})))}


@st.composite
def import_file(draw) -> bytes:
    kind = draw(st.sampled_from(["generic", "claude", "junk", "sqlite"]))
    if kind == "junk":
        return draw(st.binary(max_size=300))
    if kind == "sqlite":
        return b"SQLite format 3\x00" + draw(st.binary(max_size=300))
    records = draw(st.lists(generic_record() if kind == "generic" else claude_record(), min_size=1, max_size=6))
    lines = [encode(r) for r in records]
    if draw(st.booleans()):
        k = draw(st.integers(0, len(lines) - 1))
        lines[k] = lines[k][: draw(st.integers(0, len(lines[k])))]  # a torn or cut line
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\n\n"]))


@pytest.fixture(scope="module")
def imported_root(tmp_path_factory) -> Path:
    """A root with one memory already holding a few imported turns (so refusals can touch it)."""
    base = tmp_path_factory.mktemp("fuzz-import")
    (base / "ws").mkdir()
    return base


@hsettings(max_examples=60, **SETTINGS)
@given(data=import_file(), fmt=st.sampled_from(["auto", "generic", "claude", "hermes"]))
def test_import_never_raises_and_refusals_write_nothing(imported_root, monkeypatch, data, fmt):
    monkeypatch.setenv("ENDLESS_HOME", str(imported_root / "root"))
    monkeypatch.setenv("ENDLESS_CONFIG", str(imported_root / "no-config.toml"))
    source = imported_root / "source.jsonl"
    source.write_bytes(data)
    before = snapshot(imported_root / "root") if (imported_root / "root").exists() else {}
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["import", str(source), "--format", fmt, "--workspace", str(imported_root / "ws"),
                     "--writer", "offline", "--no-progress"])
    assert "Traceback" not in out.getvalue() + err.getvalue()
    assert code in (0, 1, 2), (code, err.getvalue())
    event(f"exit {code}")
    if code != 0:
        assert err.getvalue().strip(), "a refusal says why"
        after = snapshot(imported_root / "root") if (imported_root / "root").exists() else {}
        assert after == before, f"a refused import ({err.getvalue().strip()[:120]}) changed files"


# -- RPC bodies ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rpc(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-rpc")
    memory = F.build(root, turns=12)
    mid = memory.memory_id
    memory.close()
    app = create_app(F.small_settings(), root=root)
    with TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                    headers=credential.auth_headers(root)) as client:
        yield client, root, mid


RPC_METHODS = app_methods
METHODS = ["bind", "memories", "view", "zoom", "history", "search", "nothing"]
ARG_NAMES = ["memoryId", "id", "n", "page", "query", "limit", "offset", "before", "since", "from", "chat",
             "kind", "scope", "below", "sessionId", "agent", "project", "agentName", "extra"]


@st.composite
def rpc_body(draw, mid: str) -> tuple[str, bytes]:
    method = draw(st.sampled_from(METHODS))
    kind = draw(st.sampled_from(["envelope", "envelope", "envelope", "json", "bytes"]))
    if kind == "bytes":
        return method, draw(st.binary(max_size=200))
    if kind == "json":
        return method, encode(draw(values))
    spec = RPC_METHODS.get(method)
    names = sorted(spec.args) if spec and draw(st.integers(0, 9)) else ARG_NAMES  # mostly its own names
    args = draw(st.dictionaries(st.sampled_from(names), values, max_size=5))
    if draw(st.integers(0, 3)) and method != "bind":
        args["memoryId"] = mid
    if not draw(st.integers(0, 9)):  # now and then a broken envelope
        envelope = {"type": draw(st.sampled_from(["client-request", "other"])),
                    "rpcId": draw(values), "method": draw(st.sampled_from([f"endless.{method}", "endless.view"])),
                    "payload": draw(st.one_of(st.just({"args": args}), values))}
    else:
        envelope = {"type": "client-request", "rpcId": draw(st.integers(-10, 10)),
                    "method": f"endless.{method}", "payload": {"args": args}}
    return method, encode(envelope)


@hsettings(max_examples=300, **SETTINGS)
@given(data=st.data())
def test_rpc_bodies_get_an_answer_in_words(rpc, data):
    client, root, mid = rpc
    method, body = data.draw(rpc_body(mid))
    ui = not data.draw(st.integers(0, 9))
    before = snapshot(root)
    response = client.post(f"/api/{'endless-ui' if ui else 'endless'}.{method}", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code in (200, 400, 403, 404, 405, 413, 415), response.status_code
    answer = response.json()
    assert answer["type"] == "server-response"
    event(f"status {response.status_code} ok {answer['result']['ok']}")
    result = answer["result"]
    if not result["ok"]:
        assert result["error"]["code"] != "endless/internal", result["error"]
        assert "Traceback" not in result["error"]["message"] and result["error"]["message"]
        after = {k: v for k, v in snapshot(root).items() if not k.startswith("memories/") or "/index/" not in k}
        assert after == {k: v for k, v in before.items() if not k.startswith("memories/") or "/index/" not in k}


# -- the tools' arguments --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tool_memory(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-tools")
    memory = F.build(root, turns=12)
    yield memory
    memory.close()


@hsettings(max_examples=200, **SETTINGS)
@given(name=st.sampled_from(list(lookback.TOOL_NAMES) + ["other"]),
       args=st.one_of(st.dictionaries(st.sampled_from(["id", "n", "page", "query", "chat", "kind", "since",
                                                       "before", "scope", "x"]), values, max_size=5),
                      values.map(lambda v: encode(v).decode()),
                      st.text(max_size=40)))
def test_tool_arguments_get_an_answer(tool_memory: Memory, name, args):
    before = snapshot(tool_memory.folder)
    answer = lookback.call(tool_memory, name, args)
    assert isinstance(answer, str) and answer
    if isinstance(answer, lookback.Refusal):
        assert snapshot(tool_memory.folder) == before
