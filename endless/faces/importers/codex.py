"""Reading OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as entries.

A rollout is one JSON object a line, ``{"timestamp", "type", "payload"}``:
``session_meta`` first (the session's id and its folder, ``cwd``), then
``response_item`` lines holding what the model saw and said, interleaved with
lines that are not conversation (``event_msg`` copies of the same messages
for the user interface, ``turn_context``, ``world_state``, token counts).

Only ``response_item`` lines are read, and of those only what a person or the
agent said and did: the context Codex writes in the person's name (the
environment, AGENTS.md, permissions) and developer messages are left out,
reasoning is never logged (DESIGN §2.2), and a ``compacted`` line's
replacement history is not read: everything it replaces is earlier in the
same file.  Checked on rollouts written by Codex CLI 0.171.0 (SEAMS.md,
"Codex rollouts").

The converter works a record at a time, :func:`codex_entries` with a
:class:`CodexState` carried from line to line, so a live capture reading a
rollout from a byte offset converts the same way a whole-file import does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from endless.core import settings as limits
from endless.faces.importers.formats import Entry, FormatError, json_lines, parse_time

TITLE_CHARS = 60
# What Codex writes as the person's words itself, in versions whose rollouts do not say who
# wrote a block (0.171 marks each block's provenance: ``user``, ``harness``, ``agents_md``...).
INJECTED_PREFIXES = ("<environment_context>", "# AGENTS.md instructions for ", "<permissions instructions>",
                     "<user_instructions>", "# Files mentioned by the user", "<skills_instructions>",
                     "<turn_aborted>", "Another language model started to solve this problem")
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


@dataclass
class CodexState:
    """What converting one rollout carries from line to line (and a live capture keeps between reads).

    ``seen``: a fingerprint of each item converted, so an item Codex writes
    again (a resumed session replaying an item) is logged once.
    """

    session: str = ""
    cwd: str | None = None
    title: str = ""
    seen: set[str] = field(default_factory=set)

    def title_or_default(self) -> str:
        return self.title or f"Codex {self.session[:8]}"


def session_of_name(path: Path) -> str:
    """The session id in a rollout's file name (``rollout-<time>-<uuid>.jsonl``), else its stem:
    the session of lines read before (or without) the ``session_meta`` line."""
    stem = path.stem
    tail = stem[-36:]
    return tail if stem.startswith("rollout-") and len(stem) > 45 and tail.count("-") == 4 else stem


def read_codex(path: Path) -> Iterator[Entry]:
    """A Codex rollout's entries, in the file's order, as a stream (a bad line raises when reached)."""
    state = CodexState(session=session_of_name(path))
    for where, record in json_lines(path):
        yield from codex_entries(record, where, state)


def rollout_cwd(path: Path) -> str | None:
    """The folder a rollout's session ran in (``session_meta.cwd``), from its first line only.

    None when the first line is no ``session_meta`` or names no folder; a first
    line that cannot be read at all is a FormatError naming it.
    """
    cwd = rollout_meta(path).get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def rollout_meta(path: Path) -> dict:
    """The ``session_meta`` payload of a rollout's first line (``{}`` when it has none)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.readline(limits.IMPORT_LINE_BYTES_MAX + 1)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not raw.strip():
        return {}
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"{path}:1: not valid JSON ({exc})") from None
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        return {}
    payload = record.get("payload")
    return payload if isinstance(payload, dict) else {}


def codex_entries(record: Any, where: str, state: CodexState) -> list[Entry]:
    """The entries one rollout line holds, each naming its event id (see :func:`_entries`).

    The id is the item's own (``payload.id``: 0.171 gives each message and call one), else
    the line's place in its file, within the session: an import and a live capture of the
    same rollout agree on it (the same turn, the same id, logged once), and an item Codex
    writes again (a resumed session, a rollout rewritten) keeps its id where it has one.
    """
    entries = _entries(record, where, state)
    if entries:
        payload = record["payload"]
        item = payload.get("id") if isinstance(payload.get("id"), str) and payload["id"] else None
        ident = f"item:{item}" if item else f"line:{where.rsplit(':', 1)[-1]}"
        for entry in entries:
            entry.uid = entry.uid or f"codex:{state.session}:{ident}"
    return entries


def turn_end(record: Any) -> str | None:
    """How a turn ended, when this line is Codex's end of a turn (``event_msg`` ``task_complete``, checked
    on 0.171): '' when it ended well, else a few words on why (``usage limit (…)``, ``rate limit (…)``,
    ``error (…)``), from its ``error``; None for any other line."""
    if not isinstance(record, dict) or record.get("type") != "event_msg":
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict) or payload.get("type") not in ("task_complete", "turn_aborted"):
        return None
    if payload["type"] == "turn_aborted":
        return "interrupted"
    error = payload.get("error")
    if not isinstance(error, dict):
        return ""
    message = " ".join(str(error.get("message") or "").split())[:200]
    info = orjson.dumps(error.get("codex_error_info") or {}).decode().lower()
    if "usage_limit" in info or "usage limit" in message.lower() or "quota" in info:
        return f"usage limit ({message})"
    if "rate_limit" in info or "429" in info:
        return f"rate limit ({message})"
    return f"error ({message})"


