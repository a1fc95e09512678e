"""The turn protocol (DESIGN §4): the request a harness sends instead of its own history.

One :class:`Turn` for every harness.  A turn's head is built once, at its
first request (:mod:`endless.turn.head`): the harness's system prompt with
Endless's section, the tools with Endless's three, the rarely-changing context
messages, the view up to its first unwritten line, the recent block ``[p, T)``
word for word, the per-turn state, then the new message.  Steps after the
first keep that head and append the turn's own calls and results.  A turn
waits only while the recent block would pass its limit and the writer is
storing lines, for at most ``turn_wait_seconds`` (:func:`wait_for_room`);
then it goes on with a bounded head.  It is refused, with one sentence, only
when no bounded head fits the window at all; the refused message is then in
the memory at once (a ``kept`` turn) and shown once to the next turn of any
chat of that memory (:mod:`endless.turn.pending`).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Callable

import orjson

from endless import prompts
from endless.core.store import durable
from endless.core import lookback
from endless.core.memory import Memory
from endless.core.store import TurnInProgress
from endless.core.store import TraceBuilder
from endless.llm.request import Msg, Request, ToolCallOut
from endless.core.settings import KEPT_SHARE_BYTES
from endless.turn.head import HeadTooLarge, build_request, fits, rebuild_bytes, shorten_line
from endless.turn.pending import Kept, adopt_per_session, claim, delivered, keep, release, with_kept
from endless.writer.recorded import recorded_routes

CONTINUED = "continued"  # the status of a long turn's parts before its last
# what the person reads when a turn is refused: the one case is a head that cannot fit (HeadTooLarge): the
# message itself is too long, or this chat's own instructions and tools fill the window
REFUSAL = ("I can't answer this one: with this chat's own instructions and tools, your message does not fit in "
           "the model's window, which leaves no room for my memory. I have kept it whole in my memory and will "
           "answer it with your next message, in this chat or another of this memory, showing it in a shorter "
           "form I can open in full (a shorter system prompt or a model with a larger window makes more room); "
           "no need to send it again.")
# what the person reads when they stopped a turn while it waited for the memory (nothing was asked of a model)
STOPPED_WAITING = "Stopped before I answered. Your message is in my memory."


@dataclass(frozen=True)
class Waited:
    """A turn's wait before its head, done (see :func:`wait_before_turn`)."""

    fits: bool  # the recent block fits: the head is whole, not bounded
    interrupted: bool = False  # the person stopped the turn while it waited


async def wait_before_turn(memory: Memory, interrupted: Callable[[], bool] | None = None,
                           limit: float | None = None) -> Waited:
    """The one decision to wait before a turn, for every harness: :func:`wait_for_room`, ended early
    when ``interrupted()`` says the person stopped the turn (a harness with its own stop button).

    :meth:`Turn.begin` waits so itself when it is not handed a wait already done; a harness that
    must wait earlier than it builds the head (Hermes waits in ``pre_llm_call``, where it can still
    answer a stopped turn itself) calls this and hands the result to ``begin``.
    """
    fits = await wait_for_room(memory, limit, interrupted)
    return Waited(fits, bool(interrupted is not None and not fits and interrupted()))


