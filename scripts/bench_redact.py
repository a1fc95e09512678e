"""What redacting secrets costs a message before it is kept (issue 19, item 2).

Typical messages are the recall benchmark's generated conversation (short
chat, replies, status notes); the 30 KB messages are pastes of this
project's own source files cut to 30,000 characters, one with a key planted.
Prints the median and p99 per message in microseconds, and how many were
changed (the planted keys are the only expected changes).

With ``--compare FILE`` (another version's ``endless/core/privacy/redact.py``, e.g.
from ``git show REV:endless/core/privacy/redact.py``) both run in this process, on the
same messages, round by round, and the table puts them side by side.

Usage: python scripts/bench_redact.py [--compare FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_corpus import conversation  # noqa: E402

from endless.core.privacy import redact  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def measure(texts: list[str], engines: list, rounds: int = 3) -> list[tuple[float, float, int]]:
    """Median and p99 µs per message and messages changed, for each engine, interleaved round by round."""
    times: list[list[float]] = [[] for _ in engines]
    changed = [0 for _ in engines]
    for _ in range(rounds):
        for k, engine in enumerate(engines):
            for text in texts:
                started = time.perf_counter()
                found = engine.redact(text)
                times[k].append((time.perf_counter() - started) * 1e6)
                changed[k] += found.text != text
    out = []
    for k in range(len(engines)):
        ordered = sorted(times[k])
        out.append((statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], changed[k] // rounds))
    return out


def load(path: Path):
    spec = importlib.util.spec_from_file_location("redact_compared", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", type=Path, help="another version's redact.py, measured side by side")
    args = parser.parse_args()
    engines = [redact] + ([load(args.compare)] if args.compare else [])
    print("\n## Redaction cost per message\n")
    if args.compare:
        print("| messages | count | median µs | p99 µs | changed | median µs (compared) | p99 µs (compared) "
              "| changed (compared) | median, this ÷ compared |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| messages | count | median µs | p99 µs | changed |")
        print("|---|---:|---:|---:|---:|")
    for label, texts in rows:
        results = measure(texts, engines)
        cells = [f"{m:.1f} | {p:.1f} | {c}" for m, p, c in results]
        ratio = f" | {results[0][0] / results[1][0]:.2f}" if len(results) > 1 else ""
        print(f"| {label} | {len(texts):,} | {' | '.join(cells)}{ratio} |")


if __name__ == "__main__":
    main()
