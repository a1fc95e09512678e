"""Can the agent still reach a fact word for word?  Through its request, or a view line and ``zoom``.

The benchmark asks this of planted facts at the end of a run.  It walks the
way an agent would: the recent block is in the request as it is; otherwise the
view line covering the fact's message is opened with the real ``zoom`` tool,
half by half, down to the message itself.  ``recall_search`` is not used: it
always finds raw words, so it proves nothing about the view.
"""

from __future__ import annotations

import re

from endless.core import lookback
from endless.core.view import tiling
from endless.core.memory import Memory
from endless.core.view import recent_block

_NAME = re.compile(r"^(\d+)\+(\d+)\|", re.M)


def message_holding(memory: Memory, text: str) -> int | None:
    """The id of the first message whose source text holds ``text`` (the checker's own scan)."""
    for message_id in range(memory.total):
        stored = memory.message(message_id)
        if stored is not None and text in stored.text:
            return message_id
    return None


def reachable(memory: Memory, fact: str) -> bool:
    message_id = message_holding(memory, fact)
    if message_id is None:
        return False
    lines, p = memory.views.written_prefix()
    if message_id >= p:
        return fact in recent_block(memory, p)
    line = next((v for v in lines
                 if tiling.first(v.part) <= message_id < tiling.first(v.part) + tiling.count(v.part)), None)
    if line is None:
        return False
    start, count = tiling.first(line.part), tiling.count(line.part)
    while count > 1:
        answer = lookback.zoom(memory, start, count)
        halves = [(int(a), int(b)) for a, b in _NAME.findall(answer)]
        inside = [(a, b) for a, b in halves if a <= message_id < a + b]
        if not inside:
            return False
        start, count = inside[0]
    page = 1
    while True:
        answer = lookback.zoom(memory, message_id, 1, page)
        if fact in answer:
            return True
        match = re.search(r"page (\d+) of (\d+)", answer)
        if not match or int(match.group(1)) >= int(match.group(2)):
            return False
        page += 1
