"""Live capture of a coding agent, timed as its host runs it: a hook is a whole process.

For each transcript (Claude Code's shape: a prompt, a tool call, its result and
a reply per turn; by line count, and one of about 100 MB made of big tool
results) the transcript is first captured whole, then one more turn is
appended and ``endless hook claude Stop`` runs as Claude Code runs it (its JSON
on stdin), ``--calls`` times: the hook's wall time (median, p99) and its CPU
time (user + system, from the kernel: what it costs on an idle machine; the
wall time on a busy one waits for a core), and the capture it starts, alone,
waited for (``endless capture``).  Then the hand-over (``endless hook claude
SessionStart``): its wall and CPU time and its size.  Each call reads only what
is new, so the times should not grow with the transcript; the ratio columns
divide by the smallest transcript's and by bare Python's start (same run).

Last, the import of a folder of ``--rollouts`` Codex rollouts (the dated
layout, nine in ten of them this folder's): ``endless import`` of the folder,
whole process, in rollouts, turns and messages a second; once with
``--no-catch-up`` (the import alone) and once as a person runs it (the import
then writes the summary lines itself when the offline writer is quick).

Usage: python scripts/bench_capture.py [--lines 100,10000,100000] [--mb 100] [--calls 15] [--rollouts 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

BIG_RESULT = "".join(f"{i},{i * 3},{i % 2}\n" for i in range(330_000))  # a 5 MB tool result


def turn_events(session: str, cwd: str, n: int, at: float, result: str | None = None) -> list[dict]:
    def event(kind: str, content: object) -> dict:
        return {"type": kind, "uuid": str(uuid.uuid4()), "sessionId": session, "cwd": cwd, "isSidechain": False,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at)),
                "message": {"role": "user" if kind == "user" else "assistant", "content": content}}

    call = f"toolu_{n:012x}"
    return [event("user", f"Turn {n}: check the ledger totals for region {n % 17} and fix the export"),
            event("assistant", [{"type": "tool_use", "id": call, "name": "Read",
                                 "input": {"file_path": f"src/ledger_{n % 50}.py"}}]),
            event("user", [{"type": "tool_result", "tool_use_id": call,
                            "content": result if result is not None else "def total(rows): ..." * 8}]),
            event("assistant", [{"type": "text", "text": f"The totals of region {n % 17} add up now; the export "
                                                         "skips refunds with a zero amount." * 2}])]


@dataclass
class Run:
    wall: float
    cpu: float
    out: bytes


def run(command: list[str], env: dict, stdin: bytes = b"") -> Run:
    """One whole process: wall time, and its CPU time (the kernel's count for reaped children, before and
    after: a capture it leaves running in a session of its own is not counted)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=1200)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{command[:4]} failed: {done.stderr.decode()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall, cpu, done.stdout)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def med(runs: list[Run], what: str) -> float:
    return statistics.median(getattr(r, what) for r in runs)


def transcript_row(label: str, write, calls: int, endless: list[str]) -> tuple:
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        base = Path(tmp)
        workspace, user = base / "work", base / "user"
        workspace.mkdir()
        transcript = user / ".claude" / "projects" / "-work" / "s.jsonl"
        transcript.parent.mkdir(parents=True)
        session = str(uuid.uuid4())
        env = {**os.environ, "ENDLESS_HOME": str(base / "home"), "HOME": str(user), "ENDLESS_HOOK_WAIT": "0",
               "XDG_CONFIG_HOME": str(base / "xdg")}
        with open(transcript, "w") as handle:
            lines = write(handle, session, str(workspace))
        size = transcript.stat().st_size
        first = run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript),
                               "--workspace", str(workspace), "--final"], env)
        payload = json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": str(workspace),
                              "hook_event_name": "Stop"}).encode()
        hooks, captures = [], []
        for k in range(calls):
            with open(transcript, "a") as handle:
                for event in turn_events(session, str(workspace), 10_000_000 + 2 * k, time.time()):
                    handle.write(json.dumps(event) + "\n")
            hooks.append(run(endless + ["hook", "claude", "Stop"], env, payload))
            run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript), "--workspace",
                           str(workspace), "--turn-over"], env)  # waits for the hook's own (one at a time)
            with open(transcript, "a") as handle:
                for event in turn_events(session, str(workspace), 10_000_000 + 2 * k + 1, time.time()):
                    handle.write(json.dumps(event) + "\n")
            captures.append(run(endless + ["capture", "--agent", "claude", "--transcript", str(transcript),
                                           "--workspace", str(workspace), "--turn-over"], env))
        start = json.dumps({"session_id": str(uuid.uuid4()), "cwd": str(workspace),
                            "hook_event_name": "SessionStart", "source": "startup"}).encode()
        handovers = [run(endless + ["hook", "claude", "SessionStart"], env, start) for _ in range(5)]
        out = handovers[-1].out
        handover_size = len(json.loads(out)["hookSpecificOutput"]["additionalContext"].encode()) if out.strip() else 0
        return (label, lines, size, first.wall, hooks, captures, handovers, handover_size)


