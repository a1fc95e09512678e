"""The turn protocol (DESIGN §4): the request a harness sends instead of its own history.

One module for every harness.  A turn's head is built once, at its first
request: the harness's system prompt with Endless's section, the tools with
Endless's three, the rarely-changing context messages, the view up to its
first unwritten line, the recent block ``[p, T)`` word for word, the per-turn
state, then the new message.  Steps after the first keep that head and append
the turn's own calls and results.  A turn waits only while the recent block
would pass its limit, and is refused after the wait limit with one sentence;
the refused message is kept and delivered once, with the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

import prompts
from endless import durable, tools as lookback
from endless.keys import session_file_name
from endless.memory import Memory, TurnInProgress
from endless.messages import TraceBuilder
from endless.request import Msg, Request, ToolCallOut, view_message_blocks

REFUSAL = ("I can't answer yet: my memory is still catching up on the last messages. "
           "Please send your message again in a minute; I have kept it and will read it then.")


def system_prompt(harness_system: str) -> str:
    """The harness's system prompt, then Endless's constant sections (the same bytes every turn)."""
    sections = [prompts.text("turn/section.txt").strip(), prompts.text("writer/section.txt").strip()]
    return "\n\n".join([harness_system.rstrip(), *sections]) if harness_system.strip() else "\n\n".join(sections)


def turn_tools(harness_tools: list[dict], include_search: bool = True) -> list[dict]:
    """The harness's tools, then Endless's look-back tools."""
    own = lookback.definitions(include_search)
    names = {t["name"] for t in own}
    return [t for t in harness_tools if t.get("name") not in names] + own


def recent_start(memory: Memory) -> int:
    """p: the first message not covered by a written view line."""
    _, p = memory.written_prefix()
    return p


def recent_bytes(memory: Memory, start: int | None = None) -> int:
    start = recent_start(memory) if start is None else start
    block = memory.recent_block(start)
    return len(block.encode("utf-8")) + (1 if block else 0)


def fits(memory: Memory) -> bool:
    return recent_bytes(memory) <= memory.settings.recent_block_bytes


# -- the pending store: messages of refused turns, delivered once ----------------------

def _pending_path(memory: Memory, session: str) -> Path:
    return memory.folder / "pending" / f"{session_file_name(session)}.jsonl"


def keep_pending(memory: Memory, session: str, text: str, at: float) -> None:
    path = _pending_path(memory, session)
    durable.make_dir(path.parent)
    durable.append_lines(path, [durable.dumps_line({"s": session, "x": text, "at": at})])


def pending(memory: Memory, session: str) -> list[str]:
    data, _ = durable.read_complete(_pending_path(memory, session), 0)
    out = []
    for _, line in durable.iter_lines(data, 0):
        try:
            out.append(orjson.loads(line)["x"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            durable.log("turn", f"skipped a damaged line of {_pending_path(memory, session).name}")
    return out


def drop_pending(memory: Memory, session: str) -> None:
    try:
        _pending_path(memory, session).unlink()
    except FileNotFoundError:
        pass


@dataclass
class Turn:
    """One turn of one chat, from its first request to its commit."""

    memory: Memory
    session: str
    title: str
    system: str
    tools: list[dict]
    context: list[str] = field(default_factory=list)
    head: Request | None = None
    refused: bool = False
    delivered_pending: list[str] = field(default_factory=list)
    _journal: TurnInProgress | None = None
    _trace: TraceBuilder | None = None

    async def begin(self, message: str, state: str = "", route: dict | None = None,
                    timeout: float | None = None) -> Request | None:
        """Build the head, waiting while the recent block is too long; None when refused."""
        memory = self.memory
        limit = memory.settings.turn_wait_seconds if timeout is None else timeout
        ok = await memory.settle(fits, limit)
        if not ok:
            keep_pending(memory, self.session, message, memory.clock())
            self.refused = True
            durable.log("turn", f"refused a turn of {self.session!r}: the recent block stayed over "
                                f"{memory.settings.recent_block_bytes} bytes for {limit:.0f} s")
            return None
        if route is not None:
            memory.record_route(self.session, route, self.system, self.tools)
        self.delivered_pending = pending(memory, self.session)
        new = "\n\n".join([*self.delivered_pending, message])
        self._journal = memory.journal(self.session, self.title)
        self._journal.add("user", new)
        self._trace = TraceBuilder(memory.settings)
        self.head = build_request(memory, self.system, self.tools, self.context, state, new)
        return self.head

    def request(self) -> Request:
        assert self.head is not None, "begin() the turn first"
        return self.head

    def add_step(self, said: str, calls: list[ToolCallOut], results: dict[str, str]) -> Request:
        """Append the agent's tool calls and their results; returns the request for the next step."""
        head = self.request()
        assert self._trace is not None
        if said:
            self._trace.add("said", said)
        head.messages.append(Msg("assistant", [said] if said else [], list(calls)))
        for call in calls:
            result = results.get(call.id, "")
            try:
                args = orjson.loads(call.arguments or "{}")
            except orjson.JSONDecodeError:
                args = None
            words = lookback.lookback_words(call.name, args, self.title)
            self._trace.add("did", f"{call.name} {call.arguments}", words)
            self._trace.add("result", result, "" if words else None)
            head.messages.append(Msg("tool", [result], tool_call_id=call.id))
        return head

    def finish(self, reply: str, status: str = "completed", status_text: str | None = None):
        """Journal the trace and the reply, commit the turn, and drop delivered pending messages."""
        assert self._journal is not None and self._trace is not None
        if not self._trace.empty:
            self._journal.add("trace", self._trace.text(), writer_text=self._trace.writer_text())
        if reply:
            self._journal.add("reply", reply)
        info = self._journal.commit(status, status_text)
        drop_pending(self.memory, self.session)
        return info


def build_request(memory: Memory, system: str, tools: list[dict], context: list[str], state: str,
                  new: str) -> Request:
    """The head of DESIGN §4, in neutral form."""
    lines, p = memory.written_prefix()
    rendered = [line.render() for line in lines]
    recent = memory.recent_block(p)
    tail = []
    if recent:
        tail.append(recent + "\n")
    if state:
        tail.append(state.rstrip("\n") + "\n")
    tail.append(new)
    blocks, whole = view_message_blocks(rendered, tail)
    messages = [Msg("user", [text]) for text in context]
    messages.append(Msg("user", blocks))
    return Request(system, tools, messages, view_message=len(context), view_blocks=whole,
                   cache_key=memory.memory_id)
