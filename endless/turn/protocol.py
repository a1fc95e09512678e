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

from endless import prompts
from endless.core import durable
from endless.core import lookback
from endless.core.keys import session_file_name
from endless.core.memory import Memory, TurnInProgress
from endless.core.messages import TraceBuilder
from endless.llm.request import Msg, Request, ToolCallOut, view_message_blocks

CONTINUED = "continued"  # the status of a long turn's parts before its last
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


def refresh_bytes(memory: Memory) -> int:
    """A quarter of the window, in bytes: a token is at least a byte, so this errs early."""
    window = memory.window_tokens or memory.settings.default_window_tokens
    return int(window * memory.settings.long_turn_fraction)


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
    state: str = ""
    refreshes: int = 0
    _journal: TurnInProgress | None = None
    _person_id: int | None = None  # the person's message, once a refresh has logged it
    _calls: int = 0  # tool calls the turn has made (a refresh saves them all)
    _trace: TraceBuilder | None = None
    _step_bytes: int = 0

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
        self.state = state
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
            self._calls += 1
            self._step_bytes += len(call.arguments.encode()) + len(result.encode())
        self._step_bytes += len(said.encode())
        if self._step_bytes > refresh_bytes(self.memory):
            return self.refresh()
        return head

    def refresh(self) -> Request:
        """Rebuild the head so a long turn never outgrows the window (one cache miss).

        The turn so far is committed as a part with status ``continued``: its
        messages get real ids (the agent can ``zoom`` them, the writer starts on
        them, a crash later loses none of it) and the new head shows them in the
        recent block, whatever the writer has caught up with: the turn is
        already running, so it does not wait.  When the block would pass a
        quarter of the window, the person's message and the newest steps stay
        (shortened if need be) and the rest is named for ``zoom``.  The rest of
        the turn goes to a fresh journal and is committed by ``finish`` as the
        turn's last part.
        """
        assert self._journal is not None and self._trace is not None
        memory = self.memory
        if not self._trace.empty:
            self._journal.add("trace", self._trace.text(), writer_text=self._trace.writer_text())
        info = self._journal.commit(CONTINUED)
        if info is not None and self._person_id is None:
            self._person_id = info.first  # begin() journals the person's message first
        drop_pending(memory, self.session)
        self.refreshes += 1
        self._journal = memory.journal(self.session, self.title)
        self._trace = TraceBuilder(memory.settings)
        self._step_bytes = 0
        durable.log("turn", f"a turn of {self.session!r} passed a quarter of the window; "
                            f"its steps so far are committed and the head rebuilt ({self.refreshes})")
        first = self._person_id if self._person_id is not None else memory.total - 1
        calls = f"{self._calls} tool call{'' if self._calls == 1 else 's'}"
        note = prompts.text("turn/continued.txt").strip().format(calls=calls, first=first,
                                                                 last=memory.total - 1)
        self.head = build_request(memory, self.system, self.tools, self.context, self.state, note,
                                  recent_limit=refresh_bytes(memory), keep=self._person_id)
        return self.head

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


def bounded_recent_block(memory: Memory, start: int, limit: int, keep: int | None = None) -> str:
    """``[start, T)`` when it fits ``limit`` bytes; else the most of it that does, the rest named.

    Only a long turn's refresh needs this, when the writer lags behind the
    turn's own steps.  Message ``keep`` (the person's message of the turn)
    always stays, shortened to at most a quarter of ``limit``; then the newest
    messages, the oldest of them shortened to the room left.  Each run of
    left-out messages gets a note line: they are in the memory, and ``zoom``
    reads them by id.
    """
    total = memory.total
    lines = {m: memory.recent_line(m) for m in range(start, total)}  # each message read once
    block = "\n".join(lines.values())
    if len(block.encode("utf-8")) <= limit:
        return block
    room = limit - 2 * _NOTE_ROOM
    shown: dict[int, str] = {}
    if keep is not None and start <= keep < total:
        shown[keep] = shorten_line(lines[keep], keep, max(0, room // 4))
        room -= len(shown[keep].encode("utf-8")) + 1
    for message_id in range(total - 1, start - 1, -1):
        if message_id == keep:
            continue
        line = lines[message_id]
        size = len(line.encode("utf-8")) + 1
        if size > room:
            if room >= _MIN_SHORTENED:
                shown[message_id] = shorten_line(line, message_id, room - 1)
            break
        shown[message_id] = line
        room -= size
    out: list[str] = []
    message_id = start
    while message_id < total:
        if message_id in shown:
            out.append(shown[message_id])
            message_id += 1
            continue
        last = message_id
        while last + 1 < total and last + 1 not in shown:
            last += 1
        note = prompts.text("turn/left_out.txt").strip().format(first=message_id, last=last)
        out.append(f"{message_id}+0|note: {note}")
        message_id = last + 1
    return "\n".join(out)


_NOTE_ROOM = 256  # bytes for one left-out note line
_MIN_SHORTENED = 1024  # a message shortened below this shows too little to be worth it


def shorten_line(line: str, message_id: int, size: int) -> str:
    """``line`` in at most ``size`` UTF-8 bytes: its head and tail, with the cut named for ``zoom``."""
    data = line.encode("utf-8")
    if len(data) <= size:
        return line
    marker = prompts.text("turn/shortened.txt").strip()
    longest = len(marker.format(cut=f"{len(line):,}", id=message_id).encode("utf-8")) + 2
    half = max(0, (size - longest) // 2)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half:].decode("utf-8", "ignore") if half else ""
    cut = len(line) - len(head) - len(tail)
    return f"{head}\n{marker.format(cut=f'{cut:,}', id=message_id)}\n{tail}"


def build_request(memory: Memory, system: str, tools: list[dict], context: list[str], state: str,
                  new: str, recent_limit: int | None = None, keep: int | None = None) -> Request:
    """The head of DESIGN §4, in neutral form."""
    lines, p = memory.written_prefix()
    rendered = [line.render() for line in lines]
    recent = (memory.recent_block(p) if recent_limit is None
              else bounded_recent_block(memory, p, recent_limit, keep))
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
