"""Finding by meaning: does one search with the question as a person asks it find the evidence?

One table per corpus, measured in one run: the share of questions whose
evidence (any of its messages) is in the first 5, 10 and 20 hits of one
``recall_search``-style call (the question as the query, 20 hits), by question
type, for plain BM25, the shipped default, the default without each of its
methods, and each method alone over BM25.

Corpora:

- ``own`` (always): scripts/meaning_corpus.py, generated here, deterministic;
  questions whose words are not the evidence's (paraphrased, answered by the
  other speaker, evidence holding none of the words, two messages, "last Tuesday").
- ``--locomo PATH``: the public LoCoMo benchmark's ``locomo10.json`` (10 long
  multi-session conversations, 1,986 questions of which 1,531 are answerable
  with evidence ids; licence CC BY-NC 4.0, so not in this repository: give
  the path to your copy).  Each conversation is one memory; a turn of the
  dialogue is one message (a shared photo's caption appended in brackets),
  timed by its session's date; questions are asked just after the last session.

Each memory's summary lines are written by the offline writer first (no model:
sentences picked from the messages), as a memory is once its writer caught
up; ``--no-lines`` leaves them unwritten.
  Categories as the benchmark numbers them: 1 multi-hop, 2 temporal,
  3 open-domain, 4 single-hop (5, adversarial, has no evidence and is skipped).

Usage: python scripts/bench_meaning.py [--scale 4] [--locomo ~/data/locomo10.json] [--only default,plain]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from meaning_corpus import TYPES, corpus  # noqa: E402

from endless.core.memory import Memory  # noqa: E402
from endless.core.search import finder  # noqa: E402
from endless.core.search import ranking as rk  # noqa: E402
from endless.core.settings import Settings  # noqa: E402
from endless.core.store.keys import workspace_key  # noqa: E402
from endless.core.store.messages import Message  # noqa: E402
from endless.core.store.turns import TurnRecord  # noqa: E402

LOCOMO_TYPES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METHODS = ("question_words", "neighbours", "time", "lines", "feedback", "speakers")


@dataclasses.dataclass
class Case:
    """One memory's messages and its questions: (question, evidence ids, type)."""

    messages: list[tuple[str, str, float, str]]  # (kind, text, unix time, chat title)
    questions: list[tuple[str, list[int], str]]
    asked_at: float


def say(text: str) -> None:
    print(f"[endless.bench] {text}", file=sys.stderr, flush=True)


def rankings() -> list[tuple[str, rk.Ranking]]:
    """Plain BM25, the default, the default without each method, each method alone."""
    out = [("plain BM25", rk.PLAIN), ("default", rk.DEFAULT)]
    for name in METHODS:
        on = getattr(rk.DEFAULT, name)
        out.append((f"default {'without' if on else 'with'} {name.replace('_', ' ')}",
                    dataclasses.replace(rk.DEFAULT, **{name: not on})))
    for name in METHODS:
        out.append((f"BM25 + {name.replace('_', ' ')} only", dataclasses.replace(rk.PLAIN, **{name: True})))
    return out


def own_case(scale: float) -> Case:
    made = corpus(scale=scale)
    return Case(made.messages, [(q.text, q.evidence, q.kind) for q in made.questions], made.asked_at)


