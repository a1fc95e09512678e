"""``endless doctor``: is this installation usable, and is every memory healthy?

Each check is a finding, ``ok``, ``warning`` or ``error``, with what to do
when it is not ok.  Warnings are things Endless repairs by itself or that
only matter in some set-ups (a torn last line, an unfinished turn of a dead
process, a stale writer lease, no Hermes home); errors mean something cannot
work until a person acts (unreadable settings, a memory of a newer format,
damaged lines inside a log, a folder Endless cannot write).  Any error makes
the command exit 1.

Read-only unless ``--repair``: memories are opened read-only and cold, the
change lock is only probed, never waited for.  ``--repair`` opens each memory
for writing once, which is what repairs a torn tail and closes the journals
of dead processes (DESIGN §2.5).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import stat
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import orjson

from endless.core.store import journal
from endless.core.words import agree, count
from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, memory_id_word
from endless.faces.kit.terminal import entry, one_line
from endless.core.store import MEMORY_ID
from endless.core.store import Lease, holder_pid, is_held
from endless.core.store import FORMAT, shown_project
from endless.core.memory import Memory, MemoryUseError, memories_dir
from endless.core.settings import Settings, SettingsError, config_path, load_settings
from endless.turn.head import recent_start

STATUSES = ("ok", "warning", "error")
PLUGIN_NAME = "endless"


@dataclass
class Finding:
    check: str
    status: str
    message: str
    fix: str | None = None
    memory: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


class Report:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, check: str, status: str, message: str, fix: str | None = None,
            memory: str | None = None) -> None:
        assert status in STATUSES
        self.findings.append(Finding(check, status, message, fix, memory))

    @property
    def status(self) -> str:
        worst = max((STATUSES.index(f.status) for f in self.findings), default=0)
        return STATUSES[worst]


# -- paths and permissions -------------------------------------------------------------


def _loose(path: Path) -> bool:
    """Readable or writable by others than the owner (Endless makes 0700 folders and 0600 files)."""
    try:
        return bool(stat.S_IMODE(path.stat().st_mode) & 0o077)
    except OSError:
        return False


def check_settings(report: Report, environ: dict) -> Settings:
    path = config_path(environ)
    try:
        settings = load_settings(environ=environ)
    except SettingsError as exc:
        report.add("settings", "error", str(exc), "fix the file or the ENDLESS_* variable it names")
        return Settings(home=environ.get("ENDLESS_HOME", ""))  # still look at the memories it names
    where = f"{path}" if path.exists() else f"{path} (absent: defaults and ENDLESS_* variables)"
    report.add("settings", "ok", f"settings from {where}")
    return settings


def check_root(report: Report, root: Path) -> bool:
    if not root.exists():
        report.add("paths.root", "warning", f"no memory folder yet at {root}",
                   "it is created by the first chat or `endless import` "
                   "(`endless demo` keeps its memory in a folder of its own)")
        return False
    if not root.is_dir():
        report.add("paths.root", "error", f"{root} is not a folder", "move it away or set ENDLESS_HOME")
        return False
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        report.add("paths.root", "error", f"cannot read and write {root} as this user",
                   f"fix its owner or permissions (chown/chmod 700 {root})")
        return False
    mode = stat.S_IMODE(root.stat().st_mode)
    report.add("paths.root", "ok", f"memory folder {root} (mode {mode:o}; each memory's own folder is 700)")
    return True


# -- one memory ------------------------------------------------------------------------


def _lock_held(path: Path) -> bool:
    """Probe the change lock without waiting (an flock, as filelock takes it); never creates it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # absent, or unreadable (its own check names that)
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


def _loose_files(folder: Path) -> list[Path]:
    found = []
    for sub in (folder, folder / "index", folder / "journal", folder / "pending", folder / "marks"):
        if not sub.is_dir():
            continue
        if _loose(sub):
            found.append(sub)
        for path in sub.iterdir():
            if path.is_file() and _loose(path):
                found.append(path)
    return found


def _route_text(route: dict) -> str:
    from endless.llm.routes import Route, RouteError

    try:
        return Route.from_json(route).describe()
    except (RouteError, TypeError, ValueError):
        return f"an unusable route {orjson.dumps(route).decode()}"


