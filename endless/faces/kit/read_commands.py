"""The CLI's read commands: ``memories``, ``view``, ``zoom``, ``date``, ``search``, ``history``.

Each prints data on stdout (``--json``: the same value the host RPC answers,
from :mod:`endless.faces.kit.answers`) and diagnostics on stderr.  Exit codes: 0 done;
1 not found (no such memory, line, message or page); 2 bad usage or settings
(a malformed argument, an invalid settings file); 3 a partial search (its time limit
cut it: the answer says which messages it searched and the ``--below`` that goes on).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from endless.faces.kit import answers
from endless.faces.kit.answers import AnswerError, ArgumentError
from endless.faces.kit.choose import memory_id_word
from endless.faces.kit.terminal import entry, one_line, shown, title
from endless.core.view import fold
from endless.core import moments

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2
EXIT_PARTIAL = 3  # a search its time limit cut: the hits are right, but only for the messages it searched
LIST_COMMAND = "`endless memories`"
# The RPC's argument names as a person types them on this command line.
CLI_NAMES = {"memoryId": "--memory", "id": "ID", "n": "N", "page": "--page", "before": "--before",
             "limit": "--limit", "query": "the words to find", "agent": "--agent", "offset": "--offset",
             "from": "--from", "since": "--since", "kind": "--kind", "scope": "--scope",
             "below": "--below"}


def line_word(text: str) -> tuple[int, int | None]:
    """``ID`` or ``ID+N``, the form ``endless view`` prints at the start of each line."""
    first, plus, rest = text.strip().partition("+")
    try:
        ident = int(first)
        n = int(rest) if plus else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a line: give ID+N as `endless view` prints it "
                                         "(such as 0+16), or ID and N apart") from None
    return ident, n


def message_word(text: str) -> int:
    """A message number, also in the forms a line of one message is named (``11+0``, ``11+1``)."""
    ident, n = line_word(text)
    if n is not None and n not in (0, 1):
        raise argparse.ArgumentTypeError(f"{text!r} is a line of {n} messages, not one message: "
                                         f"give one of its message numbers, such as {ident}")
    return ident


def add_read_parsers(sub: Any) -> None:
    """Registers the read commands on the ``endless`` command's subparsers."""
    memories = sub.add_parser("memories", help="list the memories, the most recently used first",
                              epilog="example:\n  endless memories --agent endless",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    memories.add_argument("--agent", help="only the memories of this agent")
    memories.add_argument("--json", action="store_true", help="print the endless.memories value as JSON")
    memories.set_defaults(run=_run, method="memories")

    def reader(name: str, help_text: str, example: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text, epilog=f"example:\n  {example}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--memory", metavar="ID", type=memory_id_word,
                            help="a memory id (16 hex digits; `endless memories` lists them)")
        parser.add_argument("--workspace", help="the workspace whose memory to read (default: this folder)")
        parser.add_argument("--json", action="store_true", help=f"print the endless.{name} value as JSON")
        parser.set_defaults(run=_run, method=name)
        return parser

    reader("view", "print the memory's view: the lines the chat model sees instead of the history",
           "endless view --memory 0123456789abcdef")
    zoom = reader("zoom", "open line ID+N into its two halves, or message ID whole when N is 1", "endless zoom 0+16")
    zoom.add_argument("line", metavar="ID+N", type=line_word,
                      help="the line as `endless view` prints it (0+16), or its first message ID then N")
    zoom.add_argument("n", metavar="N", type=int, nargs="?",
                      help="how many messages the line covers (1: the message itself), when not given as ID+N")
    zoom.add_argument("--page", type=int, default=1, help="page of a long message (default 1)")
    date = reader("date", "print when message ID was written", "endless date 11")
    date.add_argument("id", metavar="ID", type=message_word, help="a message number")
    search = reader("search", "search the whole history: words ranked by relevance, a \"quoted phrase\" "
                              "exactly, or a /pattern/, newest first",
                    "endless search which database did we pick for billing")
    search.add_argument("words", nargs="+", help="words to rank (any order, any case), a \"quoted phrase\" "
                                                 "(quote it for the shell too: '\"a b\"'), or one /regular expression/")
    search.add_argument("--limit", type=int, help="at most this many hits (1-50, default 50)")
    search.add_argument("--offset", type=int, help="skip this many hits first (the next page)")
    search.add_argument("--chat", help="only the chat with this title (any part, any case) or session id")
    search.add_argument("--kind", choices=("person", "agent", "tool", "status"), help="only messages of this kind")
    search.add_argument("--since", help="only messages from this date or time on (2026-11-30, 2026-11-30T14:05)")
    search.add_argument("--before", help="only messages before this date or time")
    search.add_argument("--scope", choices=("messages", "lines", "both"),
                        help="search the messages (default), the summary lines, or both")
    search.add_argument("--below", type=int, metavar="ID",
                        help="only messages with an id below ID: goes on with a search its time limit cut "
                             f"(exit code {EXIT_PARTIAL} says which ID)")
    history = reader("history", "print whole turns, newest page last; page back with --before, forward with "
                     "--from or --since", "endless history --since 2026-11-30 --limit 10")
    start = history.add_mutually_exclusive_group()
    start.add_argument("--before", type=int, help="show turns before this turn number (default: the newest)")
    start.add_argument("--from", dest="start", type=int, metavar="TURN",
                       help="show turns from this turn number on (0: the oldest)")
    start.add_argument("--since", metavar="WHEN",
                       help="show turns from the first one at or after this date or time (2026-11-30, "
                            "or 2026-11-30T14:00, local time) on")
    history.add_argument("--limit", type=int, help="turns on the page (default 50, at most 200)")


def _open(args: argparse.Namespace, settings: Any):
    from endless.core.store import InvalidKey
    from endless.faces.kit.choose import folder_memory_id

    if args.memory:
        return answers.open_memory(settings, args.memory, listed_by=LIST_COMMAND)
    workspace = Path(args.workspace or ".")
    try:
        mid = folder_memory_id(settings, workspace)
    except InvalidKey as exc:
        raise AnswerError(answers.BAD_REQUEST, str(exc)) from None
    return answers.open_memory(settings, mid, listed_by=LIST_COMMAND,
                               missing=f"the workspace {workspace.resolve()} has no memory yet (it would "
                                       f"be {mid}); pick one with --memory, see `endless memories`")


def _args(args: argparse.Namespace) -> dict:
    method = args.method
    if method == "memories":
        return {"agent": args.agent}
    if method == "zoom":
        ident, n = args.line
        if n is not None and args.n is not None:
            raise AnswerError(answers.BAD_REQUEST, f"give the line as ID+N or as ID N, not both: "
                                                   f"`endless zoom {ident}+{n}`")
        if n is None and args.n is None:
            raise AnswerError(answers.BAD_REQUEST, f"say how many messages the line covers: "
                                                   f"`endless zoom {ident}+N` (N = 1 opens message {ident})")
        return {"id": ident, "n": n if n is not None else args.n, "page": args.page}
    if method == "date":
        return {"id": args.id}
    if method == "search":
        return {"query": " ".join(args.words), "limit": args.limit, "offset": args.offset, "chat": args.chat,
                "kind": args.kind, "since": args.since, "before": args.before, "scope": args.scope,
                "below": args.below}
    if method == "history":
        return {"before": args.before, "from": args.start, "since": args.since, "limit": args.limit}
    return {}


def _run(args: argparse.Namespace) -> int:
    from endless.core.settings import load_settings

    settings = load_settings()
    method = args.method
    note = None
    try:
        if method == "memories":
            value = answers.memories(settings, _args(args))
        else:
            with _open(args, settings) as memory:
                value = answers.answer(memory, method, _args(args), settings)
                note = _empty_note(args, value, memory.memory_id, memory.turns, memory.total)
    except AnswerError as exc:
        print(f"[endless] {one_line(said(exc))}", file=sys.stderr)  # it may quote what was typed
        return EXIT_USAGE if exc.code == answers.BAD_REQUEST else EXIT_NOT_FOUND
    if note is not None:  # like a search without hits: said on stderr, and still an answer (exit 0)
        print(f"[endless] {note}", file=sys.stderr)
    out = sys.stdout
    done = EXIT_PARTIAL if value.get("partial") else EXIT_OK
    if args.json:
        out.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
        return done
    TEXT[method](value, out)
    return done


def said(error: AnswerError) -> str:
    """The error as this command line says it: arguments named as the person typed them."""
    if isinstance(error, ArgumentError):
        return f"{CLI_NAMES.get(error.arg, error.arg)} {error.problem}"
    return error.message


def _empty_note(args: argparse.Namespace, value: dict, memory_id: str, turns: int, total: int) -> str | None:
    """One line saying why a view or history page is empty, or that --before was past the newest turn."""
    if args.method == "view" and not value["lines"]:
        return f"the view is empty: memory {memory_id} holds no messages yet"
    if args.method != "history":
        return None
    if turns == 0:
        return f"memory {memory_id} holds no turns yet"
    if not value["turns"]:
        if args.start is not None:
            return f"no turns from turn {args.start}: the newest is turn {turns - 1}"
        if args.since is not None:
            return f"no turns since {args.since}: the newest turn is older"
        return f"no turns before turn {args.before}: turn 0 is the first"
    if args.before is not None and args.before > turns:
        return (f"--before {args.before} is past the newest turn ({turns - 1}) of memory {memory_id}: "
                "this is the newest page")
    return None


# -- plain text ----------------------------------------------------------------------------------


def _when(at: float | None) -> str:
    if at is None:
        return "?"
    return moments.local(at, unknown="?")


def _memories(value: dict, out) -> None:
    for gone in value.get("unreadable", []):
        print(f"[endless] memory {gone['memoryId']} cannot be read ({gone['error']}); `endless doctor` says "
              "what to do", file=sys.stderr)
    if not value["memories"] and not value.get("unreadable"):
        print("[endless] no memories yet", file=sys.stderr)
    for m in value["memories"]:
        also = "".join(f"  (also {_keyed(a)})" for a in m.get("alsoBy", []))
        out.write(f"{m['memoryId']}  {m['turns']:>7} turns  last {_when(m['lastAt'])}  "
                  f"{one_line(m['agent'])}  {_keyed(m['keyedBy'])}{also}\n")


def _keyed(keyed: dict) -> str:
    """``repo github.com/ana/shop``, ``id shop-billing``, ``path /home/ana/x``, ``chat telegram:42``, with
    the folder below the identity's top after a ``//``."""
    folder = f"//{keyed['folder']}" if keyed.get("folder") else ""
    return one_line(f"{keyed['kind']} {keyed['value']}{folder}")


def _lines(value: dict, out) -> None:
    for line in value["lines"]:
        text = "(not written yet)" if line["text"] is None else one_line(fold(line["text"]))
        out.write(f"{line['id']}+{line['n']}|{text}\n")


def _zoom(value: dict, out) -> None:
    if "lines" in value:
        _lines(value, out)
        return
    m = value["message"]
    page = f" · page {m['page']} of {m['pages']}" if m["pages"] > 1 else ""
    out.write(f"message {m['id']} · {one_line(m['kind'])} · {_chat(m)}{_when(m['at'])}{page}\n")
    out.write(shown(m["text"]) + "\n")  # the message whole: its own line breaks kept, controls visible


def _chat(value: dict) -> str:
    """``«title» · `` in a header, or nothing for a chat not titled yet (no empty ``«»``)."""
    chat = title(value.get("sessionTitle"))
    return f"{chat} · " if chat else ""


def _date(value: dict, out) -> None:
    out.write(f"{value['local']}\n")


def _search(value: dict, out) -> None:
    if not value["hits"]:
        print("[endless] no hits", file=sys.stderr)
    if "indexed" in value:
        print(f"[endless] the search index is still being built: it covers the first {value['indexed']} "
              "messages; search again for the newer ones", file=sys.stderr)
    if "stoppedAt" in value:
        what = "search" if value.get("mode") == "words" else f"{value.get('mode', 'pattern')} search"
        print(f"[endless] the {what} stopped at its time limit, at message {value['stoppedAt']}",
              file=sys.stderr)
    bold = getattr(out, "isatty", lambda: False)()
    for hit in value["hits"]:
        text = _marked(hit["snippet"], hit.get("marks", []), bold)
        if hit["kind"] == "line":
            out.write(f"{hit['id']}+{hit['n']} · {_when(hit['at'])} · summary line: {text}\n")
            continue
        if hit["kind"] == "title":  # named by the chat's first message
            out.write(f"{hit['id']}+0 · {_when(hit['at'])} · the chat's title: «{text}»\n")
            continue
        inside = f" · in line {hit['line']}" if hit.get("line") and hit["line"] != f"{hit['id']}+1" else ""
        # a message as the tool and `endless zoom` name it (ID+0), so a hit reads the same everywhere
        out.write(f"{hit['id']}+0 · {_when(hit['at'])} · {_chat(hit)}{one_line(hit['kind'])}: "
                  f"{text}{inside}\n")
    if "next" in value:
        print(f"[endless] more hits: --offset {value['next']}", file=sys.stderr)
    if value.get("partial"):  # part of the answer, so on stdout: a pipe reading the hits reads this too
        start, end = value["searched"]["from"], value["searched"]["to"]
        covered = (f"messages {start} to {end - 1} only, newest first" if start is not None and start < end
                   else "no message")
        out.write(f"[partial] the search stopped at its time limit and searched {covered}; "
                  f"search the rest with the same words and --below {value['goOn']['below']}\n")


def _marked(snippet: str, marks: list, bold: bool) -> str:
    """On a terminal, the matched words in bold; in a pipe, the text as it is (both on one line,
    controls visible: the bold is added around pieces already made safe)."""
    if not bold or not marks:
        return one_line(snippet)
    out, at = [], 0
    for start, end in marks:
        if start < at:
            continue
        out += [one_line(snippet[at:start]), "\x1b[1m", one_line(snippet[start:end]), "\x1b[0m"]
        at = end
    return "".join(out + [one_line(snippet[at:])])


def _history(value: dict, out) -> None:
    for turn in value["turns"]:
        out.write(f"— turn {turn['turn']} · {_when(turn['at'])} · {_chat(turn)}{one_line(turn['status'])}\n")
        for message in turn["entries"]:  # a message's later lines indented: none can pass for an entry
            out.write(f"{message['id']} {one_line(message['kind'])}: {entry(message['text'])}\n")
    if "next" in value:
        print(f"[endless] earlier turns: --before {value['next']}", file=sys.stderr)
    if "later" in value:
        print(f"[endless] later turns: --from {value['later']}", file=sys.stderr)


TEXT = {"memories": _memories, "view": _lines, "zoom": _zoom, "date": _date, "search": _search,
        "history": _history}
