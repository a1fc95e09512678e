"""Endless as a Hermes Agent 0.19.0 plugin (entry point group ``hermes_agent.plugins``, value ``endless.faces.hermes``).

Hermes imports this module and calls :func:`register`.  Importing it does
nothing else (Hermes may load plugins just to list them); the memories, the
event loop thread and the writer pools start at the first turn.  How each
part attaches to Hermes, with file:line references, is in ``SEAMS.md``.
"""

from __future__ import annotations

from typing import Any


def register(ctx: Any) -> None:
    """Register the context engine, the middleware, the hooks, the tools and the commands."""
    from endless.core import diagnostics, lookback

    diagnostics.into_host_logs()  # Hermes's logs/agent.log, never its screen (SEAMS.md, seam 22)
    from endless.faces.hermes import commands
    from endless.faces.hermes.engine import EndlessEngine
    from endless.faces.hermes.plugin import PLUGIN
    from endless.core.settings import load_settings

    ctx.register_context_engine(EndlessEngine(load_settings().hermes_transcript_messages))
    ctx.register_middleware("llm_request", PLUGIN.llm_request)
    ctx.register_middleware("llm_execution", PLUGIN.llm_execution)  # refused turns: answered without a model
    for hook in ("pre_llm_call", "transform_llm_output", "post_llm_call", "on_session_end",
                 "on_session_finalize"):
        ctx.register_hook(hook, getattr(PLUGIN, hook))
    for definition in lookback.definitions(True):
        ctx.register_tool(definition["name"], "endless", dict(definition), PLUGIN.tool(definition["name"]),
                          description=definition["description"])
    ctx.register_command("endless", commands.slash, description="Endless: history | view | search <words> | "
                         "status | off | on", args_hint="history|view|search|status|off|on")
    ctx.register_cli_command("endless", "Endless memory: view, search, status", commands.setup_cli,
                             commands.run_cli)