def check_memory(report: Report, folder: Path, settings: Settings, now: float) -> None:
    mid = folder.name
    if not MEMORY_ID.match(mid):
        report.add("memory.folder", "warning", f"{folder} is not a memory folder (its name is not a memory id)",
                   "move it out of the memories folder")
        return
    from endless.faces.cli.doctor_access import access_findings
    from endless.faces.cli.doctor_forget import forget_findings

    if not access_findings(report, folder, mid):
        return
    if not (folder / "key.json").exists():
        report.add("memory.key", "error", f"memory {mid} has no key.json",
                   "restore it from a backup, or move the folder away", mid)
        return
    if not _plain_files(report, folder, mid):
        return
    try:
        memory = Memory.open(memory_id=mid, settings=settings, root=folder.parent.parent, readonly=True)
    except PermissionError as exc:
        report.add("memory.permissions", "error", f"memory {mid}: cannot read {exc.filename or folder}",
                   f"run Endless as the memory's owner, or give it back: chmod -R u+rwX {folder}", mid)
        return
    except (MemoryUseError, OSError, ValueError) as exc:
        report.add("memory.format", "error", f"memory {mid}: {exc}",
                   "upgrade endless-memory if it names a newer format; else restore the memory from a backup", mid)
        return
    with memory:
        _memory_findings(report, memory, settings, now)
        _integrity_findings(report, memory)
        _price_findings(report, memory)
        forget_findings(report, folder, mid, memory.store.forgets.read(0)[0])


def _plain_files(report: Report, folder: Path, mid: str) -> bool:
    """Every file Endless reads in the memory is a regular file (a fifo would hang the open, a folder fail it)."""
    for sub in (folder, folder / "index"):
        try:
            entries = list(sub.iterdir()) if sub.is_dir() else []
        except PermissionError:
            report.add("memory.permissions", "error", f"memory {mid}: cannot list {sub}",
                       f"run Endless as the memory's owner, or give it back: chmod -R u+rwX {folder}", mid)
            return False
        for path in entries:
            if path.name in ("journal", "index", "pending", "marks") or path.name.startswith("."):
                continue
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                kind = ("a folder" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
                        else "a fifo" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                        else "not a regular file")
                report.add("memory.files", "error", f"memory {mid}: {path} is {kind}, not a file Endless wrote",
                           f"move {path} out of the memory folder (a file under index/ is rebuilt by itself; "
                           "the order log or the tree: restore it from a backup)", mid)
                return False
    return True


def _integrity_findings(report: Report, memory: Memory) -> None:
    """The full pass: every record of the log and the tree, every index row and slot (issue 17)."""
    from endless.core import integrity

    mid = memory.memory_id
    if memory.shortened is not None:
        report.add("memory.shortened", "error", f"memory {mid}: {memory.shortened.sentence(done=False)}",
            "`endless doctor --repair` sets them aside now (kept in damaged.jsonl); the lost messages come back "
            "only from a backup of the order log", mid)
    try:
        found = integrity.scan(memory)
    except OSError as exc:
        report.add("memory.scan", "error", f"memory {mid}: cannot read {exc.filename or memory.folder}: "
                                           f"{exc.strerror or exc}",
                   f"run Endless as the memory's owner, or give it back: chmod -R u+rwX {memory.folder}", mid)
        return
    if found.damaged_turns:
        which = "; ".join(f"turn {turn} ({ids}) at byte {offset}"
                          + (f": {found.reasons[turn]}" if turn in found.reasons else "")
                          for turn, offset, ids in found.damaged_turns)
        report.add("memory.damage", "error",
                   f"memory {mid}: {count(len(found.damaged_turns), 'damaged turn record')} in the order log "
                   f"{memory.log.where}: {which}; they are kept in place and read as damaged",
                   "restore the order log from a backup to recover those messages; every other turn is intact", mid)
    if found.unchecked:
        report.add("memory.checksums", "ok",
                   f"memory {mid}: {count(len(found.unchecked), 'turn record')} written before records carried "
                   "a checksum: their fields are checked, an edit that keeps them well-formed cannot be seen "
                   "in them", memory=mid)
    if found.damaged_lines:
        which = "; ".join(f"{what} at byte {offset}" for offset, what in found.damaged_lines)
        report.add("memory.damage", "warning",
                   f"memory {mid}: {count(len(found.damaged_lines), 'unreadable summary line')} in "
                   f"{memory.tree.where}: {which}; each counts as unwritten",
                   "nothing to lose (the writer writes them again); `endless doctor --repair` marks them now", mid)
    if found.bad_rows:
        report.add("memory.index", "warning",
                   f"memory {mid}: the turn index disagrees with the order log at "
                   f"{count(len(found.bad_rows), 'row')} (turns {', '.join(map(str, found.bad_rows[:20]))}"
                   f"{', …' if len(found.bad_rows) > 20 else ''}); readers rebuild it as they meet it",
                   "`endless doctor --repair` rebuilds it from the log (derived data: nothing is lost)", mid)
    _search_index_finding(report, memory)
    if found.bad_slots:
        report.add("memory.index", "warning",
                   f"memory {mid}: the tree index disagrees with the tree file at "
                   f"{count(len(found.bad_slots), 'slot')} (lines "
                   f"{', '.join(f'{l}/{i}' for l, i in found.bad_slots[:20])}"
                   f"{', …' if len(found.bad_slots) > 20 else ''}); readers rebuild it as they meet it",
                   "`endless doctor --repair` rebuilds it from the tree file (derived data: nothing is lost)", mid)


