"""Endless inside Hermes Agent 0.19.0: the hooks, the ``llm_request`` middleware and the turn states.

One turn of a chat, as Hermes runs it:

``pre_llm_call``
    the person's clean message.  Endless decides whether this chat runs with
    it (not a subagent, cron job or background fork; a served request mode; a
    window of at least 32,768 tokens; not switched off), picks the chat's
    memory (DESIGN §2.1), closes a turn of this session that never finished
    (an API error skips Hermes's finalising hooks) as ``interrupted``, and
    settles: it waits while the recent block is too long and the writer
    stores lines, watching Hermes's interrupt flag; then the turn goes on with
    a bounded head (refused only when none fits the window).
``llm_request`` middleware (every request of the turn, retries included)
    the first request builds the head (DESIGN §4) through
    :class:`endless.turn.protocol.Turn` and freezes it in wire form; every request
    is that head, byte for byte, then the turn's own part exactly as Hermes
    built it (everything after the person's message: tool calls and results,
    ``/steer`` text inside results, Hermes's synthetic nudges).  New complete
    tool steps are journalled.  It never raises: on an internal failure it
    sends the system prompt, the message and a one-line notice.
``llm_execution`` middleware (every request, after ``llm_request``)
    a refused turn, or one stopped while it waited, is answered by Endless
    itself: no model is asked, and the answer Hermes streams, prints and
    stores is the one sentence for the person (``REFUSAL``, ``STOPPED_WAITING``).
``transform_llm_output`` / ``post_llm_call`` / ``on_session_end``
    a refused turn's answer becomes the one sentence (should a model have
    answered after all); a finished turn is committed as ``completed``; an
    interrupted one as ``stopped`` (its message alone when Hermes interrupted
    it before its first request; "stopped by Hermes" when Hermes's own text
    interrupted it, a signal say).

A message that is one of Hermes's own interrupt texts (``received signal 15``,
:mod:`endless.faces.hermes.host_texts`) is no one's words: Endless answers it
itself (no model is asked) and stores nothing of it.
"""

from __future__ import annotations

import datetime as _dt
import enum
import threading
from dataclasses import dataclass, field
from typing import Any

from endless.core.words import agree, count
from endless.core import lookback
from endless.turn.head import system_prompt, turn_tools
from endless.turn.protocol import REFUSAL, STOPPED_WAITING, Turn, Waited, wait_before_turn
from endless.faces.hermes import host_texts, internals, notices, reconcile, wire
from endless.faces.hermes.runtime import log, runtime
from endless.core.store import Key, gateway_key, workspace_key
from endless.core.memory import Memory
from endless.core.view import state_line
from endless.llm.request import Request
from endless.core.store import key_for_session

REFUSED_PROMPT = "Reply with the single word: waiting."


class Phase(enum.Enum):
    """Where one Hermes turn stands with Endless (``TurnState.phase``; one at a time).

    ``RUNNING``
        runs with Endless: the head is built at its first request, then its steps follow.
    ``BYPASSED``
        runs without Endless, on Hermes's own history (``TurnState.reason`` says why:
        ``side-agent``, ``off``, ``mode``, ``moa``, ``window``).
    ``FAILED``
        Endless could not prepare it (``reason``): it goes out as system prompt + message + notice.
    ``REFUSED``
        no bounded head fits the window: Endless answers ``REFUSAL`` itself, no model is asked.
    ``REFUSED_FAILED``
        refused, then Endless failed (``reason``; keeping the message, say): answered with
        ``REFUSAL`` as ``REFUSED`` is.
    ``INTERRUPTED_WAITING``
        Hermes was interrupted during the settle wait: Endless answers ``STOPPED_WAITING``
        itself, and when the turn ends its message alone is committed as ``stopped``.
    ``HOST_TEXT``
        the message is one of Hermes's own interrupt texts (``host_texts``): Endless answers
        it itself, no model is asked, nothing is stored.
    ``FINISHED``
        committed: its turn (from ``RUNNING``) or its message alone (from ``INTERRUPTED_WAITING``,
        or ``RUNNING`` ended before its first request).
    """

    RUNNING = "running"
    BYPASSED = "bypassed"
    FAILED = "failed"
    REFUSED = "refused"
    REFUSED_FAILED = "refused-failed"
    INTERRUPTED_WAITING = "interrupted-waiting"
    HOST_TEXT = "host-text"
    FINISHED = "finished"