def _entries(record: Any, where: str, state: CodexState) -> list[Entry]:
    """The entries one rollout line holds (most hold none), updating ``state``.

    A line that is no object with a ``type`` and a ``payload`` object is a
    FormatError naming ``where``; a type or item type this reader does not know
    is skipped: newer Codex versions add them, and they are not conversation.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str) \
            or not isinstance(record.get("payload"), dict):
        raise FormatError(f"{where}: not a Codex rollout line (an object with 'type' and a 'payload' object); "
                          "is this file a rollout from ~/.codex/sessions? (else choose --format)")
    kind, payload = record["type"], record["payload"]
    if kind == "session_meta":
        if isinstance(payload.get("id"), str) and payload["id"]:
            state.session = payload["id"]
        if isinstance(payload.get("cwd"), str):
            state.cwd = payload["cwd"]
        return []
    if kind != "response_item":
        return []  # event_msg (copies for the screen), turn_context, compacted, world_state, ...
    metadata = record.get("metadata")
    if isinstance(metadata, dict) and metadata.get("compaction_output"):
        return []  # the summary a compaction asked the model for: the history it sums up is in the file
    item = payload.get("type")
    if item == "message":
        return _message(payload, record, where, state)
    if item in CALL_TYPES:
        return _call(item, payload, record, where, state)
    if item in OUTPUT_TYPES:
        return _output(payload, record, where, state)
    return []  # reasoning (never logged), ghost snapshots, newer item types


def _entry(role: str, text: str, record: dict, where: str, state: CodexState, **extra: Any) -> Entry:
    return Entry(role, text, parse_time(record.get("timestamp"), where), state.session, state.title_or_default(),
                 where, **extra)


def _first_time(ident: Any, key: str, state: CodexState) -> bool:
    """Whether the item with this id (and fingerprint ``key``) is new; an item without an id always is
    (the same words said twice are two messages)."""
    if not isinstance(ident, str) or not ident:
        return True
    fingerprint = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    if fingerprint in state.seen:
        return False
    state.seen.add(fingerprint)
    return True


def _message(payload: dict, record: dict, where: str, state: CodexState) -> list[Entry]:
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return []  # developer and system messages: Codex's instructions, not the conversation
    content = payload.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text" if role == "user" else "output_text", "text": content}]
    if not isinstance(content, list):
        raise FormatError(f"{where}: a message's content must be a list of blocks")
    if role == "assistant":
        text = "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "output_text"
                         and isinstance(b.get("text"), str))
        if not text.strip() or not _first_time(payload.get("id"), f"a\0{payload.get('id')}\0{text}", state):
            return []
        return [_entry("assistant", text, record, where, state)]
    texts = _person_texts(payload, content, where)
    if not texts or not _first_time(payload.get("id"), f"u\0{payload.get('id')}\0" + "\0".join(texts), state):
        return []
    if not state.title:
        words = " ".join(texts[0].split())
        state.title = words if len(words) <= TITLE_CHARS else words[:TITLE_CHARS - 1].rstrip() + "…"
    return [_entry("user", text, record, where, state) for text in texts]


def _person_texts(payload: dict, content: list, where: str) -> list[str]:
    """The blocks of a user-role message that the person wrote (Codex's own context left out)."""
    passthrough = payload.get("internal_chat_message_metadata_passthrough")
    marks = passthrough.get("content_item_metadata") if isinstance(passthrough, dict) else None
    marks = marks if isinstance(marks, list) and len(marks) == len(content) else None
    texts = []
    for number, block in enumerate(content):
        if not isinstance(block, dict):
            raise FormatError(f"{where}: a content block must be an object with a 'type'")
        if marks is not None:
            mark = marks[number]
            provenance = mark.get("provenance") if isinstance(mark, dict) else None
            if isinstance(provenance, dict) and provenance.get("type") not in (None, "user"):
                continue  # harness, agents_md, skills...: written by Codex, not by the person
        if block.get("type") == "input_text" and isinstance(block.get("text"), str):
            text = block["text"]
            if marks is None and text.lstrip().startswith(INJECTED_PREFIXES):
                continue
            if text.strip():
                texts.append(text)
        elif block.get("type") == "input_image":
            texts.append("[image]")
    return texts


def _call(item: str, payload: dict, record: dict, where: str, state: CodexState) -> list[Entry]:
    if item == "local_shell_call":
        name, args = "shell", orjson.dumps(payload.get("action") or {}).decode()
    elif item == "web_search_call":
        # Kept as a call (what the agent looked up is worth remembering); its results are not in the file.
        name, args = "web_search", orjson.dumps(payload.get("action") or {}).decode()
    else:
        name = payload.get("name")
        args = payload.get("arguments" if item == "function_call" else "input", "")
        if not isinstance(name, str) or not name:
            raise FormatError(f"{where}: a {item} without its name")
        if not isinstance(args, str):
            args = orjson.dumps(args).decode()
    key = payload.get("call_id") or payload.get("id")
    if not _first_time(key, f"c\0{key}\0{name}\0{args}", state):
        return []
    return [_entry("call", args, record, where, state, name=name, args=args)]


def _output(payload: dict, record: dict, where: str, state: CodexState) -> list[Entry]:
    output = payload.get("output")
    text = _output_text(output)
    if not _first_time(payload.get("call_id"), f"r\0{payload.get('call_id')}\0{text}", state):
        return []
    return [_entry("result", text, record, where, state)]


def _output_text(output: Any) -> str:
    """A tool's answer: a text, content blocks (images named), or (older versions) ``{content, success}``."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = []
        for block in output:
            if isinstance(block, dict) and block.get("type") in ("input_text", "output_text") \
                    and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") == "input_image":
                parts.append("[image]")
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    if isinstance(output, dict):
        text = _output_text(output.get("content"))
        return f"(error) {text}" if output.get("success") is False else text
    return "" if output is None else str(output)