def _price_findings(report: Report, memory: Memory) -> None:
    """A writer model missing from the price table, named once (never in a chat: issue 15 item 4)."""
    from endless.writer.recorded import recorded_routes

    for route in recorded_routes(memory).routes():
        _name_unpriced(report, route)


def _name_unpriced(report: Report, route: Any) -> None:
    from endless.writer.usage import price

    try:
        found = price(route)
    except (KeyError, TypeError, ValueError):
        return  # an unusable route is named by its own check
    if found.known:
        return
    model = route.get("model") if isinstance(route, dict) else getattr(route, "model", "")
    message = (f"no price for {found.provider} model {model!r} in writer/prices.json (prices of {found.date}): "
               "its writer calls are counted at cost 0")
    if any(f.check == "writer.price" and f.message == message for f in report.findings):
        return
    report.add("writer.price", "warning", message,
               "the spend cap and the usage totals leave these calls out; set spend_cap_per_day with that "
               "in mind, or use a priced model for the writer (the writer_route setting)")


def _memory_findings(report: Report, memory: Memory, settings: Settings, now: float) -> None:
    mid, folder = memory.memory_id, memory.folder
    keyed = str(shown_project(memory.key.project))
    report.add("memory", "ok", f"memory {mid}: {memory.key.agent} · keyed by {keyed} · format {FORMAT}, "
                               f"granularity {memory.granularity}, {count(memory.turns, 'turn')}, {count(memory.total, 'message')}",
               memory=mid)
    loose = _loose_files(folder)
    if loose:
        report.add("memory.permissions", "warning",
                   f"memory {mid}: {count(len(loose), 'file or folder', 'files or folders')} "
                   f"{agree(len(loose), 'is', 'are')} open to other users (e.g. {loose[0]})",
                   f"chmod -R go-rwx {folder}", mid)
    if not os.access(folder, os.W_OK):
        report.add("memory.permissions", "error", f"memory {mid}: this user cannot write {folder}",
                   "run Endless as the memory's owner or fix the folder's owner", mid)

    # Torn and damaged lines.
    for label, tail in (("turn log", memory.log.tail_state()), ("tree", _tree_tail(memory))):
        if tail is not None and tail.partial:
            report.add("memory.torn", "warning",
                       f"memory {mid}: the {label} ends in a torn line of {count(len(tail.partial), 'byte')} "
                       "(a write cut short, or one in progress)",
                       "the next process that opens the memory for writing moves it to damaged.jsonl "
                       "(`endless doctor --repair` does it now)", mid)
    if memory.quarantine.exists():
        torn, past = _quarantined(memory.quarantine)
        what = [f"{count(torn, 'torn line')}"] if torn else []
        if past:
            what.append(f"{count(past, 'line or index row', 'lines or index rows')} past a shortened log's end")
        report.add("memory.quarantine", "ok",
                   f"memory {mid}: {' and '.join(what) or 'nothing'} {agree(torn + past, 'was', 'were')} moved "
                   f"aside earlier to {memory.quarantine.name}",
                   memory=mid)

    # Locks, lease, journal.
    if _lock_held(memory.lock.path):
        pid = holder_pid(memory.lock.holder_path)
        report.add("memory.lock", "warning",
                   f"memory {mid}: the change lock is held right now by pid {pid} "
                   "(normal for a few milliseconds; a process holding it longer stalls every chat)",
                   f"if this stays, find pid {pid} and stop it", mid)
    else:
        report.add("memory.lock", "ok", f"memory {mid}: the change lock is free", memory=mid)
    lease = Lease(folder, expiry=settings.lease_expiry_seconds)
    info = lease.read()
    if info is None:
        report.add("memory.lease", "ok", f"memory {mid}: no writer pool is running", memory=mid)
    else:
        age = now - info.renewed
        alive = lease.holder_alive(info)
        if alive and age < settings.lease_expiry_seconds:
            report.add("memory.lease", "ok",
                       f"memory {mid}: the writer pool runs in pid {info.pid} (lease renewed {age:.0f} s ago)",
                       memory=mid)
        elif alive:
            report.add("memory.lease", "warning",
                       f"memory {mid}: the writer lease of pid {info.pid} was last renewed {age:.0f} s ago "
                       f"(over {settings.lease_expiry_seconds:.0f} s: the process seems stuck)",
                       f"another process takes it over; if pid {info.pid} hangs, stop it", mid)
        else:
            report.add("memory.lease", "ok",
                       f"memory {mid}: the last writer pool (pid {info.pid}) has ended; the next one takes over",
                       memory=mid)
    for path in sorted(journal.journal_dir(folder).glob("*.jsonl")):
        pending = journal.read(path)
        if pending is None:
            continue
        pid = _journal_pid(path)
        what = f"session {pending.session!r} ({count(len(pending.messages), 'message')})"
        if is_held(path.with_suffix(".alive")):
            report.add("memory.journal", "ok", f"memory {mid}: a turn of {what} is in flight in pid {pid}",
                       memory=mid)
        else:
            report.add("memory.journal", "warning",
                       f"memory {mid}: an uncommitted turn of {what}: its process (pid {pid}) ended mid-turn",
                       "it is committed as interrupted when the memory is next opened for writing "
                       "(`endless doctor --repair` does it now)", mid)

    # Pending writer work: who writes it (a chat's pool, a detached catch-up, nothing) and how far it got.
    from endless.faces.kit.catching_up import writer_state
    from endless.writer.pace import progress

    state = writer_state(memory, now)
    catching = progress(memory, now)
    over = _recent_overflow(memory, settings.recent_block_bytes)
    if state.lines_left == 0:
        report.add("memory.writer", "ok", f"memory {mid}: every line is written", memory=mid)
    elif catching.failing is not None:
        report.add("memory.writer", "warning", f"memory {mid}: {catching.sentence()}",
                   "check the writer's route (the writer_route setting, or the chat's own model and key): "
                   "messages are kept word for word meanwhile and the writer retries by itself", mid)
    else:
        status = "warning" if over > 0 or state.cut_short else "ok"
        fix = state.fix or ("the writer pool runs with the next chat in this workspace, or with `endless serve`"
                            if over > 0 and not state.writing else None)
        report.add("memory.writer", status,
                   f"memory {mid}: catching up: {state.sentence}"
                   + (f"; the recent block is past its {settings.recent_block_bytes:,} bytes, so turns show "
                      "a shortened history until the writer catches up"
                      if over > 0 else ""), fix, mid)
    from endless.writer.spend import is_paused
    from endless.writer.usage import UsageLog

    usage = UsageLog(folder, readonly=True)
    try:
        totals = usage.totals()
        spent = usage.spent_today(now)
    finally:
        usage.close()
    cap = settings.spend_cap_per_day
    paused = is_paused(memory, spent, cap, now)
    cap_text = "no spend cap" if cap is None else f"cap {cap:.4f} USD a day"
    report.add("memory.spend", "warning" if paused else "ok",
               f"memory {mid}: {count(totals['calls'], 'writer call')}, {totals['cost']:.4f} USD in all, "
               f"{spent:.4f} USD today, {cap_text}" + (" — the writer is paused" if paused else ""),
               "`endless writer resume` lifts the pause for today" if paused else None, mid)
    from endless.core.privacy import counts as redacted_counts

    redacted = redacted_counts(memory.folder)
    if redacted:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(redacted.items()))
        total = sum(redacted.values())
        report.add("memory.redacted", "ok", f"memory {mid}: {count(total, 'secret')} redacted before "
                                            f"{agree(total, 'it was', 'they were')} kept ({kinds})", memory=mid)
    elif not settings.redact_secrets:
        report.add("memory.redacted", "ok", f"memory {mid}: secrets are kept as written "
                                            "(redact_secrets is off)", memory=mid)
    routes = _recorded_routes(memory)
    if routes:
        report.add("memory.routes", "ok", f"memory {mid}: chats write their lines with "
                                          + "; ".join(sorted(routes)), memory=mid)


