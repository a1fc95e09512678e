"""Bad input from a person ends in one sentence, a non-zero exit and nothing changed (issue 33, item 12).

A date outside the times a memory holds (``--since 0001-01-01``) raised
``ValueError: year 0 is out of range`` in search, history and forget, and
answered ``endless/internal`` over the RPC and ``code 0`` over MCP; a command
started with its stdout closed (``endless view >&-``) died on ``None.write``.
Each face is driven as its user drives it: the CLI and MCP as processes, the
RPC through its HTTP app.
"""

from __future__ import annotations

import subprocess

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from starlette.testclient import TestClient

import rpc_fixtures as F
from commands import endless_command
from endless.core.store.keys import workspace_key
from endless.faces.rpc import create_app, credential

FAR = ["0001-01-01", "9999-12-31T23:59-05:00", "0001-01-01T00:00+05:00"]


@pytest.fixture
def place(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    memory = F.build(tmp_path / "home", turns=6, key=workspace_key(None, work))
    mid, log = memory.memory_id, memory.log.path
    memory.close()
    env = {"PATH": "/usr/bin:/bin", "ENDLESS_HOME": str(tmp_path / "home"),
           "ENDLESS_CONFIG": str(tmp_path / "none.toml"), "TZ": "UTC"}
    return tmp_path / "home", work, env, mid, log


@pytest.mark.parametrize("argv,flag,when", [
    (("search", "the"), "--since", FAR[0]), (("search", "the"), "--before", FAR[1]),
    (("history",), "--since", FAR[0]), (("history",), "--since", FAR[2]),  # history's --before is a turn
    (("forget",), "--since", FAR[0]), (("forget",), "--before", FAR[1]), (("forget", "--dry-run"), "--before", FAR[2]),
])
def test_a_date_no_memory_holds_is_refused_in_words(place, argv, flag, when):
    home, work, env, mid, log = place
    before = log.read_bytes()
    done = subprocess.run([*endless_command(), *argv, flag, when], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{flag} {when!r} is not between 1970 and 2200, the times a memory holds" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert log.read_bytes() == before


def test_the_rpc_says_bad_request_for_such_a_date(place):
    home, work, env, mid, log = place
    before = log.read_bytes()
    with TestClient(create_app(F.small_settings(), root=home), base_url="http://127.0.0.1:8765",
                    client=("127.0.0.1", 50000), headers=credential.auth_headers(home)) as c:
        for method, args in [("search", {"query": "the", "since": "0001-01-01"}),
                             ("search", {"query": "the", "before": "9999-12-31T23:59-05:00"}),
                             ("history", {"since": "0001-01-01"}),
                             ("forget", {"since": "0001-01-01"}), ("forget", {"before": "0001-01-01", "dryRun": True})]:
            response = c.post(f"/api/endless.{method}", json={
                "type": "client-request", "rpcId": 1, "method": f"endless.{method}",
                "payload": {"args": {"memoryId": mid, **args}}})
            error = response.json()["result"]["error"]
            assert error["code"] == "endless/bad-request", (method, args, error)
            assert "is not between 1970 and 2200" in error["message"] and "Traceback" not in error["message"]
    assert log.read_bytes() == before


def test_mcp_gives_a_tool_error_for_such_a_date(place):
    home, work, env, mid, log = place
    command = endless_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", "--workspace", str(work)], env=env)

    async def session_run() -> list:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool("recall_search", {"query": "the", flag: "0001-01-01"})
                        for flag in ("since", "before")]

    for result in anyio.run(session_run):
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)  # as the wire has it
        assert answer.get("isError") is True, answer
        assert "is not between 1970 and 2200" in answer["content"][0]["text"], answer


@pytest.mark.parametrize("argv", [("view",), ("history",), ("search", "the"), ("memories",)])
def test_a_command_with_its_stdout_closed_says_so(place, argv):
    home, work, env, mid, log = place
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *endless_command(), *argv], cwd=work, env=env,
                          capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "standard output is closed (`>&-`)" in done.stderr and "Traceback" not in done.stderr, done.stderr
