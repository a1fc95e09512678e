"""Damage to a memory's files, at random (issue #33): every read is right or says it is damaged.

A memory of known messages is built once; each case copies it, changes one
of its files (a flipped bit, a cut, two lines swapped, a digit edited in
place, a field renamed or given another type, rows of the search index
edited) and runs every read command on it through the command line's own
entry point: ``view``, ``zoom``, ``date``, ``history``, ``search`` (words,
a phrase, a pattern, with ``--kind`` and ``--before``) and ``doctor``.

What each answer may be: exactly what was stored, or a refusal that says
the record is damaged (exit 1, in words); never another message's text,
never a message a filter excludes, never an exception.  And ``doctor`` is
never quiet about a change to the order log (the source of truth) or to
the search index's rows: it exits 1.  The cases are seeded (the same every
run) and bounded in time; ``ENDLESS_FUZZ_CASES`` runs more.  A few cases
run as real subprocesses too, as a person runs them.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import sqlite3
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from endless.cli import main
from endless.core.store.keys import workspace_key
from endless.core.memory import Memory
from endless.core.store.messages import Message
from endless.core.settings import Settings

from commands import endless_command

TURNS = 24
CASES = int(os.environ.get("ENDLESS_FUZZ_CASES", "60"))
SECONDS = float(os.environ.get("ENDLESS_FUZZ_SECONDS", "150"))  # the loop stops early past this (a shared machine), having run at least a third of them
START = 1_700_000_000.0
BEFORE = "2023-11-15"  # half the turns are before it (START + a day * t / 2)
KINDS = {"person": "user", "agent": "reply"}


@dataclass(frozen=True)
class Stored:
    id: int
    kind: str
    text: str
    at: float


def _text(turn: int, k: int) -> str:
    return f"turn{turn} {'question' if k == 0 else 'answer'} word{turn}x{k} common"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Path, dict[int, Stored]]:
    """(home, workspace, every message by id): a memory whose search index is built."""
    base = tmp_path_factory.mktemp("damage")
    home, workspace = base / "home", base / "work"
    workspace.mkdir()
    memory = Memory.open(workspace_key(None, workspace), settings=Settings(home=str(home)))
    known: dict[int, Stored] = {}
    for t in range(TURNS):
        at = START + t * 43_200.0
        messages = [Message("user", _text(t, 0), at), Message("reply", _text(t, 1), at + 1)]
        first = memory.total
        memory.commit_turn(f"s{t % 3}", f"Chat {t % 3}", messages)
        for k, m in enumerate(messages):
            known[first + k] = Stored(first + k, m.kind, m.text, m.at)
    memory.close()
    env = _env(home, base)
    assert _run(env, workspace, "search", "common", "--json")[0] == 0  # builds the index
    return home, workspace, known


def _env(home: Path, base: Path) -> dict[str, str]:
    (base / "xdg").mkdir(exist_ok=True)
    return {"ENDLESS_HOME": str(home), "XDG_CONFIG_HOME": str(base / "xdg"), "TZ": "UTC",
            "HERMES_HOME": str(base / "no-hermes")}


def _run(env: dict[str, str], workspace: Path, *args: str) -> tuple[int, str, str]:
    """One command through the CLI's entry point, in this process (what the subprocess runs)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main([*args] + (["--workspace", str(workspace)] if args[0] != "doctor" else []))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


# -- the changes ----------------------------------------------------------------------------------


def _memory_folder(home: Path) -> Path:
    (folder,) = (home / "memories").iterdir()
    return folder


