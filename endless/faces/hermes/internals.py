"""Reading Hermes Agent 0.19.0's own state, which its plugin interface does not hand a plugin.

Hooks get a session id and the person's message, not the agent; slash
commands get only their arguments.  So the agent, the chat a command runs
in, the text a turn was interrupted with and a mixture-of-agents turn are
found in Hermes's frames, and the window, title, route, side-agent marks and
interrupt flag are read off the agent's attributes.  Each read is one
function here, with the Hermes file:line it relies on (SEAMS.md), so the
hook logic in :mod:`endless.faces.hermes.plugin` never touches Hermes's
private names, and a Hermes upgrade is checked in one place.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from endless.faces.hermes.runtime import log

SKIPPED_PLATFORMS = {"subagent", "cron", "kanban", "batch"}
CLI_PLATFORMS = {"", "cli", "tui", "acp", "api"}
SummaryRequest = Callable[[Any, dict], dict]  # the plugin's rewrite of Hermes's iteration-limit summary request


@dataclass(frozen=True)
class Chat:
    """One Hermes chat as Endless tells chats apart: its session and, on the gateway, its conversation.

    Slash commands are handed no session, so a command finds its chat in
    Hermes's frames (:func:`find_chat`); a turn knows it from its hook's
    arguments.  Both give the same memory key (:func:`key_of`).
    """

    session: str
    platform: str = "cli"
    conversation: str | None = None  # the gateway's session key: its chats' memory follows it
    agent: Any = None

    @property
    def ident(self) -> str:
        """What ``/endless off`` switches off: the gateway's conversation (it outlives /new), else the session."""
        return self.conversation or self.session


def find_agent() -> Any:
    """The ``AIAgent`` whose turn is running on this thread (hooks are not handed it).

    Hermes calls every hook and middleware from inside the agent's own
    functions, which hold it in a local named ``agent`` or ``self``.
    """
    frame = inspect.currentframe()
    try:
        frame = frame.f_back if frame is not None else None
        depth = 0
        while frame is not None and depth < 40:
            for name in ("agent", "self"):
                value = frame.f_locals.get(name)
                if value is not None and type(value).__name__ == "AIAgent":
                    return value
            frame = frame.f_back
            depth += 1
        return None
    finally:
        del frame


def interrupt_message() -> str | None:
    """The text the ending turn was interrupted with: ``finalize_turn``'s ``result["interrupt_message"]``.

    ``agent/turn_finalizer.py:566-567`` puts it there and clears the agent's
    own copy (``:570``) before firing ``on_session_end`` (``:611``), so the
    hook reads it from that frame.
    """
    frame = inspect.currentframe()
    try:
        frame = frame.f_back if frame is not None else None
        depth = 0
        while frame is not None and depth < 40:
            if frame.f_code.co_name == "finalize_turn":
                result = frame.f_locals.get("result")
                value = result.get("interrupt_message") if isinstance(result, dict) else None
                return value if isinstance(value, str) else None
            frame = frame.f_back
            depth += 1
        return None
    finally:
        del frame


def find_chat() -> Chat | None:
    """The chat whose slash command is running on this thread, from the Hermes front end that dispatched it.

    Plugin commands get only their arguments (SEAMS.md, seam 18), and may run
    before the chat's first message, so there is no turn to ask.  Each front
    end dispatches from a function holding what names the chat: the classic
    CLI ``HermesCLI.process_command`` (``self.session_id``, the id its agent
    gets), the gateway ``GatewayRunner._handle_message`` (``source``, whose
    session key names the conversation), the TUI's ``command.dispatch`` and
    ``slash.exec`` (``session``, a dict whose ``session_key`` is the agent's
    session id).
    """
    frame = inspect.currentframe()
    try:
        frame = frame.f_back if frame is not None else None
        depth = 0
        while frame is not None and depth < 40:
            found = _chat_in(frame.f_locals)
            if found is not None:
                return found
            frame = frame.f_back
            depth += 1
        return None
    finally:
        del frame


def _chat_in(names: dict) -> Chat | None:
    owner = names.get("self")
    kind = type(owner).__name__
    if kind == "HermesCLI" and getattr(owner, "session_id", None):
        return Chat(str(owner.session_id), "cli", None, getattr(owner, "agent", None))
    if kind == "GatewayRunner" and names.get("source") is not None:
        source = names["source"]
        try:
            conversation = owner._session_key_for_source(source)
        except Exception:
            return None
        value = str(getattr(getattr(source, "platform", None), "value", "") or "").lower()
        platform = "cli" if value in ("", "local") else value
        return Chat(conversation, platform, None if platform in CLI_PLATFORMS else conversation)
    session = names.get("session")
    if isinstance(session, dict) and session.get("session_key") and "slash_worker" in session:
        agent = session.get("agent")
        return Chat(str(getattr(agent, "session_id", None) or session["session_key"]), "tui", None, agent)
    return None


