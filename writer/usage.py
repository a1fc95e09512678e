"""What the writer's model calls cost: one fsynced line per call, totals that survive restarts, prices.

**The log.**  ``<memory folder>/usage.jsonl`` gets one JSON line per call,
written in one ``write`` and fsynced before :meth:`UsageLog.record` returns::

    {"time": 1798761600.123, "at": "2027-01-01T00:00:00.123Z", "provider": "openai",
     "flavour": "deepseek", "model": "deepseek-flash", "jobs": ["41+1", "42+1"],
     "cached": 3840, "uncached": 212, "cache_write": 0, "output": 96, "duration": 2.481,
     "outcome": "ok", "cost": 0.0000813}

(``error`` is added for failed calls.)  ``outcome`` is ``"ok"`` or what went
wrong: the writer's check results (``"too_long"``, ``"wrong_script"``,
``"invented"`` …) or a :class:`endless.llm.errors.ProviderError` kind
(``"rate_limit"``, ``"timeout"`` …).  Every line is a call, whatever its outcome.

**Totals across restarts.**  ``usage.totals.json`` is a small snapshot: the
totals and the cost per local day, and the byte offset in the log they
account for (with the last bytes before it, to notice a replaced or truncated
log).  Opening reads the snapshot and then only the log's tail after that
offset; the snapshot is rewritten (atomically) every ``snapshot_every`` lines
and on :meth:`UsageLog.close`.  Only when there is no usable snapshot (a first
open, a deleted snapshot, a replaced log) is the whole log read, in chunks,
once; a snapshot is written right after.  After each append the log is read
from the last accounted offset, so lines another process appended (a writer
lease handed over) are counted, never skipped.

**Prices.**  ``writer/prices.json`` (the table of ``notes/caching.md`` §9, with
its date and sources): per provider and model, per 1M tokens, input,
cached read, cache write, output.  :func:`price` finds a route's entry (exact
name, then a name followed by a snapshot suffix such as ``-20250929``),
applies DeepSeek's peak hours (UTC) and long-prompt prices; local servers cost
nothing; an unknown model costs 0 and says so once on stderr.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from endless.core.store import durable

LOG_NAME = "usage.jsonl"
SNAPSHOT_NAME = "usage.totals.json"
SNAPSHOT_VERSION = 1
CHECK_BYTES = 64
CHUNK = 1 << 20
_SNAPSHOT_SUFFIX = re.compile(r"^(?:[-@](?:\d{4}[\d-]*|latest)|@.+)$")


def _notice(message: str, level: int = logging.INFO) -> None:
    durable.log("writer", message, level)


# -- prices --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def price_table() -> dict:
    """``writer/prices.json``."""
    return json.loads(resources.files(__package__).joinpath("prices.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens for one call's route at one time; ``known`` False for a model not in the table."""

    provider: str
    model: str  # the table's name that matched ("" when unknown)
    input: float = 0.0
    cached: float = 0.0
    write: float = 0.0
    output: float = 0.0
    write_long: float = 0.0  # the long time-to-live's write price (Anthropic 1 h)
    peak: bool = False
    long: bool = False
    known: bool = True
    date: str = ""
    source: str = ""

    def cost(self, usage: Any) -> float:
        """USD for ``usage`` (a :class:`endless.llm.client.Usage` or anything with its four fields)."""
        long = _field(usage, "cache_write_long")
        return (_field(usage, "uncached") * self.input + _field(usage, "cached") * self.cached
                + (_field(usage, "cache_write") - long) * self.write + long * (self.write_long or self.write)
                + _field(usage, "output") * self.output) / 1_000_000


def _field(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, 0)
    return _int(value)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _route_fields(route: Any) -> tuple[str, str, str]:
    """(provider, flavour, model) of a Route, a mapping or a usage line."""
    if isinstance(route, Mapping):
        provider, flavour, model = route.get("provider"), route.get("flavour"), route.get("model")
    else:
        provider = getattr(route, "provider", None)
        flavour = getattr(route, "flavour", None)
        model = getattr(route, "model", None)
    provider = str(provider or "")
    return provider, str(flavour or ("anthropic" if provider == "anthropic" else "openai")), str(model or "")


def _price_provider(flavour: str, model: str) -> tuple[str, str]:
    """Which price list a route reads, and the model name to look up there."""
    name = model.strip().lower()
    if flavour == "openrouter" and "/" in name:  # "openai/gpt-6.2-sol": OpenRouter passes prices through
        vendor, name = name.split("/", 1)
        return vendor, name
    return flavour, name.rsplit("/", 1)[-1]


