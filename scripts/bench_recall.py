"""Recall: does a question find its answer, how fast is a search, and what does the index cost?

Three tables, each measured in one run:

1. **Quality.** A generated multi-day project conversation (scripts/recall_corpus.py)
   with questions asked as a person asks them later, each naming the message that
   holds its answer.  For one call of 20 hits with the question as the query: the
   share of questions whose answer is among the hits, old tool (the literal scan,
   which looked for the question as written) against the new one (ranked words).
2. **Speed** at each size: ranked, phrase and pattern searches in this process
   (median and p99); the index build rate during a bulk import (messages / the
   seconds the commits spent keeping the index) and when it is rebuilt from
   the files; the commit overhead of keeping the index
   current; and the index's size against the log's.
3. **Whole process** at the largest size up to 200k: ``endless search WORD``
   against ``endless --version`` against ``python -c pass``.
4. **At scale** (``--scale 200000,1000000``): generated English-like messages
   (about 125 bytes, a Zipf vocabulary), queries of four mid-frequency words
   each with five planted messages holding all four, and a pattern with three
   planted matches.  Ranked search median / p99 and the share of queries whose
   all-words messages rank first; the pattern's coverage, time and whether a
   partial answer said so; the same four words asked as a question ("which
   messages mention …?", ranked past its words by core/search/ranking.py):
   its median / p99 and whether the all-words messages still rank first.
   ``--compare PYTHON`` runs the same searches on the
   same memory with another installation (``/work/base/.venv/bin/python``: the
   code before this change) in a child process, side by side in one table.

Usage: python scripts/bench_recall.py [--sizes 10000,100000,1000000] [--skip-quality] [--skip-speed] [--runs 7]
       python scripts/bench_recall.py --skip-quality --skip-speed --scale 200000,1000000 \
           --compare /work/base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_corpus import conversation  # noqa: E402

from endless.core.search import upkeep as index_upkeep, scan as recall, finder as search  # noqa: E402
from endless.core.store.keys import workspace_key  # noqa: E402
from endless.core.memory import Memory  # noqa: E402
from endless.core.store.messages import Message  # noqa: E402
from endless.core.settings import Settings  # noqa: E402
from endless.core.store.turns import TurnRecord  # noqa: E402

BATCH = 5_000


def say(text: str) -> None:
    print(f"[endless.bench] {text}", file=sys.stderr, flush=True)


def fill(memory: Memory, messages: list[tuple[str, str, float, str]]) -> None:
    """Commit one message a turn, in batches, the views planned once at the end (as an import does)."""
    for start in range(0, len(messages), BATCH):
        records = [TurnRecord(f"s-{title}", title, [Message(kind, text, at)], at=at)
                   for kind, text, at, title in messages[start:start + BATCH]]
        memory.commit_turns(records, sync=False, plan=False)
    memory.plan_views(sync=False)


def quality(root: Path) -> None:
    """The questions of one conversation, as generated and with five times its small talk.

    (Ten projects told with the same sentences and other values would not be
    a harder test but an ambiguous one: each question would have ten answers.)
    """
    convo = conversation()
    long_convo = conversation(filler_per_fact=60, days=60)
    n = len(convo.questions)
    print(f"\n## Retrieval quality: {n} questions, one call of 20 hits, the question as the query\n")
    print("| history | tool | answer in the 20 hits | in the first 5 | first hit |")
    print("|---|---|---:|---:|---:|")
    for label, current in ((f"{len(convo.messages):,} messages, 14 days", convo),
                           (f"{len(long_convo.messages):,} messages, 60 days", long_convo)):
        messages = current.messages
        memory = Memory.open(workspace_key(None, root / label), root=root / "q", settings=Settings())
        fill(memory, messages)
        corpus = search.corpus_of(memory)
        old = new = top5 = top1 = 0
        missed = []
        for question, answer in current.questions:
            scanned = recall.scan_literal(memory.log, question, 0, 20, 2.0)
            old += any(h.id == answer for h in scanned.hits)
            ids = [h.id for h in search.search(corpus, question, 0, 20, 2.0).hits]
            new += answer in ids
            top5 += answer in ids[:5]
            top1 += ids[:1] == [answer]
            if answer not in ids:
                missed.append(question)
        print(f"| {label} | old (literal scan of the question) | {old / n:.1%} | – | – |")
        print(f"| {label} | new (ranked words) | {new / n:.1%} | {top5 / n:.1%} | {top1 / n:.1%} |")
        if missed:
            say(f"{label}: missed " + " | ".join(missed[:12]))
        memory.close()


def corpus_messages(size: int) -> list[tuple[str, str, float, str]]:
    """``size`` messages: the conversation repeated with other seeds (new names, numbers, order)."""
    out: list[tuple[str, str, float, str]] = []
    seed = 1
    start = 1_700_000_000.0
    while len(out) < size:
        part = conversation(seed=seed, start=start).messages
        out.extend(part)
        start = part[-1][2] + 86_400
        seed += 1
    return out[:size]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def timed(run, queries: list[str]) -> tuple[float, float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        run(q)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), percentile(times, 0.99)


def speed(root: Path, sizes: list[int]) -> list[tuple[int, Path, str]]:
    rows = []
    made = []
    rng = random.Random(3)
    for size in sizes:
        messages = corpus_messages(size)
        say(f"{size:,} messages: importing them twice, without and with the index")
        bare = Memory.open(workspace_key(None, root / f"bare-{size}"), root=root / f"b{size}", settings=Settings())
        started = time.perf_counter()
        _without_index(bare, messages)
        without = time.perf_counter() - started
        key = workspace_key(None, root / f"speed-{size}")
        memory = Memory.open(key, root=root / f"s{size}", settings=Settings())
        spent = [0.0]
        kept_current = index_upkeep.after_commit

        def timed_upkeep(*args, **kwargs) -> None:  # the index's share of each commit
            started = time.perf_counter()
            kept_current(*args, **kwargs)
            spent[0] += time.perf_counter() - started

        index_upkeep.after_commit = timed_upkeep
        started = time.perf_counter()
        fill(memory, messages)  # the index fed at each commit from what it has in hand
        with_index = time.perf_counter() - started
        index_upkeep.after_commit = kept_current
        say(f"imported in {without:.1f} s without the index, {with_index:.1f} s with it "
            f"({spent[0]:.1f} s of it keeping the index); rebuilding it")
        started = time.perf_counter()
        assert index_upkeep.catch_up(bare.search_index, bare.index_sources(), time.monotonic() + 3600)
        rebuild = time.perf_counter() - started
        bare.close()
        index = memory.search_index
        index.db().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        index_bytes = sum(p.stat().st_size for p in index.path.parent.glob(index.path.name + "*"))
        log_bytes = memory.log.path.stat().st_size
        corpus = search.corpus_of(memory)
        convo = conversation(seed=1)
        questions = [q for q, _ in convo.questions][:100]
        phrases = []
        for kind, text, _, _ in rng.sample(messages, 100):
            words = text.split()
            at = rng.randrange(max(1, len(words) - 1))
            phrases.append('"' + " ".join(words[at:at + 2]).strip('".,;:!?') + '"')
        patterns = ["/port \\d{4}/", "/[A-Z][a-z]+ Corp/", "/timeout to \\d+ seconds/", "/v?\\d+\\.\\d+\\.\\d+/"]
        ranked = timed(lambda q: search.search(corpus, q, 0, 20, 10.0), questions)
        phrase = timed(lambda q: search.search(corpus, q, 0, 20, 10.0), phrases)
        pattern = timed(lambda q: search.search(corpus, q, 0, 20, 10.0), patterns * 3)
        overhead = _commit_overhead(memory)
        at_import = size / max(1e-9, spent[0])
        rows.append((size, ranked, phrase, pattern, at_import, size / rebuild, overhead, index_bytes, log_bytes))
        made.append((size, root / f"s{size}", key.memory_id))
        memory.close()
    print("\n## Speed (in-process, ms: median / p99)\n")
    print("| messages | ranked | phrase | pattern | index build during import | rebuilt from the files "
          "| commit overhead | index size | log size | index / log |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, ranked, phrase, pattern, rate, rebuilt, overhead, ib, lb in rows:
        print(f"| {size:,} | {ranked[0]:.1f} / {ranked[1]:.1f} | {phrase[0]:.1f} / {phrase[1]:.1f} | "
              f"{pattern[0]:.0f} / {pattern[1]:.0f} | {rate:,.0f} msg/s | {rebuilt:,.0f} msg/s | "
              f"{overhead:.2f} ms | {ib / 1e6:.1f} MB | {lb / 1e6:.1f} MB | {ib / lb:.2f} |")
    return made


def _without_index(memory: Memory, messages: list[tuple[str, str, float, str]]) -> None:
    """Fill as an import into a memory whose index does not exist yet (commits then skip it)."""
    first = messages[:1]
    fill(memory, first)
    memory.search_index.close()
    for path in memory.search_index.path.parent.glob(memory.search_index.path.name + "*"):
        path.unlink()
    fill(memory, messages[1:])


def _commit_overhead(memory: Memory, turns: int = 300) -> float:
    """Median ms a one-message commit costs with the index kept current, minus without it.

    The two kinds alternate, so a busy moment of the machine weighs on both alike.
    """
    index = memory.search_index
    timings: dict[bool, list[float]] = {True: [], False: []}
    for k in range(2 * turns):
        keep = k % 2 == 0
        if not keep:
            index.close()
            os.rename(index.path, str(index.path) + ".away")
        started = time.perf_counter()
        memory.commit_turn("bench", "Bench", [Message("user", f"commit overhead probe {k} with a few words",
                                                      time.time())], sync=False)
        timings[keep].append((time.perf_counter() - started) * 1000)
        if not keep:
            os.rename(str(index.path) + ".away", index.path)
            # the skipped commit is caught up here, outside the timing
            index_upkeep.catch_up(index, memory.index_sources(), time.monotonic() + 60)
    return statistics.median(timings[True]) - statistics.median(timings[False])


def summarise(root: Path, memory_id: str) -> float:
    """Write every line the memory lacks with a stand-in writer (a fixed 200-byte line, no model),
    so the memory is as a person's is once the writer has caught up; returns the seconds taken."""
    from endless.writer.queue import ready_work

    memory = Memory.open(memory_id=memory_id, root=root, settings=Settings())
    started = time.perf_counter()
    while True:
        jobs = ready_work(memory)[:2000]
        if not jobs:
            break
        memory.store_lines([(j.level, j.index, f"summary of {j.name}: " + "w" * 180) for j in jobs], sync=False)
    seconds = time.perf_counter() - started
    say(f"summarised: {memory.lines_built:,} lines, the view {len(memory.views.chat.parts)} lines, "
        f"in {seconds:.0f} s")
    memory.close()
    return seconds


