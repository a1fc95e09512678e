"""``endless import``: earlier conversations into a memory, once, resumably (DESIGN §2.2, §6).

The sources (generic JSONL, Claude Code transcripts, a Hermes ``state.db``) are
read and checked whole first (:mod:`endless.import_formats`): a bad line
names its file and line, and nothing is written.  Entries are grouped into
turns the way a live chat logs them: a person's message starts a turn; the
agent's words, tool calls and results join it as the trace and the reply.

A turn's identity is its session, the kind and exact text of its first
message, and how many turns of that session began with the same words
before it.  Turns already in the memory (an earlier import, or turns the
Hermes plugin captured live under the same session id) are skipped, so
importing the same file twice adds nothing.  New turns are appended after
what the memory holds, oldest first, with their original times, in
batches that are each committed durably: an interrupted import is resumed by
running it again.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from endless.core import durable
from endless.core import moments
from endless.core import lookback
from endless.faces.cli.choose import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose,
                            key_of)
from endless.faces.importers.formats import FORMATS, Entry, FormatError, hermes_sessions, read
from endless.core.memory import Memory, MemoryUseError
from endless.core.turns import TurnRecord
from endless.core.messages import Message, TraceBuilder, prepare
from endless.core.settings import Settings, load_settings

BATCH_TURNS = 2000  # turns per durable commit (each commit also walks the view: fewer is faster)
BATCH_BYTES = 8 << 20
PROGRESS_FROM = 200  # turns: below this no progress bar is worth drawing


def log(message: str) -> None:
    durable.log("import", message)


@dataclass
class PlannedTurn:
    session: str
    title: str
    at: float
    messages: list[Message]
    base: str  # identity without the occurrence count
    where: str
    occurrence: int = 0

    @property
    def tid(self) -> str:
        return hashlib.sha256(f"{self.base}#{self.occurrence}".encode()).hexdigest()[:16]


def identity(session: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{session}\0{kind}\0{text}".encode("utf-8")).hexdigest()[:32]


def record_identity(record: dict) -> str | None:
    """A logged turn's identity: its session and its first message's kind and whole text."""
    messages = record.get("m") or []
    if not messages:
        return None
    kind = messages[0]["k"]
    text = []
    for m in messages:  # a very long message is logged as consecutive parts: join them back
        if m["k"] != kind:
            break
        text.append(m["x"])
        if kind != "user":
            break
    return identity(record["s"], kind, "".join(text))


def present(memory: Memory) -> Counter:
    """How many turns of the memory begin with each identity (reads every turn record once)."""
    counts: Counter = Counter()
    for turn in range(memory.turns):
        record = memory.log.read_record(turn)
        if record is not None and (ident := record_identity(record)) is not None:
            counts[ident] += 1
    return counts


# -- grouping entries into turns -----------------------------------------------------------


def group(entries: list[Entry], settings: Settings, granularity: str, fallback_at: float) -> list[PlannedTurn]:
    """Turns in source order: a person's message opens one; a note is a turn of its own."""
    turns: list[PlannedTurn] = []
    current: dict[str, list[Entry]] = {}

    def close(session: str) -> None:
        group_ = current.pop(session, None)
        if group_ and (planned := _plan(group_, settings, granularity, fallback_at)) is not None:
            turns.append(planned)

    for entry in entries:
        if entry.role == "note":
            close(entry.session)
            current[entry.session] = [entry]
            close(entry.session)
            continue
        if entry.role == "user":
            open_ = current.get(entry.session)
            # Several text blocks of one event are one message; a new event is a new turn.
            if open_ and all(e.role == "user" and e.where == entry.where for e in open_):
                open_.append(entry)
                continue
            close(entry.session)
        current.setdefault(entry.session, []).append(entry)
    for session in list(current):
        close(session)
    occurrences: Counter = Counter()
    for turn in turns:
        turn.occurrence = occurrences[turn.base]
        occurrences[turn.base] += 1
    return turns


