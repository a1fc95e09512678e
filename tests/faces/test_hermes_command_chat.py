"""A slash command names the same chat its turns name, on each Hermes front end (issue 15 item 8).

Hermes hands plugin commands no session; ``internals.find_chat`` reads it from
the front end's frame.  The classic CLI is driven for real in
``tests/e2e/test_hermes_commands.py``; the gateway and the TUI are shown here
by functions holding what Hermes 0.19.0's own dispatchers hold at that point
(``GatewayRunner._handle_message``: ``self`` and ``source``; the TUI's
``slash.exec``: ``session``, a dict).
"""

from __future__ import annotations

from types import SimpleNamespace

from endless.faces.hermes.internals import chat_of, find_chat
from endless.faces.hermes.plugin import Plugin


class GatewayRunner:
    """Named as Hermes's gateway runner; only the method find_chat calls."""

    def __init__(self, conversation: str) -> None:
        self.conversation = conversation

    def _session_key_for_source(self, source) -> str:
        return self.conversation

    def _handle_message(self, event):
        source = event.source  # noqa: F841 - read from this frame, as Hermes's own local
        return find_chat()


def tui_slash_exec(session: dict):
    return find_chat()


def test_a_gateway_command_and_the_conversation_s_turns_are_one_chat():
    conversation = "agent:main:telegram:dm:4242"
    event = SimpleNamespace(source=SimpleNamespace(platform=SimpleNamespace(value="telegram")))
    command = GatewayRunner(conversation)._handle_message(event)
    agent = SimpleNamespace(platform="telegram", _gateway_session_key=conversation)
    turn = chat_of(agent, "telegram", "20261201_101010_abcdef")  # the agent's session id differs
    assert (command.platform, command.conversation, command.ident) == ("telegram", conversation, conversation)
    assert (turn.platform, turn.conversation, turn.ident) == ("telegram", conversation, conversation)
    plugin = Plugin()
    plugin.switch(command, on=False)  # /endless off before the conversation's first message
    assert plugin.is_off(turn)
    plugin.switch(command, on=True)
    assert not plugin.is_off(turn)


def test_a_tui_command_names_its_session():
    command = tui_slash_exec({"session_key": "20261201_tui_1", "slash_worker": None, "agent": None})
    assert (command.session, command.platform, command.conversation) == ("20261201_tui_1", "tui", None)
    turn = chat_of(SimpleNamespace(platform="tui"), "tui", "20261201_tui_1")
    assert turn.ident == command.ident


def test_outside_any_front_end_there_is_no_chat():
    assert find_chat() is None
