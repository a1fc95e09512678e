"""``endless catch-up``: write the lines a memory still lacks, in the foreground, with a progress bar.

After a long import nothing else may run the writer (it runs inside Hermes,
``endless chat`` or the demo): this command does, until nothing is left or
it is stopped (what is written stays written; running it again resumes).
The offline writer is the default without a ``writer_route``: no model, no
cost.  ``--writer model`` uses the configured route under the spend cap.  A
memory whose writer runs in another process already (a Hermes chat) is left
to it, and the command says so.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from endless.core.words import count
from endless.faces.kit.catching_up import catch_up
from endless.faces.kit.choose import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ChoiceError, add_memory_arguments, choose
from endless.faces.kit.signals import Terminated, exit_code, raise_on_sigterm

def _command(args: argparse.Namespace) -> int:
    from endless.core.memory import MemoryUseError

    raise_on_sigterm()
    memory = None
    try:
        memory = choose(args, readonly=False)
        writer = args.writer or ("model" if memory.settings.writer_route.strip() else "offline")
        if writer == "model" and not memory.settings.writer_route.strip():
            print("[endless.catch-up] --writer model needs the writer_route setting (`endless config` shows it); "
                  "or leave --writer out for the offline writer", file=sys.stderr)
            return EXIT_USAGE
        done = catch_up(memory, writer, sys.stderr.isatty() and not args.no_progress)
    except ChoiceError as exc:
        print(f"[endless.catch-up] {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryUseError as exc:
        print(f"[endless.catch-up] {exc}", file=sys.stderr)
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
        sys.stdout.write(f"memory {done['memoryId']}: its writer runs in another process (a chat using it); "
                         f"{count(done['left'], 'line')} left, written there; `endless doctor` shows it\n")
    else:
        sys.stdout.write(f"memory {done['memoryId']}: wrote {count(done['written'], 'line')} in "
                         f"{done['seconds']:.1f} s ({done['writer']} writer); "
                         + (f"{count(done['left'], 'line')} left\n" if done["left"] else "nothing left to write\n"))
    return EXIT_OK


def add_catch_up_parser(sub: Any) -> None:
    parser = sub.add_parser("catch-up", help="write the summary lines a memory still lacks (after an import)",
                            description=("Write the lines a memory still lacks, in the foreground, until nothing "
                                         "is left: after `endless import`, or when no chat has run the writer. "
                                         "Stopping keeps what was written; running it again resumes."),
                            epilog="example:\n  endless catch-up --workspace ~/code/project",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_memory_arguments(parser)
    parser.add_argument("--writer", choices=("offline", "model"), default=None,
                        help="offline (free, no model) or model (the writer_route, under the spend cap); "
                             "default: model when writer_route is set, else offline")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.set_defaults(run=_command)