def whole_process(made: list[tuple[int, Path, str]], runs: int) -> None:
    candidates = [m for m in made if m[0] <= 200_000]
    if not candidates:
        return
    size, root, memory_id = candidates[-1]
    summarise(root, memory_id)
    env = {**os.environ, "ENDLESS_HOME": str(root)}
    endless = str(Path(sys.executable).with_name("endless"))
    commands = [("python -c pass", [sys.executable, "-c", "pass"]),
                ("endless --version", [endless, "--version"]),
                ("endless search WORD", [endless, "search", "--memory", memory_id, "timeout"]),
                ('endless search "PHRASE"', [endless, "search", "--memory", memory_id, '"upstream timeout"'])]
    print(f"\n## Whole process ({size:,} messages, every line written, median of {runs} runs)\n")
    print("| command | seconds |")
    print("|---|---:|")
    for name, argv in commands:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True)
            times.append(time.perf_counter() - started)
            if done.returncode != 0:
                say(f"{name} exited {done.returncode}: {done.stderr.decode()[-300:]}")
        print(f"| `{name}` | {statistics.median(times):.3f} |")


# -- at scale -------------------------------------------------------------------------------------

SCALE_QUERIES = 40
PLANTED = 5  # messages holding all four words of each query
PATTERN = "/PELICAN-[0-9]+/"


