"""``endless.forget``: the one answer the CLI's ``endless forget`` and the host RPC share.

Forgetting is the only face operation that changes a memory's past, so it
opens the memory writable (under its lock, like a commit), and every call
can be a dry run that lists what would go first.  The answer always says
what forgetting cannot reach (copies the provider received, the harness's
own session files, backups).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from endless import prompts
from endless.core.privacy import forget, derived as forget_derived
from endless.core import moments
from endless.core.store import tombstone
from endless.core.errors import MemoryUseError, NoMemory
from endless.core.memory import Memory
from endless.core.settings import Settings
from endless.faces.kit.answers import BAD_REQUEST, UNKNOWN_MEMORY, AnswerError, ArgumentError, int_arg, memory_id_arg, text_arg

PREVIEW_CHARS = 200  # of each message a dry run shows


def _ints(name: str, value: Any) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 100_000:
        raise ArgumentError(name, "must be a list of whole numbers")
    return [int_arg(name, v, 0) for v in value]


def _moment(name: str, value: Any) -> float | None:
    if value is None:
        return None
    at = moments.parse_iso(value) if isinstance(value, str) else None
    if at is None:
        raise ArgumentError(name, f"must be a date or time such as 2026-11-30 or 2026-11-30T14:05, not {value!r}")
    if not moments.is_moment(at):
        raise ArgumentError(name, moments.OUT_OF_RANGE.format(value=value))
    return at


def forget_value(settings: Settings, args: dict, root: Path | None = None, merge_apart: bool = False,
                 hermes: Path | None = None) -> dict:
    """Select messages by ``ids``, ``turns``, ``since``/``before`` and ``query``; forget them unless ``dryRun``.

    ``merge_apart``: the search index's merge (a minute at a million
    messages) runs on a thread of its own, so an RPC answers before its
    time limit; the words are out of the log, the lines and the index rows
    already, and the merge is finished by the next open if the process ends.
    ``hermes``: a Hermes home whose own copy of the messages (``state.db``,
    session files) gets the tombstones too, first, so that a failure there
    leaves the memory as it was and the forget can be asked again.
    """
    mid = memory_id_arg(args.get("memoryId"))
    ids, turns = _ints("ids", args.get("ids")), _ints("turns", args.get("turns"))
    since, before = _moment("since", args.get("since")), _moment("before", args.get("before"))
    query = text_arg("query", args.get("query"), required=False)
    dry = args.get("dryRun", False)
    if not isinstance(dry, bool):
        raise ArgumentError("dryRun", "must be true or false")
    if not (ids or turns or query or since is not None or before is not None):
        raise AnswerError(BAD_REQUEST, "say what to forget: ids, turns, a time range (since, before) or a query")
    try:
        memory = Memory.open(memory_id=mid, settings=settings, root=root, create=False)
    except NoMemory:
        raise AnswerError(UNKNOWN_MEMORY, f"there is no memory {mid}; list them with endless.memories") from None
    try:
        try:
            chosen = forget.select(memory, ids=ids, turns=turns, since=since, before=before, query=query)
            # A query reaches the chat titles and summary lines holding it, not only messages; with other
            # criteria too, only the messages they all choose go (select's rule), and no title.
            words = query if not (ids or turns or since is not None or before is not None) else None
            matched = forget_derived.matching(memory, words)
            copy = None
            if hermes is not None and (chosen or matched.titles):
                copy = hermes_copy(memory, hermes, chosen, dry, words)
            outcome = forget.forget(memory, chosen, dry_run=dry, purge=not merge_apart, query=words)
            if merge_apart and not dry:
                threading.Thread(target=forget.purge_index, args=(memory,), name="endless-forget-merge",
                                 daemon=True).start()
        except MemoryUseError as exc:
            raise AnswerError(BAD_REQUEST, str(exc)) from None
        messages = []
        for stored in outcome.previews:
            entry: dict = {"id": stored.id, "turn": stored.turn, "kind": stored.kind,
                           "at": moments.moment_or_none(stored.at), "sessionTitle": stored.title}
            if dry:
                entry["text"] = stored.text[:PREVIEW_CHARS]
            messages.append(entry)
        value = {"dryRun": dry, "messages": messages, "titles": len(outcome.titles), "lines": outcome.nodes,
                 "bytesRewritten": outcome.bytes_rewritten, "seconds": round(outcome.seconds, 3),
                 "cannotReach": outcome.unreachable}
        if dry and outcome.titles:
            value["titleTexts"] = [t[:PREVIEW_CHARS] for t in outcome.titles]  # what would go, as messages show
        if copy is not None:
            value["hermes"] = {"home": str(hermes), "rows": copy.rows, "files": copy.files, "titles": copy.titles}
            value["cannotReach"] = prompts.text("forget/unreachable_hermes.txt").strip()
        return value
    finally:
        memory.close()


def hermes_copy(memory: Memory, home: Path, ids: list[int], dry: bool, words: str | None = None):
    """Hermes's copy of messages ``ids`` (matched by session id and text) replaced by their tombstones;
    ``words``: a forget by match, which clears the titles holding them of the memory's sessions too."""
    import sqlite3

    from endless.faces.kit.hermes_copy import HermesCopyError, Titles, replace

    stone = tombstone(memory.clock())
    pairs = [(s.session, s.text, stone) for s in (memory.message(i) for i in ids) if s is not None]
    titles = Titles(frozenset(forget_derived.sessions(memory)), words) if words else None
    try:
        return replace(home, pairs, dry_run=dry, titles=titles)
    except (sqlite3.Error, OSError) as exc:
        raise HermesCopyError(f"Hermes's copy in {home} could not be changed ({exc}); the memory forgot "
                              "nothing: close the Hermes using it and run the forget again") from None
