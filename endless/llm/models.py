"""What differs between models, read from ``models.json`` instead of written into code.

Model names change faster than the code that calls them: which OpenAI
models cache only at breakpoints, which flavour a host or port means, the
lowest reasoning effort each route accepts.  Keeping that in one data file
beside this module (and the matching rules here) lets a new model be a line
of JSON, and keeps the clients free of name tests.
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import json
import re
from importlib import resources
from typing import Any, Mapping, Protocol

_GPT_VERSION = re.compile(r"^gpt-(\d+)(?:\.(\d+))?(?![\d])")


class RouteFields(Protocol):
    """What :func:`reasoning_params` reads of a route (an :class:`endless.llm.routes.Route`)."""

    provider: str
    model: str
    flavour: str | None
    reasoning: str


@functools.lru_cache(maxsize=None)
def model_table() -> dict:
    """``models.json`` beside this module: flavours, breakpoint models, reasoning rules."""
    text = resources.files(__package__).joinpath("models.json").read_text(encoding="utf-8")
    return json.loads(text)


def _bare(model: str) -> str:
    """The model name without a vendor prefix (``openai/gpt-5.6-sol`` → ``gpt-5.6-sol``), lower case."""
    return model.rsplit("/", 1)[-1].strip().lower()


def model_matches(model: str, patterns: list[str] | str) -> bool:
    if isinstance(patterns, str):
        patterns = [patterns]
    name = _bare(model)
    return any(fnmatch.fnmatchcase(name, p.lower()) for p in patterns)


def uses_openai_breakpoints(model: str) -> bool:
    """OpenAI models that cache only at explicit breakpoints: GPT-5.6 and later (models.json)."""
    match = _GPT_VERSION.match(_bare(model))
    if not match:
        return False
    version = (int(match.group(1)), int(match.group(2) or 0))
    return version >= tuple(model_table()["openai_breakpoints"]["since"])


# -- reasoning -----------------------------------------------------------------------------------


def merge_params(into: dict, extra: Mapping[str, Any]) -> dict:
    for key, value in extra.items():
        if key == "extra_body":
            into.setdefault("extra_body", {}).update(copy.deepcopy(value))
        else:
            into[key] = copy.deepcopy(value)
    return into


def openai_reasoning_rule(model: str) -> dict | None:
    """The ``models.json`` rule of an OpenAI reasoning model (o-series, gpt-5*, gpt-6* …), else None."""
    for rule in model_table()["openai"]["reasoning_models"]:
        if model_matches(model, rule["match"]):
            return rule
    return None


def reasoning_params(route: RouteFields) -> dict:
    """Keyword arguments (``extra_body`` merged) that set the route's reasoning effort; {} sends nothing.

    ``lowest`` sends a parameter only where it is known to be accepted:
    DeepSeek → thinking disabled; OpenAI reasoning models → their lowest
    ``reasoning_effort``; Anthropic models with thinking on by default → their
    rule; everything else nothing (omitted = off, or the server's default).
    """
    effort = route.reasoning.strip().lower()
    if effort == "omit":
        return {}
    table = model_table()
    if route.flavour == "deepseek":
        spec = table["deepseek"]
        if effort == "lowest" or effort in spec["off_words"]:
            return merge_params({}, spec["lowest"])
        return {"extra_body": {"thinking": {"type": "enabled"}}, "reasoning_effort": effort}
    if route.provider == "anthropic":
        spec = table["anthropic"]
        if effort == "lowest":
            for rule in spec["thinking_by_default"]:
                if model_matches(route.model, rule["match"]):
                    return merge_params({}, rule["lowest"])
            return {}
        if effort in spec["off_words"]:
            return {"thinking": {"type": "disabled"}}
        return {"output_config": {"effort": effort}}
    if effort == "lowest":
        if route.flavour != "openai":
            return {}  # OpenRouter, vLLM, llama.cpp, Ollama: acceptance unknown, send nothing
        rule = openai_reasoning_rule(route.model)
        return {"reasoning_effort": rule["lowest"]} if rule else {}
    return {"reasoning_effort": "none" if effort == "off" else effort}
