"""``endless demo``: the whole engine on its embedded default, with no key and no network.

A built-in conversation of a few hundred turns over three days (three chats in
one workspace: short questions, long pastes, tool-heavy turns; our own seeded
script) is replayed through the real turn protocol and the real writer pool,
with the offline writer and the provider simulator on its simulated clock.
Then the command shows what the memory became, looks back into it the way the
agent does, and serves the History page until Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

from endless.core import lookback
from endless.core.memory import Memory
from endless.demo.recall_check import message_holding
from endless.demo.replay import Replay, ReplayConfig
from endless.faces.signals import Terminated, exit_code, raise_on_sigterm
from endless.core.settings import Settings, load_settings
from endless.sim.script import make_script

DEMO_TURNS = 300
DEMO_DAYS = 3
_NAME = re.compile(r"^(\d+)\+(\d+)\|", re.M)


def add_demo_parser(sub) -> None:
    demo = sub.add_parser("demo", help="replay a built-in conversation offline and show the memory it makes",
                          epilog="example:\n  endless demo --turns 200 --no-serve",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--dir", help="where to put the demo memory (default: a new temporary folder)")
    demo.add_argument("--turns", type=int, default=DEMO_TURNS, help=f"turns to replay (default {DEMO_TURNS})")
    demo.add_argument("--seed", type=int, default=7, help="the conversation's seed")
    demo.add_argument("--no-serve", action="store_true", help="do not serve the History page afterwards")
    demo.add_argument("--port", type=int, help="the History page's port (default: the rpc_port setting)")
    demo.set_defaults(run=run_demo)


def _folder(chosen: str | None) -> Path:
    if chosen is None:
        return Path(tempfile.mkdtemp(prefix="endless-demo-"))
    folder = Path(chosen).expanduser().resolve()
    if folder.exists() and any(folder.iterdir()) and not (folder / "memories").is_dir():
        raise SystemExit(f"[endless.demo] {folder} holds other files; name an empty folder or a previous demo's")
    if (folder / "memories").is_dir() and any((folder / "memories").iterdir()):
        raise SystemExit(f"[endless.demo] {folder} already holds a demo memory; remove it or name another folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_demo(args: argparse.Namespace) -> int:
    """``endless demo``; Ctrl-C or SIGTERM at any point stops it with no traceback (exit 130, 143)."""
    raise_on_sigterm()
    try:
        return _demo(args)
    except (KeyboardInterrupt, Terminated) as stop:
        print("[endless.demo] stopped", file=sys.stderr)
        return exit_code(stop)


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if args.turns < 10:
        print("[endless.demo] --turns must be at least 10", file=sys.stderr)
        return 2
    folder = _folder(args.dir)
    err = Console(stderr=True)
    out = Console(highlight=False, soft_wrap=True)
    err.print(f"[endless.demo] the demo memory lives in {folder} (your own memories are not touched)")
    script = make_script(args.turns, args.seed, days=DEMO_DAYS, facts=min(20, args.turns // 5))
    settings = Settings(settle_poll_seconds=1.0).replace(home=str(folder))
    config = ReplayConfig(caches=("deepseek",), settings=settings, seed=args.seed, model_writer=False,
                          settle_all=True)
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task("turns", total=len(script))
        result = Replay(folder, script, config,
                        progress=lambda done, total: progress.update(task, completed=done)).run()
    err.print(f"[endless.demo] replayed {len(script)} turns ({result.simulated_seconds / 86_400:.1f} simulated "
              f"days) in {result.real_seconds:.0f} s")

    with Memory.open(memory_id=result.memory_id, settings=settings, root=folder, readonly=True) as memory:
        _show(out, memory, result, script)
    if args.no_serve:
        return 0
    return _serve(folder, result.memory_id, args.port, err)


def _show(out, memory: Memory, result, script) -> None:
    from rich.table import Table

    lines, p = memory.views.written_prefix()
    rendered = [line.render() for line in lines]
    out.print("\n[b]The view[/b] (what the model reads instead of the history), first and last lines:")
    for text in rendered[:3]:
        out.print("  " + _clip(text), markup=False)
    out.print(f"  … {max(0, len(rendered) - 6)} more lines …")
    for text in rendered[-3:]:
        out.print("  " + _clip(text), markup=False)

    shares = [t.first.read["deepseek"] / t.first.tokens for t in result.turns[10:] if t.first and t.first.tokens]
    built = memory.lines_built
    merges = max(0, built - memory.total)  # every message has its line by now; the rest are merges
    table = Table(title="The memory after the replay")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("turns / messages", f"{memory.turns:,} / {memory.total:,}")
    table.add_row("lines written (messages + merges)", f"{built:,}")
    table.add_row("merged lines", f"{merges:,}")
    table.add_row("view", f"{len(lines):,} lines, {memory.views.size():,} bytes")
    table.add_row("recent block (messages not yet in a line)", f"{memory.total - p:,}")
    table.add_row("turn input read from cache, median / min (from turn 10)",
                  f"{statistics.median(shares):.1%} / {min(shares):.1%}" if shares else "–")
    table.add_row("writer model calls", f"{result.stats.calls} (offline writer: {result.stats.offline_lines} lines)")
    out.print(table)

    out.print("\n[b]Looking back[/b] the way the agent does:")
    fact = next((f for t in script for f in t.facts), None)
    target = message_holding(memory, fact) if fact else None
    line = next((v for v in lines if target is not None and
                 _first(v) <= target < _first(v) + _count(v)), None)
    if line is not None and target is not None:
        start, count = _first(line), _count(line)
        out.print(f"  The view line {start}+{count} covers message {target}; zoom opens it half by half:")
        while count > 1:
            answer = lookback.zoom(memory, start, count)
            out.print(f"  > zoom({start}, {count})", markup=False)
            for row in answer.splitlines():
                out.print("    " + _clip(row, 110), markup=False)
            start, count = next((int(a), int(b)) for a, b in _NAME.findall(answer)
                                if int(a) <= target < int(a) + int(b))
        out.print(f"  > zoom({target}, 1)", markup=False)
        out.print("    " + _clip(lookback.zoom(memory, target, 1), 300), markup=False)
        out.print(f"  > date({target})", markup=False)
        out.print("    " + lookback.date(memory, target), markup=False)
    if fact:
        words = " ".join(fact.split()[-2:])
        out.print(f"  > recall_search({words!r})", markup=False)
        for row in lookback.recall_search(memory, words).splitlines()[:4]:
            out.print("    " + _clip(row, 140), markup=False)


def _first(line) -> int:
    from endless.core import tiling
    return tiling.first(line.part)


def _count(line) -> int:
    from endless.core import tiling
    return tiling.count(line.part)


def _clip(text: str, width: int = 160) -> str:
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= width else text[:width - 1] + "…"


def _serve(folder: Path, memory_id: str, port: int | None, err) -> int:
    """Serve the History page on the demo memory until Ctrl-C."""
    import threading

    from endless.faces.rpc.serve import start_in_thread

    settings = load_settings(environ={"ENDLESS_HOME": str(folder)})
    try:
        served = start_in_thread(settings, port, root=folder, current=memory_id)
    except OSError as exc:
        err.print(f"[endless.demo] cannot serve the History page on port "
                  f"{settings.rpc_port if port is None else port} ({exc}); try --port 0 for any free port")
        return 1
    print(f"History page: {served.url}", flush=True)
    err.print("[endless.demo] serving the History page until Ctrl-C")
    try:
        threading.Event().wait()
    finally:
        served.stop()
    return 0
