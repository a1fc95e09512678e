"""Times as the memory keeps them: Unix seconds, shown only when they are a real moment.

An import accepts only moments between 1970 and 2200 (``endless import``
refuses the rest with the file and line), but a memory written before that
check, or edited by hand, may hold any number.  Every reader shows such a
time as unknown instead of failing on it.
"""

from __future__ import annotations

import datetime as dt
import math

from endless.core.settings import MOMENT_MAX, MOMENT_MIN

UNKNOWN = "(time unknown)"


# Why a date read for a filter is no time of a memory's (after the argument's name, as each face types it).
OUT_OF_RANGE = "{value!r} is not between 1970 and 2200, the times a memory holds; give a date such as 2026-11-30"


def is_moment(at: object) -> bool:
    """Whether ``at`` is Unix seconds between 1970 and 2200."""
    return (isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at)
            and MOMENT_MIN <= at < MOMENT_MAX)


def moment_or_none(at: object) -> float | None:
    """``at`` when it is a real moment, else None (what the faces hand out as "unknown")."""
    return float(at) if is_moment(at) else None  # type: ignore[arg-type]


def local(at: object, form: str = "%Y-%m-%d %H:%M", unknown: str = UNKNOWN) -> str:
    """``at`` in local time as ``form``, or ``unknown``."""
    if not is_moment(at):
        return unknown
    return dt.datetime.fromtimestamp(float(at)).astimezone().strftime(form).strip()  # type: ignore[arg-type]


def parse_iso(text: str) -> float | None:
    """An ISO 8601 date or time as Unix seconds (``Z`` for UTC; no zone: local time), or None.

    Any date Python reads is given as seconds, also one far outside 1970-2200
    (``0001-01-01``, ``9999-12-31T23:59-05:00``, where the local time or the
    seconds themselves are out of the platform's range): the caller says such a
    time is not one a memory holds (:func:`is_moment`) instead of failing on it.
    """
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        try:
            when = when.astimezone()  # local time, as every face shows times
        except (ValueError, OverflowError, OSError):  # no local offset known that far out: read as UTC
            when = when.replace(tzinfo=dt.timezone.utc)
    try:
        return when.timestamp()
    except (ValueError, OverflowError, OSError):
        return -math.inf if when.year < 1970 else math.inf
