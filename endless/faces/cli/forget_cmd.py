"""``endless forget``: remove messages' words from a memory, keeping their ids as tombstones.

``--dry-run`` lists what would go and changes nothing; without it the
messages are forgotten at once (a person who typed the ids meant them; the
History page and the Hermes command ask first).  ``--hermes`` also puts the
tombstone in Hermes's own copy (``endless.faces.kit.hermes_copy``), and
exits 2 before changing anything when Endless is not installed in the Hermes home.  Exit codes as the read
commands: 0 done, 1 no such memory, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from endless.core import moments
from endless.core.words import agree, count
from endless.faces.kit.answers import BAD_REQUEST, AnswerError
from endless.faces.kit.choose import memory_id_word
from endless.faces.kit.terminal import one_line
from endless.faces.kit.read_commands import CLI_NAMES, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, message_word, said

NAMES = {**CLI_NAMES, "ids": "ID", "turns": "--turn", "query": "--matching", "dryRun": "--dry-run"}


def add_forget_parser(sub: Any) -> None:
    parser = sub.add_parser("forget", help="forget messages: their words leave the memory, their ids stay as "
                                           "tombstones (try --dry-run first)",
                            epilog="example:\n  endless forget 4242 --dry-run",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ids", metavar="ID", nargs="*", type=message_word, help="message numbers to forget")
    parser.add_argument("--turn", dest="turns", metavar="TURN", type=int, action="append",
                        help="forget every message of this turn (repeatable)")
    parser.add_argument("--since", metavar="WHEN", help="forget messages from this date or time on")
    parser.add_argument("--before", metavar="WHEN", help="forget messages before this date or time")
    parser.add_argument("--matching", metavar="WORDS", help="forget every message holding these words (any case)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be forgotten; change nothing")
    parser.add_argument("--hermes", action="store_true",
                        help="also replace the text in Hermes's own copy (its state.db and session files) "
                             "with the tombstone; the Hermes home is $HERMES_HOME, else ~/.hermes")
    parser.add_argument("--memory", metavar="ID", type=memory_id_word,
                        help="a memory id (16 hex digits; `endless memories` lists them)")
    parser.add_argument("--workspace", help="the workspace whose memory to change (default: this folder)")
    parser.add_argument("--json", action="store_true", help="print the endless.forget value as JSON")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from endless.core.store import InvalidKey
    from endless.core.settings import load_settings
    from endless.faces.kit.choose import folder_memory_id
    from endless.faces.kit.forgetting import forget_value
    from endless.faces.kit.hermes_copy import HermesCopyError

    if not (args.ids or args.turns or args.since or args.before or args.matching):
        print("[endless] say what to forget: message ids (`endless forget 4242`), --turn TURN, --since/--before "
              "WHEN or --matching WORDS; add --dry-run to see what would go first", file=sys.stderr)
        return EXIT_USAGE
    settings = load_settings()
    hermes = None
    if args.hermes:
        from endless.faces.kit.hermes_copy import installed
        from endless.faces.kit.hermes_files import hermes_home

        hermes = hermes_home()
        if not installed(hermes):
            print(f"[endless] --hermes: the Endless plugin is not installed in the Hermes home {hermes} "
                  "(set HERMES_HOME to the right one, or run `endless hermes install`); nothing was forgotten",
                  file=sys.stderr)
            return EXIT_USAGE
    try:
        mid = args.memory or folder_memory_id(settings, Path(args.workspace or "."))
    except InvalidKey as exc:
        print(f"[endless] {exc}", file=sys.stderr)
        return EXIT_USAGE
    call = {"memoryId": mid, "ids": args.ids or None, "turns": args.turns, "since": args.since,
            "before": args.before, "query": args.matching, "dryRun": args.dry_run}
    try:
        value = forget_value(settings, call, hermes=hermes)
    except AnswerError as exc:
        error = said(exc)
        for rpc, cli in NAMES.items():
            if error.startswith(rpc + " "):
                error = cli + error[len(rpc):]
        print(f"[endless] {error}", file=sys.stderr)
        return EXIT_USAGE if exc.code == BAD_REQUEST else EXIT_NOT_FOUND
    except HermesCopyError as exc:
        print(f"[endless] --hermes: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    out = sys.stdout
    if args.json:
        out.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    messages = value["messages"]
    if not messages and not value["titles"] and not value["lines"]:
        print("[endless] nothing to forget: no message matched (or it was forgotten already)", file=sys.stderr)
        return EXIT_OK
    for m in messages:
        head = f"{m['id']:>8}  turn {m['turn']}  {one_line(m['kind']):<6} {moments.local(m['at'])}"
        out.write(head + (f"  {one_line(repr(m['text']))}" if "text" in m else "") + "\n")
    for title in value.get("titleTexts", []):
        out.write(f"{'title':>8}  {one_line(repr(title))}\n")
    lines = count(value["lines"], "summary line")
    titles = f", {count(value['titles'], 'chat title')}" if value["titles"] else ""
    if value["dryRun"]:
        out.write(f"would forget {count(len(messages), 'message')}{titles} and rewrite {lines}; "
                  "run again without --dry-run to do it\n")
    else:
        out.write(f"forgot {count(len(messages), 'message')}{titles}; {lines} "
                  f"{agree(value['lines'], 'is', 'are')} written again by the writer "
                  f"({count(value['bytesRewritten'], 'byte', grouped=True)} erased in place, {value['seconds']} s)\n")
    copy = value.get("hermes")
    if copy is not None:
        verb = "would replace" if value["dryRun"] else "replaced"
        out.write(f"Hermes ({copy['home']}): {verb} the text of {count(copy['rows'], 'row')} of state.db and "
                  f"{count(copy['files'], 'session file')} with the tombstone"
                  + (f", and {'would clear' if value['dryRun'] else 'cleared'} "
                     f"{count(copy['titles'], 'session title')}" if copy.get("titles") else "") + "\n")
    print(f"[endless] {value['cannotReach']}", file=sys.stderr)
    return EXIT_OK