def scale_messages(size: int, seed: int = 32) -> tuple[list[tuple[str, str, float, str]], list[tuple[str, list[int]]],
                                                       list[int]]:
    """``size`` messages of about 125 bytes; the queries with their planted ids; the pattern's ids.

    Words are drawn from a 6,000-word Zipf vocabulary, so a query's words are
    each in about 1% of the messages (thousands at 200k, past the old cap at
    1M), as words like "billing" or "export" are in a long history.
    """
    rng = random.Random(seed)
    syllables = ["ba", "ko", "ri", "tu", "me", "sa", "lo", "ne", "vi", "da", "pe", "gu", "ta", "mo", "shi"]
    vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(9000)})[:6000]
    rng.shuffle(vocab)
    weights = [1 / (k + 1) ** 1.07 for k in range(len(vocab))]
    cumulative = list(__import__("itertools").accumulate(weights))
    draw = lambda n: rng.choices(vocab, cum_weights=cumulative, k=n)  # noqa: E731
    out = [(("user", "reply")[k % 2], " ".join(draw(rng.randint(16, 22))), 1_700_000_000.0 + k * 30.0,
            f"chat {k // 5000}") for k in range(size)]
    # mid-frequency words: ranks 60-200 of the vocabulary (each in ~0.5-1.5% of the messages)
    band = vocab[60:200]
    queries = []
    for _ in range(SCALE_QUERIES):
        words = rng.sample(band, 4)
        ids = sorted(rng.sample(range(size), PLANTED))
        for i in ids:
            kind, text, at, title = out[i]
            filler = text.split()[:12]
            mixed = filler + words
            rng.shuffle(mixed)
            out[i] = (kind, " ".join(mixed), at, title)
        queries.append((" ".join(words), ids))
    pattern_ids = sorted(rng.sample(range(size), 3))
    for i in pattern_ids:
        kind, text, at, title = out[i]
        out[i] = (kind, f"{text} PELICAN-{i}", at, title)
    return out, queries, pattern_ids


