"""End to end: the real ``mcp`` client library drives ``endless mcp`` as a subprocess over stdio.

The client lists the tools (names, descriptions and schemas must be those of
``prompts/tools.json``), calls each one and compares the answer with what
``endless.tools.call`` gives a chat for the same arguments, reads the view
resource, and sees a turn committed while the server runs (the server reads
fresh state on every call).  An unknown memory is refused with a message on
stderr, an exit code of 2 and nothing on stdout.  Runs on the installed SDK;
CI runs it again on ``mcp==1.26.0`` (the generation Hermes pins).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import orjson
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from endless import prompts
from endless.core import lookback as tools
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings
from commands import endless_command

BASE = 1_700_000_000.0



@pytest.fixture
def setup(tmp_path: Path):
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    settings = Settings(home=str(home))
    memory = Memory.open(workspace_key(None, workspace), settings=settings)
    for k in range(6):
        memory.commit_turn("s1", "Planning", [
            Message("user", f"Where does the database listen, question {k}?", BASE + 60 * k),
            Message("reply", f"It listens on port 5433 (answer {k}).", BASE + 60 * k + 5)])
    memory.commit_turn("s2", "Long paste", [Message("user", "pasted: " + "lorem ipsum " * 5000, BASE + 900)])
    memory.store_line(0, 12, "you: pasted lorem ipsum, 60,000 characters")  # what a writer would do
    env = {"ENDLESS_HOME": str(home), "TZ": "UTC", "PYTHONUNBUFFERED": "1"}
    yield memory, workspace, env
    memory.close()


def reference(home_memory: Memory, name: str, args: dict) -> str:
    """What a chat gets for the same call, from a fresh read-only open of the memory."""
    with Memory.open(memory_id=home_memory.memory_id, settings=home_memory.settings, readonly=True) as ro:
        return tools.call(ro, name, orjson.dumps(args).decode())


def dumped(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_tools_and_view_over_stdio(setup, monkeypatch) -> None:
    memory, workspace, env = setup
    monkeypatch.setenv("TZ", "UTC")  # the reference answers' local dates match the server's
    command = endless_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", "--workspace", str(workspace)],
                                   env=env)
    calls = [("zoom", {"id": 2, "n": 1}), ("zoom", {"id": 12, "n": 1, "page": 2}), ("zoom", {"id": 0, "n": 2}),
             ("zoom", {"id": 5, "n": 4}), ("zoom", {"id": 999, "n": 1}), ("date", {"id": 4}),
             ("date", {"id": 99}), ("recall_search", {"query": "port 5433"}),
             ("recall_search", {"query": "/answer [0-2]/"}), ("zoom", {"id": "x"})]

    async def session_run() -> dict:
        out: dict = {}
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["tools"] = [dumped(t) for t in (await session.list_tools()).tools]
                out["answers"] = []
                for name, args in calls:
                    result = dumped(await session.call_tool(name, args))
                    out["answers"].append(result)
                out["unknown"] = dumped(await session.call_tool("nosuch", {}))
                resources = [dumped(r) for r in (await session.list_resources()).resources]
                out["resources"] = resources
                read_result = await session.read_resource(resources[0]["uri"])
                out["view"] = read_result.contents[0].text
                # A chat commits a turn while the server runs: the next call sees it.
                memory.commit_turn("s1", "Planning", [Message("user", "a late message about kestrels",
                                                              BASE + 5000)])
                out["late_date"] = dumped(await session.call_tool("date", {"id": memory.total - 1}))
                out["late_search"] = dumped(await session.call_tool("recall_search", {"query": "kestrels"}))
                out["late_view"] = (await session.read_resource(resources[0]["uri"])).contents[0].text
        return out

    expected = [reference(memory, name, args) for name, args in calls]
    got = anyio.run(session_run)

    spec = orjson.loads(prompts.text("tools.json"))
    assert [(t["name"], t["description"], t["inputSchema"]) for t in got["tools"]] == \
        [(t["name"], t["description"], t["parameters"]) for t in spec]
    # Marked as only reading, so a host asks no approval for them (Codex 0.171 under approval "never"
    # refuses an unmarked MCP tool outright).
    assert all(t["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                    "openWorldHint": False} for t in got["tools"])
    refused = {3, 4, 6, 9}  # no line 5+4 or 999+1, no message 99, zoom without n: tool errors, in words
    for k, ((name, args), answer, want) in enumerate(zip(calls, got["answers"], expected)):
        assert answer["content"] == [{"type": "text", "text": want}], (name, args)
        assert answer.get("isError", False) is (k in refused), (name, args)
    # The answers are real ones, not refusals.
    assert got["answers"][0]["content"][0]["text"].startswith("2+0|you: Where does the database listen, question 1?")
    assert "[page 2 of" in got["answers"][1]["content"][0]["text"]
    assert got["answers"][4]["content"][0]["text"] == "No line 999+1."
    assert "5433" in got["answers"][7]["content"][0]["text"]
    assert got["unknown"]["isError"] and "no tool 'nosuch'" in got["unknown"]["content"][0]["text"]

    assert len(got["resources"]) == 1 and got["resources"][0]["mimeType"] == "text/plain"
    assert memory.memory_id in got["resources"][0]["uri"]
    with Memory.open(memory_id=memory.memory_id, settings=memory.settings, readonly=True) as ro:
        view_now = ro.views.render()[0]
    assert got["view"].startswith("<chat>\n0+") and got["view"].endswith("</chat>")
    assert got["late_view"] == view_now and got["late_view"] != got["view"]
    assert "kestrels" in got["late_view"]
    assert got["late_date"]["content"][0]["text"].startswith(f"Message {memory.total - 1} was written")
    assert "kestrels" in got["late_search"]["content"][0]["text"]


def test_every_tool_error_is_marked_as_one(setup) -> None:
    """A bad argument, a line that does not exist, a tool switched off: ``isError`` true, the words kept."""
    memory, workspace, env = setup
    command = endless_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", "--workspace", str(workspace)],
                                   env={**env, "ENDLESS_RECALL_SEARCH": "false"})
    calls = [("zoom", {"id": "abc"}), ("zoom", {"id": "abc", "n": 1}), ("zoom", {"id": 3, "n": 2}),
             ("zoom", {"id": 2, "n": 1, "page": 0}), ("date", {}), ("date", {"id": -1}),
             ("recall_search", {"query": "port"}), ("zoom", {"id": 2, "n": 1})]

    async def session_run() -> list[dict]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [dumped(await session.call_tool(name, args)) for name, args in calls]

    got = [(a["content"][0]["text"], a.get("isError", False)) for a in anyio.run(session_run)]
    assert got[:-1] == [("zoom needs id and n, the two numbers of a line's name id+n.", True),
                        ("No line abc+1.", True),
                        ("No line 3+2.", True),
                        ("No page 0: pages are numbered from 1.", True),
                        ("date needs id, a message number.", True),
                        ("No message -1.", True),
                        ("recall_search is turned off for this chat.", True)]
    assert got[-1][0].startswith("2+0|") and got[-1][1] is False


def test_nothing_but_the_protocol_on_stdout(setup) -> None:
    """A raw initialize over the pipe: every stdout line is a JSON-RPC message."""
    memory, workspace, env = setup
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    proc = subprocess.run([*endless_command(), "mcp", "--memory", memory.memory_id],
                          input=orjson.dumps(init) + b"\n", capture_output=True, timeout=60,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr.decode()
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr.decode()
    for line in lines:
        assert orjson.loads(line)["jsonrpc"] == "2.0"
    assert orjson.loads(lines[0])["result"]["serverInfo"]["name"] == "endless"
    assert b"[endless.mcp] serving memory" in proc.stderr


@pytest.mark.parametrize("how", ["memory", "workspace", "bad-id"])
def test_an_unknown_memory_is_a_clear_error(setup, tmp_path: Path, how: str) -> None:
    _, _, env = setup
    args = {"memory": ["--memory", "0123456789abcdef"],
            "workspace": ["--workspace", str(tmp_path / "elsewhere")],
            "bad-id": ["--memory", "../../etc"]}[how]
    proc = subprocess.run([*endless_command(), "mcp", *args], input=b"", capture_output=True, timeout=60,
                          env={**os.environ, **env})
    assert proc.returncode == 2
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert "endless memories" in err
    if how == "memory":
        assert "no memory 0123456789abcdef" in err
    elif how == "workspace":
        assert "has no memory yet" in err and str(tmp_path / "elsewhere") in err
    else:
        assert "is not a memory id" in err
