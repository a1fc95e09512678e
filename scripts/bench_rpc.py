#!/usr/bin/env python
"""RPC benchmark: latency of the host RPC under 200 concurrent requests at a 100k-message memory.

Builds the memory with the engine benchmark's builder (``scripts/bench_engine.py``:
seeded texts, 2-3 messages a turn, every line written), or reuses one with
``--keep DIR``.  Then starts ``endless serve --port 0`` as its own process
(the real standalone server: uvicorn, the app, its thread pools) and fires a
fixed, seeded mix at it: 40% ``endless.view``, 30% ``endless.zoom`` (half
messages, half merged lines of the view), 20% ``endless.history`` (a page of
50 turns before a random turn), 10% ``endless.search`` (mostly common words,
some found only deep in the log or nowhere), keeping ``--concurrency``
requests in flight on as many keep-alive connections.  The client is a small
HTTP/1.1 client on asyncio streams, so it takes little of the CPU the server
needs.  Latency is from sending a request to having read its whole answer.

Prints a markdown table: per method, requests, p50, p99 and max latency, and
errors (non-200 or ``ok: false``).  Target: p99 ≤ 100 ms for view and zoom,
zero errors.  Logs go to stderr.

    .venv/bin/python scripts/bench_rpc.py                    # build in a temporary folder
    .venv/bin/python scripts/bench_rpc.py --keep /tmp/bench-rpc   # build once, reuse after
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import orjson  # noqa: E402

import bench_engine  # noqa: E402

MIX = (("view", 40), ("zoom", 30), ("history", 20), ("search", 10))
COMMON_WORDS = ["commit", "cache", "session", "timeout", "writer", "socket", "parser", "the window"]
DEEP_WORDS = [bench_engine.HIT_WORD, bench_engine.MISS_WORD]
TARGET_MS = 100.0


def say(text: str) -> None:
    print(f"[bench_rpc {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- the memory -----------------------------------------------------------------------------------


def build_or_reuse(folder: Path, messages: int, seed: int, tail: int) -> dict:
    info = folder / "build.json"
    if info.exists():
        data = json.loads(info.read_text())
        if data.get("size") == messages:
            say(f"reusing the {messages:,}-message memory in {folder}")
            return data
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    say(f"building a {messages:,}-message memory in {folder}")
    data = bench_engine.build(folder, messages, seed, 2000, tail, 10, 8)
    info.write_text(json.dumps(data, indent=1))
    say(f"built in {data['build_s']:.0f} s")
    return data


# -- a small HTTP/1.1 client ----------------------------------------------------------------------


TOKEN = [""]  # the served root's RPC token, read once the server has made it


class Connection:
    """One keep-alive connection; ``post`` sends a request and reads its whole answer."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.token = TOKEN[0]
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Authorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        close = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        data = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def envelope(method: str, rpc_id: int, args: dict) -> bytes:
    return orjson.dumps({"type": "client-request", "rpcId": rpc_id, "method": f"endless.{method}",
                         "payload": {"args": args}})


def plan(n: int, seed: int, memory_id: str, total: int, turns: int, view: list[dict]) -> list[tuple[str, dict]]:
    """The fixed mix: ``n`` (method, args), shuffled by ``seed``."""
    rng = random.Random(seed)
    merged = [line for line in view if line["n"] > 1]
    methods = [m for m, weight in MIX for _ in range(weight)]
    out = []
    for k in range(n):
        method = methods[k % len(methods)]
        if method == "view":
            args = {"memoryId": memory_id}
        elif method == "zoom":
            if k % 2 and merged:
                line = rng.choice(merged)
                args = {"memoryId": memory_id, "id": line["id"], "n": line["n"]}
            else:
                args = {"memoryId": memory_id, "id": rng.randrange(total), "n": 1}
        elif method == "history":
            args = {"memoryId": memory_id, "before": rng.randint(1, turns), "limit": 50}
        else:
            words = DEEP_WORDS if rng.random() < 0.2 else COMMON_WORDS
            args = {"memoryId": memory_id, "query": rng.choice(words), "limit": 50}
        out.append((method, args))
    rng.shuffle(out)
    return out


async def fire(host: str, port: int, work: list[tuple[str, dict]], concurrency: int,
               mode: str = "batch") -> dict:
    """Send ``work`` on ``concurrency`` keep-alive connections.

    ``batch``: ``concurrency`` requests at once, the next batch when all are answered (every batch
    holds the mix).  ``stream``: each connection sends its next request as soon as it has an answer
    (slow requests then hold more of the connections than the mix says).
    """
    results: dict[str, list[float]] = {m: [] for m, _ in MIX}
    errors: dict[str, list[str]] = {m: [] for m, _ in MIX}
    conns = [Connection(host, port) for _ in range(concurrency)]

    async def one_request(conn: Connection, k: int, method: str, args: dict) -> None:
        body = envelope(method, k, args)
        t0 = time.perf_counter()
        try:
            status, data = await conn.post(f"/api/endless.{method}", body)
            elapsed = time.perf_counter() - t0
            answer = orjson.loads(data)
            if status != 200 or not answer["result"]["ok"]:
                errors[method].append(f"{status} {answer['result'].get('error')}")
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
            elapsed = time.perf_counter() - t0
            errors[method].append(repr(exc))
            conn.close()
        results[method].append(elapsed)

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(conn.open() for conn in conns))
        if mode == "batch":
            for start in range(0, len(work), concurrency):
                batch = work[start:start + concurrency]
                await asyncio.gather(*(one_request(conns[j], start + j, method, args)
                                       for j, (method, args) in enumerate(batch)))
        else:
            queue = list(enumerate(work))
            queue.reverse()

            async def worker(conn: Connection) -> None:
                while queue:
                    k, (method, args) = queue.pop()
                    await one_request(conn, k, method, args)

            await asyncio.gather(*(worker(conn) for conn in conns))
    finally:
        for conn in conns:
            conn.close()
    return {"latency": results, "errors": errors, "wall": time.perf_counter() - t0}