@dataclass
class TurnState:
    session: str
    turn_id: str
    user_message: str
    memory: Memory | None = None
    title: str = ""
    phase: Phase = Phase.RUNNING
    waited: Waited | None = None  # the turn's wait before its head (the turn protocol's, done at pre_llm_call)
    reason: str = ""  # BYPASSED: why it runs without Endless; FAILED, REFUSED_FAILED: what failed
    turn: Turn | None = None
    since: int | None = None  # the memory's turn count when the turn began (a copy logged after it is an import's)
    head: Request | None = None
    frozen: dict | None = None
    view_msg: Any = None  # the head's view message object when it was frozen
    style: str = "none"
    steps_added: int = 0
    folded: int = 0
    route: dict | None = None
    window: int | None = None
    chat: internals.Chat | None = None


@dataclass
class Plugin:
    """The per-process plugin state Hermes's callbacks share (engines are deep-copied per agent)."""

    turns: dict[tuple[str, str], TurnState] = field(default_factory=dict)
    current: dict[str, TurnState] = field(default_factory=dict)  # session -> its latest turn
    off_chats: set[str] = field(default_factory=set)  # internals.Chat.ident of chats switched off with /endless off
    off_texts: dict[str, set[str]] = field(default_factory=dict)  # messages sent while off: never reconciled
    noted: set[tuple[str, str]] = field(default_factory=set)
    shown_notices: notices.Notices = field(default_factory=notices.Notices)
    last_session: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- helpers -------------------------------------------------------------------

    def _notify(self, agent: Any, rt: Any, memory: Memory) -> None:
        """At most one line on the person's screen, through Hermes's notices, when the writer needs them."""
        text = notices.writer_notice(rt.writer_stats(memory.memory_id), memory.clock(),
                                     rt.settings.writer_failing_notice_seconds)
        if self.shown_notices.update(agent, memory.memory_id, text):
            log(f"told the person: {text}")

    def note_once(self, session: str, what: str, message: str) -> None:
        if (session, what) not in self.noted:
            self.noted.add((session, what))
            log(message)

    def state_for(self, session: str, turn_id: str) -> TurnState | None:
        with self.lock:
            return self.turns.get((session, turn_id))

    # -- pre_llm_call --------------------------------------------------------------

    def pre_llm_call(self, session_id: str = "", turn_id: str = "", user_message: Any = "",
                     platform: str = "", conversation_history: list | None = None, **_: Any) -> None:
        agent = internals.find_agent()
        text = user_message if isinstance(user_message, str) else wire.content_text(user_message)
        state = TurnState(session_id, str(turn_id), text)
        if internals.is_side_agent(agent, platform):
            # subagents, cron, review forks (which share the parent's session id): left alone, and
            # never taking the parent's place as the session's current turn
            state.phase, state.reason = Phase.BYPASSED, "side-agent"
            with self.lock:
                self.turns[(session_id, state.turn_id)] = state
            return None
        with self.lock:
            previous = self.current.get(session_id)
            # keep only this session's previous turn (it may still need closing) and this one
            for key in [k for k in self.turns if k[0] == session_id and self.turns[k] is not previous
                        and not _side_agent(self.turns[k])]:
                del self.turns[key]
            self.turns[(session_id, state.turn_id)] = state
            self.current[session_id] = state
            self.last_session = session_id
        state.chat = internals.chat_of(agent, platform, session_id)
        try:
            internals.take_over_max_iterations(agent, self.summary_request)
            reason = self._bypass_reason(agent, session_id, platform, state.chat)
            if reason:
                state.phase, state.reason = Phase.BYPASSED, reason
                if reason == "off":
                    self.off_texts.setdefault(session_id, set()).add(text.strip())
                return None
            if previous is not None and previous.phase is not Phase.FINISHED and previous.turn is not None:
                self._close(previous, "interrupted",
                            "The turn stopped: the model's provider failed or Hermes ended it early.")
            if host_texts.is_host_text(text):
                state.phase = Phase.HOST_TEXT
                log(f"session {session_id}: the message {text!r} is Hermes's own interrupt text, not the "
                    "person's; answered without a model and not kept")
                return None
            state.window = internals.window_of(agent)
            if state.window is not None and not runtime().settings.serves_window(state.window):
                state.phase, state.reason = Phase.BYPASSED, "window"
                self.note_once(session_id, "window", f"session {session_id}: a {state.window}-token window "
                               f"is under {runtime().settings.smallest_window_tokens}; this chat runs "
                               "without Endless")
                return None
            rt = runtime()
            state.memory = rt.memory(key_of(state.chat), state.window)
            self._notify(agent, rt, state.memory)
            state.title = internals.title_of(agent, session_id)
            state.route = internals.route_of(agent, rt)
            if conversation_history:
                found = rt.loop.call(reconcile.reconcile, state.memory, session_id, state.title,
                                     list(conversation_history), text, self.off_texts.get(session_id, ()))
                if found:
                    log(f"session {session_id}: {count(found, 'message')} Hermes kept but Endless never saw {agree(found, 'is', 'are')} now "
                        "in the memory as interrupted turns")
            # Hermes stores the message in its state.db from here on: an import of it logging this
            # turn meanwhile is found at the commit (identity.imported_copy), not logged twice.
            state.since = state.memory.turns
            self._wait_for_room(state, agent)
        except Exception as exc:  # never break Hermes's turn, never send the full history: say why
            failure = f"{type(exc).__name__}: {exc}"
            if state.phase is not Phase.BYPASSED:  # a bypassed turn still runs without Endless
                state.phase = Phase.REFUSED_FAILED if state.phase is Phase.REFUSED else Phase.FAILED
                state.reason = failure
            log(f"session {session_id}: Endless could not prepare this turn ({failure}); it is sent "
                "with the system prompt and this message only")
        return None

    def _bypass_reason(self, agent: Any, session: str, platform: str, chat: internals.Chat) -> str:
        if internals.is_side_agent(agent, platform):
            return "side-agent"
        if chat.ident in self.off_chats:
            return "off"
        mode = getattr(agent, "api_mode", None) if agent is not None else None
        if mode is not None and mode not in wire.MODES:
            self.note_once(session, "mode", f"session {session}: Hermes's {mode!r} requests are not "
                           "served by Endless; this chat runs without Endless (Hermes's own history)")
            return "mode"
        if internals.moa_turn():
            self.note_once(session, "moa", f"session {session}: mixture-of-agents sees the whole history "
                           "before Endless could replace it; this chat runs without Endless")
            return "moa"
        return ""

    def _wait_for_room(self, state: TurnState, agent: Any) -> None:
        """Wait (interruptibly) while the writer catches up on a recent block past its limit.

        However the wait ends, the turn then goes on with a bounded head
        (``Turn.begin``); only a head that cannot fit the window refuses it.
        """
        rt = runtime()
        memory = state.memory
        assert memory is not None
        state.waited = rt.loop.run(wait_before_turn(memory, lambda: internals.interrupted(agent),
                                                    rt.settings.turn_wait_seconds))
        if state.waited.interrupted:
            state.phase = Phase.INTERRUPTED_WAITING

    # -- the middleware ------------------------------------------------------------

    def llm_request(self, request: dict | None = None, session_id: str = "", turn_id: str = "",
                    api_mode: str = "", api_call_count: int = 0, **_: Any) -> dict | None:
        state = self.state_for(session_id, str(turn_id))
        if state is None or state.phase is Phase.BYPASSED or request is None:
            return None
        if api_mode not in wire.MODES:
            self.note_once(session_id, "mode", f"session {session_id}: {api_mode!r} requests run without Endless")
            return None
        try:
            if state.phase in _FAILED:
                raise RuntimeError(state.reason)
            return {"request": self._build(state, request, api_mode)}
        except Exception as exc:
            if state.phase not in _FAILED:
                log(f"session {session_id}: could not build the Endless request ({exc!r}); sending the "
                    "system prompt and this message only")
            try:
                system = wire.system_text(request, api_mode)
                return {"request": wire.safe_request(request, api_mode, system, state.user_message,
                                                     "Endless could not load this chat's memory for this turn; "
                                                     "earlier messages are not shown.")}
            except Exception as inner:  # pragma: no cover - last resort
                log(f"session {session_id}: even the safe request failed: {inner!r}")
                return {"request": {k: v for k, v in request.items() if k != "messages"} | {
                    "messages": [{"role": "user", "content": state.user_message}]}}

    def _build(self, state: TurnState, request: dict, mode: str) -> dict:
        rt = runtime()
        system = wire.system_text(request, mode)
        if _own_answer(state) is not None:
            # answered by ``llm_execution`` without a model; should that fail open, the least request goes
            out = wire.safe_request(request, mode, "", REFUSED_PROMPT, "Endless: the memory is catching up")
            out.pop("tools", None)
            out.pop("tool_choice", None)
            if mode == "anthropic_messages":
                out.pop("system", None)
            else:
                out["messages"] = out["messages"][1:]
            return out
        conv = wire.conversation(request, mode)
        anchor = wire.find_anchor(conv, mode, state.user_message)
        own = conv[anchor + 1:]
        if state.turn is None:
            tools = turn_tools(wire.neutral_tools(request, mode), rt.settings.recall_search)
            turn = Turn(state.memory, state.session, state.title, system_prompt(system), tools, since=state.since)
            head = rt.loop.run(turn.begin(state.user_message, per_turn_state(state), route=state.route,
                                          reply_tokens=_reply_tokens(request),
                                          waited=state.waited or Waited(fits=False)))
            if head is None:  # no bounded head fits the window (the message is kept)
                state.phase = Phase.REFUSED
                return self._build(state, request, mode)
            state.turn = turn
            state.head = head
            state.view_msg = _view_msg(head)
            state.style = wire.mark_style(request, mode, _route_style(state.route))
            state.frozen = wire.render_head(head, request, mode, state.style)
        steps = wire.own_steps(own, mode)
        for step in steps[state.steps_added:]:
            rt.loop.call(state.turn.add_step, step.said, step.calls, step.results)
            state.steps_added += 1
            if _rebuilt(state.turn.head, state.head) or _view_msg(state.turn.head) is not state.view_msg:  # the turn protocol rebuilt the head (a long turn)
                state.head = state.turn.head
                state.view_msg = _view_msg(state.head)
                state.frozen = wire.render_head(state.head, request, mode, state.style)
                state.folded = len(own)
        assert state.frozen is not None
        return wire.assemble(request, mode, state.frozen, own[state.folded:], state.style)

    def llm_execution(self, request: dict | None = None, next_call: Any = None, session_id: str = "",
                      turn_id: str = "", api_mode: str = "", model: str = "", **_: Any) -> Any:
        """The provider call of each request: Endless answers a refused or stopped turn itself.

        Hermes's ``llm_execution`` middleware wraps the SDK call
        (``agent/conversation_loop.py:1455-1472``); a callback that returns
        an answer without calling ``next_call`` is the answer (SEAMS.md, seam
        8).  So such a turn sends no request at all, and what Hermes shows,
        stores in state.db and hands to its hooks is the sentence for the
        person.  Every other request goes on to the model unchanged.
        """
        state = self.state_for(session_id, str(turn_id))
        text = None if state is None else _own_answer(state)
        if text is None:
            return next_call(request)
        log(f"session {session_id}: answered by Endless itself, no model asked ({state.phase.value})")
        return wire.own_answer(api_mode, model, text)

    def summary_request(self, agent: Any, kwargs: dict) -> dict:
        """Hermes's iteration-limit summary request, as Endless sends it: the turn's head, never the transcript.

        ``handle_max_iterations`` builds this request itself and calls the
        client directly, past the ``llm_request`` middleware (SEAMS.md, seam
        24); it goes through the same head here.  It stays without tools, as
        Hermes asks for a reply with no more tool calls.
        """
        session = str(getattr(agent, "session_id", "") or "")
        state = self.current.get(session)
        mode = getattr(agent, "api_mode", "") or ""
        if state is None or state.phase is Phase.BYPASSED or mode not in wire.MODES:
            return kwargs
        answer = self.llm_request(request=kwargs, session_id=session, turn_id=state.turn_id, api_mode=mode)
        if not answer:
            return kwargs
        out = dict(answer["request"])
        out.pop("tools", None)
        out.pop("tool_choice", None)
        return out

    # -- the end of a turn ---------------------------------------------------------

    def transform_llm_output(self, response_text: str = "", session_id: str = "", **_: Any) -> str | None:
        state = self.current.get(session_id)
        if state is not None and state.phase in _REFUSED:
            return REFUSAL
        if state is not None and state.phase is Phase.HOST_TEXT:
            return _own_answer(state)
        return None

    def post_llm_call(self, session_id: str = "", turn_id: str = "", assistant_response: str = "",
                      **_: Any) -> None:
        state = self.state_for(session_id, str(turn_id))
        if state is None or state.phase in (Phase.BYPASSED, Phase.FINISHED):
            return None
        if state.turn is not None:
            self._close(state, "completed", None, reply=assistant_response or "")
        elif state.phase in _FAILED:
            log(f"session {session_id}: this turn is not in the memory ({state.reason})")
        return None

    def on_session_end(self, session_id: str = "", turn_id: str = "", completed: bool = False,
                       interrupted: bool = False, **_: Any) -> None:
        state = self.state_for(session_id, str(turn_id))
        if state is not None and _side_agent(state):
            with self.lock:
                self.turns.pop((session_id, str(turn_id)), None)
            return None
        if state is None or state.phase in (Phase.BYPASSED, Phase.FINISHED):
            return None
        note = None
        if interrupted and host_texts.is_host_text(reason := internals.interrupt_message() or ""):
            note = host_texts.stopped_by_host(reason)
        if state.turn is not None:
            if interrupted:
                self._close(state, "stopped", note)
            elif completed:
                self._close(state, "completed", None)
            # else: an error exit; the next turn (or the next process) closes it as interrupted
        elif state.memory is not None and (state.phase is Phase.INTERRUPTED_WAITING or (
                state.phase is Phase.RUNNING and interrupted)):
            # stopped while it waited, or before its first request (Hermes interrupts a first
            # message while "Initializing agent..." shows): the message alone, as stopped
            self._commit_message_only(state, "stopped", note)
        return None

    def on_session_finalize(self, session_id: str = "", **_: Any) -> None:
        """Hermes is leaving this session (exit, /new): close its unfinished turn as interrupted."""
        state = self.current.get(session_id)
        ended = ("The turn stopped: the model's provider failed or Hermes ended the session before the "
                 "turn finished.")
        if (state is not None and state.phase not in (Phase.BYPASSED, Phase.FINISHED)
                and state.turn is not None):
            self._close(state, "interrupted", ended)
        elif state is not None and state.phase is Phase.RUNNING and state.memory is not None:
            self._commit_message_only(state, "interrupted", ended)  # it ended before its first request
        return None

    def _close(self, state: TurnState, status: str, status_text: str | None, reply: str = "") -> None:
        with self.lock:
            if state.phase is Phase.FINISHED:
                return
            state.phase = Phase.FINISHED
        try:
            runtime().loop.call(state.turn.finish, reply, status, status_text)
        except Exception as exc:
            log(f"session {state.session}: could not commit the turn ({exc!r}); its journal keeps it and "
                "the next open of the memory closes it as interrupted")

    def _commit_message_only(self, state: TurnState, status: str, status_text: str | None = None) -> None:
        with self.lock:
            if state.phase is Phase.FINISHED:
                return
            state.phase = Phase.FINISHED
        memory = state.memory

        def commit():
            journal = memory.journal(state.session, state.title)
            journal.add("user", state.user_message)
            journal.commit(status, status_text)
        runtime().loop.call(commit)

    # -- tools and commands ------------------------------------------------------------

    def memory_for(self, session_id: str | None) -> Memory | None:
        state = self.current.get(session_id or "") or self.current.get(self.last_session or "")
        return None if state is None else state.memory

    def command_chat(self) -> internals.Chat | None:
        """The chat a slash command was typed in: found in Hermes's frames, else the latest turn's."""
        found = internals.find_chat()
        if found is not None:
            return found
        state = self.current.get(self.last_session or "")
        return None if state is None else state.chat

    def command_memory(self, chat: internals.Chat) -> Memory:
        """The memory a command acts on: its chat's open one, else the one its first turn would open.

        Raises :class:`endless.core.errors.NoMemory` when that memory does not
        exist yet (a command never creates one: the first message does).
        """
        with self.lock:
            opened = [s.memory for s in self.current.values()
                      if s.memory is not None and s.chat is not None and s.chat.ident == chat.ident]
        if opened:
            return opened[-1]
        return runtime().memory(key_of(chat), for_turn=False)

    def switch(self, chat: internals.Chat, on: bool) -> None:
        """``/endless on|off``: from the chat's next turn, with or without Endless (before its first one too)."""
        with self.lock:
            if on:
                self.off_chats.discard(chat.ident)
            else:
                self.off_chats.add(chat.ident)

    def is_off(self, chat: internals.Chat) -> bool:
        return chat.ident in self.off_chats

    def tool(self, name: str):
        def handler(args: dict | None = None, **kwargs: Any) -> str:
            memory = self.memory_for(kwargs.get("session_id"))
            if memory is None:
                return "Endless has no memory open for this chat yet."
            try:
                return runtime().loop.call(lookback.call, memory, name, args or {})
            except Exception as exc:
                log(f"tool {name} failed: {exc!r}")
                return f"The {name} tool failed: {exc}"
        return handler


