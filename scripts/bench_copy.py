"""``endless store copy`` and folders' identities, measured (issue 31 items 3 and 4).

1. A memory of N messages is imported into a fresh ``ENDLESS_HOME`` (files), then
   copied with the real command into PostgreSQL (a throwaway cluster started as the
   tests start one, ``tests/pg_server.py``, or ``--dsn``) and back into a fresh memory
   root: wall time of each command, and MB/s of log and tree together (each copy reads
   the source twice, once to copy and once to verify, and the target once).
2. What a folder's identity costs a hook, per lookup: ``folder_identity`` of a folder
   outside any repository, of a repository's top, of a folder four levels below it, and
   of one with an ``.endless-id``; and ``workspace_key`` + ``find_memory`` on a root of
   200 memories (what ``Memory.open`` adds before opening).

Usage: python scripts/bench_copy.py [--messages 20000,100000] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from endless.core.settings import Settings  # noqa: E402
from endless.core.store import find_memory, folder_identity, workspace_key  # noqa: E402


def _endless(env: dict, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "endless", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"endless {' '.join(args[:3])} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def _source(path: Path, messages: int) -> None:
    with open(path, "wb") as handle:
        for k in range(messages):
            role = "user" if k % 2 == 0 else "assistant"
            text = f"message {k} about the {('tulip', 'fern', 'maple', 'cedar')[k % 4]} beds " + "x" * (80 + k % 200)
            handle.write(orjson.dumps({"role": role, "content": text, "at": 1.7e9 + k, "session": f"s{k % 7}"}) + b"\n")


def _stream_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("memories/*/t*.jsonl"))


def bench_copy(sizes: list[int], dsn: str | None) -> None:
    cluster = None
    if dsn is None:
        import pg_server

        cluster = pg_server.start_cluster()
        dsn = cluster.dsn()
    try:
        print("| messages | log+tree MB | to PostgreSQL s | MB/s | back to files s | MB/s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size in sizes:
            work = Path(tempfile.mkdtemp(prefix="endless-bench-copy-"))
            try:
                import psycopg

                schema = f"bench_{size}_{os.getpid()}"
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f"CREATE SCHEMA {schema}")
                url = f"{dsn}?options=-csearch_path%3D{schema}"
                env = {**os.environ, "ENDLESS_HOME": str(work / "home"), "ENDLESS_CONFIG": str(work / "none.toml"),
                       "PYTHONPATH": str(REPO)}
                env.pop("ENDLESS_STORE", None)
                (work / "ws").mkdir()
                _source(work / "chat.jsonl", size)
                _endless(env, "import", "--workspace", str(work / "ws"), str(work / "chat.jsonl"))
                mb = _stream_bytes(work / "home") / 1e6
                to_pg = _endless(env, "store", "copy", "--to", url)
                back = _endless({**env, "ENDLESS_STORE": url}, "store", "copy", "--to", str(work / "back"))
                print(f"| {size:,} | {mb:.1f} | {to_pg:.2f} | {mb / to_pg:.1f} | {back:.2f} | {mb / back:.1f} |")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        if cluster is not None:
            cluster.remove()


def _per_call(fn, rounds: int = 2000) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        times.append((time.perf_counter() - start) / rounds)
    return statistics.median(times) * 1e6


def bench_identity() -> None:
    work = Path(tempfile.mkdtemp(prefix="endless-bench-id-"))
    try:
        plain = work / "plain" / "notes"
        plain.mkdir(parents=True)
        top = work / "shop"
        deep = top / "src" / "app" / "core" / "models"
        deep.mkdir(parents=True)
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
        subprocess.run(["git", "init", "-q", str(top)], check=True, env=env)
        subprocess.run(["git", "-C", str(top), "remote", "add", "origin", "git@github.com:ana/shop.git"],
                       check=True, env=env)
        named = work / "named"
        named.mkdir()
        (named / ".endless-id").write_text("shop-billing\n")
        root = work / "root"
        for k in range(200):
            (root / "memories" / f"{k:016x}").mkdir(parents=True)
            (root / "memories" / f"{k:016x}" / "key.json").write_text("{}")
        settings = Settings(home=str(root))
        print()
        print("| lookup | µs per call |")
        print("|---|---:|")
        for label, folder in (("folder outside any repository", plain), ("repository's top", top),
                              ("4 levels below the top", deep), ("folder with an .endless-id", named)):
            print(f"| folder_identity: {label} | {_per_call(lambda f=folder: folder_identity(f)):.0f} |")
        print(f"| workspace_key + find_memory, root of 200 memories | "
              f"{_per_call(lambda: find_memory(workspace_key(None, deep), settings, root), 500):.0f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", default="20000,100000")
    parser.add_argument("--dsn")
    args = parser.parse_args()
    bench_copy([int(n) for n in args.messages.split(",")], args.dsn)
    bench_identity()


if __name__ == "__main__":
    main()