def start_server(folder: Path) -> tuple[subprocess.Popen, str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env.update({"ENDLESS_HOME": str(folder), "ENDLESS_CONFIG": str(folder / "no-config.toml"),
                "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen([sys.executable, "-m", "endless.cli", "serve", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=sys.stderr, text=True, cwd=str(folder))
    address = proc.stdout.readline().strip()
    if not address:
        raise SystemExit(f"endless serve did not start (exit {proc.poll()})")
    parts = urlsplit(address)
    TOKEN[0] = (folder / "rpc-token").read_text().strip()  # the host RPC's credential (0600, ours)
    return proc, parts.hostname, parts.port


def one(host: str, port: int, method: str, args: dict) -> dict:
    async def go() -> dict:
        conn = Connection(host, port)
        try:
            status, data = await conn.post(f"/api/endless.{method}", envelope(method, 0, args))
        finally:
            conn.close()
        answer = orjson.loads(data)
        if status != 200 or not answer["result"]["ok"]:
            raise SystemExit(f"endless.{method} failed: {status} {answer}")
        return answer["result"]["value"]
    return asyncio.run(go())


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000


def table(run: dict, concurrency: int, n: int) -> str:
    rows = ["| method | requests | p50 ms | p99 ms | max ms | errors | target |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for method, _ in MIX:
        lat = run["latency"][method]
        p99 = pct(lat, 0.99)
        target = f"p99 ≤ {TARGET_MS:.0f} ms: {'met' if p99 <= TARGET_MS else 'MISSED'}" \
            if method in ("view", "zoom") else ""
        rows.append(f"| {method} | {len(lat)} | {pct(lat, 0.5):.1f} | {p99:.1f} | "
                    f"{max(lat) * 1000 if lat else float('nan'):.1f} | {len(run['errors'][method])} | {target} |")
    all_lat = [x for lat in run["latency"].values() for x in lat]
    errors = sum(len(e) for e in run["errors"].values())
    rows.append(f"| all | {len(all_lat)} | {pct(all_lat, 0.5):.1f} | {pct(all_lat, 0.99):.1f} | "
                f"{max(all_lat) * 1000:.1f} | {errors} | {n / run['wall']:.0f} requests/s |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages in the memory (default 100,000)")
    parser.add_argument("--keep", help="build the memory in DIR and keep it (reused when it is there)")
    parser.add_argument("--requests", type=int, default=4000, help="requests in the measured run (default 4,000)")
    parser.add_argument("--concurrency", type=int, default=200, help="requests in flight (default 200)")
    parser.add_argument("--warmup", type=int, default=400, help="requests before measuring (default 400)")
    parser.add_argument("--tail", type=int, default=2000, help="messages committed live at the end of the build")
    parser.add_argument("--mode", choices=("batch", "stream"), default="batch",
                        help="batch: CONCURRENCY requests at once, then the next batch (default); "
                             "stream: each connection sends again as soon as it is answered")
    parser.add_argument("--seed", type=int, default=bench_engine.SEED)
    args = parser.parse_args()

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-rpc-"))
    try:
        build = build_or_reuse(folder, args.messages, args.seed, args.tail)
        memory_id = bench_engine.KEY.memory_id
        proc, host, port = start_server(folder)
        try:
            view = one(host, port, "view", {"memoryId": memory_id})["lines"]
            say(f"serving on {host}:{port}; the view has {len(view)} lines")
            total, turns = build["total"], build["turns"]
            if args.warmup:
                asyncio.run(fire(host, port, plan(args.warmup, args.seed + 1, memory_id, total, turns, view),
                                 args.concurrency, args.mode))
            work = plan(args.requests, args.seed, memory_id, total, turns, view)
            workers = children(proc.pid)
            before = (cpu_seconds(proc.pid), sum(cpu_seconds(w) for w in workers), time.process_time(), load())
            run = asyncio.run(fire(host, port, work, args.concurrency, args.mode))
            after = (cpu_seconds(proc.pid), sum(cpu_seconds(w) for w in workers), time.process_time(), load())
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for method, errs in run["errors"].items():
            for e in errs[:3]:
                say(f"error in {method}: {e}")
        revision = bench_engine._revision()
        print(f"RPC at {revision}; {os.cpu_count()} CPUs; {total:,} messages in {turns:,} turns; "
              f"view {len(view)} lines; {args.requests:,} requests, {args.concurrency} at a time ({args.mode}), "
              f"after {args.warmup} warm-up requests; {run['wall']:.1f} s.\n")
        print(table(run, args.concurrency, args.requests))
        server_cpu, worker_cpu, client_cpu = (after[k] - before[k] for k in range(3))
        print(f"\nCPU during the run: server process {server_cpu:.1f} s "
              f"({server_cpu / args.requests * 1000:.2f} ms a request), {len(workers)} search workers "
              f"{worker_cpu:.1f} s, this client {client_cpu:.1f} s, in {run['wall']:.1f} s of wall time; "
              f"load average {before[3]} before, {after[3]} after.")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
