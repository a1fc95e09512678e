"""Counts in words: ``1 warning``, ``3 warnings``, and verbs that agree with them.

Every face prints counts to people (doctor, import, status, the CLI); one rule
here keeps "1 warnings" out of all of them.
"""

from __future__ import annotations


def count(n: int, word: str, plural: str | None = None, grouped: bool = False) -> str:
    """``n`` and the noun in the number it takes; ``plural`` for nouns that do not just add an s.

    ``grouped`` writes thousands with commas (``20,000 messages``) where a count can be large.
    """
    number = f"{n:,}" if grouped else f"{n}"
    return f"{number} {agree(n, word, plural if plural is not None else word + 's')}"


def agree(n: int, one: str, many: str) -> str:
    """The words that go with a count of ``n``: ``one`` for exactly one, else ``many``."""
    return one if n == 1 else many
