"""Runs real Hermes Agent 0.19.0 agents in one process, from a JSON script (for the e2e tests).

Run with the Hermes venv's python, ``HERMES_HOME`` set to a home where
``endless hermes install`` ran.  The script is one JSON argument::

    {"agents": {"a": {"platform": "cli", "gateway_session_key": null},
                "r": {"session_of": "a", "attrs": {"_persist_disabled": true}}},
     "turns": [{"agent": "a", "text": "...", "interrupt_after": 1.5}]}

Each agent is an ``AIAgent`` built from the home's ``config.yaml`` model
settings, keeping its own history across its turns the way the CLI does.
A turn ``{"command": "endless", "args": "status", "fetch": false}`` runs a
plugin slash command the way Hermes looks it up (``fetch``: GET the address
it answers with).  An agent with ``"cli": true`` belongs to a real
``HermesCLI`` (its session id is the CLI's, as ``hermes chat`` builds its
agent), and a command with ``"in": NAME`` is typed into that CLI: it goes
through ``HermesCLI.process_command``, before or between the agent's turns.  ``interrupt_after`` calls ``agent.interrupt()`` from a timer, as the CLI does
when the person types during a turn.  Prints one JSON line: per turn,
``{agent, session_id, final_response, completed, interrupted, failed}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def main() -> int:
    script = json.loads(sys.argv[1])
    import yaml
    from hermes_cli.plugins import discover_plugins
    from hermes_state import SessionDB
    from run_agent import AIAgent

    discover_plugins()
    config = yaml.safe_load((Path(os.environ["HERMES_HOME"]) / "config.yaml").read_text())
    model = config["model"]
    db = SessionDB()
    agents: dict[str, AIAgent] = {}
    clis: dict[str, object] = {}
    histories: dict[str, list] = {}
    for name, spec in script["agents"].items():
        # "session_of": share another agent's session id, as Hermes's background review fork does.
        session_id = agents[spec["session_of"]].session_id if spec.get("session_of") else None
        if spec.get("cli"):  # the classic CLI: its agent gets the CLI's session id (cli_agent_setup_mixin.py:381)
            from cli import HermesCLI
            clis[name] = HermesCLI()
            session_id = clis[name].session_id
        agents[name] = AIAgent(
            base_url=model["base_url"], api_key=model["api_key"], provider="custom",
            api_mode=model.get("api_mode"), model=model["default"], quiet_mode=True,
            session_db=None if spec.get("attrs", {}).get("_persist_disabled") else db,
            platform=spec.get("platform", "cli"), gateway_session_key=spec.get("gateway_session_key"),
            enabled_toolsets=spec.get("toolsets"), session_id=session_id,
            parent_session_id=session_id)
        # "attrs": what Hermes itself sets on such an agent (e.g. background_review.py on its fork).
        for attr, value in (spec.get("attrs") or {}).items():
            setattr(agents[name], attr, value)
        histories[name] = []
    out = []
    for turn in script["turns"]:
        if "command" in turn:  # a slash command, through Hermes's own lookup of plugin commands
            from hermes_cli.plugins import get_plugin_command_handler
            if turn.get("in"):
                answer = typed(clis[turn["in"]], f"/{turn['command']} {turn.get('args', '')}".strip())
            else:
                answer = get_plugin_command_handler(turn["command"])(turn.get("args", ""))
            item = {"command": turn["command"], "args": turn.get("args", ""), "answer": answer}
            if turn.get("fetch"):
                import http.cookiejar
                import re
                import urllib.request
                url = re.search(r"http://127\.0\.0\.1:\d+/\S*", answer or "").group(0)
                browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
                with browser.open(url, timeout=10) as page:
                    item["status"] = page.status
                    item["page"] = page.read(2000).decode("utf-8", "replace")
            out.append(item)
            continue
        agent = agents[turn["agent"]]
        if turn.get("title"):  # as Hermes's title generator would have named the session
            db.set_session_title(agent.session_id, turn["title"])
        timer = None
        if turn.get("interrupt_after"):
            timer = threading.Timer(float(turn["interrupt_after"]), agent.interrupt, args=("stop",))
            timer.start()
        started = time.monotonic()
        result = agent.run_conversation(turn["text"], conversation_history=histories[turn["agent"]])
        elapsed = time.monotonic() - started
        if timer is not None:
            timer.cancel()
        histories[turn["agent"]] = result.get("messages") or histories[turn["agent"]]
        out.append({"agent": turn["agent"], "session_id": agent.session_id,
                    "final_response": result.get("final_response"), "completed": result.get("completed"),
                    "interrupted": result.get("interrupted"), "failed": result.get("failed"),
                    "seconds": round(elapsed, 2)})
    try:
        from hermes_cli.plugins import invoke_hook
        for agent in agents.values():
            invoke_hook("on_session_finalize", session_id=agent.session_id, platform=agent.platform)
    except Exception as exc:  # the CLI does this at exit; say so if it fails
        print(f"on_session_finalize failed: {exc!r}", file=sys.stderr)
    print(json.dumps(out))
    return 0


def typed(cli, line: str) -> str:
    """What the CLI prints for a slash command typed into it (its own ``process_command``)."""
    import contextlib
    import io

    from prompt_toolkit.application.current import create_app_session
    from prompt_toolkit.output.plain_text import PlainTextOutput

    out = io.StringIO()  # the CLI prints through prompt_toolkit's session output, plain text when not a terminal
    with contextlib.redirect_stdout(out), create_app_session(output=PlainTextOutput(out)):
        cli.process_command(line)
    return out.getvalue()


if __name__ == "__main__":
    sys.exit(main())
