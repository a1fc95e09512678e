"""The demo's conversation: a person's project over several days, written by us, and its agent.

The conversation lives in ``conversation.txt`` beside this module, in a small
format meant to be read and edited by people (a line starting with ``@`` is a
header, every other line belongs to the block above it):

``@day 2027-03-08``
    the day the following turns happen on;
``@chat TITLE``
    the chat the following turns belong to (chats of one folder share one memory);
``@HH:MM you``
    a turn begins at that local time; the person's message follows;
``@$ COMMAND``
    the agent runs COMMAND in the workspace's terminal; the tool's output follows;
``@look QUERY``
    the agent looks back: ``recall_search`` for QUERY, ``zoom`` into the best hit,
    ``date`` of it; the reply's ``{recalled}`` becomes the sentence the zoom
    returned that shares most words with QUERY, ``{when}`` the date tool's answer;
``@fact TEXT``
    TEXT, stated word for word in this turn's message, is what a later look-back must find;
``@assistant``
    the agent's final reply follows (written before a ``@$``: what it says beside that command);
``@# …``
    a comment.

Both sides are written, so the conversation reads like one a person would
have; it still runs through the real engine: every request is built by the
turn protocol, answered by :class:`TranscriptAgent` through the provider
simulator, and every look-back is a real call of Endless's tools.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable

from endless.sim.model import SimReply, SimRequest, ToolCall
from endless.sim.script import ScriptTurn

_HEADER = re.compile(r"^@(day|chat|look|fact|assistant|\$|#|\d\d:\d\d you)(?=\s|$) ?(.*)$")
_HIT = re.compile(r"^(\d+)\+0 · ", re.M)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[\w-]+")


class ConversationError(ValueError):
    """The conversation file does not follow its format (a line number and what is wrong)."""


@dataclass
class DemoTurn(ScriptTurn):
    """A written turn: the commands the agent runs, its look-back, its reply."""

    commands: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # what the agent says beside each command ("" if nothing)
    look: str = ""  # a recall_search query, or "" for a turn that does not look back
    reply: str = ""
    day: str = ""


def load(text: str | None = None) -> list[DemoTurn]:
    """The demo's turns in order (``text``: a conversation in the same format, for tests)."""
    if text is None:
        text = resources.files("endless.demo").joinpath("conversation.txt").read_text(encoding="utf-8")
    turns: list[DemoTurn] = []
    chats: dict[str, int] = {}
    day = chat = ""
    block: list[str] | None = None
    target = ""  # what the open block is: person | output | reply

    def close() -> None:
        if block is None or not turns:
            return
        body = "\n".join(block).strip("\n")
        turn = turns[-1]
        if target == "person":
            turn.person = body
        elif target == "output":
            turn.outputs.append(body)
        elif target == "reply":
            turn.reply = body

    for number, line in enumerate(text.splitlines(), 1):
        match = _HEADER.match(line)
        if not match:
            if block is None:
                if line.strip():
                    raise ConversationError(f"line {number}: text outside a turn: {line[:60]!r}")
                continue
            block.append(line)
            continue
        word, rest = match.group(1), match.group(2).strip()
        if word == "#":
            continue
        close()
        block, target = None, ""
        if word == "day":
            day = rest
        elif word == "chat":
            chat = rest
            chats.setdefault(chat, len(chats))
        elif word.endswith(" you"):
            if not day or not chat:
                raise ConversationError(f"line {number}: a turn before its @day and @chat")
            at = time.mktime(time.strptime(f"{day} {word[:5]}", "%Y-%m-%d %H:%M"))
            if turns and at < (turns[-1].at or 0):
                raise ConversationError(f"line {number}: {day} {word[:5]} is earlier than the turn before")
            turns.append(DemoTurn(len(turns), chats[chat], "chat", "", at=at, chat_title=chat, day=day))
            block, target = [], "person"
        elif not turns:
            raise ConversationError(f"line {number}: @{word} before the first turn")
        elif word == "$":  # a reply written before a command is what the agent says beside it
            turns[-1].commands.append(rest)
            turns[-1].said.append(turns[-1].reply)
            turns[-1].reply = ""
            turns[-1].kind = "tool"
            block, target = [], "output"
        elif word == "look":
            turns[-1].look = rest
        elif word == "fact":
            turns[-1].facts.append(rest)
        elif word == "assistant":
            block, target = [], "reply"
    close()
    for turn in turns:
        missing = [f for f in turn.facts if f not in turn.person]
        if missing:
            raise ConversationError(f"turn {turn.number}: the fact {missing[0]!r} is not in the message")
        if not turn.person or not turn.reply:
            raise ConversationError(f"turn {turn.number} ({turn.day}): a message and a reply are both needed")
    return turns