def _search_index_finding(report: Report, memory: Memory) -> None:
    """The full-text index's watermark against the files it was read from (it is rebuilt when they disagree)."""
    import sqlite3

    from endless.core.search import upkeep as index_upkeep

    from endless.core import integrity

    index = memory.search_index
    if not index.exists():
        return
    problem = integrity.index_problem(memory)
    if problem is not None:
        report.add("memory.index", "error", f"memory {memory.memory_id}: the search index {index.path} is "
                                            f"damaged: {problem}",
                   "`endless doctor --repair` builds it again from the order log now (derived data: nothing is "
                   "lost); until then each search that meets it rebuilds it", memory.memory_id)
        return
    try:
        with index.lock:
            mark = index.watermark()
    except (sqlite3.Error, OSError) as exc:
        report.add("memory.index", "warning", f"memory {memory.memory_id}: the search index cannot be read ({exc})",
                   "nothing to lose: the next search sets it aside and builds it again from the log", memory.memory_id)
        return
    if mark.messages > memory.total or not index_upkeep.agrees(mark, memory.log, memory.tree):
        report.add("memory.index", "warning",
                   f"memory {memory.memory_id}: the search index describes {count(mark.messages, 'message')} and "
                   f"files that are not the memory's now (it holds {count(memory.total, 'message')})",
                   "nothing to lose: the next search (or `endless search`) builds it again from the log",
                   memory.memory_id)


