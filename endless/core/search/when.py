"""The time a question names, as a range of moments: "last Tuesday", "three days ago", "in March 2026".

A person asks "what did we decide yesterday?"; the words "yesterday" or
"Tuesday" are seldom in the message that holds the answer, but its time is.
So a ranked query's time phrases are taken out of its words and become a
range of local time that the ranking favours (never a filter: a person's
"last week" is loose, and a wrong guess must not hide the answer).  The
range is read relative to ``now``, the moment the question is asked.

Only phrases that name a time without doubt are read: a bare number or a
bare month name ("May") is left a word.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_SHORT_MONTHS = {m[:3]: k for k, m in enumerate(_MONTHS)} | {"sept": 8}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3}
_MONTH = r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_COUNT = r"(?P<count>\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19[7-9]|2[01]\d)\d)"

_PHRASES = [  # (name, pattern): tried in this order, each match taken out of the text
    ("iso", rf"(?:on\s+)?{_YEAR}-(?P<m>[01]?\d)-(?P<d>[0-3]?\d)"),
    ("date", rf"(?:on\s+)?(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+{_YEAR})?"),
    ("date", rf"(?:on\s+)?{_MONTH}\.?\s+{_DAY}\b(?:,?\s+{_YEAR})?"),
    ("month", rf"(?:in|during|since)\s+(?:early\s+|late\s+|mid\s+)?{_MONTH}\b(?:\s+(?:of\s+)?{_YEAR})?"),
    ("month", rf"{_MONTH}\s+{_YEAR}"),
    ("year", rf"(?:in|during)\s+{_YEAR}\b"),
    ("ago", rf"{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago"),
    ("today", r"(?:earlier\s+)?today|this\s+(?:morning|afternoon|evening)|tonight"),
    ("yesterday", r"yesterday(?:\s+(?:morning|afternoon|evening))?|last\s+night"),
    ("weekday", r"(?P<which>last|this\s+past|on|this)?\s*(?P<weekday>monday|tuesday|wednesday|thursday|"
                r"friday|saturday|sunday)s?\b"),
    ("last", r"(?P<which>last|this|past)\s+(?P<unit>week(?:end)?|month|year)"),
]
_QUESTION_CHARS = 2_000
_COMPILED = [(name, re.compile(rf"(?<![\w-]){pattern}(?![\w-])", re.IGNORECASE)) for name, pattern in _PHRASES]


@dataclass(frozen=True)
class Span:
    """A range of moments a question names: ``since`` up to, not including, ``before`` (Unix seconds)."""

    since: float
    before: float
    said: str  # the phrase as the question wrote it


def read(text: str, now: float) -> tuple[list[Span], str]:
    """The time phrases of ``text`` as ranges relative to ``now``, and the text without them.

    A text longer than a question (a pasted page) is read as words only."""
    if len(text) > _QUESTION_CHARS:
        return [], text
    today = dt.datetime.fromtimestamp(now).date()
    spans: list[Span] = []
    rest = text
    for name, pattern in _COMPILED:
        def take(found: re.Match) -> str:
            got = _range(name, found, today)
            if got is None:
                return found.group(0)
            first, last = got
            if last < dt.date(1970, 1, 2) or first > dt.date(2199, 12, 30):
                return found.group(0)
            spans.append(Span(_start(first), _start(last + dt.timedelta(days=1)), found.group(0).strip()))
            return " "
        rest = pattern.sub(take, rest)
    return spans, rest


def _start(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day).timestamp()


def _month(name: str) -> int:
    return _SHORT_MONTHS[name.lower()[:4] if name.lower().startswith("sept") else name.lower()[:3]]


def _last_date(month: int, day: int, today: dt.date, year: str | None) -> dt.date | None:
    """``month``/``day`` of ``year``, or the latest such date not after today."""
    try:
        if year:
            return dt.date(int(year), month + 1, day)
        got = dt.date(today.year, month + 1, day)
        return got if got <= today else dt.date(today.year - 1, month + 1, day)
    except ValueError:
        return None


def _month_range(year: int, month: int) -> tuple[dt.date, dt.date]:
    first = dt.date(year, month + 1, 1)
    following = dt.date(year + (month == 11), (month + 1) % 12 + 1, 1)
    return first, following - dt.timedelta(days=1)


def _range(name: str, found: re.Match, today: dt.date) -> tuple[dt.date, dt.date] | None:
    """The first and last day (both included) of what the phrase names, or None: not a time."""
    g = found.groupdict()
    if name == "iso":
        try:
            day = dt.date(int(g["year"]), int(g["m"]), int(g["d"]))
        except ValueError:
            return None
        return day, day
    if name == "date":
        day = _last_date(_month(g["month"]), int(g["day"]), today, g.get("year"))
        return None if day is None else (day, day)
    if name == "month":
        month = _month(g["month"])
        year = int(g["year"]) if g.get("year") else today.year - (month > today.month - 1)
        return _month_range(year, month)
    if name == "year":
        year = int(g["year"])
        return dt.date(year, 1, 1), dt.date(year, 12, 31)
    if name == "today":
        return today, today
    if name == "yesterday":
        day = today - dt.timedelta(days=1)
        return day, day
    if name == "ago":
        count = _NUMBERS.get(g["count"].lower()) if not g["count"].isdigit() else int(g["count"])
        unit = g["unit"].lower()
        if count is None:
            return None
        if unit == "day":  # "three days ago": that day, a day either side (people round)
            day = today - dt.timedelta(days=count)
            slack = dt.timedelta(days=0 if count <= 2 else 1)
            return day - slack, day + slack
        if unit == "week":
            middle = today - dt.timedelta(weeks=count)
            return middle - dt.timedelta(days=4), middle + dt.timedelta(days=3)
        if unit == "month":
            month = today.month - 1 - count
            return _month_range(today.year + month // 12, month % 12)
        return dt.date(today.year - count, 1, 1), dt.date(today.year - count, 12, 31)
    if name == "weekday":
        which = (g.get("which") or "").lower().split()
        weekday = _WEEKDAYS.index(g["weekday"].lower())
        back = (today.weekday() - weekday) % 7
        if not which:
            return None  # a bare "Tuesday" may be any Tuesday, or a plan: left a word
        if back == 0 and which[0] in ("last", "this"):
            back = 7 if which[0] == "last" else 0
        day = today - dt.timedelta(days=back)
        return day, day
    if name == "last":
        which, unit = g["which"].lower(), g["unit"].lower()
        if unit == "weekend":
            saturday = today - dt.timedelta(days=(today.weekday() - 5) % 7 or (7 if which == "last" else 0))
            return saturday, saturday + dt.timedelta(days=1)
        if unit == "week":
            monday = today - dt.timedelta(days=today.weekday())
            if which == "this":
                return monday, today
            if which == "past":
                return today - dt.timedelta(days=7), today
            return monday - dt.timedelta(days=7), monday - dt.timedelta(days=1)
        if unit == "month":
            if which == "this":
                return _month_range(today.year, today.month - 1)
            if which == "past":
                return today - dt.timedelta(days=31), today
            month = today.month - 2
            return _month_range(today.year + month // 12, month % 12)
        year = today.year - (which == "last")
        return dt.date(year, 1, 1), (dt.date(year, 12, 31) if which != "past" else today)
    return None