def take_over_max_iterations(agent: Any, summary_request: SummaryRequest) -> None:
    """Route the agent's iteration-limit summary call through Endless (once per agent).

    Hermes 0.19.0's ``AIAgent._handle_max_iterations`` (``run_agent.py:6316``,
    called from ``agent/turn_finalizer.py:141``) sends the whole transcript
    with the client itself (``agent/chat_completion_helpers.py:2086,2090``
    and the retries ``:2116,2133``).  The agent's own attribute shadows the
    method: while it runs, the two client calls it makes go through
    ``summary_request`` (the plugin's :meth:`Plugin.summary_request`).
    """
    if agent is None or "_handle_max_iterations" in getattr(agent, "__dict__", {}):
        return
    method = getattr(type(agent), "_handle_max_iterations", None)
    if method is None:  # another Hermes: nothing to take over
        return

    def handle_max_iterations(messages: list, api_call_count: int) -> str:
        with _summary_through_endless(agent, summary_request):
            return method(agent, messages, api_call_count)
    agent._handle_max_iterations = handle_max_iterations


class _SummaryClient:
    """The OpenAI client ``handle_max_iterations`` asks for, whose ``chat.completions.create`` goes through Endless."""

    def __init__(self, agent: Any, client: Any, summary_request: SummaryRequest) -> None:
        self._agent, self._client, self._request = agent, client, summary_request

    @property
    def chat(self) -> "_SummaryClient":
        return self

    @property
    def completions(self) -> "_SummaryClient":
        return self

    def create(self, **kwargs: Any) -> Any:
        return self._client.chat.completions.create(**self._request(self._agent, kwargs))


class _summary_through_endless:
    """While Hermes builds its summary request, its two ways to send it pass the request to Endless first."""

    NAMES = ("_ensure_primary_openai_client", "_anthropic_messages_create")

    def __init__(self, agent: Any, summary_request: SummaryRequest) -> None:
        self.agent = agent
        self.request = summary_request
        self.before: dict[str, Any] = {}

    def __enter__(self) -> None:
        agent = self.agent
        self.before = {name: agent.__dict__[name] for name in self.NAMES if name in agent.__dict__}
        openai_client = agent._ensure_primary_openai_client
        anthropic_create = agent._anthropic_messages_create
        request = self.request
        agent._ensure_primary_openai_client = lambda *a, **k: _SummaryClient(agent, openai_client(*a, **k), request)
        agent._anthropic_messages_create = lambda kwargs, *a, **k: anthropic_create(request(agent, kwargs), *a, **k)

    def __exit__(self, *exc: Any) -> None:
        for name in self.NAMES:
            self.agent.__dict__.pop(name, None)
        self.agent.__dict__.update(self.before)


def moa_turn() -> bool:
    """A mixture-of-agents turn: Hermes's loop holds a ``moa_config`` (its reference models run before us)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_locals.get("moa_config"):
                return True
            frame = frame.f_back
        return False
    finally:
        del frame


def is_side_agent(agent: Any, platform: str) -> bool:
    """Subagents, cron jobs, kanban workers and background review forks never enter the memory."""
    if (platform or "") in SKIPPED_PLATFORMS:
        return True
    if agent is None:
        return False
    if getattr(agent, "_delegate_depth", 0):
        return True
    if getattr(agent, "_memory_write_origin", "") == "background_review":
        return True
    return bool(getattr(agent, "_persist_disabled", False))


def interrupted(agent: Any) -> bool:
    if agent is not None and getattr(agent, "_interrupt_requested", False):
        return True
    try:
        from tools.interrupt import is_interrupted
        return bool(is_interrupted())
    except Exception:
        return False


def window_of(agent: Any) -> int | None:
    engine = getattr(agent, "context_compressor", None) if agent is not None else None
    value = getattr(engine, "context_length", 0) if engine is not None else 0
    return int(value) if value else None


def title_of(agent: Any, session: str) -> str:
    db = getattr(agent, "_session_db", None) if agent is not None else None
    if db is None:
        return ""
    try:
        return db.get_session_title(session) or ""
    except Exception:
        return ""


def route_of(agent: Any, rt) -> dict | None:
    """The chat's own model as the writer route (the key stays in memory, never in the route)."""
    if agent is None or not getattr(agent, "model", None):
        return None
    from endless.llm.routes import Route, RouteError

    provider = "anthropic" if getattr(agent, "api_mode", "") == "anthropic_messages" else "openai"
    base_url = getattr(agent, "base_url", None) or None
    rt.remember_key(base_url, getattr(agent, "api_key", None))
    try:
        return Route(provider=provider, model=agent.model, base_url=base_url).to_json()
    except RouteError as exc:
        log(f"no writer route from Hermes's model ({exc}); lines are written offline")
        return None


def profile_name() -> str:
    try:
        from hermes_cli.profiles import get_active_profile_name
        name = get_active_profile_name()
    except Exception:
        name = "default"
    return "default" if name in ("custom", "") else name


def chat_of(agent: Any, platform: str, session: str) -> Chat:
    """The chat of a turn, from its hook's arguments and its agent."""
    platform = platform or (getattr(agent, "platform", "") if agent is not None else "") or "cli"
    conversation = None
    if platform not in CLI_PLATFORMS:
        conversation = (getattr(agent, "_gateway_session_key", None) if agent is not None else None) or session
    return Chat(session, platform, conversation, agent)


def workspace(agent: Any) -> Path:
    try:
        from agent.runtime_cwd import resolve_agent_cwd
        return Path(resolve_agent_cwd()).resolve()
    except Exception:
        return Path(os.getcwd()).resolve()