# Run by this Python or by the one of --compare (which may be the code before the search floor).
_SCALE_CHILD = r"""
import json, statistics, sys, time
try:
    from endless.core.search import finder as search
except ImportError:
    from endless.core import search
from endless.core.memory import Memory
from endless.core.settings import Settings
root, memory_id, job = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3]).read())
memory = Memory.open(memory_id=memory_id, root=__import__("pathlib").Path(root), settings=Settings())
corpus = search.corpus_of(memory)
search.search(corpus, "warm", 0, 20, 10.0)
times, ranks = [], []
for query, planted in job["queries"]:
    started = time.perf_counter()
    result = search.search(corpus, query, 0, 20, 10.0)
    times.append((time.perf_counter() - started) * 1000)
    ids = [h.id for h in result.hits]
    ranks.append(sorted(ids[:len(planted)]) == sorted(planted))
asked, asked_first = [], []  # the same words asked as a question: ranked past its words (ranking.py)
for query, planted in job["queries"]:
    started = time.perf_counter()
    result = search.search(corpus, f"which messages mention {query}?", 0, 20, 10.0)
    asked.append((time.perf_counter() - started) * 1000)
    asked_first.append(sorted([h.id for h in result.hits][:len(planted)]) == sorted(planted))
runs = []
for _ in range(3):
    started = time.perf_counter()
    result = search.search(corpus, job["pattern"], 0, 20, 2.0)
    runs.append((time.perf_counter() - started, [h.id for h in result.hits], result.stopped_at))
print(json.dumps({"times": times, "first": ranks, "pattern": runs, "code": search.__file__,
                  "asked": asked, "asked_first": asked_first}))
"""