class TranscriptAgent:
    """Answers the demo's turn requests with the written side of the conversation.

    At each step of a turn it makes the next call the turn needs (its
    terminal commands, or ``recall_search`` → ``zoom`` → ``date`` for a
    look-back, the zoom's id taken from the search's answer in the request),
    then the written reply, with the look-back's findings put in from the
    tool messages the request carries.
    """

    def __init__(self, current: Callable[[], ScriptTurn | None]) -> None:
        self.current = current
        # Per look-back turn: each call (name, arguments) with what the engine's tool returned, and the
        # reply; the story shows them as they happened.
        self.looked: dict[int, tuple[list[tuple[str, str, str]], str]] = {}

    def reply(self, request: SimRequest, now: float) -> SimReply:
        turn = self.current()
        if not isinstance(turn, DemoTurn):
            return SimReply(text="Understood.")
        messages = request.messages
        person_at = max((i for i, m in enumerate(messages) if m.role == "user" and m.tool_call_id is None),
                        default=-1)
        after = messages[person_at + 1:]
        results = [m.text for m in after if m.role == "tool" or (m.role == "user" and m.tool_call_id)]
        done = sum(len(m.tool_calls) for m in after if m.role == "assistant")
        seed = int(hashlib.sha256(f"{turn.number}:{done}".encode()).hexdigest()[:8], 16)
        duration = 0.8 + (seed % 1000) / 500  # 0.8–2.8 s, steady for a given step
        call = self._next_call(turn, done, results, request.api)
        if call is not None:
            said = turn.said[done] if not turn.look and done < len(turn.said) else ""
            return SimReply(text=said, tool_calls=[call], first_byte=duration / 4, duration=duration)
        text = self._final(turn, results)
        if turn.look:
            calls = [(c.name, c.arguments) for m in after if m.role == "assistant" for c in m.tool_calls]
            self.looked[turn.number] = ([(n, a, r) for (n, a), r in zip(calls, results)], text)
        return SimReply(text=text, first_byte=duration / 4, duration=duration)

    @staticmethod
    def _next_call(turn: DemoTurn, done: int, results: list[str], api: str) -> ToolCall | None:
        call_id = ("toolu_" if api == "anthropic" else "call_") + f"{turn.number:04d}{done:02d}"
        if turn.look:
            if done == 0:
                return ToolCall(call_id, "recall_search", json.dumps({"query": turn.look, "kind": "person"}))
            hit = _HIT.search(results[0]) if results else None
            if hit is None:
                return None
            if done == 1:
                return ToolCall(call_id, "zoom", json.dumps({"id": int(hit.group(1)), "n": 1}))
            if done == 2:
                return ToolCall(call_id, "date", json.dumps({"id": int(hit.group(1))}))
            return None
        if done < len(turn.commands):
            return ToolCall(call_id, "terminal", json.dumps({"cmd": turn.commands[done]}))
        return None

    @staticmethod
    def _final(turn: DemoTurn, results: list[str]) -> str:
        text = turn.reply
        if turn.look:
            recalled = best_sentence(results[1], turn.look) if len(results) > 1 else ""
            when = results[2] if len(results) > 2 else ""
            if not recalled:
                return "I looked back through our chats and could not find it; could you tell me again?"
            text = text.replace("{recalled}", recalled).replace("{when}", _when(when))
        return text


def best_sentence(message: str, query: str) -> str:
    """The sentence of a zoomed message (``id+0|tag: text``) sharing most words with ``query``."""
    body = message.split("|", 1)[-1]
    body = body.split(": ", 1)[-1] if ": " in body[:12] else body
    wanted = {w.casefold() for w in _WORD.findall(query)}
    best, score = "", 0
    for line in body.splitlines():
        for sentence in _SENTENCE.split(line.strip()):
            got = len(wanted & {w.casefold() for w in _WORD.findall(sentence)})
            if got > score:
                best, score = sentence, got
    return best


def _when(answer: str) -> str:
    """"Message 12 was written Monday 2027-03-08 09:41:00 CET (local time)." → "Monday 2027-03-08 09:41"."""
    match = re.search(r"written (\w+ \d{4}-\d\d-\d\d \d\d:\d\d)", answer)
    return match.group(1) if match else "earlier"

