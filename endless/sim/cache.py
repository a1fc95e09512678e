"""Prompt-cache models of four providers (``notes/caching.md`` §1–§3 and §8).

Every model implements :class:`~endless.sim.model.CacheModel`: one call per
request with the prompt's tokens, the token positions where content blocks end,
the marks (``"5m"``/``"1h"`` Anthropic ``cache_control``, ``"breakpoint"``
OpenAI explicit breakpoints), the partition key and three times on the
simulated clock (sent, first byte, done: whatever floats the caller passes).
It returns a :class:`~endless.sim.model.CacheUsage` and records what the
request wrote.

**Entries.**  A cache entry is ``(partition, n, digest of tokens[:n]) ->
[available_from, expires_at, ttl]``.  An entry is *alive* for a request sent at
``t`` when ``available_from <= t <= expires_at``.  Writing an entry that is
still alive keeps the earlier ``available_from`` and the later
``expires_at``; writing over an expired one replaces it.  Expired entries are
swept now and then, so memory follows the live working set.

**Cost.**  Digests are computed only at the positions a model can read or
write.  DeepSeek and OpenAI automatic use every unit (128 tokens), hashed as
a chain over whole units with Python's 64-bit bytes hash
(:func:`grid_digests`).  OpenAI breakpoints and Anthropic use marked positions
and block ends near marks, taken from one running BLAKE2b over the token
bytes, copied at each position (:func:`prefix_digests`).  Either way a
request costs one C pass over ``4·L`` bytes plus O(1) Python work per
position: O(L) with small constants.  Pass the tokens as an ``array`` of type
``TOKEN_TYPECODE`` (what :meth:`endless.sim.tokens.Tokenizer.encode_segments`
returns) to skip converting a list (0.4–0.9 ms for 50k tokens).  Measured
here for a 50,000-token prompt given as an array, best of repeated runs: DeepSeek
0.3–0.5 ms, OpenAI automatic 0.4–0.6 ms, OpenAI breakpoints (81 marks)
0.5–1.1 ms, Anthropic (3 marks, 500 blocks) 0.55–0.8 ms per request, the
range being machine load.  ``tests/test_sim_cache.py::test_cost_per_request_is_linear_and_small``
checks the bound and the linearity.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import threading
from array import array
from typing import Iterable, Sequence

from .model import CacheUsage
from .tokens import TOKEN_TYPECODE

Tokens = Sequence[int]

# -- prefix digests --------------------------------------------------------------------


def token_array(tokens: Tokens) -> array:
    """``tokens`` as an array of 4-byte ids (no copy when it already is one)."""
    if isinstance(tokens, array) and tokens.typecode == TOKEN_TYPECODE:
        return tokens
    return array(TOKEN_TYPECODE, tokens)


def prefix_digests(tokens: Tokens, positions: Iterable[int]) -> dict[int, bytes]:
    """``{n: digest of tokens[:n]}`` for each ``n`` in ``positions`` (0 ≤ n ≤ len).

    One running BLAKE2b over the tokens' bytes, copied at each position: O(L)
    in C plus O(1) Python work per position.
    """
    arr = token_array(tokens)
    size = arr.itemsize
    hasher = hashlib.blake2b(digest_size=16)
    out: dict[int, bytes] = {}
    previous = 0
    with memoryview(arr) as view, view.cast("B") as raw:
        for n in sorted(set(positions)):
            if n < 0 or n > len(arr):
                raise ValueError(f"prefix position {n} outside the prompt (0..{len(arr)})")
            if n > previous:
                hasher.update(raw[previous * size:n * size])
                previous = n
            out[n] = hasher.copy().digest()
    return out


def grid_digests(tokens: Tokens, unit: int) -> list[int]:
    """Digests of ``tokens[:unit·j]`` for ``j = 1 … len // unit``, as a list indexed ``j − 1``.

    A chain over whole units, ``d_j = hash((d_{j−1}, bytes of unit j))``, with
    Python's 64-bit SipHash of bytes: about 2.5× cheaper than
    :func:`prefix_digests` for every-unit positions.  It is a function of the
    prefix only because the units always start at 0; the digests are
    per-process (hash randomisation) and live only in this process's cache.
    A false match needs a 64-bit collision at the same length and key.
    """
    arr = token_array(tokens)
    width = unit * arr.itemsize
    count = len(arr) // unit
    raw = arr.tobytes()
    out: list[int] = []
    append = out.append
    digest = unit
    for start in range(0, count * width, width):
        digest = hash((digest, raw[start:start + width]))
        append(digest)
    return out


# -- the entry store -------------------------------------------------------------------


class _Store:
    """Entries ``key -> [available_from, expires_at, ttl]`` with a lazy sweep of expired ones."""

    SWEEP_MIN = 8192  # no sweep below this many entries

    def __init__(self) -> None:
        self.entries: dict[tuple, list[float]] = {}
        self._sweep_at = self.SWEEP_MIN

    def __len__(self) -> int:
        return len(self.entries)

    def alive(self, key: tuple, t: float) -> list[float] | None:
        entry = self.entries.get(key)
        if entry is not None and entry[0] <= t <= entry[1]:
            return entry
        return None

    @staticmethod
    def refresh(entry: list[float], t: float) -> None:
        entry[1] = max(entry[1], t + entry[2])

    def write(self, key: tuple, available_from: float, ttl: float, now: float) -> None:
        expires_at = available_from + ttl
        entry = self.entries.get(key)
        if entry is None or entry[1] < now:
            self.entries[key] = [available_from, expires_at, ttl]
        else:
            entry[0] = min(entry[0], available_from)
            entry[1] = max(entry[1], expires_at)
            entry[2] = max(entry[2], ttl)

    def write_many(self, keys: Iterable[tuple], available_from: float, ttl: float,
                   now: float) -> None:
        """:meth:`write` for many keys with the same times (the hot loop, inlined)."""
        entries = self.entries
        get = entries.get
        expires_at = available_from + ttl
        for key in keys:
            entry = get(key)
            if entry is None or entry[1] < now:
                entries[key] = [available_from, expires_at, ttl]
            else:
                if available_from < entry[0]:
                    entry[0] = available_from
                if expires_at > entry[1]:
                    entry[1] = expires_at
                if ttl > entry[2]:
                    entry[2] = ttl

    def sweep(self, now: float) -> None:
        """Drop entries expired before ``now``, when the store has doubled since the last sweep."""
        if len(self.entries) < self._sweep_at:
            return
        self.entries = {k: e for k, e in self.entries.items() if e[1] >= now}
        self._sweep_at = max(self.SWEEP_MIN, 2 * len(self.entries))


class _Base:
    name = ""

    def __init__(self) -> None:
        self._store = _Store()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many entries are stored (alive or not yet swept)."""
        return len(self._store)

    def clear(self) -> None:
        with self._lock:
            self._store = _Store()