def find_price_entry(provider: str, model: str) -> tuple[dict, str] | None:
    """The table entry for a model, and the name that matched: exact, then the longest name followed by a
    snapshot suffix (``-20250929``, ``-0813``, ``-2025-04-14``, ``-latest``, ``@…``)."""
    entries = [e for e in price_table()["models"] if e["provider"] == provider]
    model = model.lower()
    for entry in entries:
        for name in entry["names"]:
            if name.lower() == model:
                return entry, name
    best: tuple[dict, str] | None = None
    for entry in entries:
        for name in entry["names"]:
            low = name.lower()
            if model.startswith(low) and _SNAPSHOT_SUFFIX.match(model[len(low):]):
                if best is None or len(low) > len(best[1]):
                    best = (entry, name)
    return best


def is_peak(provider: str, when: float) -> bool:
    """Whether ``when`` (Unix time) falls in the provider's peak hours (UTC), per ``prices.json``."""
    spec = price_table().get("peak_hours", {}).get(provider)
    if not spec:
        return False
    moment = _dt.datetime.fromtimestamp(when, tz=_dt.timezone.utc)
    if moment.weekday() not in spec["weekdays"]:
        return False
    hour = moment.hour + moment.minute / 60 + moment.second / 3600
    return any(start <= hour < end for start, end in spec["utc_hours"])


_unknown_noticed: set[tuple[str, str]] = set()


def price(route: Any, when: float | None = None, prompt_tokens: int | None = None) -> Price:
    """The prices for ``route`` (a Route, or a mapping with provider/flavour/model) at ``when`` (Unix time,
    default now), for a prompt of ``prompt_tokens`` tokens (for long-prompt prices)."""
    provider, flavour, model = _route_fields(route)
    table = price_table()
    if flavour in table.get("free_flavours", []):
        return Price(provider=flavour, model=model, date=table["date"], source="local server")
    list_name, name = _price_provider(flavour, model)
    found = find_price_entry(list_name, name)
    if found is None:
        key = (list_name, name)
        if key not in _unknown_noticed:
            _unknown_noticed.add(key)
            # Said in the log only (``endless doctor`` names it to the person): never into a chat.
            _notice(f"no price for {list_name} model {model!r} in writer/prices.json (prices of "
                    f"{table['date']}): its calls are counted at cost 0", logging.DEBUG)
        return Price(provider=list_name, model="", known=False, date=table["date"])
    entry, matched = found
    values: Mapping[str, Any] = entry
    peak = long = False
    if "peak" in entry and is_peak(list_name, time.time() if when is None else when):
        values, peak = entry["peak"], True
    if "long" in entry and prompt_tokens is not None and prompt_tokens > entry["long"]["above"]:
        values, long = entry["long"], True
    return Price(provider=list_name, model=matched, input=float(values.get("input", 0)),
                 cached=float(values.get("cached", 0)), write=float(values.get("write", 0)),
                 write_long=float(values.get("write_long", values.get("write", 0))),
                 output=float(values.get("output", 0)), peak=peak, long=long,
                 date=entry.get("date", table["date"]), source=entry.get("source", table["source"]))


def cost(route: Any, usage: Any, when: float | None = None) -> float:
    """USD for one call of ``route`` with ``usage`` at ``when``."""
    prompt = sum(_field(usage, f) for f in ("cached", "uncached", "cache_write"))  # the long part is inside
    return price(route, when, prompt).cost(usage)


# -- the log -------------------------------------------------------------------------------------


def local_day(when: float) -> str:
    """The local calendar day of a Unix time, ``YYYY-MM-DD`` (the spend cap's day)."""
    return time.strftime("%Y-%m-%d", time.localtime(when))