def _quarantined(path: Path) -> tuple[int, int]:
    """(torn lines, lines and rows set aside past a shortened log's end) in the quarantine file."""
    torn = past = 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            reason = orjson.loads(line).get("reason", "")
        except (orjson.JSONDecodeError, AttributeError):
            reason = ""
        if "past the order log" in reason or "past the order log's end" in reason:
            past += len(orjson.loads(line).get("rows", [None]))
        else:
            torn += 1
    return torn, past


def _recent_overflow(memory: Memory, limit: int) -> int:
    """Bytes by which the recent block passes its limit (<= 0: it fits); stops counting once past it."""
    size = 0
    for message_id in range(recent_start(memory), memory.total):
        stored = memory.message(message_id)
        text = "" if stored is None else stored.source_text(memory.settings, memory.agent_name)
        size += len(f"{message_id}+0|{text}".encode("utf-8")) + 1
        if size > limit:
            return size - limit
    return size - limit



def _tree_tail(memory: Memory):
    return memory.tree.tail_state()


def _journal_pid(path: Path) -> int | None:
    try:
        with open(path, "rb") as handle:
            head = orjson.loads(handle.readline())
        return int(head.get("pid")) if head.get("pid") is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _recorded_routes(memory: Memory) -> set[str]:
    from endless.core.store import iter_lines, read_complete

    data, _ = read_complete(memory.folder / "routes.jsonl", 0)
    latest: dict[str, dict] = {}
    for _, line in iter_lines(data, 0):
        try:
            record = orjson.loads(line)
            latest[record["s"]] = record["route"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return {_route_text(route) for route in latest.values() if route}


# -- the writer route and Hermes -----------------------------------------------------------


def check_writer_route(report: Report, settings: Settings, environ: dict) -> None:
    from endless.llm.routes import Route, RouteError

    if not settings.writer_route.strip():
        report.add("writer.route", "ok", "writer route: each chat's own; chats with none (imports, the demo) "
                                         "are written by the offline writer (no model, no cost)")
        return
    try:
        route = Route.from_json(settings.writer_route)
    except RouteError as exc:
        report.add("writer.route", "error", f"the writer_route setting is unusable: {exc}",
                   "set writer_route to a JSON route, e.g. "
                   '{"provider": "openai", "model": "deepseek-v4-flash", "base_url": "https://api.deepseek.com"}')
        return
    variable = route.key_env
    if not route.local and variable and not environ.get(variable):
        report.add("writer.route", "warning", f"writer route {route.describe()}: ${variable} is not set here",
                   f"export {variable} in the environment the writer runs in")
        return
    report.add("writer.route", "ok", f"writer route {route.describe()}")
    _name_unpriced(report, route)


def hermes_home(environ: dict) -> Path:
    explicit = environ.get("HERMES_HOME")
    return Path(explicit).expanduser() if explicit else Path(environ.get("HOME") or Path.home()) / ".hermes"


def check_hermes(report: Report, environ: dict) -> None:
    home = hermes_home(environ)
    if not home.is_dir():
        report.add("hermes.home", "warning", f"no Hermes home at {home} (HERMES_HOME or ~/.hermes)",
                   "install Hermes Agent, or set HERMES_HOME, to use Endless inside Hermes")
        return
    report.add("hermes.home", "ok", f"Hermes home {home}")
    config = home / "config.yaml"
    enabled: Any = None
    if config.exists():
        import yaml

        try:
            data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
            report.add("hermes.plugin", "error", f"cannot read {config}: {exc}", "fix its YAML syntax")
            return
        plugins = data.get("plugins") if isinstance(data, dict) else None
        enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    if isinstance(enabled, str):
        enabled = [enabled]
    if isinstance(enabled, list) and PLUGIN_NAME in enabled:
        report.add("hermes.plugin", "ok", f"the {PLUGIN_NAME} plugin is enabled in {config}")
    else:
        report.add("hermes.plugin", "warning", f"the {PLUGIN_NAME} plugin is not enabled in {config}",
                   f"run `hermes plugins enable {PLUGIN_NAME}` (or `endless hermes install`)")


# -- the command ---------------------------------------------------------------------------


def diagnose(environ: dict | None = None, memory_ids: Iterable[str] | None = None,
             now: float | None = None) -> Report:
    environ = dict(os.environ if environ is None else environ)
    now = time.time() if now is None else now
    report = Report()
    settings = check_settings(report, environ)
    from endless.faces.cli.doctor_store import store_findings

    store_findings(report, settings)
    root = settings.memory_root()
    if check_root(report, root):
        folder = memories_dir(root)
        try:
            names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        except OSError as exc:
            report.add("paths.memories", "error", f"cannot list {folder}: {exc.strerror or exc}",
                       f"run Endless as the folder's owner, or give it back: chmod u+rwx {folder}")
            names = []
        if memory_ids is not None:
            wanted = list(memory_ids)
            missing = [m for m in wanted if m not in names]
            for m in missing:
                report.add("memory", "error", f"no memory {m} under {folder}", "`endless memories` lists them", m)
            names = [n for n in names if n in wanted]
        if not names and memory_ids is None:
            report.add("memory", "ok", f"no memories yet under {folder}")
        for name in names:
            try:
                check_memory(report, folder / name, settings, now)
            except OSError as exc:  # a file Endless cannot read, whatever it is: said, never a crash
                report.add("memory.permissions", "error",
                           f"memory {name}: cannot read {exc.filename or folder / name}: {exc.strerror or exc}",
                           f"run Endless as the memory's owner, or give it back: chmod -R u+rwX {folder / name}", name)
        if memory_ids is None:
            from endless.faces.cli.doctor_folder import folder_findings

            folder_findings(report, settings, Path.cwd())
    check_writer_route(report, settings, environ)
    check_hermes(report, environ)
    check_agents(report, root)
    return report


def check_agents(report: Report, root: Path) -> None:
    """What live capture of Claude Code and Codex has read on this machine, and what it had to leave out."""
    from endless.faces.kit.agent_sessions import all_places

    places = all_places(root)
    if not places:
        return
    behind = [p for p in places if _size(p.path) is not None and _size(p.path) > p.offset]
    skipped = sum(p.skipped for p in places)
    agents = ", ".join(sorted({p.agent for p in places if p.agent})) or "coding agents"
    report.add("agents.capture", "ok", f"{count(len(places), 'transcript')} of {agents} captured; "
               f"{count(len(behind), 'transcript')} with a turn still going or not yet read")
    if skipped:
        report.add("agents.skipped", "warning", f"{count(skipped, 'transcript line')} could not be read and "
                   "{} left out (see logs/agents.log under the memory root)".format(agree(skipped, "was", "were")),
                   "nothing to repair: the rest of each transcript was captured")


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def repair(settings: Settings, memory_ids: Iterable[str] | None = None) -> list[str]:
    """Open each memory for writing once: torn tails move aside, dead journals close as interrupted."""
    folder = memories_dir(settings.memory_root())
    done = []
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    for name in names:
        if memory_ids is not None and name not in memory_ids or not MEMORY_ID.match(name):
            continue
        if not _plain_files(Report(), folder / name, name):
            done.append(f"memory {name}: not repaired (a file in it is not a regular file; `endless doctor` names it)")
            continue
        try:
            with Memory.open(memory_id=name, settings=settings, create=False) as memory:
                from endless.core import integrity

                done.extend(f"memory {name}: {what}" for what in memory.reports)
                done.extend(f"memory {name}: {what}" for what in integrity.repair(memory))
        except (MemoryUseError, OSError) as exc:
            done.append(f"memory {name}: not repaired ({exc})")
    return done


def render(report: Report) -> str:
    """The findings for a terminal: they quote names, paths and errors, so through its filter."""
    marks = {"ok": "ok     ", "warning": "warning", "error": "ERROR  "}
    lines = []
    for f in report.findings:
        lines.append(f"{marks[f.status]}  {entry(f.message)}")
        if f.fix and f.status != "ok":
            lines.append(f"         → {entry(f.fix)}")
    counts = {s: sum(1 for f in report.findings if f.status == s) for s in STATUSES}
    lines.append(f"{report.status}: {counts['ok']} ok, {count(counts['warning'], 'warning')}, "
                 f"{count(counts['error'], 'error')}")
    return "\n".join(lines) + "\n"


def _doctor_command(args: argparse.Namespace) -> int:
    ids = [args.memory] if args.memory else None
    if args.repair:
        try:
            settings = load_settings()
        except SettingsError as exc:
            print(f"[endless.doctor] cannot repair: {exc}", file=sys.stderr)
            return EXIT_FAILED
        for line in repair(settings, ids):
            print(f"[endless.doctor] {one_line(line)}", file=sys.stderr)
    report = diagnose(memory_ids=ids)
    if args.json:
        sys.stdout.write(orjson.dumps({"status": report.status,
                                       "findings": [f.to_json() for f in report.findings]},
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render(report))
    return EXIT_FAILED if report.status == "error" else EXIT_OK


def add_doctor_parser(sub: Any) -> None:
    parser = sub.add_parser("doctor", help="check paths, memories, locks, journals, the writer and Hermes",
                            epilog="example:\n  endless doctor --repair",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=("Checks the installation and every memory; each finding is ok, "
                                         "warning or error. Exits 1 if any is an error, else 0."))
    parser.add_argument("--memory", metavar="ID", type=memory_id_word, help="check only this memory (16 hex digits)")
    parser.add_argument("--json", action="store_true", help="print {status, findings: [...]} as JSON")
    parser.add_argument("--repair", action="store_true",
                        help="first open each memory for writing once (moves torn lines aside, closes the "
                             "unfinished turns of dead processes as interrupted)")
    parser.set_defaults(run=_doctor_command)
