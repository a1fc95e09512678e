"""Refusing a regular expression that would exhaust memory before it is compiled (DESIGN §5).

The ``regex`` engine expands counted repeats when it compiles: ``a{100000}``
costs about 26 MB, and nested counts multiply (``(?:(?:a{1000}){1000}){10}``,
25 characters, passed 2.8 GB in five seconds).  A time limit cannot help, since
compiling is one call.  So every pattern is weighed first: each atom weighs
one, a group the sum of what it holds, and a counted repeat multiplies what it
repeats by its largest count.  Open-ended loops (``*``, ``+``, ``{n,}`` past
its ``n``) are not expanded by the engine and multiply by their lower count.
"""

from __future__ import annotations

import re

from endless.core.settings import PATTERN_CHARS_MAX, PATTERN_WEIGHT_MAX

_COUNT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


class PatternTooLarge(ValueError):
    """A pattern whose compiled form would be too large; the message says why and what to do."""


def check(body: str) -> None:
    """Raise :class:`PatternTooLarge` when ``body`` is too long or weighs too much to compile."""
    if len(body) > PATTERN_CHARS_MAX:
        raise PatternTooLarge(f"the regular expression is {len(body):,} characters long; at most "
                              f"{PATTERN_CHARS_MAX:,} are searched")
    weight = weigh(body)
    if weight > PATTERN_WEIGHT_MAX:
        raise PatternTooLarge(f"the regular expression repeats too much (about {weight:,} expanded pieces, at "
                              f"most {PATTERN_WEIGHT_MAX:,}); use * or + instead of large or nested {{n}} counts")


def weigh(body: str) -> int:
    """The pattern's expanded size, counted as the module docstring says (never less than its atoms)."""
    stack: list[list[int]] = [[]]  # per open group: the weights of its items, a 0 marking each |
    k, n = 0, len(body)
    while k < n:
        c = body[k]
        if c == "\\":
            stack[-1].append(1)
            k += 2
        elif c == "[":
            k = _class_end(body, k)
            stack[-1].append(1)
        elif c == "(":
            if body.startswith("?#", k + 1):  # a comment: skip to its end
                end = body.find(")", k)
                k = n if end < 0 else end + 1
                continue
            stack.append([])
            k = _group_body(body, k + 1)
        elif c == ")":
            if len(stack) > 1:
                inner = stack.pop()
                stack[-1].append(sum(inner))
            k += 1
        elif c == "|":
            stack[-1].append(0)
            k += 1
        elif c in "*+?":
            k += 1
            if k < n and body[k] in "?+":  # lazy or possessive
                k += 1
        elif c == "{":
            match = _COUNT.match(body, k)
            if match is None or not (match.group(1) or match.group(3)):
                stack[-1].append(1)  # a literal brace
                k += 1
                continue
            low, comma, high = match.group(1), match.group(2), match.group(3)
            count = int(high) if comma and high else int(low or 0)  # {n}, {n,m}, {,m}: the most; {n,}: n
            items = stack[-1]
            if items and items[-1] > 0:
                items[-1] = items[-1] * max(1, count)
            k = match.end()
            if k < n and body[k] in "?+":
                k += 1
        else:
            stack[-1].append(1)
            k += 1
    while len(stack) > 1:  # unbalanced: the compiler will say so; weigh what there is
        inner = stack.pop()
        stack[-1].append(sum(inner))
    return sum(stack[0])


def _group_body(body: str, k: int) -> int:
    """Where the content of a group opened just before ``k`` starts, past ``?:``, ``?P<name>``, flags…"""
    if not body.startswith("?", k):
        return k
    j = k + 1
    if body.startswith(("<=", "<!"), j):
        return j + 2
    if j < len(body) and body[j] in ":=!>|":
        return j + 1
    if body.startswith(("P<", "<", "'"), j):
        close = body.find("'" if body[j] == "'" else ">", j + 1)
        return len(body) if close < 0 else close + 1
    while j < len(body) and (body[j].isalpha() or body[j] == "-"):  # inline flags: (?i) or (?i:…)
        j += 1
    return j + 1 if body.startswith(":", j) else j


def _class_end(body: str, k: int) -> int:
    """The index after the character class opening at ``k`` (``]`` first in it is literal)."""
    n = len(body)
    j = k + 1
    if j < n and body[j] == "^":
        j += 1
    if j < n and body[j] == "]":
        j += 1
    while j < n:
        if body[j] == "\\":
            j += 2
            continue
        if body[j] == "[" and j + 1 < n and body[j + 1] == ":":  # [:alpha:]
            close = body.find(":]", j + 2)
            if close >= 0:
                j = close + 2
                continue
        if body[j] == "]":
            return j + 1
        j += 1
    return n
