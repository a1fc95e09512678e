"""Long-lived readers follow a forget another process made (issue #33, item 7).

A running ``endless serve`` (and an MCP server) keep a memory open; a forget
made by the CLI in another process must be what their next answer shows:
the tombstone, never the forgotten words.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.faces.rpc import credential

import rpc_fixtures as F  # noqa: E402
from commands import endless_command  # noqa: E402


def envelope(method: str, **args) -> dict:
    return {"type": "client-request", "rpcId": 1, "method": f"endless.{method}", "payload": {"args": args}}


def _env(root: Path) -> dict[str, str]:
    env = {**os.environ, "ENDLESS_HOME": str(root), "TZ": "UTC"}
    env.pop("ENDLESS_WRITER_ROUTE", None)
    return env


def _workspace(root: Path) -> tuple[Path, str]:
    """A workspace whose memory has no writer lines yet, only the free ones (as right after an import),
    forgotten from once: a forget then erases lines and stores as many again and leaves the view files
    as they were, so neither a count nor a file tells a reader's cache that it happened."""
    ws = root / "ws"
    ws.mkdir()
    memory = F.build(root, key=workspace_key(None, ws), write=False)
    memory.close()
    _forget_by_cli(root, memory.memory_id, 3)  # a first forget: the views are saved as they stand after one
    return ws, memory.memory_id


def _last_message(root: Path, mid: str) -> tuple[int, str]:
    memory = Memory.open(memory_id=mid, settings=F.small_settings(), root=root, readonly=True)
    try:
        last = memory.total - 1
        return last, memory.message(last).text
    finally:
        memory.close()


def _forget_by_cli(root: Path, mid: str, ident: int) -> None:
    done = subprocess.run(endless_command() + ["forget", "--memory", mid, str(ident)], capture_output=True,
                          text=True, env=_env(root), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def _texts(lines: list[dict]) -> str:
    return "\n".join(line["text"] or "" for line in lines)


@pytest.mark.parametrize("by", ["cli", "rpc"])
def test_running_server_view_follows_a_forget(tmp_path: Path, by: str) -> None:
    ws, mid = _workspace(tmp_path)
    target, text = _last_message(tmp_path, mid)
    proc = subprocess.Popen(endless_command() + ["serve", "--port", "0"], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else address
        base = address.split("/?")[0]
        with httpx.Client(base_url=base, timeout=30, headers=credential.auth_headers(tmp_path)) as host:
            def view() -> str:
                body = host.post("/api/endless.view", json=envelope("view", memoryId=mid)).json()
                assert body["result"]["ok"], body
                return _texts(body["result"]["value"]["lines"])

            assert text in view()  # the server has the memory open, its view cached
            if by == "cli":
                _forget_by_cli(tmp_path, mid, target)
            else:
                done = host.post("/api/endless.forget", json=envelope("forget", memoryId=mid, ids=[target])).json()
                assert done["result"]["ok"], done
            after = view()
            assert text not in after and "(forgotten on " in after
            zoom = host.post("/api/endless.zoom", json=envelope("zoom", memoryId=mid, id=target, n=1)).json()
            assert zoom["result"]["value"]["message"]["text"].startswith("(forgotten on ")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_running_mcp_server_follows_a_cli_forget(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    ws, mid = _workspace(tmp_path)
    target, text = _last_message(tmp_path, mid)

    async def run() -> tuple[str, str]:
        command = endless_command()
        params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", "--memory", mid],
                                       env=_env(tmp_path), cwd=str(ws))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                before = (await session.call_tool("zoom", {"id": target, "n": 1})).content[0].text
                await asyncio.to_thread(_forget_by_cli, tmp_path, mid, target)
                after = (await session.call_tool("zoom", {"id": target, "n": 1})).content[0].text
                return before, after

    before, after = asyncio.run(run())
    assert text in before  # the server read the message before the forget
    assert text not in after and "(forgotten on " in after
