"""The agent's three look-back tools, answering in text the model reads (DESIGN §5).

``zoom`` opens a line into its halves or a message word for word, ``date``
tells when a message was written, ``recall_search`` ranks words, finds a
phrase or a pattern anywhere in the history.  Their names, descriptions and
schemas live in ``prompts/tools.json`` and change only with a release, so the
cached tool list changes once, at an upgrade.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

import orjson

from endless import prompts
from endless.core import moments
from endless.core.search import scan as recall
from endless.core.search import finder as search
from endless.core.view import tiling
from endless.core.memory import Memory
from endless.core.view import ViewLine, controls_shown

TOOL_NAMES = ("zoom", "date", "recall_search")


class Refusal(str):
    """An answer saying the call could not be done (a bad argument, no such line): still the text the
    model reads, and marked, so a face that reports errors apart (MCP's ``isError``) can tell."""


def definitions(include_search: bool = True) -> list[dict]:
    """The tools as ``{name, description, parameters}``, byte-identical every call."""
    # Parsed afresh each call: a caller that adds a cache mark to a tool must not change
    # what the next call returns.
    tools = orjson.loads(prompts.text("tools.json"))
    assert isinstance(tools, list)
    return [t for t in tools if include_search or t["name"] != "recall_search"]


def _int_arg(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    return None


_INTEGER = re.compile(r"-?[0-9]{1,30}")


def zoom(memory: Memory, ident: Any, n: Any, page: Any = 1) -> str:
    """The two halves of ``id+n``, or message ``id`` whole (paged) when ``n`` is 1."""
    memory.catch_up()
    i, count, p = _int_arg(ident), _int_arg(n), _int_arg(page if page is not None else 1)
    shown = f"{ident}+{n}"
    if i is None or count is None:
        return Refusal(f"No line {shown}.")
    part = tiling.parse_name(i, count, memory.total)
    if part is None:
        return Refusal(f"No line {i}+{count}.")
    if p is None or p < 1:
        return Refusal(f"No page {page}: pages are numbered from 1.")
    if count == 1:
        return _zoom_message(memory, i, p)
    if not memory.is_built(*part):
        return Refusal(f"No line {i}+{count}.")
    halves = tiling.children(part)
    lines = [ViewLine(h, memory.node_text(*h)) for h in halves]
    if any(line.text is None for line in lines):
        return Refusal(f"No line {i}+{count}.")
    return "\n".join(line.render() for line in lines)


def _zoom_message(memory: Memory, ident: int, page: int) -> str:
    stored = memory.message(ident)
    if stored is None:
        return Refusal(f"Message {ident} cannot be read: its record in the log is damaged.")
    whole = stored.source_text(memory.settings, memory.agent_name)
    size = memory.settings.zoom_page_chars
    pages = max(1, -(-len(whole) // size))
    if page > pages:
        return Refusal(f"No page {page}: message {ident} has {pages} page{'s' if pages > 1 else ''}.")
    text = controls_shown(whole[(page - 1) * size:page * size])  # as the view shows them (render.HIDDEN)
    head = f"{ident}+0|"
    if pages == 1:
        return head + text
    return f"{head}{text}\n[page {page} of {pages}]"


def local_time(at: float) -> str:
    return moments.local(at, "%A %Y-%m-%d %H:%M:%S %Z")


def date(memory: Memory, ident: Any) -> str:
    memory.catch_up()
    i = _int_arg(ident)
    if i is None or i < 0 or i >= memory.total:
        return Refusal(f"No message {ident}.")
    stored = memory.message(i)
    if stored is None:
        return Refusal(f"Message {i} cannot be read: its record in the log is damaged.")
    if not moments.is_moment(stored.at):
        return f"Message {i} has no known time (its record holds {stored.at!r})."
    return f"Message {i} was written {local_time(stored.at)} (local time)."


def recall_search(memory: Memory, query: Any, page: Any = 1,
                  clock: Callable[[], float] = time.monotonic, **filters: Any) -> str:
    """Ranked words, an exact phrase or a ``/pattern/`` (DESIGN §5); 20 hits a page."""
    memory.catch_up()
    p = _int_arg(page if page is not None else 1)
    if p is None or p < 1:
        return Refusal(f"No page {page}: pages are numbered from 1.")
    if not isinstance(query, str):
        return Refusal('Give recall_search a query: words, a "quoted phrase" or a /regular expression/.')
    unknown = sorted(set(filters) - set(FILTERS))
    if unknown:
        return Refusal(f"recall_search has no parameter {unknown[0]!r}; its filters are {', '.join(FILTERS)}.")
    per_page = memory.settings.search_hits_tool
    seconds = memory.settings.regex_seconds
    pin = (memory.memory_id, query, tuple(sorted((k, str(v)) for k, v in filters.items())))
    below = _PINS.get(pin) if p > 1 else None
    if filters.get("below") is not None:  # going on from a search its time limit cut: below that message
        asked = _int_arg(filters["below"])
        if asked is None or asked < 0:
            return Refusal(f"below must be a message id (a whole number from 0), not {filters['below']!r}.")
        below = asked if below is None else min(below, asked)
    filters = {k: v for k, v in filters.items() if k != "below"}
    try:
        result = search.search(search.corpus_of(memory), query, (p - 1) * per_page, per_page, seconds,
                               clock=clock, below=below, expand=memory.expand_query, **filters)
    except recall.SearchError as exc:
        return Refusal(f"Cannot search: {exc}.")
    if p == 1 and result.below is not None:
        _PINS[pin] = result.below
        while len(_PINS) > _PINS_KEPT:
            _PINS.pop(next(iter(_PINS)))
    lines = _search_notes(result, memory.total, seconds)
    order = "best first" if result.mode == "words" else "newest first"
    if not result.hits:
        lines.append(f"No hits for {query} on page {p}." if p > 1 else f"No hits for {query}.")
        return "\n".join(lines)
    first = (p - 1) * per_page + 1
    lines.append(f"Hits {first}–{first + len(result.hits) - 1} for {query}, {order}"
                 + (f" (more on page {p + 1}):" if result.more else ":"))
    for hit in result.hits:
        when = moments.local(hit.at)
        text = controls_shown(bold(hit.snippet, hit.marks))
        if hit.kind == "line":
            lines.append(f"{hit.id}+{hit.count} · from {when} · summary line: {text}")
        elif hit.kind == "title":  # named by the chat's first message
            lines.append(f"{hit.id}+0 · {when} · the chat's title: «{text}»")
        else:
            inside = f" · in line {hit.line}" if hit.line and hit.line != f"{hit.id}+1" else ""
            chat = f"«{controls_shown(hit.title)}» · " if hit.title else ""  # not yet titled: no empty «»
            lines.append(f"{hit.id}+0 · {when} · {chat}{hit.kind}: {text}{inside}")
    return "\n".join(lines)


FILTERS = ("chat", "kind", "since", "before", "scope", "below")
# The messages a search's first page saw, by (memory, query, filters): its later pages search the
# same ones, so turns arriving between two pages neither repeat a hit nor push one past a page.
_PINS: dict[tuple, int] = {}
_PINS_KEPT = 256


def bold(snippet: str, marks: tuple[tuple[int, int], ...]) -> str:
    """The snippet with its marked spans in ``**bold**``, as a model reads emphasis."""
    out, at = [], 0
    for start, end in marks:
        if start < at:
            continue
        out.append(snippet[at:start])
        out.append(f"**{snippet[start:end]}**")
        at = end
    out.append(snippet[at:])
    return "".join(out)


def _search_notes(result: recall.Result, total: int, seconds: float) -> list[str]:
    lines = []
    if result.indexed is not None:
        lines.append(f"The search index is still being built: it covers messages 0 to {result.indexed - 1} "
                     f"of {total}; search again for the newer ones.")
    if result.stopped_at is not None:
        if result.mode == "words":
            lines.append(f"The search stopped after {seconds:g} s before ranking every match. "
                         "Search for fewer or rarer words.")
        else:
            end = result.below if result.below is not None else total
            start = result.go_on()
            some = start is not None and start < end
            searched = (f"it searched messages {start} to {end - 1}, newest first, not 0 to {start - 1}; "
                        "the hits here are only from those" if some
                        else "before it had searched a single message")
            go_on = (f"To search the rest, call recall_search again with the same query and below={start}."
                     if some else "To try again, call recall_search again with the same arguments.")
            advice = ("Narrow the pattern or search for plain words." if result.pattern
                      else "Search for fewer or shorter words.")
            lines.append(f"PARTIAL ANSWER: The {'pattern ' if result.pattern else ''}search stopped after "
                         f"{seconds:g} s, {searched}. {go_on} {advice}")
    return lines


def call(memory: Memory, name: str, args: Any) -> str:
    """Run a tool call as the model sent it; bad arguments get an answer, never an exception.

    ``args`` may be the decoded object or the JSON text a provider sends.
    """
    if isinstance(args, (str, bytes)):
        try:
            args = orjson.loads(args) if args.strip() else {}
        except orjson.JSONDecodeError:
            return Refusal(f"The {name} tool's arguments are not valid JSON; send a JSON object.")
    if not isinstance(args, dict):
        return Refusal(f"The {name} tool takes named arguments as a JSON object.")
    if name == "zoom":
        if "id" not in args or "n" not in args:
            return Refusal("zoom needs id and n, the two numbers of a line's name id+n.")
        return zoom(memory, args["id"], args["n"], args.get("page", 1))
    if name == "date":
        if "id" not in args:
            return Refusal("date needs id, a message number.")
        return date(memory, args["id"])
    if name == "recall_search":
        if not memory.settings.recall_search:
            return Refusal("recall_search is turned off for this chat.")
        extra = {k: v for k, v in args.items() if k not in ("query", "page")}
        return recall_search(memory, args.get("query"), args.get("page", 1), **extra)
    return Refusal(f"There is no tool {name!r} here; the look-back tools are {', '.join(TOOL_NAMES)}.")


def lookback_words(name: str, args: Any, title: str) -> str | None:
    """How the writer reads a call of our own tools: in words, never as raw JSON."""
    if not isinstance(args, dict) or name not in TOOL_NAMES:
        return None
    where = f" in «{title}»" if title else ""
    if name == "zoom":
        i, n = _int_arg(args.get("id")), _int_arg(args.get("n"))
        if i is None or n is None:
            what = "a line that does not exist"
        else:
            what = f"message {i}" if n == 1 else f"line {i}+{n}"
        return f"looked back at {what}{where}"
    if name == "date":
        i = _int_arg(args.get("id"))
        if i is None:
            return f"looked up the date of a message that does not exist{where}"
        return f"looked up when message {i} was written{where}"
    return f"searched the history for {args.get('query')!r}{where}"