def _flip(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    at = rng.randrange(len(data))
    data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return f"flip byte {at} of {path.name}"


def _cut(path: Path, rng: random.Random) -> str:
    size = path.stat().st_size
    at = rng.randrange(size)
    os.truncate(path, at)
    return f"cut {path.name} at {at}"


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _swap(path: Path, rng: random.Random) -> str:
    lines = _lines(path)
    a, b = rng.sample(range(len(lines)), 2)
    lines[a], lines[b] = lines[b], lines[a]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return f"swap lines {a} and {b} of {path.name}"


def _edit_digit(path: Path, rng: random.Random) -> str:
    """A same-length edit: one digit inside a record becomes another (an id, a time, a text)."""
    data = bytearray(path.read_bytes())
    digits = [k for k, c in enumerate(data) if chr(c).isdigit()]
    at = rng.choice(digits)
    data[at] = ord(rng.choice([d for d in "0123456789" if d != chr(data[at])]))
    path.write_bytes(bytes(data))
    return f"digit at byte {at} of {path.name}"


def _edit_field(path: Path, rng: random.Random) -> str:
    """A field renamed, or its value given another type (as by a hand or another program)."""
    lines = _lines(path)
    k = rng.randrange(len(lines))
    line = lines[k]
    edits = [(b'"at":', b'"au":'), (b'"x":"', b'"x":7,"y":"'), (b'"k":"', b'"k":"bogus'), (b'"s":"', b'"s":1,"q":"'),
             (b'"id":', b'"id":-'), (b'"m":[', b'"m":[3,'), (b'"tid":"', b'"tid":"zz')]
    old, new = rng.choice(edits)
    lines[k] = line.replace(old, new, 1)
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    return f"{old!r} -> {new!r} in line {k} of {path.name}"


def _index_rows(path: Path, rng: random.Random) -> str:
    """Rows of the search index given another kind or time (a reply as a person's, a 2023 message as 1999's)."""
    db = sqlite3.connect(path)
    try:
        ids = [i for (i,) in db.execute("SELECT id FROM msg")]
        picked = rng.sample(ids, 3)
        for mid in picked:
            if rng.random() < 0.5:
                db.execute("UPDATE msg SET kind = 1 - kind WHERE id = ?", (mid,))  # user <-> reply
            else:
                db.execute("UPDATE msg SET at = ? WHERE id = ?", (900_000_000.0, mid))
        db.commit()
    finally:
        db.close()
    return f"index rows {picked} of {path.name}"


LOG_CHANGES = [_flip, _flip, _cut, _swap, _edit_digit, _edit_digit, _edit_field]


def _change(folder: Path, rng: random.Random) -> tuple[str, str]:
    """Change one file at random; returns (which kind of file, what was done)."""
    roll = rng.random()
    log = folder / "turns.turn.v1.jsonl"
    if roll < 0.6:
        return "log", rng.choice(LOG_CHANGES)(log, rng)
    index = folder / "index"
    if roll < 0.75:
        return "rows", _index_rows(index / "search.v1.sqlite", rng)
    files = [p for p in index.iterdir() if p.is_file() and p.stat().st_size]
    path = rng.choice(files)
    return "derived", rng.choice([_flip, _flip, _cut])(path, rng)


# -- what the answers may be ----------------------------------------------------------------------


def _damage_said(err: str) -> bool:
    return "damaged" in err or "cannot be read" in err


def _check_reads(env: dict, workspace: Path, known: dict[int, Stored], rng: random.Random, what: str) -> None:
    ids = sorted(rng.sample(sorted(known), 10))
    for mid in ids:
        code, out, err = _run(env, workspace, "zoom", str(mid), "1", "--json")
        if code == 0:
            got = orjson.loads(out)["message"]
            assert (got["id"], got["kind"], got["text"], got["at"]) == (
                mid, known[mid].kind, known[mid].text, known[mid].at), what
        else:
            assert code == 1 and _damage_said(err), (what, err)
        code, out, err = _run(env, workspace, "date", str(mid), "--json")
        if code == 0:
            assert orjson.loads(out)["at"] == known[mid].at, what
        else:
            assert code == 1 and _damage_said(err), (what, err)
    code, out, err = _run(env, workspace, "history", "--json", "--limit", "100")
    assert code == 0, (what, err)
    seen = set()
    for turn in orjson.loads(out)["turns"]:
        for entry in turn["entries"]:
            mid = entry["id"]
            assert mid not in seen, (what, mid)  # never one id twice
            seen.add(mid)
            assert (entry["kind"], entry["text"]) == (known[mid].kind, known[mid].text), (what, mid)
    code, out, err = _run(env, workspace, "view")
    assert code == 0, (what, err)
    for t in range(TURNS):
        for piece in (f"word{t}x0", f"word{t}x1"):  # a message's words are only ever its own
            for line in out.splitlines():
                if piece in line:
                    assert f"turn{t} " in line, (what, line)
    for args, keep in ((["common"], lambda s: True),
                       (["common", "--kind", "person"], lambda s: s.kind == "user"),
                       (["common", "--kind", "agent"], lambda s: s.kind == "reply"),
                       (["common", "--before", BEFORE], lambda s: s.at < 1_700_006_400.0),
                       (['"common"', "--since", BEFORE], lambda s: s.at >= 1_700_006_400.0),
                       (["/word1[0-9]x1/"], lambda s: s.kind == "reply" and "word1" in s.text),
                       ([f"word{rng.randrange(TURNS)}x{rng.randrange(2)}"], None)):
        code, out, err = _run(env, workspace, "search", *args, "--json", "--limit", "50")
        assert code in (0, 1), (what, args, err)
        if code == 1:
            assert _damage_said(err) or "cannot search" in err, (what, args, err)
            continue
        for hit in orjson.loads(out)["hits"]:
            if hit["kind"] == "line":
                continue
            stored = known[hit["id"]]
            assert hit["kind"] == stored.kind and hit["at"] == stored.at, (what, args, hit)
            if keep is not None:
                assert keep(stored), (what, args, hit)
            else:
                assert args[0] in stored.text, (what, args, hit)


def test_every_read_of_a_damaged_memory_is_right_or_says_so(pristine, tmp_path):
    home, workspace, known = pristine
    started = time.monotonic()
    ran = 0
    for seed in range(CASES):
        if ran >= CASES // 3 and time.monotonic() - started > SECONDS:
            break
        rng = random.Random(seed)
        case_home = tmp_path / f"case{seed}"
        shutil.copytree(home, case_home)
        folder = _memory_folder(case_home)
        log = folder / "turns.turn.v1.jsonl"
        before = log.read_bytes()
        kind, what = _change(folder, rng)
        what = f"seed {seed}: {what}"
        env = _env(case_home, tmp_path)
        changed_log = log.read_bytes() != before
        # doctor first: it must find what changed before any reader sets anything right
        code, out, err = _run(env, workspace, "doctor", "--json")
        if changed_log or kind == "rows":
            assert code == 1, (what, out)
        _check_reads(env, workspace, known, rng, what)
        code, out, err = _run(env, workspace, "doctor", "--json")
        if changed_log:
            assert code == 1, (what, out)  # still: the log's damage is kept in place and reported
        shutil.rmtree(case_home)
        ran += 1
    assert ran >= CASES // 3


@pytest.mark.parametrize("seed", [3, 11])
def test_damaged_files_as_a_person_meets_them(pristine, tmp_path, seed):
    """The same, as real processes: exit codes and stderr in words, no traceback."""
    home, workspace, known = pristine
    rng = random.Random(1000 + seed)
    case_home = tmp_path / "home"
    shutil.copytree(home, case_home)
    folder = _memory_folder(case_home)
    _edit_digit(folder / "turns.turn.v1.jsonl", rng)
    _index_rows(folder / "index" / "search.v1.sqlite", rng)
    env = {**os.environ, **_env(case_home, tmp_path)}
    for args in (["doctor"], ["view"], ["history"], ["zoom", "20", "1"], ["date", "20"],
                 ["search", "common", "--kind", "person"], ["search", "/word1/"]):
        full = [*endless_command(), *args] + (["--workspace", str(workspace)] if args[0] != "doctor" else [])
        proc = subprocess.run(full, capture_output=True, text=True, timeout=60, env=env)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), (args, proc.stderr)
        if args[0] == "doctor":
            assert proc.returncode == 1 and "ERROR" in proc.stdout, proc.stdout