def scale(root: Path, sizes: list[int], compare: str | None) -> None:
    rows = []
    for size in sizes:
        say(f"at scale: generating {size:,} messages")
        messages, queries, pattern_ids = scale_messages(size)
        key = workspace_key(None, root / f"scale-{size}")
        memory = Memory.open(key, root=root / f"x{size}", settings=Settings())
        started = time.perf_counter()
        fill(memory, messages)
        say(f"imported in {time.perf_counter() - started:.0f} s")
        docs = memory.search_index.term_docs([w for q, _ in queries for w in q.split()])
        memory.close()
        job = root / f"job-{size}.json"
        job.write_text(json.dumps({"queries": queries, "pattern": PATTERN}))
        pythons = [("this", sys.executable)] + ([("compare", compare)] if compare else [])
        # with --compare, each installation runs twice, taking turns: a shared machine's load moves
        for label, python in pythons * (2 if compare else 1):
            # (run from the temporary folder: ``-c`` puts the working folder first on the path, and a
            # checkout's own package there would shadow the installation asked for)
            done = subprocess.run([python, "-c", _SCALE_CHILD, str(root / f"x{size}"), key.memory_id, str(job)],
                                  capture_output=True, text=True, cwd=root)
            if done.returncode != 0:
                say(f"{label} ({python}) failed: {done.stderr[-800:]}")
                continue
            got = json.loads(done.stdout.strip().splitlines()[-1])
            say(f"{label}: {got['code']}")
            times = got["times"]
            found = [len(set(ids) & set(pattern_ids)) for _, ids, _ in got["pattern"]]
            said = [stopped is not None for _, _, stopped in got["pattern"]]
            asked = got["asked"]
            rows.append((size, label, statistics.median(times), percentile(times, 0.99),
                         sum(got["first"]) / len(got["first"]), statistics.median(docs.values()),
                         found, statistics.median(t for t, _, _ in got["pattern"]), said,
                         statistics.median(asked), percentile(asked, 0.99),
                         sum(got["asked_first"]) / len(got["asked_first"])))
    print(f"\n## At scale: {SCALE_QUERIES} four-word queries, {PLANTED} planted all-words messages each; "
          f"pattern {PATTERN} with 3 planted matches (3 runs, 2 s limit)\n")
    print("| messages | code | ranked median ms | ranked p99 ms | all-words first | median rows a word "
          "| pattern found (of 3, each run) | pattern s | partial said | asked median ms | asked p99 ms "
          "| asked: all-words first |")
    print("|---:|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|")
    for size, label, median, p99, first, rows_a_word, found, seconds, said, a50, a99, afirst in rows:
        print(f"| {size:,} | {label} | {median:.1f} | {p99:.1f} | {first:.0%} | {rows_a_word:,.0f} | "
              f"{' '.join(map(str, found))} | {seconds:.2f} | {' '.join('yes' if s else 'no' for s in said)} | "
              f"{a50:.1f} | {a99:.1f} | {afirst:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--scale", default="", help="sizes for the at-scale table (200000,1000000)")
    parser.add_argument("--compare", metavar="PYTHON", help="another installation's Python, side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="endless-bench-recall-") as tmp:
        root = Path(tmp)
        if not args.skip_quality:
            quality(root)
        if not args.skip_speed:
            made = speed(root, [int(s) for s in args.sizes.split(",")])
            whole_process(made, args.runs)
        if args.scale:
            scale(root, [int(x) for x in args.scale.split(",")], args.compare)


if __name__ == "__main__":
    main()
