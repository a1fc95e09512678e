#!/usr/bin/env python
"""Adversarial checks of issue #17 items 5-7: links, errors without tracebacks, the RPC's local security.

Each attack runs against the real thing: memories made by the engine on
disk, the ``endless`` command in its own process, the RPC server (uvicorn,
the app) on a loopback port, raw sockets.  Attacks by "another local user"
run in a forked child that drops to uid/gid 65534 (nobody), which needs root;
run as anyone else, those are listed as skipped, not as held.

Prints a markdown table: each attack, what must happen, and whether it held.
Exits 1 if any attack got through.  ``tests/faces/test_attacks.py`` runs the
same attacks in CI.

    .venv/bin/python scripts/attack.py
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import httpx
import orjson

from endless.core.store.keys import workspace_key
from endless.core.memory import Memory, memories_dir
from endless.core.store.messages import Message
from endless.core.settings import Settings

NOBODY = 65534
HEADER_SECONDS = 2.0
BODY_SECONDS = 1.0
PER_CLIENT = 8
SLACK = 3.0  # seconds a closing may take past its deadline on a busy machine


class Broke(Exception):
    """The attack got through: what happened instead of the expected outcome."""


@dataclass(frozen=True)
class Attack:
    name: str
    expected: str
    run: Callable[["Lab"], None]  # raises Broke if the attack got through
    second_user: bool = False  # acts as another local user (needs root)


# -- the lab: a memory root, a memory in it, a server on demand -----------------------------------


class Lab:
    """A fresh memory root with one memory of three turns, and helpers to attack it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.config = base / "no-config.toml"  # none: defaults, the same for every user
        self.outside = base / "outside.txt"  # a file of the same user that no memory should touch
        self.outside.write_bytes(b"precious\n")
        os.chmod(self.outside, 0o644)
        self.workspace = base / "ws"
        self.workspace.mkdir()
        self.key = workspace_key(None, self.workspace)  # as a chat in that folder makes it
        memory = Memory.open(self.key, root=self.root, settings=self.settings())
        for t in range(3):
            memory.commit_turn(f"s{t}", "Chat", [Message("user", f"question {t} zebra", 1_790_000_000.0 + t),
                                                Message("reply", f"answer {t}", 1_790_000_000.0 + t)],
                               status="completed")
        self.mid, self.folder = memory.memory_id, memory.folder
        memory.close()

    @staticmethod
    def settings(**values) -> Settings:
        base = dict(rpc_header_seconds=HEADER_SECONDS, rpc_body_seconds=BODY_SECONDS,
                    rpc_connections_per_client=PER_CLIENT, rpc_search_workers=1)
        base.update(values)
        return Settings(**base)

    def cli(self, *argv: str, shell_tail: str | None = None) -> tuple[int, str, str]:
        """Run ``endless ARGV`` in its own process on this root; ``shell_tail``: a pipe after it."""
        env = dict(os.environ, ENDLESS_HOME=str(self.root), ENDLESS_CONFIG=str(self.config),
                   PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "endless.cli", *argv]
        if shell_tail:
            line = " ".join(f"'{w}'" for w in command) + " | " + shell_tail
            done = subprocess.run(["bash", "-o", "pipefail", "-c", line], env=env, capture_output=True,
                                  text=True, timeout=120)
        else:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    def cli_as(self, uid: int, *argv: str) -> tuple[int, str, str]:
        """``endless ARGV`` run as ``uid`` in a forked child (the interpreter cannot be exec'd as nobody
        under /root, so the child reuses this one; the command runs once first to load its modules)."""
        self.cli_here(*argv)
        return as_user(uid, lambda: self.cli_here(*argv))

    def cli_here(self, *argv: str) -> tuple[int, str, str]:
        """``endless ARGV`` in this process (stdout and stderr captured through files)."""
        from endless import cli

        kept = {name: os.environ.get(name) for name in ("ENDLESS_HOME", "ENDLESS_CONFIG")}
        os.environ["ENDLESS_HOME"] = str(self.root)
        os.environ["ENDLESS_CONFIG"] = str(self.config)
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        said_out, said_err = io.StringIO(), io.StringIO()  # what goes through sys.stdout / sys.stderr
        try:
            try:
                with contextlib.redirect_stdout(said_out), contextlib.redirect_stderr(said_err):
                    code = cli.main(list(argv))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            except BaseException:  # noqa: BLE001 - a traceback is what the attack looks for
                import traceback
                traceback.print_exc()
                code = 99
            sys.stdout.flush(), sys.stderr.flush()
        finally:
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
            for name, value in kept.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        out.seek(0), err.seek(0)
        return (code, said_out.getvalue() + out.read().decode(errors="replace"),
                said_err.getvalue() + err.read().decode(errors="replace"))

    @contextlib.contextmanager
    def server(self, **values) -> Iterator[object]:
        from endless.faces.rpc import start_in_thread

        served = start_in_thread(self.settings(**values), 0, root=self.root, current=self.mid)
        try:
            yield served
        finally:
            served.stop()

    def envelope(self, method: str, **args) -> bytes:
        return orjson.dumps({"type": "client-request", "rpcId": 1, "method": f"endless.{method}",
                             "payload": {"args": args}})


