"""``endless store copy``: memories copied into a PostgreSQL database and back to files, resumable and verified.

The copy itself is the store floor's (:mod:`endless.core.store.copying`); this
face names the two stores in the person's words, says what it found and did, and
exits 0 (copied and verified), 1 (refused, failed, or a check disagreed: the
target was left as it was, or a prefix a second run finishes), or 2 (bad usage).
The database is always shown with its password masked.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import orjson

from endless.faces.kit.choose import memory_id_word
from endless.faces.kit.terminal import one_line

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FILES = "files"

DESCRIPTION = """\
Copies memories from one store to another: the order log and the tree of lines byte for byte, the
memory's key, its marks and the aliases that name it. The source is where memories are kept now (the
store setting, ENDLESS_STORE) unless --from says otherwise; nothing of the source changes.

Each of --from and --to is one of:
  postgresql://USER@HOST/DATABASE            a PostgreSQL database (its password in the URL, ~/.pgpass or
                                             PGPASSWORD; TLS options in its query, such as
                                             ?sslmode=verify-full&sslrootcert=/path/ca.pem, or the
                                             store_ssl* settings)
  files                                      the files under this ENDLESS_HOME (the embedded store)
  /a/folder                                  the files under another memory root

Resumable: a copy cut short (killed, a lost connection) is run again and goes on where it stopped,
never copying a line twice. A memory the target holds with another history is refused, and nothing
is copied. Verified: both sides' turns, messages, ids, lines and SHA-256 of the log are printed and
must agree."""

EXAMPLES = """\
examples:
  endless store copy --to postgresql://ana@db.example/endless        try the database
  ENDLESS_STORE=postgresql://ana@db.example/endless endless store copy --to files
                                                                      and leave it again
  endless store copy --to postgresql://ana@db.example/endless --memory 0123456789abcdef"""


