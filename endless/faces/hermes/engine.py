"""The context engine Endless registers with Hermes: it never summarises, it only keeps Hermes's transcript bounded.

Hermes asks its context engine whether and how to compress the chat.  With
Endless the model never sees Hermes's history (the middleware replaces it
with the view), so there is nothing to summarise; but Hermes's own message
list and session store would grow forever.  So at the start of a turn, once
the transcript passes ``hermes_transcript_messages`` messages, the engine
asks for one compaction that keeps only a note and the current message;
with ``compression.in_place: true`` (set by ``endless hermes install``)
Hermes archives the old rows and keeps the session id, and
``endless hermes uninstall`` makes them live again (``transcripts.py``).

Hermes would announce it with "📦 Preflight compression: ~N tokens >= M
threshold" and "🗜️ Compacting context — summarizing earlier conversation",
both untrue here (no summary is made, nothing the model sees changes), and
count it as a summary ("🗜️ N" in the status bar, "Session compressed N
times — accuracy may degrade").  So while this compaction runs, those two
lines go to the log instead of the screen (the agent's own ``_emit_status``
shadowed from ``should_compress`` answering True until ``compress``), and it
is not counted.

Hermes deep-copies the engine for every agent; copies share the plugin's
process-wide state (open memories, turns) through module globals, never
through the engine, so a copy is cheap and cannot fail.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

from agent.context_engine import ContextEngine

from endless.faces.hermes.install import ENGINE_NAME
from endless.faces.hermes.runtime import log
from endless.faces.hermes.transcripts import TRANSCRIPT_ACK, TRANSCRIPT_NOTE

NOTE = TRANSCRIPT_NOTE
ACK = TRANSCRIPT_ACK
# Hermes's status lines about this compaction (agent/turn_context.py:643-647, agent/conversation_compression.py:52-55)
UNTRUE_NOTICES = ("Preflight compression", "Compacting context")


class EndlessEngine(ContextEngine):
    """No summaries; a rare in-place compaction of Hermes's own transcript at a turn's start."""

    def __init__(self, transcript_limit: int = 120) -> None:
        self.transcript_limit = transcript_limit
        self.session_id: str | None = None
        self.model_info: dict[str, Any] = {}
        self._quieted: Any = None  # the agent whose compaction notices are held back until compress()

    @property
    def name(self) -> str:
        return ENGINE_NAME

    def __deepcopy__(self, memo: dict) -> "EndlessEngine":
        clone = EndlessEngine(self.transcript_limit)
        for attr in ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens",
                     "threshold_tokens", "context_length", "compression_count"):
            setattr(clone, attr, getattr(self, attr))
        clone.model_info = dict(self.model_info)
        return clone

    def update_from_response(self, usage: Dict[str, Any]) -> None:
        usage = usage or {}
        self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
        self.last_total_tokens = int(usage.get("total_tokens") or 0)

    def should_compress(self, prompt_tokens: int = None) -> bool:
        """True only at a turn's start (Hermes's preflight) when the transcript is past the limit."""
        frame = sys._getframe(1)
        try:
            if frame.f_code.co_name != "build_turn_context":
                return False
            messages = frame.f_locals.get("messages")
            if not isinstance(messages, list) or len(messages) <= self.transcript_limit:
                return False
            agent = frame.f_locals.get("agent")
            from endless.faces.hermes.internals import chat_of
            from endless.faces.hermes.plugin import PLUGIN
            # a chat switched off with /endless off runs on this transcript: never cut it
            if PLUGIN.is_off(chat_of(agent, "", str(getattr(agent, "session_id", "") or ""))):
                return False
            self._hold_notices(agent)
            return True
        finally:
            del frame

    def _hold_notices(self, agent: Any) -> None:
        """Until :meth:`compress`, Hermes's untrue lines about this compaction go to the log, not the screen."""
        if agent is None or "_emit_status" in getattr(agent, "__dict__", {}):
            return
        emit = agent._emit_status

        def emit_status(message: str) -> None:
            if any(mark in str(message) for mark in UNTRUE_NOTICES):
                log(f"Hermes's transcript of session {getattr(agent, 'session_id', '')} is cut to its last "
                    "message (its rows stay in state.db; `endless hermes uninstall` makes them live again); "
                    f"not shown: {message}")
                return
            emit(message)
        agent._emit_status = emit_status
        self._quieted = agent

    def _release_notices(self) -> None:
        agent, self._quieted = self._quieted, None
        if agent is not None:
            agent.__dict__.pop("_emit_status", None)

    def compress(self, messages: List[Dict[str, Any]], current_tokens: Optional[int] = None,
                 focus_topic: Optional[str] = None, force: bool = False, memory_context: str = "",
                 **_: Any) -> List[Dict[str, Any]]:
        """A note, an acknowledgement, then everything from the last message of the person on."""
        start = len(messages)
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user":
                start = index
                break
        self._release_notices()  # not counted as a summary: compression_count stays as it was
        return [{"role": "user", "content": NOTE}, {"role": "assistant", "content": ACK}] + messages[start:]

    def update_model(self, model: str, context_length: int, base_url: str = "", api_key: str = "",
                     provider: str = "", api_mode: str = "") -> None:
        super().update_model(model, context_length, base_url, api_key, provider, api_mode)
        self.model_info = {"model": model, "context_length": context_length, "base_url": base_url,
                           "provider": provider, "api_mode": api_mode}

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        return []  # the look-back tools are plugin tools (toolset "endless"), dispatched with the session id