def rollout_lines(session: str, cwd: str, at: float, turns: int) -> list[dict]:
    """A rollout as Codex 0.171 writes one (the lines an import reads, and those it skips)."""
    def line(kind: str, payload: dict) -> dict:
        nonlocal at
        at += 0.7
        return {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at)), "type": kind, "payload": payload}

    out = [line("session_meta", {"id": session, "cwd": cwd, "originator": "codex_exec", "cli_version": "0.171.0",
                                 "base_instructions": {"text": "You are Codex, a coding agent. " * 300}}),
           line("response_item", {"type": "message", "role": "developer", "id": f"msg_{uuid.uuid4().hex}",
                                  "content": [{"type": "input_text", "text": "<permissions instructions>…"}]}),
           line("response_item", {"type": "message", "role": "user", "id": f"msg_{uuid.uuid4().hex}",
                                  "content": [{"type": "input_text", "text": f"<environment_context><cwd>{cwd}</cwd>"}]})]
    for n in range(turns):
        call = f"call_{uuid.uuid4().hex[:16]}"
        out += [line("event_msg", {"type": "task_started"}),
                line("response_item", {"type": "message", "role": "user", "id": f"msg_{uuid.uuid4().hex}",
                                       "content": [{"type": "input_text",
                                                    "text": f"Step {n}: make the export skip zero refunds"}]}),
                line("event_msg", {"type": "user_message", "message": f"Step {n}"}),
                line("response_item", {"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call,
                                       "name": "exec_command", "arguments": json.dumps({"cmd": "pytest -q"})}),
                line("response_item", {"type": "function_call_output", "call_id": call,
                                       "output": "3 passed, 1 failed: test_zero_refund\n" * 5}),
                line("response_item", {"type": "message", "role": "assistant", "id": f"msg_{uuid.uuid4().hex}",
                                       "content": [{"type": "output_text",
                                                    "text": "Zero refunds are skipped now; the failing test passes."}]}),
                line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 9000}}}),
                line("event_msg", {"type": "task_complete", "last_agent_message": "done"})]
    return out


