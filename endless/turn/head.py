"""The head of a turn (DESIGN §4): the request a harness sends instead of its own history.

A turn's head is built once, at its first request: the harness's system
prompt with Endless's section, the tools with Endless's three, the
rarely-changing context messages, the view up to its first unwritten line, the
recent block ``[p, T)`` word for word, the per-turn state, then the new
message.

Every head is bounded, whatever the memory holds (DESIGN §4).  The recent
block keeps the newest messages that fit its limit and names the stretch
before them in one note line (right after an import, or while the writer is
stalled, that stretch is not summarised yet; ``zoom`` and ``recall_search``
still reach it word for word).  The whole head is then measured against the
window, less the reply's room and the room a long turn's steps may take
before its head is rebuilt (``rebuild_bytes``); a head that would not fit
shows fewer of the view's last lines (named the same way), then a smaller
recent block.  Only when the harness's own prompt and tools leave no room at
all is there no head (:class:`HeadTooLarge`).

While the writer catches up (the recent block past its limit), a head built
naively would change near its front at every turn: each new written line
moves the view's end, and each new message slides the newest-first window.
So both move in steps: the view shows its written lines up to a checkpoint
that advances when about a quarter more is written, and the recent block's
word-for-word messages start at a checkpoint that advances when about half
of them have gone.  Between steps a head only grows at its end, and the
provider's cache serves the rest.
"""

from __future__ import annotations

from endless import prompts
from endless.core import lookback
from endless.core.view import tiling
from endless.core.memory import Memory
from endless.core.view import neutralise, recent_line
from endless.core.view import Prefix
from endless.llm import tokens
from endless.llm.request import Msg, Request, view_message_blocks

_NOTE_ROOM = 256  # bytes for one left-out note line
_MIN_SHORTENED = 1024  # a message shortened below this shows too little to be worth it
_SMALLEST_RECENT = 2048  # the least recent block a head is cut down to before there is no head
_TAIL_GROWTH = 5  # bytes neutralise adds at most at the start of a shortened line's tail ("|" → "&#124;")
_LINES_STEP_MIN = 64  # while catching up, the view shows its written lines in steps of at least this


def _lines_checkpoint(count: int) -> int:
    """``count`` rounded down to a step of about a quarter of it (at least ``_LINES_STEP_MIN``)."""
    step = max(_LINES_STEP_MIN, 1 << max(0, count.bit_length() - 3))
    return count // step * step


