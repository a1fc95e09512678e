"""How a PostgreSQL memory's index reads words (:mod:`endless.core.search.pg_index`).

:func:`fold` turns a text into the words the index stores, the same for a
message and a query (:class:`Rows` gathers an insert's messages, folded, and
names their chats); :func:`compile_match` turns the finder's match expressions
(FTS5's syntax: quoted strings, AND, OR, parentheses) into ``tsquery`` values
built from ``phraseto_tsquery`` (each quoted string a phrase of its folded words).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

CONFIG = "endless_text"  # the text search configuration: Snowball English, no stop words (pg_tables.DDL)
# Every message's tsvector also holds the lexeme ``~<id // STRETCH>`` (no position; a folded word never
# holds "~"): GIN then finds a word's rows among the newest messages without reading the others
# (PgSearchIndex.ranked), where ranking every row holding a common word costs a heap visit each.
STRETCH = 8192
MESSAGE_TSV = f"to_tsvector('{CONFIG}', u.text) || ('~' || (u.id / {STRETCH}))::tsvector"
WORD = re.compile(r"[^\W_]+")  # a word as the query language and FTS5's unicode61 see one
_NON_WORD = re.compile(r"[\W_]+")


def fold(text: str) -> str:
    """``text`` as the index reads it: diacritics removed, lower case, words apart by one space."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _NON_WORD.sub(" ", text).lower().strip()


def chat_id(session: str, title: str) -> int:
    """A chat's row id: the same on every machine for the same session and title (no lookup needed)."""
    digest = hashlib.blake2b(f"{session}\x1f{title}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class Rows:
    """Rows of messages to add, in arrays (one statement adds them all)."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.ats: list[float | None] = []
        self.kinds: list[int] = []
        self.chat_ids: list[int] = []
        self.texts: list[str] = []
        self.chats: dict[int, tuple[str, str]] = {}
        self._last: tuple[str, str, int] | None = None

    def chat(self, session: str, title: str) -> int:
        if self._last is None or self._last[:2] != (session, title):  # (most often the turn before's)
            ident = chat_id(session, title)
            self.chats[ident] = (session, title)
            self._last = (session, title, ident)
        return self._last[2]

    def add(self, mid: int, at: float | None, kind: int, chat: int, text: str) -> None:
        self.ids.append(mid)
        self.ats.append(at)
        self.kinds.append(kind)
        self.chat_ids.append(chat)
        self.texts.append(fold(text))


# -- the finder's match expressions (FTS5's syntax: quoted strings, AND, OR, parentheses) --------------

_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"|(AND|OR)\b|(\()|(\)))')


class Compiled:
    """A match expression as SQL over ``phraseto_tsquery`` values, and its quoted strings (folded);
    ``joined``: whether any of them are required together (an AND)."""

    def __init__(self, sql: str, params: list[str], atoms: list[str], joined: bool = False) -> None:
        self.sql, self.params, self.atoms, self.joined = sql, params, atoms, joined


def compile_match(expression: str) -> Compiled | None:
    """The ``tsquery`` of a match expression; None when it holds no word (it then matches nothing)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expression):
        found = _TOKEN.match(expression, pos)
        if found is None or found.end() == pos:
            if expression[pos:].strip():
                raise ValueError(f"not a match expression at {expression[pos:]!r}")
            break
        pos = found.end()
        if found.group(1) is not None:
            tokens.append(("str", found.group(1).replace('""', '"')))
        elif found.group(2):
            tokens.append((found.group(2), ""))
        else:
            tokens.append(("(" if found.group(3) else ")", ""))
    params: list[str] = []
    atoms: list[str] = []
    joined: list[bool] = []
    at = 0

    def atom() -> str | None:
        nonlocal at
        kind, value = tokens[at]
        at += 1
        if kind == "(":
            inner = either()
            at += 1  # the ")"
            return inner
        folded = fold(value)
        if not folded:
            return None
        params.append(folded)
        if folded not in atoms:
            atoms.append(folded)
        return f"phraseto_tsquery('{CONFIG}', %s)"

    def both() -> str | None:
        nonlocal at
        parts = [atom()]
        while at < len(tokens) and tokens[at][0] not in ("OR", ")"):
            if tokens[at][0] == "AND":
                at += 1
            parts.append(atom())
        kept = [p for p in parts if p is not None]
        if len(kept) < len(parts):
            return None  # a required string with no word matches nothing
        if len(kept) > 1:
            joined.append(True)
        return kept[0] if len(kept) == 1 else "(" + " && ".join(kept) + ")"

    def either() -> str | None:
        nonlocal at
        parts = [both()]
        while at < len(tokens) and tokens[at][0] == "OR":
            at += 1
            parts.append(both())
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else "(" + " || ".join(kept) + ")"

    if not tokens:
        return None
    sql = either()
    return None if sql is None else Compiled(sql, params, atoms, bool(joined))


def stretches(first: int, last: int) -> str:
    """A ``tsquery`` (its text) matching the messages of stretches ``first`` to ``last`` (MESSAGE_TSV)."""
    return " | ".join(f"~{k}" for k in range(first, last + 1))