def _plan(entries: list[Entry], settings: Settings, granularity: str,
          fallback_at: float) -> PlannedTurn | None:
    first = entries[0]
    at = lambda e: fallback_at if e.at is None else e.at  # noqa: E731
    messages: list[Message] = []
    i = 0
    if first.role in ("user", "note"):
        texts = []
        while i < len(entries) and entries[i].role == first.role and entries[i].where == first.where:
            texts.append(entries[i].text)
            i += 1
        head_text = "\n\n".join(texts)
        messages += prepare(first.role, head_text, at(first), settings)
        base = identity(first.session, first.role, head_text)
    rest = entries[i:]
    last_step = max((k for k, e in enumerate(rest) if e.role in ("call", "result")), default=-1)
    steps, replies = rest[:last_step + 1], rest[last_step + 1:]
    if steps:
        messages += _steps(steps, settings, granularity, first.title, at)
    reply = "\n\n".join(e.text for e in replies if e.text.strip())
    if reply:
        messages += prepare("reply", reply, at(replies[-1]), settings)
    if not messages:
        return None  # nothing but empty words: no turn
    if first.role not in ("user", "note"):
        head = messages[0]
        text = "".join(m.text for m in messages if m.kind == head.kind) if head.kind == "user" else head.text
        base = identity(first.session, head.kind, text)
    return PlannedTurn(first.session, first.title, at(first), messages, base, first.where)


def _steps(steps: list[Entry], settings: Settings, granularity: str, title: str, at) -> list[Message]:
    """The agent's words between calls, its calls and their results: one trace, or one message each."""
    if granularity == "step":
        out: list[Message] = []
        for e in steps:
            kind = {"assistant": "said", "call": "call", "result": "result", "user": "said"}[e.role]
            text = f"{e.name} {e.args}" if e.role == "call" else e.text
            out += prepare(kind, text, at(e), settings)
        return out
    trace = TraceBuilder(settings)
    own_tool = False
    for e in steps:
        if e.role == "call":
            try:
                args = orjson.loads(e.args or "{}")
            except orjson.JSONDecodeError:
                args = None
            words = lookback.lookback_words(e.name or "", args, title)
            own_tool = words is not None
            trace.add("did", f"{e.name} {e.args}", words)
        elif e.role == "result":
            trace.add("result", e.text, "" if own_tool else None)
            own_tool = False
        elif e.text.strip():
            trace.add("said", e.text)
    return prepare("trace", trace.text(), at(steps[-1]), settings, trace.writer_text())


# -- the plan, the estimate and the commit --------------------------------------------------


@dataclass
class Plan:
    new: list[PlannedTurn] = field(default_factory=list)
    skipped: int = 0
    sources: list[tuple[str, str, int]] = field(default_factory=list)  # (path, format, entries)

    @property
    def messages(self) -> int:
        return sum(len(t.messages) for t in self.new)


Source = tuple[Path, str, list[Entry]]  # (path, format read as, entries)


def read_sources(paths: list[Path], fmt: str, sessions: list[str] | None, project: str | None,
                 all_sessions: bool) -> list[Source]:
    """Read and check every source whole, before anything is written."""
    from endless.faces.importers.formats import detect

    out = []
    for path in _expand(paths):
        kind = detect(path) if fmt == "auto" and path.exists() else fmt
        chosen = sessions
        if kind == "hermes" and chosen is None and not all_sessions:
            chosen = _hermes_workspace_sessions(path, project)
        used, entries = read(path, kind, chosen)
        out.append((path, used, entries))
    return out


def make_plan(sources: list[Source], settings: Settings, granularity: str, have: Counter) -> Plan:
    """The turns of the sources the memory does not hold yet, oldest first."""
    plan = Plan()
    turns: list[PlannedTurn] = []
    for path, used, entries in sources:
        plan.sources.append((str(path), used, len(entries)))
        turns += group(entries, settings, granularity, path.stat().st_mtime)
    for turn in turns:
        if have[turn.base] > turn.occurrence:
            plan.skipped += 1
        else:
            plan.new.append(turn)
    order = {id(t): k for k, t in enumerate(plan.new)}
    plan.new.sort(key=lambda t: (t.at, order[id(t)]))
    return plan


def _expand(paths: list[Path]) -> list[Path]:
    out = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.jsonl"))
            if not found:
                raise FormatError(f"{path}: a folder without .jsonl files")
            out += found
        else:
            out.append(path)
    return out


