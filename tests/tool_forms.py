"""The look-back tools in each SDK's own tool form, for tests that talk to a provider directly."""

from __future__ import annotations

from endless.core import lookback


def openai_tools(include_search: bool = True) -> list[dict]:
    return [{"type": "function", "function": t} for t in lookback.definitions(include_search)]


def anthropic_tools(include_search: bool = True) -> list[dict]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in lookback.definitions(include_search)]
