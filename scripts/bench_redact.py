"""What redacting secrets costs a message before it is kept (issue 19, item 2).

Typical messages are the recall benchmark's generated conversation (short
chat, replies, status notes); the 30 KB messages are pastes of this
project's own source files cut to 30,000 characters, one with a key planted.
Prints the median and p99 per message in microseconds, and how many were
changed (the planted keys are the only expected changes).

Usage: python scripts/bench_redact.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_corpus import conversation  # noqa: E402

from endless.core import redact  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def measure(texts: list[str], rounds: int = 3) -> tuple[float, float, int]:
    times, changed = [], 0
    for _ in range(rounds):
        for text in texts:
            started = time.perf_counter()
            found = redact.redact(text)
            times.append((time.perf_counter() - started) * 1e6)
            changed += found.text != text
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], changed // rounds


def main() -> None:
    typical = [m[1] for m in conversation().messages]
    sources = sorted(ROOT.glob("endless/**/*.py")) + sorted(ROOT.glob("writer/*.py"))
    pastes = []
    for path in sources:
        text = path.read_text(encoding="utf-8")
        while len(text) < 30_000:
            text += "\n" + text
        pastes.append(text[:30_000])
    planted = pastes[0][:15_000] + " AKIAZ7QW3RTY5UIO9PAS " + pastes[0][15_000:29_978]
    rows = [("typical chat messages", typical), ("30 KB pastes of source code", pastes),
            ("30 KB paste with a key in it", [planted])]
    print("\n## Redaction cost per message\n")
    print("| messages | count | median µs | p99 µs | changed |")
    print("|---|---:|---:|---:|---:|")
    for label, texts in rows:
        median, p99, changed = measure(texts)
        print(f"| {label} | {len(texts):,} | {median:.1f} | {p99:.1f} | {changed} |")


if __name__ == "__main__":
    main()
