"""``endless demo``: the whole engine on its embedded default, with no key and no network.

A written conversation (one person's project over four days, three chats in
one folder; ``conversation.txt``) is replayed through the real turn protocol
and the real writer pool, with the offline writer and the provider simulator
on its simulated clock.  Then the command tells what the memory became (see
:mod:`endless.demo.story`), and serves the History page until Ctrl-C.

The demo keeps its memory in a folder of its own, never the person's memory
root, and removes it on exit unless ``--keep`` (or ``--dir``) asks to keep it.
Endless's diagnostics are held back while it runs: the printed story is the
demo's whole output; if the replay fails, the held diagnostics are printed.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from endless.core import diagnostics
from endless.core.memory import Memory
from endless.core.settings import Settings, load_settings
from endless.demo import conversation
from endless.demo.replay import Replay, ReplayConfig
from endless.demo.story import tell
from endless.faces.kit.signals import Terminated, exit_code, raise_on_sigterm, wait_for_stop

# The demo model's window (tokens).  The view's ceiling scales with it (48,000 bytes here, 128,000 from a
# 128k window on), so four days of one project already fold older messages into merged lines.
DEMO_WINDOW = 48_000
log = logging.getLogger("endless.demo")


def add_demo_parser(sub) -> None:
    demo = sub.add_parser("demo", help="replay a built-in conversation offline and show the memory it makes",
                          epilog="example:\n  endless demo --no-serve --keep",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--dir", help="where to put the demo memory (default: a new temporary folder, "
                                    "removed on exit); a folder named here is kept")
    demo.add_argument("--keep", action="store_true", help="keep the temporary demo memory after exit")
    demo.add_argument("--no-serve", action="store_true", help="do not serve the History page afterwards")
    demo.add_argument("--port", type=int, help="the History page's port (default: the rpc_port setting; "
                                               "0: any free port)")
    demo.set_defaults(run=run_demo)


class _Held(logging.Handler):
    """Keeps the diagnostics of the run, to print only if it fails."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter(diagnostics.FORMAT))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def _folder(chosen: str | None) -> Path:
    if chosen is None:
        return Path(tempfile.mkdtemp(prefix="endless-demo-"))
    folder = Path(chosen).expanduser().resolve()
    if folder.exists() and any(folder.iterdir()) and not (folder / "memories").is_dir():
        raise SystemExit(f"endless demo: {folder} holds other files; name an empty folder or a new one")
    if (folder / "memories").is_dir() and any((folder / "memories").iterdir()):
        raise SystemExit(f"endless demo: {folder} already holds a demo memory; remove it or name another folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_demo(args: argparse.Namespace) -> int:
    """``endless demo``; Ctrl-C or SIGTERM at any point stops it with no traceback (exit 130, 143)."""
    raise_on_sigterm()
    sock = None
    if not args.no_serve:  # a busy port is told now, not after the whole replay
        from endless.faces.rpc.serve import bind_socket

        port = load_settings().rpc_port if args.port is None else args.port
        try:
            sock = bind_socket(port)
        except OSError:
            print(f"endless demo: port {port} is already in use; try --port 0 (any free port) "
                  "or --no-serve", file=sys.stderr)
            return 1
    folder = _folder(args.dir)
    keep = args.keep or args.dir is not None
    held = _Held()
    try:
        with diagnostics.diverted_to(held):
            return _demo(folder, keep, sock, held)
    except (KeyboardInterrupt, Terminated) as stop:
        print("endless demo: stopped", file=sys.stderr)
        return exit_code(stop)
    finally:
        if sock is not None:
            sock.close()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _demo(folder: Path, keep: bool, sock, held: _Held) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    script = conversation.load()
    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)  # the chats' folder: the CLI finds the memory through it
    settings = Settings(settle_poll_seconds=1.0).replace(home=str(folder))
    config = ReplayConfig(caches=("deepseek",), settings=settings, model_writer=False, settle_all=True,
                          window_tokens=DEMO_WINDOW, start_wall=(script[0].at or 0) - 60)
    kept = "kept after exit" if keep else "removed on exit; --keep keeps it"
    out.print(f"The demo memory lives in {folder} ({kept}); your own memories are not touched.")
    try:
        with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("turns", total=len(script))
            agents: list[conversation.TranscriptAgent] = []

            def agent(current):
                agents.append(conversation.TranscriptAgent(current))
                return agents[-1]

            result = Replay(folder, script, config, agent=agent,
                            progress=lambda done, total: progress.update(task, completed=done)).run()
    except Exception:
        for line in held.lines[-40:]:
            print(line, file=sys.stderr)
        raise
    with Memory.open(memory_id=result.memory_id, settings=settings, root=folder, readonly=True) as memory:
        tell(out, memory, result, script, agents[0].looked, folder, workspace, serving=sock is not None, keep=keep,
             window=DEMO_WINDOW)
    if sock is None:
        return 0
    return _serve(folder, result.memory_id, sock, out)


def _serve(folder: Path, memory_id: str, sock, out) -> int:
    """Serve the History page on the demo memory until Ctrl-C."""
    from endless.faces.rpc.serve import start_in_thread

    settings = load_settings(environ={"ENDLESS_HOME": str(folder)})
    served = start_in_thread(settings, root=folder, current=memory_id, sock=sock)
    out.print(f"\nHistory page: {served.url}  (every turn by day, and what the memory remembers)")
    out.print("Serving it until Ctrl-C.")
    sys.stdout.flush()
    try:
        wait_for_stop()
    finally:
        served.stop()
    return 0