def _hermes_workspace_sessions(path: Path, project: str | None) -> list[str]:
    """Sessions Hermes ran in the memory's workspace (CLI sessions record their cwd)."""
    everything = hermes_sessions(path)
    if project is None:
        return [s.id for s in everything]
    wanted = str(Path(project).resolve())
    chosen = [s.id for s in everything if s.cwd and str(Path(s.cwd).resolve()) == wanted]
    if not chosen:
        raise FormatError(f"{path}: none of its {len(everything)} sessions ran in {wanted}; pick sessions "
                          "with --session ID, or take them all with --all-sessions")
    return chosen


def estimate(plan: Plan, settings: Settings, total_before: int) -> dict:
    """Writer lines, calls and cost the new messages will take on the configured route (a rough bound)."""
    from endless.llm.routes import Route, RouteError
    from endless.writer.usage import cost, price

    budget = settings.line_budget
    leaves = 0
    input_bytes = 0
    for turn in plan.new:
        for m in turn.messages:
            source = m.writer_text if m.writer_text is not None else m.text
            size = len(source.encode("utf-8")) + 12  # the tag
            if size > budget:
                leaves += 1
                input_bytes += size
    after = total_before + plan.messages
    merges = sum((after >> level) - (total_before >> level) for level in range(1, max(after, 1).bit_length()))
    lines = leaves + merges
    calls = math.ceil(lines / settings.lines_per_call) if lines else 0
    result = {"lines": lines, "messageLines": leaves, "merges": merges, "calls": 0, "route": "offline writer",
              "cost": 0.0}
    if not settings.writer_route.strip():
        result["note"] = ("no writer_route is set and imported chats have no route of their own, so the "
                          "offline writer writes their lines: no model calls, no cost")
        return result
    result["calls"] = calls
    try:
        route = Route.from_json(settings.writer_route)
    except RouteError as exc:
        raise FormatError(f"the writer_route setting is unusable: {exc}") from None
    view_tokens = (settings.writer_view_floor + settings.writer_view_ceiling) // 2 // 4
    usage = {"cached": calls * view_tokens,
             "uncached": input_bytes // 4 + merges * 2 * budget // 4 + calls * 400,
             "output": lines * budget // 4}
    result.update(route=route.describe(), cost=round(cost(route, usage), 4), tokens=usage,
                  priced=price(route).known)
    return result


def commit(memory: Memory, plan: Plan, show_progress: bool) -> int:
    """Append the new turns in durable batches; returns how many landed."""
    done = 0
    progress = None
    task = None
    if show_progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        progress.start()
        task = progress.add_task("turns", total=len(plan.new))
    try:
        batch: list[tuple] = []
        size = 0
        for turn in plan.new:
            batch.append(TurnRecord(turn.session, turn.title, turn.messages, tid=turn.tid, at=turn.at))
            size += sum(len(m.text) for m in turn.messages)
            if len(batch) >= BATCH_TURNS or size >= BATCH_BYTES:
                done += len(memory.commit_turns(batch))
                batch, size = [], 0
                if progress is not None:
                    progress.update(task, completed=done)
        if batch:
            done += len(memory.commit_turns(batch))
            if progress is not None:
                progress.update(task, completed=done)
    finally:
        if progress is not None:
            progress.stop()
    return done


# -- the command ----------------------------------------------------------------------------


def _when(at: float) -> str:
    return moments.local(at)


def _preview(turn: PlannedTurn) -> str:
    head = turn.messages[0]
    text = " ".join(head.text.split())
    text = text if len(text) <= 72 else text[:71] + "…"
    kinds = Counter(m.kind for m in turn.messages)
    what = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"+ {_when(turn.at)}  «{turn.title}»  {what}  {head.kind}: {text}"


def _import_command(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except Exception as exc:  # SettingsError: main() maps it too, but say it in import's words
        print(f"[endless.import] {exc}", file=sys.stderr)
        return EXIT_USAGE
    memory: Memory | None = None
    try:
        try:
            memory = choose(args, readonly=True, settings=settings)
        except ChoiceError as exc:
            if args.memory:
                print(f"[endless.import] {exc}", file=sys.stderr)
                return EXIT_USAGE
            memory = None  # a workspace without a memory yet: the import creates it
        project = memory.key.project if memory else key_of(args).project
        target = memory.memory_id if memory else key_of(args).memory_id
        try:
            sources = read_sources([Path(p) for p in args.paths], args.format, args.session or None, project,
                                   args.all_sessions)
        except FormatError as exc:
            print(f"[endless.import] {exc}. Nothing was imported; fix the source and run the import again.",
                  file=sys.stderr)
            return EXIT_USAGE
        if not args.dry_run:  # every source is readable: now open the memory for writing
            if memory is not None:
                memory.close()
            memory = choose(args, readonly=False, create=True, settings=settings)
        granularity = memory.granularity if memory else settings.granularity
        plan = make_plan(sources, settings, granularity, present(memory) if memory else Counter())
        summary = {"memoryId": target, "sources": [{"path": p, "format": f, "entries": n}
                                                   for p, f, n in plan.sources],
                   "turns": len(plan.new), "messages": plan.messages, "skipped": plan.skipped}
        if args.dry_run:
            try:
                guess = estimate(plan, settings, memory.total if memory else 0)
            except FormatError as exc:
                print(f"[endless.import] {exc}", file=sys.stderr)
                return EXIT_USAGE
            _print_dry_run(args, plan, summary, guess, target)
            return EXIT_OK
        assert memory is not None
        show = len(plan.new) >= PROGRESS_FROM and sys.stderr.isatty() and not args.no_progress
        landed = commit(memory, plan, show)
        summary["turns"] = landed
        if args.json:
            sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            sys.stdout.write(f"imported {landed} turns ({plan.messages} messages) into memory {memory.memory_id}; "
                             f"{plan.skipped} turns were there already\n")
        return EXIT_OK
    except ChoiceError as exc:
        print(f"[endless.import] {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (MemoryUseError, OSError) as exc:
        print(f"[endless.import] stopped: {exc}. The turns committed so far are kept; run the same import "
              "again to add the rest.", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if memory is not None:
            memory.close()


def _print_dry_run(args: argparse.Namespace, plan: Plan, summary: dict, guess: dict, target: str) -> None:
    summary["writer"] = guess
    if args.json:
        summary["new"] = [{"session": t.session, "title": t.title, "at": t.at,
                           "messages": [{"kind": m.kind, "text": m.text, "at": m.at} for m in t.messages]}
                          for t in plan.new]
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    for turn in plan.new:
        sys.stdout.write(_preview(turn) + "\n")
    sys.stdout.write(f"would add {len(plan.new)} turns ({plan.messages} messages) to memory {target}; "
                     f"{plan.skipped} turns are there already\n")
    sys.stdout.write(f"writer: about {guess['lines']} lines to write ({guess['messageLines']} messages too "
                     f"long to be their own line, up to {guess['merges']} merges)")
    if guess.get("note"):
        sys.stdout.write(f"; {guess['note']}\n")
    else:
        sys.stdout.write(f"; about {guess['calls']} calls, about {guess['cost']:.4f} USD on {guess['route']}\n")


def add_import_parser(sub: Any) -> None:
    parser = sub.add_parser("import", help="import earlier conversations (JSONL, Claude Code, Hermes state.db)",
                            description=("Import conversations into a memory: a generic JSONL "
                                         "({role, content, at?, session?, title?} per line), Claude Code "
                                         "session transcripts (.jsonl files or their folder) or Hermes sessions "
                                         "from a state.db. Turns already in the memory are skipped; running "
                                         "the same import again adds nothing and resumes an interrupted one."))
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files (or folders of .jsonl files) to import")
    add_memory_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="auto", help="the sources' format (default: detect)")
    parser.add_argument("--session", action="append", metavar="ID",
                        help="Hermes: import this session (repeatable; default: the sessions run in the workspace)")
    parser.add_argument("--all-sessions", action="store_true", help="Hermes: import every session of the state.db")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the turns and messages that would be added and the writer's estimated cost")
    parser.add_argument("--json", action="store_true", help="print the summary (and with --dry-run the turns) as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=_import_command)
