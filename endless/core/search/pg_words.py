"""How a PostgreSQL memory's index reads words (:mod:`endless.core.search.pg_index`).

Two jobs, each the same on both sides of a search: :func:`fold` turns a text
into the words the index stores (so a message and a query are read alike), and
:func:`compile_match` turns the finder's match expressions (FTS5's syntax:
quoted strings, AND, OR, parentheses) into ``tsquery`` values built from
``phraseto_tsquery`` (each quoted string a phrase of its folded words).
"""

from __future__ import annotations

import re
import unicodedata

CONFIG = "endless_text"  # the text search configuration: Snowball English, no stop words (pg_index.DDL)
WORD = re.compile(r"[^\W_]+")  # a word as the query language and FTS5's unicode61 see one
_NON_WORD = re.compile(r"[\W_]+")


def fold(text: str) -> str:
    """``text`` as the index reads it: diacritics removed, lower case, words apart by one space."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _NON_WORD.sub(" ", text).lower().strip()


# -- the finder's match expressions (FTS5's syntax: quoted strings, AND, OR, parentheses) --------------

_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"|(AND|OR)\b|(\()|(\)))')


class Compiled:
    """A match expression as SQL over ``phraseto_tsquery`` values, and its quoted strings (folded)."""

    def __init__(self, sql: str, params: list[str], atoms: list[str]) -> None:
        self.sql, self.params, self.atoms = sql, params, atoms


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
    return None if sql is None else Compiled(sql, params, atoms)
