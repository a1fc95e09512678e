"""What the two wire formats share: errors, JSON, SSE framing, stream pieces, prompt rendering.

The rendered prompt (what the tokenizer and the cache models see) is a plain
transcript: every message opens with a header line ``<|role|>\\n`` (plus the
tool name or call id where the wire has one), every content block follows as
its own :class:`~endless.sim.model.Segment` ending in ``\\n``.  Cache marks are
never part of the text: a request with its marks moved renders to the same
text and the same tokens.
"""

from __future__ import annotations

import re
from typing import Any

import orjson


class WireError(Exception):
    """A request the provider would refuse: rendered as that API's error JSON with ``status``."""

    def __init__(self, status: int, message: str, *, code: str | None = None,
                 param: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.retry_after = retry_after


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(body: bytes | str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireError(400, f"We could not parse the JSON body of your request: {exc}",
                        code="invalid_json") from None


def canonical_json(value: Any) -> str:
    """Tools and tool inputs as prompt text: keys sorted, so the same definition gives the same tokens."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def header(role: str, detail: str | None = None) -> str:
    return f"<|{role}|>{' ' + detail if detail else ''}\n"


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already bytes."""
    payload = data if isinstance(data, bytes) else dumps(data)
    return (b"event: " + event.encode() + b"\n" if event else b"") + b"data: " + payload + b"\n\n"


_WORDS = re.compile(r"\S*\s*")


def pieces(text: str, size: int = 48) -> list[str]:
    """``text`` cut at word ends into pieces of about ``size`` characters (never empty pieces)."""
    if not text:
        return []
    out: list[str] = []
    current = ""
    for word in _WORDS.findall(text):
        if not word:
            continue
        while len(word) > size:  # one very long word: cut it hard
            if current:
                out.append(current)
                current = ""
            out.append(word[:size])
            word = word[size:]
        if current and len(current) + len(word) > size:
            out.append(current)
            current = ""
        current += word
    if current:
        out.append(current)
    return out


def retry_headers(retry_after: float | None) -> dict[str, str]:
    if retry_after is None:
        return {}
    seconds = max(0.0, float(retry_after))
    whole = int(seconds) if seconds == int(seconds) else int(seconds) + 1
    return {"retry-after": str(whole), "retry-after-ms": str(int(round(seconds * 1000)))}
