"""``endless mcp``: one memory's look-back tools and view for any MCP client, over stdio (DESIGN §6).

Claude Code, Codex, Cursor… start ``endless mcp`` as a subprocess and get the
three tools a chat has (``zoom``, ``date``, ``recall_search``: the same names,
descriptions and schemas as ``prompts/tools.json``, and the very answers
``endless.core.lookback.call`` gives the chat model) and the view as a resource.

Read-only: the memory is opened read-only and caught up from its files before
every answer, so the server follows a chat that is writing the memory live and
never takes its lock.  Stdout carries nothing but the protocol (fd 1 is pointed
at stderr while serving, and the protocol writes to a private copy of it);
logs go to stderr.

Built on the official ``mcp`` SDK's low-level server, which changed shape
between the generation Hermes pins (1.26: decorators) and the current one
(2.x: constructor handlers); :func:`build_server` speaks both.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from endless import __version__
from endless.core.store import durable
from endless.core import lookback
from endless.core.words import count
from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose
from endless.faces.kit.signals import Terminated, end_at_once_on_stop, exit_code
from endless.core.memory import Memory

SERVER_NAME = "endless"
VIEW_URI = "endless://memory/{memory_id}/view"
INSTRUCTIONS = ("Look back into an Endless memory: the view resource lists summary lines id+n; "
                "zoom opens a line down to exact messages, date tells when a message was written, "
                "recall_search finds raw words or a /pattern/ anywhere in the history.")
# MCP tool annotations: every tool here reads the memory and changes nothing, inside this machine.
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def log(message: str) -> None:
    durable.log("mcp", message)


class Backend:
    """The memory behind the server: every answer reads fresh state; one call at a time."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.uri = VIEW_URI.format(memory_id=memory.memory_id)

    def tool_definitions(self) -> list[dict]:
        return lookback.definitions(self.memory.settings.recall_search)

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """The chat's answer to a tool call, and whether it is an error (an unknown tool, a bad argument,
        no such line): MCP clients see that as ``isError``, the text says what to do."""
        text = lookback.call(self.memory, name, arguments if arguments is not None else {})
        return str(text), isinstance(text, lookback.Refusal)

    def view_text(self) -> str:
        self.memory.catch_up()
        text, _ = self.memory.views.render()
        return text

    def resource(self) -> dict:
        return {"uri": self.uri, "name": "view",
                "title": f"Endless view of memory {self.memory.memory_id}",
                "description": ("The memory's view as the chat model sees it: one line per part, "
                                "id+n|summary, oldest first, up to the first line not written yet."),
                "mimeType": "text/plain"}


def _modern_sdk(server_class: type) -> bool:
    """mcp 2.x registers handlers in the constructor; 1.x through decorators."""
    return "on_list_tools" in inspect.signature(server_class.__init__).parameters


def build_server(backend: Backend) -> Any:
    """A low-level MCP ``Server`` for ``backend``, on whichever SDK generation is installed."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server

    lock = anyio.Lock()

    async def run(function, *args):
        # Searches may take up to the regex limit: off the event loop, one at a time
        # (a Memory is not shared between threads).
        async with lock:
            return await anyio.to_thread.run_sync(function, *args)

    def tool_models() -> list:
        # The tools only read the memory: hosts that ask before a tool with effects (Codex 0.171 under
        # approval policy "never" refuses such calls outright) run these without asking.
        return [types.Tool.model_validate({"name": t["name"], "description": t["description"],
                                           "inputSchema": t["parameters"], "annotations": READ_ONLY})
                for t in backend.tool_definitions()]

    def resource_models() -> list:
        return [types.Resource.model_validate(backend.resource())]

    def check_uri(uri: Any) -> None:
        if str(uri) != backend.uri:
            raise ValueError(f"no resource {uri}; this server has {backend.uri}")

    if _modern_sdk(Server):
        async def on_list_tools(ctx, params):
            return types.ListToolsResult(tools=tool_models())

        async def on_call_tool(ctx, params):
            text, failed = await run(backend.call, params.name, params.arguments)
            return types.CallToolResult.model_validate(
                {"content": [{"type": "text", "text": text}], "isError": failed})

        async def on_list_resources(ctx, params):
            return types.ListResourcesResult(resources=resource_models())

        async def on_read_resource(ctx, params):
            check_uri(params.uri)
            text = await run(backend.view_text)
            return types.ReadResourceResult.model_validate(
                {"contents": [{"uri": backend.uri, "mimeType": "text/plain", "text": text}]})

        return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                      on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                      on_list_resources=on_list_resources, on_read_resource=on_read_resource)

    from mcp.server.lowlevel.helper_types import ReadResourceContents

    server = Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS)

    @server.list_tools()
    async def list_tools():
        return tool_models()

    # The chat answers bad arguments in words; so does this server (no schema gate in front).
    call_tool = (server.call_tool(validate_input=False)
                 if "validate_input" in inspect.signature(server.call_tool).parameters
                 else server.call_tool())

    @call_tool
    async def call(name: str, arguments: dict | None):
        text, failed = await run(backend.call, name, arguments)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "isError": failed})

    @server.list_resources()
    async def list_resources():
        return resource_models()

    @server.read_resource()
    async def read_resource(uri):
        check_uri(uri)
        text = await run(backend.view_text)
        return [ReadResourceContents(content=text, mime_type="text/plain")]

    return server


@contextmanager
def protocol_stdout() -> Iterator[Any]:
    """A private copy of stdout for the protocol; fd 1 goes to stderr meanwhile.

    Whatever else writes to stdout (a library's stray print) lands on stderr
    instead of corrupting the protocol stream.
    """
    import io

    import anyio

    sys.stdout.flush()
    wire = os.dup(1)
    saved = os.dup(1)
    os.dup2(2, 1)
    handle = io.TextIOWrapper(os.fdopen(wire, "wb"), encoding="utf-8")
    try:
        yield anyio.wrap_file(handle)
    finally:
        try:
            handle.close()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


async def serve(backend: Backend) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(backend)
    with protocol_stdout() as out:
        import io

        import anyio

        stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        async with stdio_server(stdin=stdin, stdout=out) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def _mcp_command(args: argparse.Namespace) -> int:
    try:
        memory = choose(args, readonly=True)
    except ChoiceError as exc:
        print(f"[endless.mcp] {exc}", file=sys.stderr)
        return EXIT_USAGE
    import anyio

    with memory:
        end_at_once_on_stop()  # before the line a client waits for: a stop right after it is handled
        log(f"serving memory {memory.memory_id} ({count(memory.total, 'message')}) read-only over stdio")
        try:
            anyio.run(serve, Backend(memory))
        except (KeyboardInterrupt, Terminated) as stop:
            return exit_code(stop)
        except Exception as exc:  # the protocol is broken: say so where a person can read it
            log(f"stopped: {exc!r}")
            return EXIT_FAILED
    return EXIT_OK


def add_mcp_parser(sub: Any) -> None:
    parser = sub.add_parser("mcp", help="serve one memory's look-back tools and view to MCP clients over stdio",
                            epilog="example:\n  endless mcp --workspace ~/code/project",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=("An MCP server over stdio for one memory (read-only): the tools "
                                         "zoom, date and recall_search, and the view as a resource. Add it to "
                                         "an MCP client as the command `endless mcp --workspace DIR`."))
    add_memory_arguments(parser)
    parser.set_defaults(run=_mcp_command)
