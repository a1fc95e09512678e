"""One turn against a model, through the turn protocol: request, tool calls, reply, commit.

Used by harnesses without a loop of their own (the demo, the CLI chat, the
benchmarks).  The look-back tools run here; other tools go to the harness's
``run_tool``.  A provider failure closes the turn as ``interrupted`` with what
it already did, and is raised again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

from endless.core import lookback
from endless.llm.request import ToolCallOut
from endless.turn.protocol import REFUSAL, Turn
from endless.llm.client import Completion, Usage
from endless.llm.errors import ProviderError

RunTool = Callable[[ToolCallOut], Awaitable[str]]


@dataclass
class TurnOutcome:
    reply: str
    refused: bool = False
    steps: int = 0
    usages: list[Usage] = field(default_factory=list)


async def run_turn(turn: Turn, message: str, provider, *, state: str = "", route: dict | None = None,
                   run_tool: RunTool | None = None, max_steps: int = 32) -> TurnOutcome:
    request = await turn.begin(message, state, route=route)
    if request is None:
        return TurnOutcome(REFUSAL, refused=True)
    outcome = TurnOutcome("")
    try:
        for _ in range(max_steps):
            completion: Completion = await provider.complete(request)
            outcome.usages.append(completion.usage)
            outcome.steps += 1
            if not completion.tool_calls:
                outcome.reply = completion.text
                turn.finish(completion.text)
                return outcome
            results = {}
            for call in completion.tool_calls:
                if call.name in lookback.TOOL_NAMES:
                    results[call.id] = lookback.call(turn.memory, call.name, call.arguments)
                elif run_tool is not None:
                    results[call.id] = await run_tool(call)
                else:
                    results[call.id] = f"The tool {call.name} is not available here."
            request = turn.add_step(completion.text, list(completion.tool_calls), results)
    except ProviderError as error:
        turn.finish("", "interrupted", f"The turn stopped: the model's provider failed ({error.kind}).")
        raise
    turn.finish("", "interrupted", f"The turn stopped after {max_steps} steps without a final reply.")
    return outcome