async def wait_for_room(memory: Memory, limit: float | None = None,
                        interrupted: Callable[[], bool] | None = None) -> bool:
    """Wait while the recent block is past its limit, as long as the writer stores lines; True if it fits.

    The wait ends once the block fits, once ``turn_stall_seconds`` pass with
    no new line (a stalled or failing writer: waiting longer buys nothing),
    after ``limit`` seconds (``turn_wait_seconds``) in all, or once
    ``interrupted()`` holds (looked at with every poll of the memory).
    """
    settings = memory.settings
    limit = settings.turn_wait_seconds if limit is None else limit
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        # Only a new line can make the block fit (more messages make it longer): it is measured
        # once per line stored, not at every poll.
        built = memory.lines_built
        if fits(memory):
            return True
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        if interrupted is None:
            await memory.settle(lambda m: m.lines_built != built, min(remaining, settings.turn_stall_seconds))
        else:
            await memory.settle(lambda m: m.lines_built != built or interrupted(),
                                min(remaining, settings.turn_stall_seconds), poll=settings.settle_poll_seconds)
            if interrupted():
                return fits(memory)
        if memory.lines_built == built:
            return False


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
    delivered_pending: list[Kept] = field(default_factory=list)  # kept messages this turn shows, until committed
    state: str = ""
    rebuilds: int = 0  # how often a long turn rebuilt its head
    reply_tokens: int | None = None  # the reply's room the harness asked for, kept for rebuilt heads
    waiting: bool = False  # in begin(), waiting for the writer (a face may say so)
    since: int | None = None  # the memory's turn count when the turn began (None: at begin())
    _journal: TurnInProgress | None = None
    _person_id: int | None = None  # the person's message, once a head rebuild has logged it
    _calls: int = 0  # tool calls the turn has made (a head rebuild saves them all)
    _trace: TraceBuilder | None = None
    _step_bytes: int = 0

    async def begin(self, message: str, state: str = "", route: dict | None = None,
                    timeout: float | None = None, reply_tokens: int | None = None,
                    waited: Waited | None = None) -> Request | None:
        """Build the head (after a short wait while the writer catches up); None when refused.

        ``reply_tokens``: the room the harness asks for its reply (else the
        ``reply_room_tokens`` setting).  ``waited``: the wait before this turn,
        done already by :func:`wait_before_turn` (so it is not waited twice).
        """
        memory = self.memory
        if self.since is None:
            memory.catch_up()
            self.since = memory.turns
        if waited is None:
            self.waiting = True
            try:
                await wait_before_turn(memory, None, timeout)
            finally:
                self.waiting = False
        if route is not None:
            recorded_routes(memory).record(self.session, route, self.system, self.tools)
        if adopt_per_session(memory):
            durable.log("turn", "messages an earlier Endless kept per chat are now kept turns of the memory")
        owner = f"{self.session}:{uuid.uuid4().hex}"
        kept = claim(memory, owner)
        try:
            head = self._head_with(kept, message, state, reply_tokens)
        except BaseException as exc:
            release(memory, kept, owner)
            if not isinstance(exc, HeadTooLarge):
                raise
            held = keep(memory, self.session, self.title, message)
            self.refused = True
            durable.log("turn", f"refused a turn of {self.session!r}: {exc}; its message is kept as "
                                f"message {held.ident}")
            return None
        self.delivered_pending = kept
        self._journal = memory.journal(self.session, self.title, since=self.since)
        self._journal.add("user", message)  # the kept ones are in the log already, under their own chats
        self._trace = TraceBuilder(memory.settings)
        self.state = state
        self.reply_tokens = reply_tokens
        self.head = head
        return self.head

    def _head_with(self, kept: list[Kept], message: str, state: str, reply_tokens: int | None) -> Request:
        """The head with the kept messages whole, else each cut to a share, else named only (zoom reads them)."""
        shares = [None] + ([KEPT_SHARE_BYTES, 0] if kept else [])
        for share in shares:
            shorten = None if share is None else (lambda text, ident, size=share: shorten_line(text, ident, size))
            try:
                return build_request(self.memory, self.system, self.tools, self.context, state,
                                     with_kept(kept, message, shorten), reply_tokens=reply_tokens)
            except HeadTooLarge:
                if share == shares[-1]:
                    raise
        raise AssertionError("unreachable")

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
        if self._step_bytes > rebuild_bytes(self.memory):
            return self.rebuild_head()
        return head

    def rebuild_head(self) -> Request:
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
        self._delivered()
        self.rebuilds += 1
        self._journal = memory.journal(self.session, self.title)
        self._trace = TraceBuilder(memory.settings)
        self._step_bytes = 0
        durable.log("turn", f"a turn of {self.session!r} passed a quarter of the window; "
                            f"its steps so far are committed and the head rebuilt ({self.rebuilds})")
        first = self._person_id if self._person_id is not None else memory.total - 1
        calls = f"{self._calls} tool call{'' if self._calls == 1 else 's'}"
        note = prompts.text("turn/continued.txt").strip().format(calls=calls, first=first,
                                                                 last=memory.total - 1)
        self.head = build_request(memory, self.system, self.tools, self.context, self.state, note,
                                  recent_limit=rebuild_bytes(memory), keep=self._person_id,
                                  reply_tokens=self.reply_tokens)
        return self.head

    def finish(self, reply: str, status: str = "completed", status_text: str | None = None):
        """Journal the trace and the reply, commit the turn; the kept messages it showed are delivered."""
        assert self._journal is not None and self._trace is not None
        if not self._trace.empty:
            self._journal.add("trace", self._trace.text(), writer_text=self._trace.writer_text())
        if reply:
            self._journal.add("reply", reply)
        info = self._journal.commit(status, status_text)
        self._delivered()
        return info

    def _delivered(self) -> None:
        delivered(self.memory, self.delivered_pending)
        self.delivered_pending = []