def _iso(when: float) -> str:
    moment = _dt.datetime.fromtimestamp(when, tz=_dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class _Totals:
    __slots__ = ("calls", "cached", "uncached", "cache_write", "output", "cost", "days", "skipped")

    def __init__(self) -> None:
        self.calls = self.cached = self.uncached = self.cache_write = self.output = 0
        self.cost = 0.0
        self.days: dict[str, float] = {}
        self.skipped = 0

    def add(self, line: Mapping[str, Any]) -> None:
        self.calls += 1
        self.cached += _int(line.get("cached"))
        self.uncached += _int(line.get("uncached"))
        self.cache_write += _int(line.get("cache_write"))
        self.output += _int(line.get("output"))
        spent = float(line.get("cost") or 0.0)
        self.cost += spent
        when = line.get("time")
        if spent and isinstance(when, (int, float)):
            day = local_day(float(when))
            self.days[day] = self.days.get(day, 0.0) + spent

    def to_json(self) -> dict:
        return {"calls": self.calls, "cached": self.cached, "uncached": self.uncached,
                "cache_write": self.cache_write, "output": self.output, "cost": self.cost,
                "days": self.days, "skipped": self.skipped}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "_Totals":
        totals = cls()
        for name in ("calls", "cached", "uncached", "cache_write", "output", "skipped"):
            setattr(totals, name, int(data[name]))
        totals.cost = float(data["cost"])
        totals.days = {str(k): float(v) for k, v in dict(data["days"]).items()}
        return totals


class UsageLog:
    """``<folder>/usage.jsonl``: one line per writer call, and the totals of all of them.

    ``snapshot_every``: lines between totals snapshots.  ``readonly``: never
    write (not even a snapshot), for readers such as ``endless memories``.
    ``sync=False`` skips fsync (benchmarks only).  ``clock``: Unix time for
    lines recorded without ``when`` (default ``time.time``).
    """

    def __init__(self, folder: str | Path, *, snapshot_every: int = 64, readonly: bool = False,
                 sync: bool = True, clock: Any = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOG_NAME
        self.snapshot_path = self.folder / SNAPSHOT_NAME
        self.snapshot_every = max(1, int(snapshot_every))
        self.readonly = readonly
        self.sync = sync
        self._clock = clock if clock is not None else time.time
        self._lock = threading.Lock()
        self._totals = _Totals()
        self._offset = 0  # the log's bytes accounted for in _totals (always at a line boundary)
        self._partial = False  # the log ends in a torn line (a crash mid-write)
        self._since_snapshot = 0
        self.opened_from = "empty"  # "snapshot", "scan" or "empty": how the totals were found
        self.read_bytes = 0  # log bytes read while opening
        self._open()

    # -- opening --

    def _open(self) -> None:
        if not self.path.exists():
            return
        snapshot = self._load_snapshot()
        if snapshot is not None:
            self._totals, self._offset = snapshot
            self.opened_from = "snapshot"
        else:
            self.opened_from = "scan"
        before = self._offset
        tail_lines = self._catch_up()
        self.read_bytes = self._offset - before
        if not self.readonly and (snapshot is None or tail_lines >= self.snapshot_every):
            self._write_snapshot()
        else:
            self._since_snapshot = tail_lines

    def _load_snapshot(self) -> tuple[_Totals, int] | None:
        try:
            data = orjson.loads(durable.read_all(self.snapshot_path))
            if data.get("version") != SNAPSHOT_VERSION or data.get("log") != LOG_NAME:
                return None
            offset = int(data["offset"])
            check = bytes.fromhex(data["check"])
            totals = _Totals.from_json(data["totals"])
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            _notice(f"{self.snapshot_path} is unreadable: reading the whole usage log once")
            return None
        if offset < 0 or offset > self.path.stat().st_size or len(check) > offset:
            _notice(f"{self.snapshot_path} does not match {self.path.name}: reading the whole usage log once")
            return None
        with durable.open_read(self.path) as handle:
            handle.seek(offset - len(check))
            if handle.read(len(check)) != check:
                _notice(f"{self.snapshot_path} does not match {self.path.name}: reading the whole usage log once")
                return None
        return totals, offset

    def _catch_up(self) -> int:
        """Add the complete lines after ``_offset`` to the totals; returns how many were read."""
        count = 0
        try:
            handle = durable.open_read(self.path)
        except FileNotFoundError:
            return 0
        with handle:
            handle.seek(self._offset)
            carry = b""
            position = self._offset
            while True:
                chunk = handle.read(CHUNK)
                if not chunk:
                    break
                data = carry + chunk
                cut = data.rfind(b"\n") + 1
                for _, raw in durable.iter_lines(data[:cut], position):
                    count += 1
                    self._account(raw)
                position += cut
                carry = data[cut:]
            self._offset = position
            self._partial = bool(carry)
        return count

    def _account(self, raw: bytes) -> None:
        try:
            line = orjson.loads(raw)
            if not isinstance(line, dict):
                raise ValueError("not an object")
        except (orjson.JSONDecodeError, ValueError):
            self._totals.skipped += 1
            return
        self._totals.add(line)

    def _write_snapshot(self) -> None:
        if self.readonly:
            return
        start = max(0, self._offset - CHECK_BYTES)
        with durable.open_read(self.path) as handle:
            handle.seek(start)
            check = handle.read(self._offset - start)
        durable.write_json(self.snapshot_path, {
            "version": SNAPSHOT_VERSION, "log": LOG_NAME, "offset": self._offset, "check": check.hex(),
            "totals": self._totals.to_json(), "written": time.time()}, self.sync)
        self._since_snapshot = 0

    # -- writing --

    def record(self, when: float | None, route: Any, jobs: Iterable[str] | str = (), usage: Any = None,
               duration: float = 0.0, outcome: str = "ok", *, cost: float | None = None,
               error: str | None = None) -> dict:
        """Append (and fsync) one call's line; returns it.

        ``when``: Unix time of the call (None: the log's clock); ``route``: a
        :class:`endless.llm.routes.Route` (or a mapping with provider/flavour/
        model); ``jobs``: the job names (``"41+1"``); ``usage``: the
        :class:`endless.llm.client.Usage`, None for a call that failed;
        ``outcome``: ``"ok"``, a check result or a provider error kind.
        ``cost`` defaults to the prices table's.
        """
        if self.readonly:
            raise PermissionError(f"{self.path} was opened read-only")
        if not isinstance(outcome, str) or not outcome:
            raise ValueError("outcome must be a non-empty string such as 'ok' or 'rate_limit'")
        provider, flavour, model = _route_fields(route)
        when = float(self._clock() if when is None else when)
        job_list = [jobs] if isinstance(jobs, str) else [str(j) for j in jobs]
        counts = {f: _field(usage, f) if usage is not None else 0
                  for f in ("cached", "uncached", "cache_write", "output")}
        if cost is None:
            cost = price(route, when, counts["cached"] + counts["uncached"] + counts["cache_write"]).cost(usage) \
                if usage is not None else 0.0
        line: dict[str, Any] = {"time": round(when, 3), "at": _iso(when), "provider": provider, "flavour": flavour,
                                "model": model, "jobs": job_list, **counts,
                                "duration": round(float(duration), 3), "outcome": outcome,
                                "cost": round(float(cost), 10)}
        if error:
            line["error"] = str(error)[:500]
        data = durable.dumps_line(line)
        with self._lock:
            durable.make_dir(self.folder)
            if self._partial:
                data = b"\n" + data  # end a torn last line (it is skipped) rather than glue onto it
            durable.append_lines(self.path, [data], self.sync)
            self._since_snapshot += self._catch_up()
            if self._since_snapshot >= self.snapshot_every:
                self._write_snapshot()
        return line

    def snapshot(self) -> None:
        """Write the totals snapshot now."""
        with self._lock:
            self._catch_up()
            self._write_snapshot()

    def close(self) -> None:
        if not self.readonly and self.path.exists():
            with self._lock:
                self._catch_up()
                if self._since_snapshot:
                    self._write_snapshot()

    def __enter__(self) -> "UsageLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading --

    def refresh(self) -> None:
        """Count lines other processes appended since this log was opened."""
        with self._lock:
            self._catch_up()

    def totals(self) -> dict:
        """``writerUsage`` of DESIGN §6: ``{calls, cacheRead, miss, output, cost}``; ``miss`` is the input
        not read from the cache (uncached + cache writes)."""
        with self._lock:
            t = self._totals
            return {"calls": t.calls, "cacheRead": t.cached, "miss": t.uncached + t.cache_write,
                    "output": t.output, "cost": round(t.cost, 6)}

    def details(self) -> dict:
        """Totals with cache writes apart, unreadable lines skipped, and cost per local day."""
        with self._lock:
            data = self._totals.to_json()
        data["days"] = dict(data["days"])
        return data

    def spent_on(self, day: str) -> float:
        with self._lock:
            return self._totals.days.get(day, 0.0)

    def spent_today(self, now: float | None = None) -> float:
        """USD spent on this memory's writer calls on the local day of ``now`` (default: now)."""
        return self.spent_on(local_day(float(self._clock() if now is None else now)))

    def lines(self) -> list[dict]:
        """Every readable line (reads the whole log: for tests and small tools)."""
        out = []
        try:
            data, _ = durable.read_complete(self.path, 0)
        except FileNotFoundError:
            return out
        for _, raw in durable.iter_lines(data, 0):
            try:
                out.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                continue
        return out
