"""The head of a turn (DESIGN §4): the request a harness sends instead of its own history.

A turn's head is built once, at its first request: the harness's system
prompt with Endless's section, the tools with Endless's three, the
rarely-changing context messages, the view up to its first unwritten line, the
recent block ``[p, T)`` word for word, the per-turn state, then the new
message.  A long turn's head is rebuilt with the recent block bounded to a
quarter of the window (``bounded_recent_block``).
"""

from __future__ import annotations

from endless import prompts
from endless.core import lookback
from endless.core.memory import Memory
from endless.llm.request import Msg, Request, view_message_blocks
from endless.core.render import recent_block
from endless.core.render import recent_line


def system_prompt(harness_system: str) -> str:
    """The harness's system prompt, then Endless's constant sections (the same bytes every turn)."""
    sections = [prompts.text("turn/section.txt").strip(), prompts.text("writer/section.txt").strip()]
    return "\n\n".join([harness_system.rstrip(), *sections]) if harness_system.strip() else "\n\n".join(sections)


def turn_tools(harness_tools: list[dict], include_search: bool = True) -> list[dict]:
    """The harness's tools, then Endless's look-back tools."""
    own = lookback.definitions(include_search)
    names = {t["name"] for t in own}
    return [t for t in harness_tools if t.get("name") not in names] + own


def recent_start(memory: Memory) -> int:
    """p: the first message not covered by a written view line."""
    _, p = memory.views.written_prefix()
    return p


def recent_bytes(memory: Memory, start: int | None = None) -> int:
    start = recent_start(memory) if start is None else start
    block = recent_block(memory, start)
    return len(block.encode("utf-8")) + (1 if block else 0)


def rebuild_bytes(memory: Memory) -> int:
    """A quarter of the window, in bytes: a token is at least a byte, so this errs early."""
    window = memory.window_tokens or memory.settings.default_window_tokens
    return int(window * memory.settings.long_turn_fraction)


def fits(memory: Memory) -> bool:
    return recent_bytes(memory) <= memory.settings.recent_block_bytes


def bounded_recent_block(memory: Memory, start: int, limit: int, keep: int | None = None) -> str:
    """``[start, T)`` when it fits ``limit`` bytes; else the most of it that does, the rest named.

    Only a long turn's head rebuild (``Turn.rebuild_head``) needs this, when the writer lags behind the
    turn's own steps.  Message ``keep`` (the person's message of the turn)
    always stays, shortened to at most a quarter of ``limit``; then the newest
    messages, the oldest of them shortened to the room left.  Each run of
    left-out messages gets a note line: they are in the memory, and ``zoom``
    reads them by id.
    """
    total = memory.total
    lines = {m: recent_line(memory, m) for m in range(start, total)}  # each message read once
    block = "\n".join(lines.values())
    if len(block.encode("utf-8")) <= limit:
        return block
    room = limit - 2 * _NOTE_ROOM
    shown: dict[int, str] = {}
    if keep is not None and start <= keep < total:
        shown[keep] = shorten_line(lines[keep], keep, max(0, room // 4))
        room -= len(shown[keep].encode("utf-8")) + 1
    for message_id in range(total - 1, start - 1, -1):
        if message_id == keep:
            continue
        line = lines[message_id]
        size = len(line.encode("utf-8")) + 1
        if size > room:
            if room >= _MIN_SHORTENED:
                shown[message_id] = shorten_line(line, message_id, room - 1)
            break
        shown[message_id] = line
        room -= size
    out: list[str] = []
    message_id = start
    while message_id < total:
        if message_id in shown:
            out.append(shown[message_id])
            message_id += 1
            continue
        last = message_id
        while last + 1 < total and last + 1 not in shown:
            last += 1
        note = prompts.text("turn/left_out.txt").strip().format(first=message_id, last=last)
        out.append(f"{message_id}+0|note: {note}")
        message_id = last + 1
    return "\n".join(out)


_NOTE_ROOM = 256  # bytes for one left-out note line
_MIN_SHORTENED = 1024  # a message shortened below this shows too little to be worth it


def shorten_line(line: str, message_id: int, size: int) -> str:
    """``line`` in at most ``size`` UTF-8 bytes: its head and tail, with the cut named for ``zoom``."""
    data = line.encode("utf-8")
    if len(data) <= size:
        return line
    marker = prompts.text("turn/shortened.txt").strip()
    longest = len(marker.format(cut=f"{len(line):,}", id=message_id).encode("utf-8")) + 2
    half = max(0, (size - longest) // 2)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half:].decode("utf-8", "ignore") if half else ""
    cut = len(line) - len(head) - len(tail)
    return f"{head}\n{marker.format(cut=f'{cut:,}', id=message_id)}\n{tail}"


def build_request(memory: Memory, system: str, tools: list[dict], context: list[str], state: str,
                  new: str, recent_limit: int | None = None, keep: int | None = None) -> Request:
    """The head of DESIGN §4, in neutral form."""
    lines, p = memory.views.written_prefix()
    rendered = [line.render() for line in lines]
    recent = (recent_block(memory, p) if recent_limit is None
              else bounded_recent_block(memory, p, recent_limit, keep))
    tail = []
    if recent:
        tail.append(recent + "\n")
    if state:
        tail.append(state.rstrip("\n") + "\n")
    tail.append(new)
    blocks, whole = view_message_blocks(rendered, tail)
    messages = [Msg("user", [text]) for text in context]
    messages.append(Msg("user", blocks))
    return Request(system, tools, messages, view_message=len(context), view_blocks=whole,
                   cache_key=memory.memory_id)
