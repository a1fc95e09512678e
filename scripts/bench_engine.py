#!/usr/bin/env python
"""Engine benchmark: open, commit, zoom and search over memories of 10k, 100k and 1M messages.

Builds each memory in a temporary folder with a seeded generator (texts mostly
50-500 bytes, about 2% between 2 and 30 KB, turns of 2-3 messages, a few
titled sessions, a marker word in exactly one old message and one in none),
then measures each size in fresh processes:

* open: ``Memory.open`` in a new Python process, median of 3;
* commit of a 3-message turn with and without fsync, median of 50, with a
  writer keeping up between commits (untimed ``store_lines``), and 50 more
  commits in a row with no writer;
* ``zoom(id, 1)`` on random ids and ``zoom`` of merged lines, median of 200;
* literal ``recall_search`` for a hit and a miss, median of 5;
* a pattern search (it stops at 2 s), median of 3;
* peak RSS of the measuring process (``VmHWM``: a spawned child's
  ``ru_maxrss`` starts at its parent's RSS on Linux).

Fixtures are built through the bulk path: ``commit_turns`` of ``--batch``
turns a call with one fsync of the log per batch, then every line those
messages need in one ``Memory.store_lines`` call (one fsync of the tree).
Storing ~a million lines one ``store_line`` at a time would take longer than
the run may, so only the last ``--tail`` messages are committed in small
batches with every line stored through ``Memory.store_line``, as a live
writer would; that rate is measured and printed.  The builder opens the
memory afresh every ``--reopen-every`` batches, because a long-lived
``Memory`` slows down once its line-size cache is full (see the report).

Logs go to stderr, the tables to stdout.

    .venv/bin/python scripts/bench_engine.py --sizes 10000,100000
    .venv/bin/python scripts/bench_engine.py --keep /tmp/bench   # 10k, 100k, 1M
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from endless.core.store.keys import Key  # noqa: E402
from endless.core.store.messages import Message, render  # noqa: E402
from endless.core.settings import Settings  # noqa: E402
from endless.core.store.turns import TurnRecord  # noqa: E402

KEY = Key("bench", "/bench/engine-workspace")
HIT_WORD = "qz7hitmark"  # in exactly one old message
MISS_WORD = "qz9missmark"  # in no message
PATTERN = "/rare[0-9]+x/"  # matches a handful of old messages only: the scan runs to its limit
SEED = 20240611
BYTES_PER_MESSAGE = 1500  # disk estimate per message (log + tree + indexes), generous


def say(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def bench_settings(root: Path) -> Settings:
    return Settings(home=str(root))


# -- the generator ---------------------------------------------------------------------

COMMON = """the be to of and a in that have I it for not on with he as you do at this but his by
from they we say her she or an will my one all would there their what so up out if about who get
which go me when make can like time no just him know take people into year your good some could
them see other than then now look only come its over think also back after use two how our work
first well way even new want because any these give day most us is was are were been has had did
said made found thing still should here where why again each between never same another while
last might great old both before through down those feel such world long little very right
""".split()

TECH = """function commit branch merge test pytest fixture async await request response token
cache prompt model provider schema index offset buffer parser encoder decoder thread process lock
lease journal view tree node summary search pattern regex query config setting deploy server
client socket header payload retry timeout latency throughput benchmark profile memory disk fsync
rename folder file path module package import export class method argument return value error
exception traceback stack frame loop queue worker pool batch stream chunk line byte string integer
float list dict tuple set array slice hash key session title turn message reply trace zoom date
recall writer ceiling floor sawtooth sibling parent level budget window context gateway telegram
discord terminal workspace harness plugin endpoint database migration rollback snapshot container
""".split()

ACCENTED = "café naïve résumé façade jalapeño über déjà São Zürich Ångström".split()
SYLLABLES = ("ka lo mi ne ru ta shi po ve da gri fen tor mal qui sen bor lin cas pe tro mun "
             "del fa ri zo ben kel wur sta pli dor nex vol ith").split()


class Generator:
    """Deterministic text: Zipf-weighted words from common, technical and made-up vocabularies."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.rng = random.Random(seed + 1)
        self.tree_rng = random.Random(seed + 2)
        made_up = set()
        while len(made_up) < 4000:
            made_up.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
        rest = TECH + sorted(made_up) + ACCENTED
        rng.shuffle(rest)  # technical, made-up and accented words share the long tail
        vocab = COMMON + rest
        weights = [1.0 / (rank + 8) ** 1.05 for rank in range(len(vocab))]
        cum, total = [], 0.0
        for w in weights:
            total += w
            cum.append(total)
        self.sentences: list[str] = []
        for _ in range(20_000):
            words = rng.choices(vocab, cum_weights=cum, k=rng.randint(4, 18))
            for k in range(len(words)):
                r = rng.random()
                if r < 0.04:
                    words[k] = str(rng.randint(0, 99_999))
                elif r < 0.06:
                    words[k] = f"{rng.choice(TECH)}_{rng.randint(1, 999)}"
                elif r < 0.07:
                    words[k] = f"src/{rng.choice(TECH)}/{rng.choice(sorted(made_up))}.py"
            sentence = " ".join(words)
            self.sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(".....?!"))
        self.steps = [f"did: {rng.choice(['run', 'read', 'edit', 'grep', 'open'])} "
                      f"{rng.choice(TECH)}_{rng.randint(1, 99)}" for _ in range(500)]

    def size(self) -> int:
        r = self.rng.random()
        if r < 0.02:
            return self.rng.randint(2_000, 30_000)
        return 50 + int(450 * self.rng.random() ** 1.3)

    def text(self, size: int, sep: str = " ") -> str:
        rng, pool, parts, n = self.rng, self.sentences, [], 0
        while n < size:
            s = pool[rng.randrange(len(pool))]
            parts.append(s)
            n += len(s) + 1
        out = sep.join(parts)
        if len(out) > size:
            cut = out.rfind(" ", 0, size)
            out = out[:cut if cut > size // 2 else size]
        return out

    def trace(self, size: int) -> str:
        lines, n = [], 0
        while n < size:
            step = self.steps[self.rng.randrange(len(self.steps))]
            body = self.text(self.rng.randint(30, max(60, size // 4)), "\n" if size > 2000 else " ")
            lines.extend((step, f"result: {body}"))
            n += len(step) + len(body) + 10
            if self.rng.random() < 0.3:
                lines.append("said: " + self.text(self.rng.randint(30, 120)))
        out = "\n".join(lines)
        return out[:size] if len(out) > size else out

    def summary(self) -> str:
        """A written line: 380-510 bytes (what a writer call would store)."""
        rng, pool = self.tree_rng, self.sentences
        target = rng.randint(380, 510)
        parts, n = [], 0
        while n < target:
            s = pool[rng.randrange(len(pool))]
            parts.append(s)
            n += len(s) + 1
        raw = " ".join(parts).encode("utf-8")[:target]
        return raw.decode("utf-8", "ignore").rstrip()


SESSIONS = [("chat-setup", "Setting up the project"), ("chat-bugs", "Hunting the flaky test"),
            ("chat-design", "Design of the storage layer"), ("chat-release", "Release checklist"),
            ("chat-ideas", "Ideas for the next version"), ("chat-perf", "Why opening is slow")]


class TurnStream:
    """Turns of 2-3 messages (user, reply, sometimes a trace) in a few titled sessions."""

    def __init__(self, gen: Generator, total: int) -> None:
        self.gen, self.total = gen, total
        self.next_id = 0
        self.at = 1_672_531_200.0  # 2023-01-01
        self.session = SESSIONS[0]
        self.left_in_session = 50
        self.hit_at = max(1, total // 20)
        self.pattern_at = {max(0, total // 100): 17, max(0, total // 50): 4242, max(0, total // 25): 9}

    def turn(self) -> TurnRecord:
        gen, rng = self.gen, self.gen.rng
        if self.left_in_session <= 0:
            self.session = SESSIONS[rng.randrange(len(SESSIONS))]
            self.left_in_session = rng.randint(20, 400)
        self.left_in_session -= 1
        kinds = ["user", "trace", "reply"] if rng.random() < 0.4 else ["user", "reply"]
        kinds = kinds[:max(1, min(len(kinds), self.total - self.next_id))]
        messages = []
        for kind in kinds:
            size = gen.size()
            text = gen.trace(size) if kind == "trace" else gen.text(size)
            mid = self.next_id
            if mid == self.hit_at:
                text = f"{text[:40]} {HIT_WORD} {text[40:]}"
            if mid in self.pattern_at:
                text = f"{text} rare{self.pattern_at[mid]}x"
            self.at += rng.expovariate(1 / 90.0)
            messages.append(Message(kind, text, self.at))
            self.next_id += 1
        self.at += rng.expovariate(1 / 900.0)
        return TurnRecord(self.session[0], self.session[1], messages)

    def turns(self, upto: int) -> list[TurnRecord]:
        out = []
        while self.next_id < upto:
            out.append(self.turn())
        return out


# -- building a fixture ------------------------------------------------------------------

class TreeWalk:
    """Every line a fully caught-up writer would have stored, in build order.

    Walks messages in order like a binary counter: a message's line, then each
    parent whose halves both exist.  A line whose halves joined by a newline
    fit the budget is free (the engine stores it itself); others get a
    generated summary.
    """

    def __init__(self, gen: Generator, settings: Settings) -> None:
        self.gen, self.settings = gen, settings
        self.pending: dict[int, tuple[int, str]] = {}  # level -> (index, text) of a lone left half

    def source(self, m: Message) -> str:
        return render(m.kind, m.text, self.settings, self.settings.agent_name)

    def nodes(self, mid: int, m: Message):
        """Yield ``(level, index, text, src, free)`` for message ``mid`` and the parents it completes."""
        budget = self.settings.line_budget
        source = self.source(m)
        src = len(source.encode("utf-8"))
        free = src <= budget
        text = source if free else self.gen.summary()
        yield 0, mid, text, src, free
        level, index = 0, mid
        while index & 1:
            left_index, left_text = self.pending.pop(level)
            assert left_index == index - 1
            joined = f"{left_text}\n{text}"
            free = len(joined.encode("utf-8")) <= budget
            text = joined if free else self.gen.summary()
            level, index = level + 1, index >> 1
            yield level, index, text, None, free
        self.pending[level] = (index, text)


def build(folder: Path, size: int, seed: int, batch_turns: int, tail: int, tail_batch: int,
          reopen_every: int) -> dict:
    from endless.core.memory import Memory

    settings = bench_settings(folder)
    gen = Generator(seed)
    stream = TurnStream(gen, size)
    walk = TreeWalk(gen, settings)
    stats = {"size": size, "bulk_commit_s": 0.0, "bulk_tree_s": 0.0, "tail_commit_s": 0.0,
             "store_line_s": 0.0, "store_line_calls": 0, "bulk_lines": 0, "free_lines": 0, "gen_s": 0.0,
             "reopen_s": 0.0, "reopens": 0, "batch_rates": []}
    t_start = time.perf_counter()
    memory = Memory.open(KEY, settings=settings, root=folder)
    bulk_upto = max(0, size - tail)
    batches = 0

    def reopen() -> None:
        # A fresh Memory every few batches: its size cache evicts in O(n) once full
        # (see the report), which would make one long-lived builder quadratic.
        nonlocal memory
        t0 = time.perf_counter()
        memory.close()
        memory = Memory.open(KEY, settings=settings, root=folder)
        stats["reopen_s"] += time.perf_counter() - t0
        stats["reopens"] += 1

    try:
        # Bulk part: 2,000 turns per commit_turns call, one fsync per batch; tree lines appended in one write.
        while stream.next_id < bulk_upto:
            if reopen_every and batches and batches % reopen_every == 0:
                reopen()
            batches += 1
            t_batch = time.perf_counter()
            before = stream.next_id
            turns, first = _take_turns(stream, bulk_upto, batch_turns, stats)
            t0 = time.perf_counter()
            memory.commit_turns(turns, sync=False)
            _fsync(memory.log.path)
            stats["bulk_commit_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            lines = []
            mid = first
            for turn in turns:
                for m in turn.messages:
                    for level, index, text, src, free in walk.nodes(mid, m):
                        if memory.is_built(level, index):
                            stats["free_lines"] += 1
                        else:
                            lines.append((level, index, text))
                    mid += 1
            memory.store_lines(lines, sync=False)
            _fsync(memory.tree.path)
            stats["bulk_tree_s"] += time.perf_counter() - t0
            stats["bulk_lines"] += len(lines)
            stats["batch_rates"].append((stream.next_id - before) / (time.perf_counter() - t_batch))
            say(f"  {size:,}: committed {stream.next_id:,} messages "
                f"({time.perf_counter() - t_start:.0f} s, {stats['batch_rates'][-1]:,.0f} messages/s)")
        if reopen_every and batches:
            reopen()
        # Tail: small commits, every line stored through store_line, as a live writer would.
        while stream.next_id < size:
            turns, first = _take_turns(stream, size, tail_batch, stats)
            t0 = time.perf_counter()
            memory.commit_turns(turns, sync=False)
            _fsync(memory.log.path)
            stats["tail_commit_s"] += time.perf_counter() - t0
            mid = first
            for turn in turns:
                for m in turn.messages:
                    for level, index, text, src, free in walk.nodes(mid, m):
                        if memory.is_built(level, index):
                            stats["free_lines"] += 1
                            continue
                        t1 = time.perf_counter()
                        memory.store_line(level, index, text, sync=False)
                        stats["store_line_s"] += time.perf_counter() - t1
                        stats["store_line_calls"] += 1
                    mid += 1
            if stream.next_id // 5000 != first // 5000 or stream.next_id >= size:
                _fsync(memory.tree.path)
                say(f"  {size:,}: tail at {stream.next_id:,} messages, "
                    f"{stats['store_line_calls']:,} store_line calls in {stats['store_line_s']:.1f} s")
        _fsync(memory.tree.path)
        stats["total"] = memory.total
        stats["turns"] = memory.turns
        stats["view_parts"] = len(memory.views.chat.parts)
        stats["view_bytes"] = memory.views.size()
    finally:
        memory.close()
    stats["build_s"] = time.perf_counter() - t_start
    stats["log_bytes"] = memory.log.path.stat().st_size
    stats["tree_bytes"] = memory.tree.path.stat().st_size
    stats["folder"] = str(memory.folder)
    return stats


def _take_turns(stream, upto: int, count: int, stats: dict) -> tuple[list, int]:
    """Up to ``count`` generated turns ending at or before message ``upto``, and their first id."""
    t0 = time.perf_counter()
    turns = []
    while stream.next_id < upto and len(turns) < count:
        turns.append(stream.turn())
    stats["gen_s"] += time.perf_counter() - t0
    return turns, stream.next_id - sum(len(t.messages) for t in turns)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- measuring (in child processes) ------------------------------------------------------

def child_open(root: Path) -> dict:
    from endless.core.memory import Memory
    settings = bench_settings(root)
    t0 = time.perf_counter()
    memory = Memory.open(KEY, settings=settings, root=root)
    seconds = time.perf_counter() - t0
    total = memory.total
    memory.close()
    return {"open_s": seconds, "total": total, "rss_mb": _rss_mb()}


def _rss_mb() -> float:
    """Peak RSS of this process, in MB.

    ``VmHWM`` where Linux has it: ``ru_maxrss`` of a freshly spawned child
    starts at the RSS of the parent it was forked from (here the builder), so
    it overstates the measuring process; elsewhere ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _median_time(fn, n: int) -> tuple[float, list]:
    times, outs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        outs.append(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), outs


def child_measure(root: Path, seed: int) -> dict:
    from endless.core import lookback as tools
    from endless.core.memory import Memory

    out: dict = {}
    settings = bench_settings(root)
    t0 = time.perf_counter()
    memory = Memory.open(KEY, settings=settings, root=root)
    out["open_in_measure_s"] = time.perf_counter() - t0
    out["rss_after_open_mb"] = _rss_mb()
    total = memory.total
    rng = random.Random(seed + 99)

    ids = [rng.randrange(total) for _ in range(200)]
    it = iter(ids)
    out["zoom1_s"], answers = _median_time(lambda: tools.zoom(memory, next(it), 1), 200)
    out["zoom1_bad"] = sum(1 for a in answers if not a.split("|", 1)[0].endswith("+0"))

    merged = []
    top = total.bit_length() - 1
    tries = 0
    while len(merged) < 200 and tries < 100_000:
        tries += 1
        level = rng.randint(1, max(1, top))
        index = rng.randrange(max(1, total >> level))
        if memory.is_built(level, index):
            merged.append((index << level, 1 << level))
    it2 = iter(merged)
    out["zoom_merged_s"], answers = _median_time(lambda: tools.zoom(memory, *next(it2)), len(merged))
    out["zoom_merged_n"] = len(merged)
    out["zoom_merged_bad"] = sum(1 for a in answers if a.startswith("No line"))

    out["hit_s"], answers = _median_time(lambda: tools.recall_search(memory, HIT_WORD), 5)
    out["hit_found"] = answers[0].count("+0 ·")
    out["miss_s"], answers = _median_time(lambda: tools.recall_search(memory, MISS_WORD), 5)
    out["miss_found"] = answers[0].count("+0 ·")
    out["regex_s"], answers = _median_time(lambda: tools.recall_search(memory, PATTERN), 3)
    out["regex_stopped"] = [a.startswith("The pattern search stopped") for a in answers]
    out["regex_found"] = answers[0].count("+0 ·")
    out["rss_before_commit_mb"] = _rss_mb()

    # One fsync of a small append on this file system, for the commit target.
    scratch = memory.folder / "bench-fsync.tmp"
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fsyncs = []
    for _ in range(20):
        os.write(fd, b"x" * 1024)
        t0 = time.perf_counter()
        os.fsync(fd)
        fsyncs.append(time.perf_counter() - t0)
    os.close(fd)
    scratch.unlink()
    out["fsync_s"] = statistics.median(fsyncs)

    gen = Generator(seed + 7)

    def turn() -> list[Message]:
        now = time.time()
        return [Message("user", gen.text(rng.randint(60, 300)), now),
                Message("trace", gen.trace(rng.randint(300, 1500)), now),
                Message("reply", gen.text(rng.randint(100, 480)), now)]

    def writer(ranges: list[tuple[int, int]]) -> None:
        """Untimed: store every line the new messages need, as a writer keeping up would."""
        budget = settings.line_budget
        lines, pending = [], {}
        for first, n in ranges:
            for mid in range(first, first + n):
                source = memory.message(mid).writer_source(settings, memory.agent_name)
                text = source if len(source.encode("utf-8")) <= budget else gen.summary()
                if not memory.is_built(0, mid):
                    lines.append((0, mid, text))
                pending[(0, mid)] = text
                level, index = 0, mid
                while index & 1:
                    left = pending.get((level, index - 1)) or memory.node_text(level, index - 1)
                    if left is None:
                        break
                    joined = f"{left}\n{text}"
                    text = joined if len(joined.encode("utf-8")) <= budget else gen.summary()
                    level, index = level + 1, index >> 1
                    if not memory.is_built(level, index):
                        lines.append((level, index, text))
                    pending[(level, index)] = text
        if lines:
            memory.store_lines(lines, sync=False)

    count = {"n": 0}
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        count["n"] += 1
        real_fsync(fd)

    fsyncs_in_commits: list[int] = []

    def timed_commits(n: int, sync: bool, keep_up: bool) -> float:
        times = []
        for _ in range(n):
            messages = turn()
            before = count["n"]
            t0 = time.perf_counter()
            info = memory.commit_turn("bench-measure", "Measuring commits", messages, sync=sync)
            times.append(time.perf_counter() - t0)
            fsyncs_in_commits.append(count["n"] - before)
            if keep_up:
                writer([(info.first, info.count)])
        return statistics.median(times)

    os.fsync = counting_fsync
    try:
        out["commit_sync_s"] = timed_commits(50, True, True)
        out["fsyncs_per_commit"] = statistics.median(fsyncs_in_commits)
    finally:
        os.fsync = real_fsync
    out["commit_nosync_s"] = timed_commits(50, False, True)
    out["view_lines_before_idle"] = len(memory.views.chat.parts)
    idle_from = memory.total
    out["commit_idle_s"] = timed_commits(50, False, False)
    out["view_lines_after_idle"] = len(memory.views.chat.parts)
    out["rss_mb"] = _rss_mb()
    out["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    # Untimed: the writer catches up on the idle turns, so a fixture kept with --keep stays steady.
    writer([(idle_from, memory.total - idle_from)])
    out["total"] = total
    memory.close()
    return out


def run_child(mode: str, root: Path, seed: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--root", str(root),
           "--seed", str(seed)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {mode} failed with {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the table -----------------------------------------------------------------------------

def fmt_s(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def label(size: int) -> str:
    return f"{size // 1_000_000}M" if size >= 1_000_000 and size % 1_000_000 == 0 else (
        f"{size // 1000}k" if size % 1000 == 0 else str(size))


def _rates(b: dict) -> str:
    rates = b.get("batch_rates") or []
    if not rates:
        return "—"
    head, tail = rates[:5], rates[-5:]
    return f"{statistics.mean(head):,.0f} → {statistics.mean(tail):,.0f}"


def table(sizes: list[int], results: dict[int, dict], builds: dict[int, dict]) -> str:
    def cell(value: str, ok: bool | None) -> str:
        return value if ok is None or ok else f"**{value}** ✗"

    rows = []

    def row(name: str, target: str, fn) -> None:
        rows.append([name] + [fn(size, results[size]) for size in sizes] + [target])

    row("open (new process, median of 3)", "≤ 0.3 s at 100k, ≤ 1 s at 1M",
        lambda n, r: cell(fmt_s(r["open_s"]), r["open_s"] <= (0.3 if n <= 100_000 else 1.0)))
    row("commit 3-message turn, fsync, writer keeping up (median of 50)", "≤ 5 ms + 1 fsync",
        lambda n, r: cell(f"{fmt_s(r['commit_sync_s'])} ({r['fsyncs_per_commit']:.0f} fsyncs)",
                          r["commit_sync_s"] <= 0.005 + r["fsync_s"]))
    row("commit 3-message turn, sync=False, writer keeping up (median of 50)", "≤ 5 ms",
        lambda n, r: cell(fmt_s(r["commit_nosync_s"]), r["commit_nosync_s"] <= 0.005))
    row("commit 3-message turn, sync=False, writer idle (50 in a row)", "≤ 5 ms",
        lambda n, r: cell(f"{fmt_s(r['commit_idle_s'])} (view {r['view_lines_before_idle']}→"
                          f"{r['view_lines_after_idle']} lines)", r["commit_idle_s"] <= 0.005))
    row("one fsync of a 1 KB append (median of 20)", "(reference)",
        lambda n, r: fmt_s(r["fsync_s"]))
    row("zoom(id, 1), random ids (median of 200)", "—",
        lambda n, r: fmt_s(r["zoom1_s"]))
    row("zoom of a merged line, n ≥ 2 (median of 200)", "—",
        lambda n, r: fmt_s(r["zoom_merged_s"]))
    row("literal search, hit (median of 5)", "≤ 50 ms over 100k, ≤ 1 s over 1M",
        lambda n, r: cell(f"{fmt_s(r['hit_s'])} ({r['hit_found']} hit)",
                          r["hit_s"] <= (0.05 if n <= 100_000 else 1.0)))
    row("literal search, miss (median of 5)", "≤ 50 ms over 100k, ≤ 1 s over 1M",
        lambda n, r: cell(f"{fmt_s(r['miss_s'])} ({r['miss_found']} hits)",
                          r["miss_s"] <= (0.05 if n <= 100_000 else 1.0)))
    row(f"pattern search {PATTERN} (median of 3)", "stops at 2 s",
        lambda n, r: cell(f"{fmt_s(r['regex_s'])}, "
                          f"{'stopped' if all(r['regex_stopped']) else 'finished' if not any(r['regex_stopped']) else 'mixed'}",
                          r["regex_s"] <= 2.2))
    row("peak RSS of the measuring process", "≤ 300 MB at 1M",
        lambda n, r: cell(f"{r['rss_mb']:.0f} MB (after open: {r['rss_after_open_mb']:.0f} MB)",
                          r["rss_mb"] <= 300))
    head = ["measurement"] + [f"{label(s)} messages" for s in sizes] + ["target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    lines.append("Cells in bold with ✗ miss their target.")
    lines.append("")
    bhead = ["build", *[label(s) for s in sizes]]
    brows = [
        ("total build time", lambda b: fmt_s(b["build_s"])),
        ("  generating texts", lambda b: fmt_s(b["gen_s"])),
        ("  bulk commit_turns (one call and one fsync a batch)", lambda b: fmt_s(b["bulk_commit_s"])),
        ("  bulk store_lines (one call a batch)", lambda b: fmt_s(b["bulk_tree_s"])),
        ("  bulk rate, first → last 5 batches (messages/s)", lambda b: _rates(b)),
        ("  reopening the memory between batches", lambda b: f"{b['reopens']}× {fmt_s(b['reopen_s'])}"),
        ("  tail commit_turns (small batches)", lambda b: fmt_s(b["tail_commit_s"])),
        ("  tail store_line calls", lambda b: f"{b['store_line_calls']:,}"),
        ("  tail store_line time", lambda b: fmt_s(b["store_line_s"])),
        ("  store_line, per call", lambda b: fmt_s(b["store_line_s"] / max(1, b["store_line_calls"]))),
        ("messages / turns", lambda b: f"{b['total']:,} / {b['turns']:,}"),
        ("order log / tree file", lambda b: f"{b['log_bytes'] / 1e6:.0f} MB / {b['tree_bytes'] / 1e6:.0f} MB"),
        ("view after build", lambda b: f"{b['view_parts']} lines, {b['view_bytes']:,} B"),
    ]
    lines.append("| " + " | ".join(bhead) + " |")
    lines.append("|" + "---|" * len(bhead))
    for name, fn in brows:
        lines.append("| " + " | ".join([name] + [fn(builds[s]) for s in sizes]) + " |")
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------

def _revision() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "endless"],
                               capture_output=True, text=True).stdout.strip()
        return f"commit {head}" + (" with uncommitted changes under endless/" if dirty else "")
    except OSError:
        return "an unknown revision"


def pick_base(sizes: list[int], keep: str | None) -> Path:
    need = sum(sizes) * BYTES_PER_MESSAGE
    candidates = [Path(keep)] if keep else [Path(tempfile.gettempdir()), ROOT / ".bench-tmp", Path.home()]
    for base in candidates:
        probe = base
        while not probe.exists():
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        say(f"{base}: {free / 1e9:.1f} GB free, fixtures need about {need / 1e9:.1f} GB")
        if free > need * 1.5:
            base.mkdir(parents=True, exist_ok=True)
            return base
    raise SystemExit(f"no folder with {need * 1.5 / 1e9:.1f} GB free among {candidates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--keep", help="build the fixtures in DIR and keep them")
    parser.add_argument("--reuse", action="store_true", help="with --keep: measure fixtures already built there")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--batch", type=int, default=2000, help="turns per bulk commit_turns call")
    parser.add_argument("--tail", type=int, default=20_000,
                        help="messages at the end committed live, with every line stored by store_line")
    parser.add_argument("--tail-batch", type=int, default=10, help="turns per commit in the tail")
    parser.add_argument("--reopen-every", type=int, default=8,
                        help="open the memory afresh every N bulk batches (0: never)")
    parser.add_argument("--child", choices=("open", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        root = Path(args.root)
        result = child_open(root) if args.child == "open" else child_measure(root, args.seed)
        print(json.dumps(result))
        return

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    revision = _revision()  # before the run: the engine may change under a long one
    base = pick_base(sizes, args.keep)
    results: dict[int, dict] = {}
    builds: dict[int, dict] = {}
    for size in sizes:
        folder = base / f"bench-{label(size)}" if args.keep else Path(tempfile.mkdtemp(
            prefix=f"bench-{label(size)}-", dir=base))
        info = folder / "build.json"
        try:
            if args.keep and args.reuse and info.exists():
                builds[size] = json.loads(info.read_text())
                say(f"{size:,}: reusing {folder}")
            else:
                if folder.exists():
                    shutil.rmtree(folder)
                folder.mkdir(parents=True)
                say(f"{size:,}: building in {folder}")
                builds[size] = build(folder, size, args.seed, args.batch, args.tail, args.tail_batch,
                                     args.reopen_every)
                info.write_text(json.dumps(builds[size], indent=1))
                b = builds[size]
                say(f"{size:,}: built in {b['build_s']:.1f} s; {b['store_line_calls']:,} store_line "
                    f"calls took {b['store_line_s']:.1f} s")
            opens = []
            for k in range(3):
                opens.append(run_child("open", folder, args.seed))
                say(f"{size:,}: open {k + 1}: {opens[-1]['open_s'] * 1000:.0f} ms")
            result = run_child("measure", folder, args.seed)
            result["open_s"] = statistics.median(o["open_s"] for o in opens)
            result["opens"] = [o["open_s"] for o in opens]
            results[size] = result
            say(f"{size:,}: {json.dumps(result)}")
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"Engine at {revision}; {os.cpu_count()} CPUs; fixtures under {base}.\n")
    print(table(sizes, results, builds))


if __name__ == "__main__":
    main()