# -- DeepSeek --------------------------------------------------------------------------


class DeepSeekCache(_Base):
    """DeepSeek's disk KV cache (§1, §8 "DeepSeekSim", measured mode).

    Knobs:

    * ``unit=128`` — tokens per cache unit; hits are whole units.
    * ``withhold_last=True`` — the last full unit of a request is not stored
      (measured: ``cached = 128·max(0, floor(L/128) − 1)`` for a repeat).
    * ``ttl=86400.0`` — idle lifetime in seconds, refreshed by each read.
    * ``miss_probability=0.0`` and ``seed=0`` — best-effort misses: a would-be
      hit is dropped with this probability (seeded RNG).

    Lookup: the longest ``n = unit·j ≤ L`` whose entry is alive at ``sent_at``.
    Writes happen when the request *finished*: units ``unit·j`` for
    ``j = 1 … floor(L/unit) − 1`` become readable at ``done_at``, so a request
    sent before an earlier one with the same prefix finished gets no hit.
    Entries are partitioned by ``key`` (DeepSeek's ``user_id``).  Only prompt
    tokens are stored (the output is not part of ``tokens``).  Marks and block
    ends are ignored.
    """

    name = "deepseek"

    def __init__(self, *, unit: int = 128, withhold_last: bool = True, ttl: float = 86_400.0,
                 miss_probability: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        if unit <= 0:
            raise ValueError("unit must be positive")
        self.unit = unit
        self.withhold_last = withhold_last
        self.ttl = ttl
        self.miss_probability = miss_probability
        self._rng = random.Random(seed)

    def request(self, tokens: Tokens, block_ends: list[int], marks: dict[int, str],
                key: str | None, sent_at: float, first_byte_at: float, done_at: float,
                failed: bool = False) -> CacheUsage:
        length = len(tokens)
        unit = self.unit
        digests = grid_digests(tokens, unit)  # digests[j - 1] is the prefix of j units
        with self._lock:
            store = self._store
            read = 0
            for j in range(len(digests), 0, -1):
                entry = store.alive((key, j * unit, digests[j - 1]), sent_at)
                if entry is not None:
                    if self.miss_probability and self._rng.random() < self.miss_probability:
                        break
                    store.refresh(entry, sent_at)
                    read = j * unit
                    break
            if not failed:
                stored = len(digests) - 1 if self.withhold_last else len(digests)
                store.write_many([(key, j * unit, digests[j - 1]) for j in range(1, stored + 1)],
                                 done_at, self.ttl, sent_at)
                store.sweep(sent_at)
        return CacheUsage(input=length, read=read)


# -- OpenAI before GPT-5.6 -------------------------------------------------------------


class OpenAIAutoCache(_Base):
    """OpenAI's automatic prompt cache, models before GPT-5.6 (§2, §8 "OpenAIAutoSim").

    Knobs:

    * ``min_tokens=1024`` — no hit (and no entry) below this many tokens.
    * ``step=128`` — hits grow in steps of this many tokens.
    * ``ttl=600.0`` — idle lifetime in seconds, refreshed by each read
      (in-memory retention; pass 86400 for the extended ``24h`` retention).
    * ``route_tokens=256`` — requests go to a machine chosen by the digest of
      their first ``route_tokens`` tokens together with ``prompt_cache_key``
      (``key``); each machine has its own cache.
    * ``overflow_rpm=None`` — off by default.  When set (OpenAI: about 15),
      a route that got more than this many requests in the last
      ``overflow_window=60.0`` seconds spills to further machines:
      ``machine = floor((requests in the window, this one included, − 1) / overflow_rpm)``;
      each new machine starts cold.
    * ``miss_probability=0.0`` and ``seed=0`` — best-effort misses (seeded).

    Lookup: ``read = max n``, ``n ≡ 0 (mod step)``, ``min_tokens ≤ n ≤
    step·floor((L−1)/step)`` (at least one token is always computed), whose
    entry on this machine is alive at ``sent_at``.  Writes: every
    ``n = step·j``, ``min_tokens ≤ n ≤ L``, readable from ``first_byte_at``.
    No write fee, so ``CacheUsage.write`` is 0.  Marks are ignored.
    """

    name = "openai-auto"

    def __init__(self, *, min_tokens: int = 1024, step: int = 128, ttl: float = 600.0,
                 route_tokens: int = 256, overflow_rpm: int | None = None,
                 overflow_window: float = 60.0, miss_probability: float = 0.0,
                 seed: int = 0) -> None:
        super().__init__()
        if step <= 0:
            raise ValueError("step must be positive")
        self.min_tokens = min_tokens
        self.step = step
        self.ttl = ttl
        self.route_tokens = route_tokens
        self.overflow_rpm = overflow_rpm
        self.overflow_window = overflow_window
        self.miss_probability = miss_probability
        self._rng = random.Random(seed)
        self._route_times: dict[tuple, list[float]] = {}

    def _machine(self, route: tuple, sent_at: float) -> tuple:
        if not self.overflow_rpm:
            return route + (0,)
        times = self._route_times.setdefault(route, [])
        bisect.insort(times, sent_at)
        start = sent_at - self.overflow_window
        # Drop what no later request can count (requests arrive in about send order).
        cut = bisect.bisect_right(times, start - self.overflow_window)
        if cut:
            del times[:cut]
        recent = bisect.bisect_right(times, sent_at) - bisect.bisect_right(times, start)
        return route + ((recent - 1) // self.overflow_rpm,)

    def request(self, tokens: Tokens, block_ends: list[int], marks: dict[int, str],
                key: str | None, sent_at: float, first_byte_at: float, done_at: float,
                failed: bool = False) -> CacheUsage:
        length = len(tokens)
        step = self.step
        digests = grid_digests(tokens, step)  # digests[j - 1] is the prefix of j steps
        first = max(1, -(-self.min_tokens // step))  # the first j with step·j ≥ min_tokens
        top = len(digests)
        readable = (length - 1) // step if length else 0  # the L − 1 cap
        route_at = min(self.route_tokens, length)
        if route_at and route_at % step == 0:
            route = digests[route_at // step - 1]
        else:
            route = prefix_digests(tokens, [route_at])[route_at]
        with self._lock:
            store = self._store
            machine = self._machine((route, key), sent_at)
            read = 0
            for j in range(min(top, readable), first - 1, -1):
                entry = store.alive((machine, j * step, digests[j - 1]), sent_at)
                if entry is not None:
                    if self.miss_probability and self._rng.random() < self.miss_probability:
                        break
                    store.refresh(entry, sent_at)
                    read = j * step
                    break
            if not failed:
                store.write_many([(machine, j * step, digests[j - 1]) for j in range(first, top + 1)],
                                 first_byte_at, self.ttl, sent_at)
                store.sweep(sent_at)
        return CacheUsage(input=length, read=read)


# -- OpenAI GPT-5.6 and later ----------------------------------------------------------


class OpenAIBreakpointCache(_Base):
    """OpenAI's breakpoint cache, GPT-5.6 and later (§2, §8 "OpenAIBreakpointSim").

    Candidate positions are the ``"breakpoint"`` marks of the request (other
    mark kinds are ignored).  The wire layer marks the implicit breakpoint
    (the latest user or tool message) itself in implicit mode; in explicit
    mode it marks only the client's breakpoints.  Either way the model sees
    "the latest ``max_writes`` marks are written".

    Knobs:

    * ``min_tokens=1024`` — positions below this are neither read nor written.
    * ``ttl=1800.0`` — lifetime in seconds (``30m``; ``12h`` is 43200),
      refreshed by each read.
    * ``max_read_breakpoints=80`` — only the latest this many marks are read.
    * ``max_writes=4`` — the latest this many marks are written (those beyond
      the read).
    * ``no_key_hit_rate=0.5`` and ``seed=0`` — without ``prompt_cache_key``
      (``key is None``) a would-be hit is served with this probability only
      (seeded RNG); otherwise the request reads nothing.

    Lookup: ``read = max n`` among the candidates, ``n ≥ min_tokens``, whose
    entry ``(key, n, digest)`` is alive at ``sent_at``: an exact match at the
    marked position, no rounding, and no fallback to an unmarked prefix even
    if an earlier request wrote it.  Writes at the latest ``max_writes`` marks
    ``> read`` and ``≥ min_tokens``, readable from ``first_byte_at``;
    ``CacheUsage.write = max(written) − read`` (billed at 1.25× input).
    """

    name = "openai-breakpoints"

    def __init__(self, *, min_tokens: int = 1024, ttl: float = 1800.0,
                 max_read_breakpoints: int = 80, max_writes: int = 4,
                 no_key_hit_rate: float = 0.5, seed: int = 0) -> None:
        super().__init__()
        self.min_tokens = min_tokens
        self.ttl = ttl
        self.max_read_breakpoints = max_read_breakpoints
        self.max_writes = max_writes
        self.no_key_hit_rate = no_key_hit_rate
        self._rng = random.Random(seed)

    def request(self, tokens: Tokens, block_ends: list[int], marks: dict[int, str],
                key: str | None, sent_at: float, first_byte_at: float, done_at: float,
                failed: bool = False) -> CacheUsage:
        length = len(tokens)
        candidates = sorted(n for n, kind in marks.items() if kind == "breakpoint")
        if candidates and (candidates[0] < 0 or candidates[-1] > length):
            raise ValueError(f"breakpoint positions {candidates} outside the prompt (0..{length})")
        readable = [n for n in candidates[-self.max_read_breakpoints:] if n >= self.min_tokens] \
            if self.max_read_breakpoints > 0 else []
        writable = [n for n in candidates[-self.max_writes:] if n >= self.min_tokens] \
            if self.max_writes > 0 else []
        digests = prefix_digests(tokens, readable + writable)
        with self._lock:
            store = self._store
            read = 0
            hit = None
            for n in reversed(readable):
                entry = store.alive((key, n, digests[n]), sent_at)
                if entry is not None:
                    read, hit = n, entry
                    break
            if hit is not None and key is None and self._rng.random() >= self.no_key_hit_rate:
                read, hit = 0, None
            if hit is not None:
                store.refresh(hit, sent_at)
            written = [n for n in writable if n > read]
            if failed:
                return CacheUsage(input=length, read=read)
            for n in written:
                store.write((key, n, digests[n]), first_byte_at, self.ttl, sent_at)
            store.sweep(sent_at)
        return CacheUsage(input=length, read=read, write=(max(written) - read) if written else 0)


# -- Anthropic -------------------------------------------------------------------------


class AnthropicCache(_Base):
    """Anthropic's prompt cache (§3, §8 "AnthropicSim").

    Marks are the ``cache_control`` breakpoints: ``"5m"`` or ``"1h"`` (any
    other kind raises ``ValueError``).  At most ``max_marks`` (4) per request;
    more raises ``ValueError`` (the wire layer reports it as Anthropic's 400).
    ``"1h"`` marks must all come before ``"5m"`` marks (also a ``ValueError``).

    Knobs:

    * ``min_tokens=1024`` — the model's minimum cacheable prompt (512 for
      the 5.x models, 2,048 or 4,096 for some older ones, see §3).  No entry
      is written at a mark below it; if the last mark is below it the request
      reads and writes nothing.
    * ``lookback_blocks=20`` — for each mark, the block ends searched for an
      entry, counting the mark itself as the first.
    * ``max_marks=4``.
    * ``ttl_5m=300.0``, ``ttl_1h=3600.0`` — lifetimes, refreshed by each read.

    Block ends are ``block_ends`` plus the mark positions.  Lookup: for each
    mark, the ``lookback_blocks`` block ends up to and including it are
    checked from the latest back; ``A`` is the longest alive entry found over
    all marks.  Writes: an entry at every mark ``> A`` (and ``≥ min_tokens``),
    readable from ``first_byte_at``, with its mark's lifetime.  Usage, with
    ``C`` the last mark and ``B`` the last ``"1h"`` mark beyond ``A`` and
    ``≥ min_tokens`` (or ``A``): ``read = A``, ``write = C − A`` of which ``write_1h = B − A``,
    ``uncached = L − C`` (Anthropic's ``input_tokens``).  Entries are
    partitioned by ``key`` (the workspace).
    """

    name = "anthropic"
    KINDS = ("5m", "1h")

    def __init__(self, *, min_tokens: int = 1024, lookback_blocks: int = 20, max_marks: int = 4,
                 ttl_5m: float = 300.0, ttl_1h: float = 3600.0) -> None:
        super().__init__()
        self.min_tokens = min_tokens
        self.lookback_blocks = lookback_blocks
        self.max_marks = max_marks
        self.ttl = {"5m": ttl_5m, "1h": ttl_1h}

    def check_marks(self, marks: dict[int, str], length: int) -> list[tuple[int, str]]:
        """The marks in order, or ``ValueError`` for what Anthropic rejects."""
        ordered = sorted(marks.items())
        if len(ordered) > self.max_marks:
            raise ValueError(
                f"A maximum of {self.max_marks} blocks with cache_control may be provided. "
                f"Found {len(ordered)}.")
        seen_5m = False
        for n, kind in ordered:
            if kind not in self.KINDS:
                raise ValueError(f"cache_control mark {kind!r} at token {n}: expected '5m' or '1h'")
            if n < 0 or n > length:
                raise ValueError(f"cache_control mark at token {n} outside the prompt (0..{length})")
            if kind == "5m":
                seen_5m = True
            elif seen_5m:
                raise ValueError("a cache_control block with ttl '1h' must not come after one with "
                                 "ttl '5m' (longer TTLs must precede shorter ones)")
        return ordered

    def request(self, tokens: Tokens, block_ends: list[int], marks: dict[int, str],
                key: str | None, sent_at: float, first_byte_at: float, done_at: float,
                failed: bool = False) -> CacheUsage:
        length = len(tokens)
        ordered = self.check_marks(marks, length)
        if not ordered or ordered[-1][0] < self.min_tokens:
            return CacheUsage(input=length, read=0)
        blocks = sorted({n for n in block_ends if 0 < n <= length} | {n for n, _ in ordered if n > 0})
        windows: list[list[int]] = []
        for n, _ in reversed(ordered):
            if n <= 0:
                continue
            i = bisect.bisect_left(blocks, n)
            windows.append(blocks[max(0, i + 1 - self.lookback_blocks):i + 1])
        writable = [n for n, _ in ordered if n >= self.min_tokens]
        digests = prefix_digests(tokens, [n for w in windows for n in w] + writable)
        last = ordered[-1][0]
        with self._lock:
            store = self._store
            read = 0
            hit = None
            for window in windows:  # from the last mark back
                for n in reversed(window):
                    if n <= read:
                        break
                    entry = store.alive((key, n, digests[n]), sent_at)
                    if entry is not None:
                        read, hit = n, entry
                        break
            if hit is not None:
                store.refresh(hit, sent_at)
            if failed:
                return CacheUsage(input=length, read=read)
            for n, kind in ordered:
                if n > read and n >= self.min_tokens:
                    store.write((key, n, digests[n]), first_byte_at, self.ttl[kind], sent_at)
            store.sweep(sent_at)
        hour = max((n for n, kind in ordered if kind == "1h" and n > read and n >= self.min_tokens),
                   default=read)
        return CacheUsage(input=length, read=read, write=last - read, write_1h=hour - read)


# -- factory ---------------------------------------------------------------------------

MODELS: dict[str, type] = {
    "deepseek": DeepSeekCache,
    "openai-auto": OpenAIAutoCache,
    "openai-breakpoints": OpenAIBreakpointCache,
    "anthropic": AnthropicCache,
}


def make_cache(name: str, **knobs):
    """A cache model by name (``deepseek``, ``openai-auto``, ``openai-breakpoints``, ``anthropic``)."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown cache model {name!r}; choose one of {', '.join(MODELS)}") from None
    return cls(**knobs)