def as_user(uid: int, work: Callable[[], object]) -> object:
    """``work()`` run in a forked child as ``uid`` (gid the same, no groups); returns what it returned."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, do the work, send back its result
        code = 0
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.environ["HOME"] = "/nonexistent"  # the other user's own home, not root's
            result: object = ("ok", work())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
            result = ("raised", f"{type(exc).__name__}: {exc}")
            code = 1
        with contextlib.suppress(BaseException):
            os.write(writer, orjson.dumps(result, default=str))
        os._exit(code)
    os.close(writer)
    chunks = []
    while chunk := os.read(reader, 65536):
        chunks.append(chunk)
    os.close(reader)
    os.waitpid(pid, 0)
    kind, value = orjson.loads(b"".join(chunks))
    if kind == "raised":
        raise Broke(f"the other user's side failed: {value}")
    return value


def no_traceback(code: int, out: str, err: str, *, want_code: bool = True) -> str:
    """The error line a command printed; Broke if it printed a traceback or exited 0 (when ``want_code``)."""
    if "Traceback" in out + err:
        raise Broke("printed a traceback: " + (out + err).strip().splitlines()[-1][:160])
    if want_code and code == 0:
        raise Broke(f"exited 0 (stdout {out[:80]!r})")
    return err.strip().splitlines()[-1] if err.strip() else ""


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise Broke(what)


# -- item 5: links ------------------------------------------------------------------------------


def damaged_link(lab: Lab) -> None:
    quarantine = lab.folder / "damaged.jsonl"
    quarantine.symlink_to(lab.outside)
    with open(lab.folder / "turns.turn.v1.jsonl", "ab") as log:
        log.write(b'{"torn": "half a li')  # a torn last line: the next writer moves it to damaged.jsonl
    code, out, err = lab.cli("doctor", "--repair")
    expect(lab.outside.read_bytes() == b"precious\n", "the torn bytes were appended to the outside file")
    said = no_traceback(code, out, err)
    expect("symbolic link" in out + err, f"doctor did not name the link ({said!r})")


def holder_link(lab: Lab) -> None:
    holder = lab.folder / "lock.holder"
    holder.unlink()
    holder.symlink_to(lab.outside)
    try:
        memory = Memory.open(lab.key, root=lab.root, settings=lab.settings())
    except OSError as exc:
        expect("symbolic link" in str(exc) and "rm " in str(exc), f"refused, but unclearly: {exc}")
    else:
        memory.close()
        raise Broke("the memory opened for writing with lock.holder a link")
    expect(lab.outside.read_bytes() == b"precious\n", "the pid was written over the outside file")


def log_link(lab: Lab) -> None:
    log = lab.folder / "turns.turn.v1.jsonl"
    copy = lab.base / "elsewhere.jsonl"
    shutil.move(log, copy)
    log.symlink_to(copy)
    code, out, err = lab.cli("view", "--memory", lab.mid)
    said = no_traceback(code, out, err)
    expect("symbolic link" in said, f"view did not say the log is a link: {said!r}")
    code, out, err = lab.cli("doctor")
    no_traceback(code, out, err)
    expect("turns.turn.v1.jsonl is a symbolic link" in out, "doctor did not report the linked log")


def key_link(lab: Lab) -> None:
    key = lab.folder / "key.json"
    copy = lab.base / "key-copy.json"
    shutil.copy(key, copy)
    key.unlink()
    key.symlink_to(copy)
    code, out, err = lab.cli("search", "--memory", lab.mid, "zebra")
    said = no_traceback(code, out, err)
    expect("symbolic link" in said, f"search did not say key.json is a link: {said!r}")


def key_dangling_link(lab: Lab) -> None:
    key = lab.folder / "key.json"
    key.unlink()
    key.symlink_to(lab.base / "nowhere.json")
    try:
        Memory.open(lab.key, root=lab.root, settings=lab.settings()).close()
    except OSError as exc:
        expect("symbolic link" in str(exc), f"refused, but unclearly: {exc}")
    else:
        raise Broke("the memory was made anew over the link")
    expect(key.is_symlink() and not (lab.base / "nowhere.json").exists(), "the link was replaced or followed")


# -- item 6: errors in words --------------------------------------------------------------------


def _hand_to_nobody(lab: Lab) -> None:
    """Make the whole root belong to nobody, the user the commands then run as."""
    for where, dirs, files in os.walk(lab.root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(where, name), NOBODY, NOBODY)
    os.lchown(lab.root, NOBODY, NOBODY)


def folder_000(lab: Lab) -> None:
    _hand_to_nobody(lab)
    lab.cli_here("view", "--memory", lab.mid)
    lab.cli_here("doctor")
    os.chmod(lab.folder, 0)
    for argv in (("view", "--memory", lab.mid), ("search", "--memory", lab.mid, "zebra"),
                 ("zoom", "--memory", lab.mid, "0+1"), ("doctor",)):
        code, out, err = as_user(NOBODY, lambda argv=argv: lab.cli_here(*argv))
        said = no_traceback(code, out, err)
        expect("no memory" not in said, f"{argv[0]} said {said!r}")
        if argv[0] == "doctor":
            expect("cannot" in out and "ERROR" in out, f"doctor did not report the folder: {out[-200:]!r}")
        else:
            expect("permission denied" in said, f"{argv[0]} said {said!r}")


def lock_unreadable(lab: Lab) -> None:
    _hand_to_nobody(lab)
    lab.cli_here("doctor")
    os.chmod(lab.folder / "lock", 0)
    os.chmod(lab.folder / "lock.holder", 0o400)
    code, out, err = as_user(NOBODY, lambda: lab.cli_here("doctor"))
    no_traceback(code, out, err)
    expect("cannot write" in out and "lock" in out, f"doctor said ok: {out[-300:]!r}")


def log_is_folder(lab: Lab) -> None:
    log = lab.folder / "turns.turn.v1.jsonl"
    log.unlink()
    log.mkdir()
    for argv in (("view", "--memory", lab.mid), ("search", "--memory", lab.mid, "zebra")):
        code, out, err = lab.cli(*argv)
        said = no_traceback(code, out, err)
        expect("folder" in said or "directory" in said.lower(), f"{argv[0]} said {said!r}")


def key_newer(lab: Lab) -> None:
    key = lab.folder / "key.json"
    meta = orjson.loads(key.read_bytes())
    meta["format"] = 99
    key.write_bytes(orjson.dumps(meta))
    for argv in (("view", "--memory", lab.mid), ("view", "--workspace", str(lab.workspace))):
        code, out, err = lab.cli(*argv)
        said = no_traceback(code, out, err)
        expect("newer" in said and "upgrade" in said, f"`endless {' '.join(argv[:2])}` said {said!r}")
    if os.geteuid() != 0:  # the owner itself, whom the mode stops
        os.chmod(lab.folder / "key.json", 0)
        code, out, err = lab.cli("view", "--workspace", str(lab.workspace))
    else:  # root reads any file: the memory becomes nobody's, who then runs the command
        meta["format"] = 1
        key.write_bytes(orjson.dumps(meta))
        _hand_to_nobody(lab)
        lab.cli_here("view", "--workspace", str(lab.workspace))  # loads the modules the child needs
        os.chmod(lab.folder / "key.json", 0)
        code, out, err = as_user(NOBODY, lambda: lab.cli_here("view", "--workspace", str(lab.workspace)))
    said = no_traceback(code, out, err)
    expect("no memory yet" not in said and "permission denied" in said, f"an unreadable key.json read as {said!r}")


def pipe_to_head(lab: Lab) -> None:
    code, out, err = lab.cli("history", "--memory", lab.mid, shell_tail="head -c 10")
    expect("Traceback" not in err and "BrokenPipe" not in err, f"stderr: {err[-160:]!r}")
    expect(len(out) <= 10, "head did not cut the output")


# -- item 7: the RPC and the folders ------------------------------------------------------------


def rpc_without_token(lab: Lab) -> None:
    from endless.faces.rpc import credential

    with lab.server() as served:
        base = served.base
        bind = lab.envelope("bind", sessionId="victim-session", agent="evil", project="/evil")
        for headers in ({}, {"authorization": "Bearer " + "x" * 43}, {"authorization": "Basic abc"}):
            r = httpx.post(f"{base}/api/endless.bind", content=bind,
                           headers={"content-type": "application/json", **headers})
            expect(r.status_code == 401, f"bind with {headers or 'no header'} answered {r.status_code}")
            r = httpx.post(f"{base}/api/endless.view", content=lab.envelope("view", memoryId=lab.mid),
                           headers={"content-type": "application/json", **headers})
            expect(r.status_code == 401 and "rpc-token" in r.text, f"view answered {r.status_code}")
        expect(not any("victim-session" in p.read_text(errors="replace")
                       for p in (lab.root / "sessions").glob("*")) if (lab.root / "sessions").exists() else True,
               "a session was bound without the credential")
        r = httpx.post(f"{base}/api/endless.view", content=lab.envelope("view", memoryId=lab.mid),
                       headers={"content-type": "application/json", **credential.auth_headers(lab.root)})
        expect(r.status_code == 200 and r.json()["result"]["ok"], f"the owner was refused: {r.text[:120]}")


def other_user_reads(lab: Lab) -> None:
    from endless.faces.rpc import credential

    with lab.server():
        pass  # the token file exists from here on

    def peek() -> dict:
        found = {}
        for path in (credential.token_path(lab.root), memories_dir(lab.root), lab.folder / "key.json"):
            try:
                if path.is_dir():
                    os.listdir(path)
                else:
                    path.read_bytes()
                found[str(path)] = "read"
            except PermissionError:
                found[str(path)] = "denied"
        return found

    seen = as_user(NOBODY, peek)
    expect(all(v == "denied" for v in seen.values()), f"another user could read: {seen}")


def loose_root_tightened(lab: Lab) -> None:
    folders = (lab.root, memories_dir(lab.root), lab.folder, lab.folder / "index")
    for folder in folders:
        expect(os.stat(folder).st_mode & 0o777 == 0o700, f"{folder} was created {os.stat(folder).st_mode & 0o777:o}")
        os.chmod(folder, 0o755)
    code, out, err = lab.cli("view", "--memory", lab.mid)
    expect(code == 0, f"view failed: {err[-160:]}")
    for folder in folders:
        expect(os.stat(folder).st_mode & 0o777 == 0o700, f"{folder} stayed {os.stat(folder).st_mode & 0o777:o}")
    expect("made it 0700" in err, f"no note said so: {err[-200:]!r}")


def closed_within(sock: socket.socket, limit: float) -> tuple[bool, float, bytes]:
    """Wait (polling the socket, up to ``limit`` s) for the server to answer or close; (closed?, seconds, data)."""
    start = time.monotonic()
    sock.settimeout(0.05)
    data = b""
    while time.monotonic() - start < limit:
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return True, time.monotonic() - start, data
        if not chunk:
            return True, time.monotonic() - start, data
        data += chunk
    return False, time.monotonic() - start, data


def half_sent_headers(lab: Lab) -> None:
    with lab.server() as served:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(b"POST /api/endless.view HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            closed, took, data = closed_within(sock, HEADER_SECONDS + SLACK)
        expect(closed and not data, f"still open after {took:.1f} s" if not closed else f"answered {data[:40]!r}")
        expect(took >= HEADER_SECONDS * 0.8, f"closed after {took:.2f} s, before the deadline")
        # A slow trickle (a byte a second) does not reset the deadline.
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            start = time.monotonic()
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            closed = False
            while time.monotonic() - start < HEADER_SECONDS + SLACK and not closed:
                closed, _, _ = closed_within(sock, 0.5)
                if not closed:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"a")
            took = time.monotonic() - start
        expect(closed and took < HEADER_SECONDS + SLACK, f"a trickle kept it open {took:.1f} s")


def half_sent_body(lab: Lab) -> None:
    from endless.faces.rpc import credential

    with lab.server() as served:
        token = credential.auth_headers(lab.root)
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(f"POST /api/endless.view HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                         f"Authorization: {token['authorization']}\r\nContent-Type: application/json\r\n"
                         "Content-Length: 500\r\n\r\n{\"type\":".encode())
            closed, took, data = closed_within(sock, BODY_SECONDS + SLACK)
        expect(b" 408 " in data.split(b"\r\n", 1)[0], f"answered {data[:40]!r} after {took:.1f} s")
        expect(BODY_SECONDS * 0.8 <= took <= BODY_SECONDS + SLACK, f"answered after {took:.2f} s")


def connection_flood(lab: Lab) -> None:
    from endless.faces.rpc import credential

    with lab.server() as served:
        port = served.port
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()

        def flood() -> list[str]:
            socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(PER_CLIENT + 2)]
            answers = []
            for sock in socks[PER_CLIENT:]:
                _, _, data = closed_within(sock, HEADER_SECONDS)
                answers.append(data.split(b"\r\n", 1)[0].decode(errors="replace"))
            os.write(ready_w, b"1")
            os.read(go_r, 1)  # held open until the owner has been served
            for sock in socks:
                sock.close()
            return answers

        pid_result: dict = {}

        def owner() -> None:
            os.read(ready_r, 1)
            try:
                r = httpx.post(f"{served.base}/api/endless.view", content=lab.envelope("view", memoryId=lab.mid),
                               headers={"content-type": "application/json", **credential.auth_headers(lab.root)},
                               timeout=10)
                pid_result["owner"] = r.status_code
            finally:
                os.write(go_w, b"1")

        import threading
        thread = threading.Thread(target=owner)
        thread.start()
        try:
            answers = as_user(NOBODY, flood)
        finally:
            thread.join(30)
        expect(all(" 503 " in a + " " for a in answers), f"past its bound the flood got {answers}")
        expect(pid_result.get("owner") == 200, f"the owner got {pid_result.get('owner')} during the flood")


def page_token_expires(lab: Lab) -> None:
    with lab.server() as served:
        keys = served.app.state.endless.keys
        stale = served.new_url()
        fresh = served.new_url()
        now = time.monotonic()
        keys.clock = lambda: now + lab.settings().rpc_page_token_seconds + 1
        r = httpx.get(stale)
        expect(r.status_code == 403 and "expired" in r.text and "endless serve" in r.text,
               f"a stale address answered {r.status_code}: {r.text[:120]!r}")
        keys.clock = time.monotonic
        again = httpx.get(fresh.replace(fresh.split("token=")[1], stale.split("token=")[1]))
        expect(again.status_code == 403, "the stale token worked after all")
        ok = httpx.get(served.new_url(), follow_redirects=False)
        expect(ok.status_code == 303, f"a new address answered {ok.status_code}")


ATTACKS: list[Attack] = [
    Attack("damaged.jsonl is a link to an outside file, and the log has a torn tail",
           "the repair refuses the link; the outside file is unchanged; doctor names the link", damaged_link),
    Attack("lock.holder is a link to an outside file", "opening for writing is refused with `rm PATH`; "
           "the outside file is unchanged", holder_link),
    Attack("the turn log is a link to a copy elsewhere", "view refuses it in words; doctor reports it", log_link),
    Attack("key.json is a link", "search refuses it in words", key_link),
    Attack("key.json is a dangling link", "opening refuses it; no new memory made over it, nothing made "
           "where it points", key_dangling_link),
    Attack("the memory folder is mode 000 (its owner runs view, search, zoom, doctor)",
           "each says permission denied, no traceback; doctor reports it", folder_000, second_user=True),
    Attack("lock is unreadable and lock.holder unwritable", "doctor reports both as errors (not ok)",
           lock_unreadable, second_user=True),
    Attack("the turn log is a folder", "view and search say so, no traceback", log_is_folder),
    Attack("key.json has a newer format, then is unreadable (view --memory, view --workspace)",
           "view says upgrade, then permission denied; never 'no memory yet'", key_newer),
    Attack("endless history \\| head -c 10", "no traceback, no BrokenPipe", pipe_to_head),
    Attack("host RPC called with no, a wrong or a Basic credential (view, bind a victim's session)",
           "401 naming rpc-token; nothing bound; the owner's token works", rpc_without_token),
    Attack("another local user reads the token, lists memories/, reads key.json",
           "permission denied on each (0600 file, 0700 folders)", other_user_reads, second_user=True),
    Attack("the root, memories/, the memory folder and its index/ were 0755", "created 0700; tightened at open, with a note",
           loose_root_tightened),
    Attack("half-sent request headers (and a trickle, a byte every half second)",
           f"closed within rpc_header_seconds ({HEADER_SECONDS:g} s)", half_sent_headers),
    Attack("a body declared 500 bytes, 8 sent", f"408 within rpc_body_seconds ({BODY_SECONDS:g} s)", half_sent_body),
    Attack(f"another user opens {PER_CLIENT + 2} idle connections",
           f"past {PER_CLIENT} they get 503; the owner is served meanwhile", connection_flood, second_user=True),
    Attack("a page address opened after it expired", "403 page saying it expired and how to get a new one",
           page_token_expires),
]


def run(attack: Attack) -> tuple[str, str]:
    """``(outcome, detail)``: outcome ``held``, ``BROKE`` or ``skipped``."""
    if attack.second_user and os.geteuid() != 0:
        return "skipped", "needs root to act as a second local user"
    base = Path(tempfile.mkdtemp(prefix="endless-attack-"))
    os.chmod(base, 0o755)  # the second user may walk to the root (and is then stopped by its 0700)
    try:
        attack.run(Lab(base))
        return "held", ""
    except Broke as broke:
        return "BROKE", str(broke)
    except Exception as exc:  # noqa: BLE001 - the attack itself failed: not held
        return "BROKE", f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    rows, broke = [], 0
    for k, attack in enumerate(ATTACKS, 1):
        started = time.monotonic()
        outcome, detail = run(attack)
        broke += outcome == "BROKE"
        rows.append(f"| {k} | {attack.name} | {attack.expected} | {outcome}"
                    f"{': ' + detail if detail else ''} | {time.monotonic() - started:.1f} s |")
        print(f"[attack] {k}/{len(ATTACKS)} {outcome}: {attack.name}", file=sys.stderr, flush=True)
    print("| # | attack | expected | outcome | took |\n|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if broke else 0


if __name__ == "__main__":
    raise SystemExit(main())