def locomo_cases(path: Path) -> list[Case]:
    cases = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        talk = conversation["conversation"]
        messages: list[tuple[str, str, float, str]] = []
        ids: dict[str, int] = {}
        n = 1
        while f"session_{n}" in talk:
            start = dt.datetime.strptime(talk[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").timestamp()
            for k, turn in enumerate(talk[f"session_{n}"]):
                text = turn["text"] + (f" [shares a photo of {turn['blip_caption']}]"
                                       if turn.get("blip_caption") else "")
                kind = "user" if turn["speaker"] == talk["speaker_a"] else "reply"
                ids[turn["dia_id"]] = len(messages)
                messages.append((kind, text, start + 30.0 * k, f"session {n}"))
            n += 1
        questions = []
        for qa in conversation["qa"]:
            evidence = [ids[e] for e in qa.get("evidence", []) if e in ids]
            if qa["category"] in LOCOMO_TYPES and evidence:
                questions.append((qa["question"], evidence, LOCOMO_TYPES[qa["category"]]))
        cases.append(Case(messages, questions, messages[-1][2] + 3600.0))
    return cases


def fill(root: Path, name: str, case: Case, lines: bool = True) -> Memory:
    """The case's messages in a memory; ``lines``: its summary lines written by the offline writer."""
    memory = Memory.open(workspace_key(None, root / name), root=root / "memories", settings=Settings())
    records = [TurnRecord(f"s-{title}", title, [Message(kind, text, at)], at=at)
               for kind, text, at, title in case.messages]
    for start in range(0, len(records), 5000):
        memory.commit_turns(records[start:start + 5000], sync=False, plan=False)
    memory.plan_views(sync=False)
    if lines:
        import asyncio
        import logging

        from endless.writer.pool import WriterPool

        logging.getLogger("endless.writer").setLevel(logging.WARNING)
        asyncio.run(WriterPool(memory, lambda route: None).run(until_idle=True))
    return memory


def measure(memories: list[tuple[Memory, Case]], ranking: rk.Ranking) -> tuple[dict[str, list[int]], float]:
    """Per type: [questions, evidence in top 5, top 10, top 20, every evidence message in top 20]; ms a search."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    spent, searches = 0.0, 0
    for memory, case in memories:
        corpus_ = finder.corpus_of(memory)
        for question, evidence, kind in case.questions:
            started = time.perf_counter()
            result = finder.search(corpus_, question, 0, 20, 10.0, ranking=ranking, now=case.asked_at)
            spent += time.perf_counter() - started
            searches += 1
            ids = [h.id for h in result.hits if h.kind != "title"]
            row = counts[kind]
            row[0] += 1
            for column, k in ((1, 5), (2, 10), (3, 20)):
                row[column] += any(e in ids[:k] for e in evidence)
            row[4] += all(e in ids[:20] for e in evidence)
    return counts, 1000 * spent / max(1, searches)


def table(title: str, memories: list[tuple[Memory, Case]], types: list[str], only: set[str] | None) -> None:
    n = sum(len(case.questions) for _, case in memories)
    size = sum(len(case.messages) for _, case in memories)
    print(f"\n## {title}: {n} questions over {size:,} messages; evidence in the top 5 / 10 / 20 hits\n")
    shown = [t for t in types if any(q[2] == t for _, c in memories for q in c.questions)]
    print("| ranking | all: top 5 | top 10 | top 20 | every evidence in 20 | "
          + " | ".join(f"{t}: 5 / 20" for t in shown) + " | ms a search |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(shown) + "---:|")
    for label, ranking in rankings():
        if only and label not in only:
            continue
        counts, ms = measure(memories, ranking)
        total = [sum(row[i] for row in counts.values()) for i in range(5)]
        cells = [f"{total[i] / total[0]:.1%}" for i in (1, 2, 3, 4)]
        cells += [f"{counts[t][1] / counts[t][0]:.0%} / {counts[t][3] / counts[t][0]:.0%}" for t in shown]
        print(f"| {label} | " + " | ".join(cells) + f" | {ms:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=4.0, help="filler between the own corpus's episodes")
    parser.add_argument("--locomo", type=Path, help="path to LoCoMo's locomo10.json")
    parser.add_argument("--only", default="", help="comma-separated ranking labels to run (default: all)")
    parser.add_argument("--no-lines", action="store_true", help="leave the summary lines unwritten")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    with tempfile.TemporaryDirectory(prefix="endless-bench-meaning-") as tmp:
        root = Path(tmp)
        own = own_case(args.scale)
        memory = fill(root, "own", own, not args.no_lines)
        table(f"Own harder corpus (scripts/meaning_corpus.py, scale {args.scale:g})", [(memory, own)],
              list(TYPES), only)
        memory.close()
        if args.locomo:
            cases = locomo_cases(args.locomo)
            memories = [(fill(root, f"locomo-{k}", case, not args.no_lines), case) for k, case in enumerate(cases)]
            table("LoCoMo (public benchmark, 10 conversations)", memories, list(LOCOMO_TYPES.values()), only)
            for memory, _ in memories:
                memory.close()


if __name__ == "__main__":
    main()