PLUGIN = Plugin()

_FAILED = (Phase.FAILED, Phase.REFUSED_FAILED)  # sent as system prompt + message + notice
_REFUSED = (Phase.REFUSED, Phase.REFUSED_FAILED)  # answered with the refusal sentence


def _own_answer(state: TurnState) -> str | None:
    """The sentence Endless answers a turn with itself, or None when a model answers it."""
    if state.phase in _REFUSED:
        return REFUSAL
    if state.phase is Phase.HOST_TEXT:
        return host_texts.answer(state.user_message)
    if state.phase is Phase.INTERRUPTED_WAITING or (state.phase is Phase.FINISHED and state.turn is None):
        return STOPPED_WAITING  # stopped while it waited (FINISHED: its message alone was committed)
    return None


def _reply_tokens(request: dict) -> int | None:
    """The reply room Hermes's request asks for (``max_tokens`` or ``max_completion_tokens``), if any."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = request.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _side_agent(state: TurnState) -> bool:
    """A subagent's, cron job's or review fork's turn: never the session's current one."""
    return state.phase is Phase.BYPASSED and state.reason == "side-agent"


def _view_msg(head: Request | None) -> Any:
    if head is None or head.view_message is None or head.view_message >= len(head.messages):
        return None
    return head.messages[head.view_message]


def _rebuilt(now: Request | None, frozen: Request | None) -> bool:
    """True when the turn protocol replaced the head with a new Request."""
    return now is not frozen


def key_of(chat: internals.Chat) -> Key:
    """DESIGN §2.1: CLI chats by profile and workspace; gateway chats by platform:conversation.

    A session a host bound keeps its binding.  Turns and commands both ask
    here, so a command typed before the first message opens the memory that
    message will go to.
    """
    profile = internals.profile_name()
    if chat.platform in internals.CLI_PLATFORMS:
        fallback = workspace_key(profile, internals.workspace(chat.agent))
    else:
        fallback = gateway_key(profile, chat.platform, chat.conversation or chat.session)
    key, _ = key_for_session(runtime().settings.memory_root(), chat.session, fallback)
    return key


def _route_style(route: dict | None) -> str:
    if not route:
        return "none"
    from endless.llm.routes import Route

    try:
        return Route.from_json(route).style or "none"
    except Exception:
        return "none"


def per_turn_state(state: TurnState) -> str:
    """Per-turn facts that change: the time (and the chat's title)."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return state_line(now)