def add_store_parser(sub: Any) -> None:
    store = sub.add_parser("store", help="move memories between stores: files and a PostgreSQL database",
                           epilog="example:\n  endless store copy --to postgresql://ana@db.example/endless",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = store.add_subparsers(dest="action")
    copy = actions.add_parser("copy", help="copy memories to another store, resumable and verified",
                              description=DESCRIPTION, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    copy.add_argument("--to", required=True, metavar="STORE",
                      help="where to copy: a postgresql:// URL, `files` (this ENDLESS_HOME), or a memory root folder")
    copy.add_argument("--from", dest="source", metavar="STORE",
                      help="where to copy from (default: the store setting, ENDLESS_STORE; files if it is empty)")
    copy.add_argument("--memory", metavar="ID", type=memory_id_word,
                      help="copy only this memory (16 hex digits; default: every memory of the source)")
    copy.add_argument("--json", action="store_true", help="print what was copied and both sides' tallies as JSON")
    copy.set_defaults(run=_copy)
    store.set_defaults(run=lambda args: _usage(store))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _say(text: str) -> None:
    print(f"[endless.store] {one_line(text)}", file=sys.stderr)


def _copy(args: argparse.Namespace) -> int:
    from endless.core.settings import SettingsError, is_postgres_url, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        _say(str(exc))
        return EXIT_USAGE
    source_word = args.source if args.source is not None else (settings.store.strip() or FILES)
    try:
        source_spec, target_spec = _spec(source_word, settings, "--from"), _spec(args.to, settings, "--to")
    except ValueError as exc:
        _say(str(exc))
        return EXIT_USAGE
    if source_spec == target_spec:
        _say(f"--from and --to name the same store ({_shown(source_spec)}); the memories are there already")
        return EXIT_USAGE
    if source_spec[0] == FILES and not (Path(source_spec[1]) / "memories").is_dir():
        _say(f"no memories under {source_spec[1]} to copy (--from {_shown(source_spec)})")
        return EXIT_FAILED
    from endless.core.store import copying

    source = target = None
    try:
        source, target = _side(source_spec, settings), _side(target_spec, settings)
        if source.kind == target.kind == "postgresql" and source.identity() == target.identity():
            _say(f"{source.where} and {target.where} are the same database; the memories are there already")
            return EXIT_USAGE
        ids = source.memory_ids()
        if args.memory is not None:
            if args.memory not in ids:
                _say(f"no memory {args.memory} in {source.where}; `endless memories` lists them")
                return EXIT_FAILED
            ids = [args.memory]
        if not ids:
            _say(f"no memories in {source.where}: nothing to copy")
            return EXIT_OK
        if source.kind == "files":
            _prepare_files(settings, Path(source_spec[1]), ids)
        plans = copying.plan(source, target, ids)
        done = copying.copy(source, target, plans, settings.store_copy_chunk_bytes, _progress())
    except copying.CopyRefused as exc:
        for line in str(exc).splitlines():
            _say(line)
        _say("nothing was copied" if target is None or "changed while" not in str(exc) else
             "the copy stopped; what it copied is whole: run it again once nothing else writes the memory")
        return EXIT_FAILED
    except OSError as exc:  # the database refused or went away (StoreUnavailable), a file it cannot read
        from endless.faces.kit.oserrors import os_error_said

        _say(os_error_said(exc) if not hasattr(exc, "strerror") or exc.strerror else str(exc))
        _say("what was copied is whole; run the same command again to go on")
        return EXIT_FAILED
    finally:
        for side in (source, target):
            if side is not None:
                side.close()
    return _report(done, source_spec, target_spec, args.json, is_postgres_url(settings.store))


def _spec(word: str, settings: Any, flag: str) -> tuple[str, str]:
    """``("postgresql", url)`` or ``("files", real path of a memory root)``; ValueError in the person's words."""
    from endless.core.settings import is_postgres_url

    text = word.strip()
    if is_postgres_url(text):
        return "postgresql", text
    if "://" in text:
        shown = re.sub(r"(://[^/@:]*:)[^@/]*@", r"\1***@", text.split("?", 1)[0])  # any URL's password masked
        raise ValueError(f"{flag} {shown!r} is not a store: give a postgresql:// URL, `files`, or a "
                         "memory root folder")
    if not text:
        raise ValueError(f"{flag} is empty: give a postgresql:// URL, `files`, or a memory root folder")
    root = settings.memory_root() if text == FILES else Path(text).expanduser()
    if root.exists() and not root.is_dir():
        raise ValueError(f"{flag} {text} is a file, not a memory root folder")
    return FILES, str(root.resolve(strict=False))


def _shown(spec: tuple[str, str]) -> str:
    from endless.core.settings import masked_store

    return masked_store(spec[1]) if spec[0] == "postgresql" else f"files under {spec[1]}"


def _side(spec: tuple[str, str], settings: Any) -> Any:
    if spec[0] == "postgresql":
        try:
            from endless.core.store import PgSide
        except ImportError:
            raise OSError("the PostgreSQL driver is not installed: pip install 'endless-memory[postgres]'") from None
        from endless.core.settings import store_url

        return PgSide(store_url(settings.replace(store=spec[1])))
    from endless.core.store import FilesSide

    return FilesSide(Path(spec[1]))


def _prepare_files(settings: Any, root: Path, ids: list[str]) -> None:
    """Each files memory opened once for writing before it is copied (a torn last line set aside, a turn
    its process died in closed as interrupted), and a memory made under a folder's path given the folder's
    identity as an alias, so the copy carries it and other machines find it by that."""
    from endless.core.memory import Memory, MemoryUseError
    from endless.core.store import find_memory, folder_identity, IdFileError, Key

    files = settings.replace(store="", home=str(root))
    for mid in ids:
        try:
            with Memory.open(memory_id=mid, settings=files, root=root, create=False) as memory:
                agent, project = memory.key.agent, memory.key.project
        except (MemoryUseError, OSError) as exc:
            _say(f"memory {mid} could not be opened before the copy ({exc}); it is copied as it is")
            continue
        if not project.startswith("/") or not Path(project).is_dir():
            continue
        try:
            identity = folder_identity(project)
        except IdFileError as exc:
            _say(f"memory {mid}: {exc}; it is copied without its folder's identity")
            continue
        if identity.project != project:
            find_memory(Key(agent, identity.project, identity.names), files, root)


def _progress():
    """Bytes copied, on stderr, on a terminal only (a line rewritten in place)."""
    if not sys.stderr.isatty():
        return lambda mid, done, total: None

    def show(mid: str, done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\r[endless.store] memory {mid}: {done:,} of {total:,} bytes", end=end, file=sys.stderr, flush=True)
    return show


def _report(done: list, source_spec: tuple[str, str], target_spec: tuple[str, str], as_json: bool,
            store_is_database: bool) -> int:
    from endless.core.store import shown_project
    from endless.core.words import count

    agree = all(c.agrees for c in done)
    if as_json:
        value = {"from": _shown(source_spec), "to": _shown(target_spec), "verified": agree,
                 "memories": [c.to_json() for c in done]}
        sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out = sys.stdout
        for c in done:
            s, t = c.source, c.target
            moved = c.copied["log"] + c.copied["tree"]
            what = f"copied {moved:,} bytes" if moved else "nothing to copy (the target had it all)"
            out.write(f"memory {c.memory_id} ({one_line(str(shown_project(c.project)))}): {what}\n")
            for label, tally in (("source", s), ("target", t)):
                ids = f"ids 0 to {tally.messages - 1}" if tally.messages else "no ids"
                out.write(f"  {label}: {count(tally.turns, 'turn')}, {count(tally.messages, 'message')} ({ids}), "
                          f"{count(tally.lines, 'line')}, log sha256 {tally.log_sha256}\n")
            if any(c.ahead.values()):
                out.write(f"  the target holds {c.ahead['log']:,} bytes of log more (turns made there since); "
                          "they stay\n")
            out.write(f"  {'verified: both sides agree' if c.agrees else 'NOT verified: the two sides differ'}\n")
        out.write(f"{count(len(done), 'memory', 'memories')} from {_shown(source_spec)} to {_shown(target_spec)}: "
                  f"{'verified' if agree else 'the target differs from the source'}\n")
    if not agree:
        _say("a copied memory does not match its source; run the copy again, and `endless doctor` where it is used")
        return EXIT_FAILED
    if target_spec[0] == "postgresql" and not store_is_database:
        _say("to use the database: set ENDLESS_STORE to its URL (the files stay as they are: "
             "`endless store copy --to files` brings the database's turns back)")
    elif target_spec[0] == FILES and store_is_database:
        _say("to use the files again: unset ENDLESS_STORE")
    return EXIT_OK
