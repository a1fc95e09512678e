"""What ``endless demo`` prints after the replay: a short story a newcomer can judge.

The view's first lines (what the model reads instead of the history), the
last day's question answered from the memory with the look-backs that found
it, the figures that matter with a sentence each, and the commands that open
the same memory with the CLI.  Everything shown is read from the memory or
from what the engine's tools returned during the replay; nothing is assumed.
"""

from __future__ import annotations

import json
import shlex
import statistics
import time
from pathlib import Path

from endless.core.view import tiling
from endless.core.lookback import FILTERS
from endless.core.memory import Memory
from endless.demo.conversation import DemoTurn
from endless.demo.recall_check import message_holding
from endless.demo.replay import ReplayResult
from endless.sim.tokens import default_tokenizer

SHOWN_LINES = 3  # whole: a newcomer judges the lines, not their openings
FROM_TURN = 10  # cache shares are counted from this turn on (the first turns fill the cache)


def clip(text: str, width: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _day(at: float) -> str:
    return time.strftime("%A %Y-%m-%d", time.localtime(at))


def commands(folder: Path, workspace: Path, query: str, message_id: int | None) -> list[str]:
    """The CLI commands that open the demo memory, exactly as the story prints them."""
    home = f"ENDLESS_HOME={shlex.quote(str(folder))}"
    where = f"--workspace {shlex.quote(str(workspace))}"
    out = [f"{home} endless view {where}", f"{home} endless search {where} {query}"]
    if message_id is not None:
        out.append(f"{home} endless zoom {where} {message_id} 1")
    out.append(f"{home} endless history {where} --limit 3")
    return out


def tell(out, memory: Memory, result: ReplayResult, script: list[DemoTurn], looked: dict,
         folder: Path, workspace: Path, *, serving: bool, keep: bool, window: int) -> None:
    days = sorted({t.day for t in script})
    chats = sorted({t.chat_title for t in script}, key=lambda title: next(
        t.number for t in script if t.chat_title == title))
    out.print(f"\nReplayed {memory.turns} turns of one person's project through the real engine: "
              f"{len(chats)} chats in one folder ({', '.join('«' + c + '»' for c in chats)}), "
              f"{len(days)} days from {days[0]} to {days[-1]}. The model and its provider were simulated; "
              "the memory is real.")

    lines, p = memory.views.written_prefix()
    merged = sum(1 for line in lines if tiling.count(line.part) > 1)
    out.print(f"\n[b]What the model reads[/b] instead of the history: the view, {len(lines)} lines for "
              f"{memory.total} messages, {merged} of them merged (a line id+n covers messages id to id+n-1; "
              f"this model's {window:,}-token window puts the view's ceiling at "
              f"{memory.settings.window_limits(window)[0]:,} bytes). Its first lines:")
    for line in lines[:SHOWN_LINES]:
        out.print("  " + " ".join(line.render().split()), markup=False)
    out.print("  …", markup=False)

    _question(out, memory, script, looked)
    _figures(out, memory, result, script)

    fact = next((f for t in script for f in t.facts), "")
    ask = next((t for t in script if t.look), None)
    message_id = message_holding(memory, fact) if fact else None
    lead = ("Explore this memory with the CLI (while the History page is served)" if serving and not keep
            else "Explore this memory with the CLI")
    if not serving and not keep:
        out.print("\nThe demo memory is removed now; run [b]endless demo --keep[/b] to explore it "
                  "with the CLI afterwards.")
        return
    out.print(f"\n{lead}:")
    for command in commands(folder, workspace, ask.look if ask else "deploy", message_id):
        out.print("  " + command, markup=False)


def _question(out, memory: Memory, script: list[DemoTurn], looked: dict) -> None:
    ask = next((t for t in script if t.look), None)
    if ask is None or ask.number not in looked:
        return
    calls, answer = looked[ask.number]
    out.print(f"\n[b]A question on the last day[/b] ({_day(ask.at or 0)}, in «{ask.chat_title}»):")
    out.print("  you: " + clip(ask.person, 300), markup=False)
    out.print("The agent looks back with Endless's tools:")
    for name, arguments, returned in calls:
        args = list(json.loads(arguments).items())
        shown = ", ".join((f"{k}=" if k in FILTERS else "") + (repr(v) if isinstance(v, str) else str(v))
                          for k, v in args)
        out.print(f"  > {name}({shown})", markup=False)
        rows = [r for r in returned.splitlines() if r.strip()]
        for row in rows[1:3] if name == "recall_search" else rows[:1]:
            out.print("    " + clip(row, 180), markup=False)
    out.print("and answers:")
    out.print("  Assistant: " + clip(answer, 400), markup=False)
    fact = next((f for t in script for f in t.facts), "")
    planted = next((t for t in script if fact and fact in t.facts), None)
    message_id = message_holding(memory, fact) if fact else None
    stored = memory.message(message_id) if message_id is not None else None
    if planted and stored is not None and fact in answer:
        out.print(f"  ✓ «{fact}»: word for word what the person wrote on {_day(stored.at)} "
                  f"(message {message_id}), {len(script) - 1 - planted.number} turns earlier.")
    else:
        out.print(f"  ✗ the answer does not hold «{fact}» as the person wrote it.")


def _figures(out, memory: Memory, result: ReplayResult, script: list[DemoTurn]) -> None:
    rows = [t for t in result.turns[FROM_TURN:] if t.first and t.first.tokens]
    out.print("\n[b]The figures that matter[/b]:")
    if rows:
        shares = [t.first.read["deepseek"] / t.first.tokens for t in rows]
        low = min(rows, key=lambda t: t.first.read["deepseek"] / t.first.tokens)
        out.print(f"  prefix cache share: {statistics.median(shares):.1%} of a turn's request, median; "
                  f"{min(shares):.1%} at the lowest. Each request starts with what the chat's previous one sent, "
                  "so the provider reads it from its prompt cache, billed at a fraction of the price of new "
                  f"input. The lowest, turn {low.number + 1}, {_why_low(low, script)}.", markup=False)
    history = sum(default_tokenizer().count(m.text) for m in (memory.message(i) for i in range(memory.total))
                  if m is not None)
    last = next((t.first.tokens for t in reversed(result.turns) if t.first), 0)
    out.print(f"  request size: the last turn sent {last:,} tokens, system prompt and tools included; the "
              f"history it stands for is {history:,} tokens word for word. The view gains a line per message and "
              "is compacted when it passes its ceiling, so a request stays about this size however long the history "
              "grows.", markup=False)
    out.print(f"  writer calls: {result.stats.calls}. Here the offline writer (no model, no key) wrote all "
              f"{memory.lines_built:,} lines as extracts of the messages' own sentences; with a writer model set, "
              "each of its calls writes up to six lines as real summaries, in the background.", markup=False)


def _why_low(turn, script: list[DemoTurn]) -> str:
    """Why a turn's request was read least from the cache, from what the replay measured."""
    row = turn.first
    new = row.tokens - row.common
    if turn.batch:
        return ("came right after a merge batch compacted the view: its older lines changed once, "
                "so the request was new from there on")
    if row.common == 0 or script[turn.number].chat not in {t.chat for t in script[:turn.number]}:
        return "was the first of a new chat, whose own requests had not been cached yet"
    return (f"carried {new:,} new tokens (the previous turn's long paste or tool output and the new message), "
            "which no cache can hold before they are sent")