def _anchored_start(earliest: int, total: int) -> int:
    """The first message shown word for word: ``earliest`` rounded up to a step of about half of
    ``[earliest, total)``, so it moves once every so many new messages, not at each one."""
    fit = total - earliest
    step = 1 << max(0, (fit // 2).bit_length() - 1) if fit >= 2 else 1
    return min(total, -(-earliest // step) * step)


class HeadTooLarge(Exception):
    """No bounded head fits the model's window: the harness's own prompt and tools leave no room."""


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


def recent_bytes(memory: Memory, start: int | None = None, stop_past: int | None = None) -> int:
    """Bytes of the recent block ``[start, T)``; with ``stop_past``, counting stops once past it."""
    start = recent_start(memory) if start is None else start
    size = 0
    for message_id in range(start, memory.total):
        size += len(recent_line(memory, message_id).encode("utf-8")) + 1
        if stop_past is not None and size > stop_past:
            break
    return size


def rebuild_bytes(memory: Memory) -> int:
    """A quarter of the window, in bytes: a token is at least a byte, so this errs early."""
    window = memory.window
    return int(window * memory.settings.long_turn_fraction)


def head_room(memory: Memory, reply_tokens: int | None = None) -> int:
    """Tokens a head may take: the window less the reply's room and a long turn's steps.

    The reply's room is what the harness asks for, up to ``reply_room_tokens``:
    harnesses often send the model's whole output ceiling as ``max_tokens``
    (128,000 for some Claude models), and the quarter kept for the turn's
    steps is free at its first request.
    """
    window = memory.window
    reply = memory.settings.reply_room_tokens
    if reply_tokens:
        reply = min(reply, reply_tokens)
    return window - reply - rebuild_bytes(memory)


def fits(memory: Memory) -> bool:
    """Whether the recent block is within its limit (reads only as far as the limit)."""
    limit = memory.settings.recent_block_bytes
    return recent_bytes(memory, stop_past=limit) <= limit


def bounded_recent_block(memory: Memory, start: int, limit: int, keep: int | None = None) -> str:
    """``[start, T)`` when it fits ``limit`` bytes; else the most of it that does, the rest named.

    Message ``keep`` (a long turn's person's message, when its head is
    rebuilt) always stays, shortened to at most a quarter of ``limit``; then
    the newest messages, the oldest of them shortened to the room left.  Each
    run of left-out messages gets a note line: they are in the memory, and
    ``zoom`` and ``recall_search`` reach them.  Only the messages shown (and
    one past the limit) are read, so a block after an import of thousands of
    unwritten messages costs what it shows.
    """
    total = memory.total
    lines: dict[int, str] = {}
    size = 0
    for message_id in range(start, total):  # the whole block, while it fits
        lines[message_id] = recent_line(memory, message_id)
        size += len(lines[message_id].encode("utf-8")) + 1
        if size > limit + 1:
            break
    else:
        return "\n".join(lines.values())

    def line_of(message_id: int) -> str:
        if message_id not in lines:
            lines[message_id] = recent_line(memory, message_id)
        return lines[message_id]

    room = limit - 2 * _NOTE_ROOM
    shown: dict[int, str] = {}
    if keep is None:
        # The newest whole messages from an anchored start, and the one before them shortened to a
        # fixed share: every part of the block stays put until the anchor moves.
        reserve = min(room // 2, max(_MIN_SHORTENED, room // 4))
        budget = room - reserve
        earliest = total
        for message_id in range(total - 1, start - 1, -1):
            size = len(line_of(message_id).encode("utf-8")) + 1
            if size > budget:
                break
            budget -= size
            earliest = message_id
        if earliest == total:  # not even the newest message fits whole: show it shortened
            shown = {total - 1: shorten_line(line_of(total - 1), total - 1, max(0, room - 1))}
            return _with_notes(shown, start, total)
        first_shown = max(start, _anchored_start(earliest, total))
        shown = {m: line_of(m) for m in range(first_shown, total)}
        if first_shown > start:
            shown[first_shown - 1] = shorten_line(line_of(first_shown - 1), first_shown - 1, reserve - 1)
        return _with_notes(shown, start, total)
    if keep is not None and start <= keep < total:
        shown[keep] = shorten_line(line_of(keep), keep, max(0, room // 4))
        room -= len(shown[keep].encode("utf-8")) + 1
    for message_id in range(total - 1, start - 1, -1):
        if message_id == keep:
            continue
        line = line_of(message_id)
        size = len(line.encode("utf-8")) + 1
        if size > room:
            if room >= _MIN_SHORTENED:
                shown[message_id] = shorten_line(line, message_id, room - 1)
            break
        shown[message_id] = line
        room -= size
    return _with_notes(shown, start, total)


def _with_notes(shown: dict[int, str], start: int, total: int) -> str:
    """The shown lines of ``[start, total)`` in order, each run left out named by one note line."""
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
        out.append(note_line("turn/left_out.txt", message_id, last))
        message_id = last + 1
    return "\n".join(out)


def note_line(prompt: str, first: int, last: int) -> str:
    """A recent-block line naming messages ``first`` to ``last``, which the head does not show."""
    note = prompts.text(prompt).strip().format(first=first, last=last)
    return f"{first}+0|note: {note}"


def shorten_line(line: str, message_id: int, size: int) -> str:
    """``line`` in at most ``size`` UTF-8 bytes: its head and tail, with the cut named for ``zoom``."""
    data = line.encode("utf-8")
    if len(data) <= size:
        return line
    marker = prompts.text("turn/shortened.txt").strip()
    # The tail starts a line of its own: neutralised again, it may grow by a head's "&#124;".
    longest = len(marker.format(cut=f"{len(line):,}", id=message_id).encode("utf-8")) + 2 + _TAIL_GROWTH
    half = max(0, (size - longest) // 2)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half:].decode("utf-8", "ignore") if half else ""
    tail = neutralise("\n" + tail)[1:]
    cut = len(line) - len(head) - len(tail)
    return f"{head}\n{marker.format(cut=f'{cut:,}', id=message_id)}\n{tail}"


def build_request(memory: Memory, system: str, tools: list[dict], context: list[str], state: str,
                  new: str, recent_limit: int | None = None, keep: int | None = None,
                  reply_tokens: int | None = None) -> Request:
    """The head of DESIGN §4, in neutral form, within the window (see the module docstring)."""
    prefix = memory.views.written_prefix()
    limit = memory.settings.recent_block_bytes if recent_limit is None else recent_limit
    room = head_room(memory, reply_tokens)
    if keep is None and recent_bytes(memory, prefix.stop, stop_past=limit) > limit:
        shown = _lines_checkpoint(len(prefix.lines))  # catching up: the view's end moves in steps
        if shown < len(prefix.lines):
            prefix = Prefix(prefix.lines[:shown], tiling.first(prefix.lines[shown].part))

    def assemble(rendered: list[str], recent: str) -> Request:
        tail = [recent + "\n"] if recent else []
        if state:
            tail.append(state.rstrip("\n") + "\n")
        tail.append(new)
        blocks, whole = view_message_blocks(rendered, tail)
        messages = [Msg("user", [text]) for text in context] + [Msg("user", blocks)]
        return Request(system, tools, messages, view_message=len(context), view_blocks=whole,
                       cache_key=memory.memory_id)

    rendered = [line.render() for line in prefix.lines]
    recent = bounded_recent_block(memory, prefix.stop, limit, keep)
    head = assemble(rendered, recent)
    if tokens.fits(head, room):
        return head
    while True:  # show fewer of the view's last lines, then a smaller recent block
        left = room - tokens.estimate(assemble([], note_line("turn/cut_view.txt", 0, 0) + "\n" + recent))
        if left >= 0:
            shown = tokens.lines_within(rendered, left)
            if shown == len(rendered):
                return assemble(rendered, recent)
            cut = note_line("turn/cut_view.txt", tiling.first(prefix.lines[shown].part), prefix.stop - 1)
            return assemble(rendered[:shown], cut + "\n" + recent)
        if limit <= _SMALLEST_RECENT:
            raise HeadTooLarge(f"the harness's prompt and tools leave no room for the memory in a "
                               f"{memory.window}-token window")
        limit //= 2
        recent = bounded_recent_block(memory, prefix.stop, limit, keep)