def codex_row(rollouts: int, endless: list[str], catch_up: bool) -> tuple:
    with tempfile.TemporaryDirectory(prefix="bench-codex-") as tmp:
        base = Path(tmp)
        workspace = base / "work"
        workspace.mkdir()
        sessions = base / "codex" / "sessions"
        env = {**os.environ, "ENDLESS_HOME": str(base / "home"), "HOME": str(base), "CODEX_HOME": str(base / "codex"),
               "XDG_CONFIG_HOME": str(base / "xdg")}
        at = time.time() - 30 * 86400
        ours = turns = 0
        for k in range(rollouts):
            day = time.gmtime(at + k * 2400)
            folder = sessions / time.strftime("%Y/%m/%d", day)
            folder.mkdir(parents=True, exist_ok=True)
            session = str(uuid.uuid4())
            mine = k % 10 != 9
            count = 2 + k % 5
            ours += mine
            turns += count if mine else 0
            lines = rollout_lines(session, str(workspace if mine else base / "elsewhere"), at + k * 2400, count)
            name = f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', day)}-{session}.jsonl"
            (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
        size = sum(p.stat().st_size for p in sessions.rglob("*.jsonl"))
        flags = [] if catch_up else ["--no-catch-up"]
        done = run(endless + ["import", str(sessions), "--workspace", str(workspace), "--no-progress", "--json"]
                   + flags, env)
        said = json.loads(done.out)
        return rollouts, ours, size, turns, said, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="100,10000,100000")
    parser.add_argument("--mb", type=int, default=100, help="a transcript of about this many MB (0: none)")
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--rollouts", type=int, default=1000)
    args = parser.parse_args()
    endless = [sys.executable, "-m", "endless"]
    # The floor every hook pays: this Python starting and ending, measured in the same run.
    bare = [run([sys.executable, "-c", "pass"], dict(os.environ)) for _ in range(args.calls)]
    rows = []
    for lines in [int(x) for x in args.lines.split(",") if x]:
        def by_lines(handle, session, cwd, lines=lines):
            at = time.time() - 86400
            for n in range(lines // 4):
                for event in turn_events(session, cwd, n, at + n):
                    handle.write(json.dumps(event) + "\n")
            return lines
        rows.append(transcript_row(f"{lines:,} lines", by_lines, args.calls, endless))
    if args.mb:
        def by_size(handle, session, cwd):
            at, n, written = time.time() - 86400, 0, 0
            while written < args.mb * 1_000_000:
                for event in turn_events(session, cwd, n, at + n, BIG_RESULT):
                    text = json.dumps(event) + "\n"
                    handle.write(text)
                    written += len(text)
                n += 1
            return 4 * n
        rows.append(transcript_row(f"{args.mb} MB", by_size, args.calls, endless))
    bare_wall, bare_cpu = med(bare, "wall"), med(bare, "cpu")
    print(f"bare Python start and exit: {bare_wall * 1000:.0f} ms wall, {bare_cpu * 1000:.0f} ms CPU (median); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if rows:
        _transcript_table(rows, bare_wall)
    if args.rollouts:
        print()
        print("| Codex rollouts | lines written | of this folder | MB | turns in them | imported turns | messages "
              "| wall s | CPU s | rollouts/s | turns/s | messages/s |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for catch_up in (False, True):
            rollouts, ours, size, turns, said, done = codex_row(args.rollouts, endless, catch_up)
            got = said.get("turns", 0)
            messages = said.get("messages", 0)
            how = "by the import" if catch_up else "left (--no-catch-up)"
            print(f"| {rollouts:,} | {how} | {ours:,} | {size / 1e6:.1f} | {turns:,} | {got:,} | {messages:,} | "
                  f"{done.wall:.2f} | {done.cpu:.2f} | {rollouts / done.wall:.0f} | {got / done.wall:.0f} | "
                  f"{messages / done.wall:.0f} |")


def _transcript_table(rows: list[tuple], bare_wall: float) -> None:
    base_hook = med(rows[0][4], "wall")
    print()
    print("| transcript | lines | MB | first capture s | hook wall median ms | hook wall p99 ms | hook CPU median ms "
          "| hook ÷ smallest | hook ÷ bare (wall) | capture wall / CPU ms | hand-over wall / CPU ms "
          "| hand-over bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, lines, size, first, hooks, captures, handovers, handover_size in rows:
        wall = med(hooks, "wall")
        print(f"| {label} | {lines:,} | {size / 1e6:.1f} | {first:.2f} | {wall * 1000:.0f} | "
              f"{percentile([h.wall for h in hooks], 0.99) * 1000:.0f} | {med(hooks, 'cpu') * 1000:.0f} | "
              f"{wall / base_hook:.2f} | {wall / bare_wall:.1f} | "
              f"{med(captures, 'wall') * 1000:.0f} / {med(captures, 'cpu') * 1000:.0f} | "
              f"{med(handovers, 'wall') * 1000:.0f} / {med(handovers, 'cpu') * 1000:.0f} | {handover_size:,} |")


if __name__ == "__main__":
    main()
