"""``endless catch-up``: write the lines a memory still lacks, in the foreground, with a progress bar.

After a long import nothing else may run the writer (it runs inside Hermes,
``endless chat`` or the demo): this command does, until nothing is left or
it is stopped (what is written stays written; running it again resumes).
The offline writer is the default without a ``writer_route``: no model, no
cost.  With the model (``--writer model``, or by default when a route is set)
it first says what the lines will cost and the spend cap that bounds it.  A
memory whose writer runs in another process already (a Hermes chat, a
detached catch-up an import started) is left to it, and the command says
which.  ``endless import`` starts it detached (``--background``) when the
offline writer would take too long to wait for.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import orjson

from endless.core.words import count
from endless.faces.kit.catching_up import catch_up, last_run
from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose
from endless.faces.kit.signals import Terminated, exit_code, raise_on_sigterm
from endless.faces.kit.writing_cost import CatchUp, catch_up_cost, choose_writer

SAMPLED_LEAVES = 200  # unwritten messages read to price what the model reads of them all


def _command(args: argparse.Namespace) -> int:
    from endless.core.memory import MemoryUseError
    from endless.core.store import LockBusy

    raise_on_sigterm()
    memory = None
    said = sys.stderr if args.json else sys.stdout  # what is said before the work: never inside --json's answer
    try:
        memory = choose(args, readonly=False)
        if args.writer == "model" and not memory.settings.writer_route.strip():
            print("[endless.catch-up] --writer model needs the writer_route setting (`endless config` shows it); "
                  "or leave --writer out for the offline writer", file=sys.stderr)
            return EXIT_USAGE
        writer = choose_writer(args.writer, memory.settings)
        if writer == "model":
            price = estimate(memory, time.time())
            said.write(f"memory {memory.memory_id}: {price.sentence()}\n")
            said.flush()
        done = catch_up(memory, writer, sys.stderr.isatty() and not args.no_progress, background=args.background,
                        model_asked=args.writer == "model")
    except ChoiceError as exc:
        print(f"[endless.catch-up] {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (MemoryUseError, LockBusy) as exc:
        print(f"[endless.catch-up] {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        from endless.faces.kit.oserrors import os_error_said

        print(f"[endless.catch-up] stopped: {os_error_said(exc)}. The lines written so far are kept: run it again "
              "to go on", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, Terminated) as stop:
        print("[endless.catch-up] stopped; the lines written so far are kept: run it again to go on",
              file=sys.stderr)
        return exit_code(stop)
    finally:
        if memory is not None:
            memory.close()
    if args.json:
        sys.stdout.write(orjson.dumps(done).decode() + "\n")
    elif done["elsewhere"]:
        sys.stdout.write(f"memory {done['memoryId']}: {_elsewhere(memory, done)}; {count(done['left'], 'line')} "
                         "left, written there; `endless doctor` shows its progress\n")
    else:
        sys.stdout.write(f"memory {done['memoryId']}: wrote {count(done['written'], 'line')} in "
                         f"{done['seconds']:.1f} s ({done['writer']} writer); "
                         + (f"{count(done['left'], 'line')} left" if done["left"] else "nothing left to write")
                         + ("; the spend cap paused it (`endless writer resume` lifts it for today)\n"
                            if done["paused"] else "\n"))
    return EXIT_OK


def _elsewhere(memory: Any, done: dict) -> str:
    """Which other process writes the memory's lines, in words."""
    pid = done.get("holder")
    run = last_run(memory)
    if pid is not None and run is not None and run.pid == pid and run.state == "running":
        return f"its lines are being written by a {run.name} (pid {pid})"
    return f"its writer runs in another process{f' (pid {pid})' if pid is not None else ''} (a chat using it)"


def estimate(memory: Any, now: float) -> CatchUp:
    """What the model will take to write what is left (its sources' bytes read from a sample)."""
    from endless.writer.pace import leaves_left, lines_left

    slots, total = memory.built_slots(), memory.total
    leaves = leaves_left(slots, total)
    merges = lines_left(slots, total) - leaves
    row = slots[0] if slots else ()
    unwritten = [i for i in range(total) if i >= len(row) or not row[i]]
    sample = random.Random(total).sample(unwritten, min(SAMPLED_LEAVES, len(unwritten)))
    sizes = [memory.views.source_size(i) for i in sample]
    long_bytes = int(sum(sizes) / len(sizes) * len(unwritten)) if sizes else 0
    return catch_up_cost(memory.settings, "model", leaves, merges, long_bytes, memory.folder, now)


def add_catch_up_parser(sub: Any) -> None:
    parser = sub.add_parser("catch-up", help="write the summary lines a memory still lacks (after an import)",
                            description=("Write the lines a memory still lacks, in the foreground, until nothing "
                                         "is left: after `endless import`, or when no chat has run the writer. "
                                         "Stopping keeps what was written; running it again resumes. With the "
                                         "model it first says the price and the spend cap."),
                            epilog="example:\n  endless catch-up --workspace ~/code/project",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_memory_arguments(parser)
    parser.add_argument("--writer", choices=("offline", "model"), default=None,
                        help="offline (free, no model) or model (the writer_route, under the spend cap); "
                             "default: model when writer_route is set, else offline")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.add_argument("--background", action="store_true", help=argparse.SUPPRESS)  # started by an import
    parser.set_defaults(run=_command)
