"""Live capture of a coding agent, timed as its host runs it: a hook is a whole process.

For each transcript length (Claude Code's shape, a prompt, a tool call, its
result and a reply per turn) the transcript is first captured whole, then one
more turn is appended and ``endless hook claude Stop`` runs as Claude Code runs
it (its JSON on stdin), ``--calls`` times: the hook's wall time (median, p99;
it starts the capture and returns), and the capture it starts, alone, waited
for (``endless capture``).
Then the hand-over (``endless hook claude SessionStart``): its wall time and
its size.  Each call reads only what is new, so the times should not grow
with the transcript; the ratio column divides by the smallest length's.

Usage: python scripts/bench_capture.py [--lines 100,10000,100000] [--calls 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def turn_events(session: str, cwd: str, n: int, at: float) -> list[dict]:
    def event(kind: str, content: object) -> dict:
        return {"type": kind, "uuid": str(uuid.uuid4()), "sessionId": session, "cwd": cwd, "isSidechain": False,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at)),
                "message": {"role": "user" if kind == "user" else "assistant", "content": content}}

    call = f"toolu_{n:012x}"
    return [event("user", f"Turn {n}: check the ledger totals for region {n % 17} and fix the export"),
            event("assistant", [{"type": "tool_use", "id": call, "name": "Read",
                                 "input": {"file_path": f"src/ledger_{n % 50}.py"}}]),
            event("user", [{"type": "tool_result", "tool_use_id": call, "content": "def total(rows): ..." * 8}]),
            event("assistant", [{"type": "text", "text": f"The totals of region {n % 17} add up now; the export "
                                                         "skips refunds with a zero amount." * 2}])]


def run(command: list[str], env: dict, stdin: bytes = b"") -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=600)
    if done.returncode:
        raise SystemExit(f"{command[:4]} failed: {done.stderr.decode()[-800:]}")
    return time.perf_counter() - started, done.stdout


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="100,10000,100000")
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    endless = [sys.executable, "-m", "endless"]
    # The floor every hook pays: this Python starting and ending, measured in the same run.
    bare = statistics.median(run([sys.executable, "-c", "pass"], dict(os.environ))[0] for _ in range(args.calls))
    rows = []
    for lines in [int(x) for x in args.lines.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
            base = Path(tmp)
            workspace, user = base / "work", base / "user"
            workspace.mkdir()
            transcript = user / ".claude" / "projects" / "-work" / "s.jsonl"
            transcript.parent.mkdir(parents=True)
            session = str(uuid.uuid4())
            env = {**os.environ, "ENDLESS_HOME": str(base / "home"), "HOME": str(user), "ENDLESS_HOOK_WAIT": "0",
                   "XDG_CONFIG_HOME": str(base / "xdg")}
            at = time.time() - 86400
            with open(transcript, "w") as handle:
                for n in range(lines // 4):
                    for event in turn_events(session, str(workspace), n, at + n):
                        handle.write(json.dumps(event) + "\n")
            first, _ = run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript),
                                      "--workspace", str(workspace), "--final"], env)
            payload = json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": str(workspace),
                                  "hook_event_name": "Stop"}).encode()
            hooks, captures = [], []
            for k in range(args.calls):
                with open(transcript, "a") as handle:
                    for event in turn_events(session, str(workspace), lines + 2 * k, time.time()):
                        handle.write(json.dumps(event) + "\n")
                hooks.append(run(endless + ["hook", "claude", "Stop"], env, payload)[0])
                run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript), "--workspace",
                               str(workspace), "--turn-over"], env)  # waits for the hook's own (one at a time)
                with open(transcript, "a") as handle:
                    for event in turn_events(session, str(workspace), lines + 2 * k + 1, time.time()):
                        handle.write(json.dumps(event) + "\n")
                captures.append(run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript),
                                               "--workspace", str(workspace), "--turn-over"], env)[0])
            start = json.dumps({"session_id": str(uuid.uuid4()), "cwd": str(workspace),
                                "hook_event_name": "SessionStart", "source": "startup"}).encode()
            handover_times, size = [], 0
            for _ in range(5):
                seconds, out = run(endless + ["hook", "claude", "SessionStart"], env, start)
                handover_times.append(seconds)
                size = len(json.loads(out)["hookSpecificOutput"]["additionalContext"].encode()) if out.strip() else 0
            rows.append((lines, first, statistics.median(hooks), percentile(hooks, 0.99),
                         statistics.median(captures), statistics.median(handover_times), size))
    base_hook = rows[0][2]
    print(f"bare Python start and exit: {bare * 1000:.0f} ms median")
    print("| transcript lines | first capture s | hook median ms | hook p99 ms | hook ÷ smallest | hook ÷ bare Python | "
          "capture median ms | hand-over median ms | hand-over bytes |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lines, first, median, p99, capture, handover, size in rows:
        print(f"| {lines:,} | {first:.2f} | {median * 1000:.0f} | {p99 * 1000:.0f} | {median / base_hook:.2f} | "
              f"{median / bare:.1f} | {capture * 1000:.0f} | {handover * 1000:.0f} | {size:,} |")


if __name__ == "__main__":
    main()
