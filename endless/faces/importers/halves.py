"""A long generic source planned on both cores: its second half in a forked process, then joined.

Planning an import (reading and checking every line, grouping, redacting,
encoding the spill) is a third of a long import's time, and the second
core has nothing to do meanwhile: the index helper starts with the commits.
So a long generic JSONL is cut at a line past its middle that opens a turn
and gives its time (:func:`formats.split_point`); a forked process plans
the lines from there into a spill of its own while this one plans the
lines before, and the two plans are joined into the one a single pass
makes, turn for turn and byte for byte:

- A turn still open where the first half ends closes where a single pass
  would close it: at its session's first line in the second half (which
  must open a turn, or the halves cannot be told apart and this process
  plans the rest itself), or at the end.
- Occurrences, and so turn ids and what the memory holds already, are
  counted in the joined order; a second-half turn whose id changes gets it
  when it is read back (``Plan.tids``).
- A bad line of the first half is named first, as a single pass names it.

If the second process fails in any way, this one plans the second half
itself: nothing depends on the fork but time.
"""

from __future__ import annotations

import bisect
import os
import pickle
import signal
import tempfile
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from endless.core.settings import PLAN_FIRST_SHARE, PLAN_HALVES_FROM
from endless.faces.importers import importer
from endless.faces.importers.formats import (Entry, FormatError, Stretch, generic_titles, read_generic,
                                             split_point)

OPENS_A_TURN = ("user", "note")


@dataclass
class Half:
    """The second half's plan as its process sends it back; its turns are in its own spill."""

    ats: array = field(default_factory=lambda: array("d"))
    offsets: array = field(default_factory=lambda: array("Q"))
    lengths: array = field(default_factory=lambda: array("Q"))
    keys: array = field(default_factory=lambda: array("Q"))
    occurrences: array = field(default_factory=lambda: array("Q"))  # counted within the half
    sizes: array = field(default_factory=lambda: array("I"))
    bases: bytes = b""  # each turn's identity, 16 bytes
    redacted: dict[int, dict[str, int]] = field(default_factory=dict)
    long_turns: array = field(default_factory=lambda: array("Q"))  # as the plan holds them (importer.Plan)
    long_counts: array = field(default_factory=lambda: array("I"))
    long_sizes: array = field(default_factory=lambda: array("Q"))
    closed: int = 0  # the turns closed inside the half; the rest were open at the source's end
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)  # session -> (turns closed before its
    #                                                                   first line, that line's number)
    entries: int = 0
    error: str | None = None  # the half's first bad line
    cannot: bool = False  # a session's first line in the half continues a turn: plan it in one pass


def worth_it(path: Path) -> bool:
    """A source long enough for two processes to plan it sooner than one."""
    if not hasattr(os, "fork"):
        return False
    try:
        return path.stat().st_size >= PLAN_HALVES_FROM
    except OSError:
        return False


def plan_in_halves(path: Path, plan: importer.Plan, granularity: str, spill_dir: Path | None,
                   split: Stretch | None = None) -> int:
    """Plan a generic source into ``plan`` as :func:`importer.make_plan` does; returns its entries read."""
    settings = plan.settings
    titles = generic_titles(path)
    fallback_at = path.stat().st_mtime
    split = split or split_point(path, share=PLAN_FIRST_SHARE)
    current: dict[str, list[Entry]] = {}
    if split is None:
        return _plan_lines(path, Stretch(), titles, plan, granularity, fallback_at, current)
    spill = tempfile.TemporaryFile(prefix=".import-", dir=spill_dir)
    pid: int | None = None
    reading, writing = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:
            _second_half_process(path, split, titles, settings, granularity, fallback_at, spill, reading, writing)
        os.close(writing)
        writing = None
        first = Stretch(0, 1, split.start)
        read = _plan_lines(path, first, titles, plan, granularity, fallback_at, current,
                           keep_open=True)
        with os.fdopen(reading, "rb") as pipe:
            reading = None
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        pid = None
        half = pickle.loads(data) if data and os.waitstatus_to_exitcode(status) == 0 else None
        if half is not None and half.error is not None:
            raise FormatError(half.error)
        if half is None or half.cannot:
            return read + _plan_lines(path, split, titles, plan, granularity, fallback_at,
                                      current)
        _join(plan, half, spill, current, granularity, fallback_at)
        return read + half.entries
    finally:
        if pid is not None:  # stopped or failed before the half came back
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for fd in (reading, writing):
            if fd is not None:
                os.close(fd)
        spill.close()


def _plan_lines(path: Path, stretch: Stretch, titles: dict[str, str], plan: importer.Plan,
                granularity: str, fallback_at: float, current: dict[str, list[Entry]],
                keep_open: bool = False) -> int:
    counted = importer.Counted(read_generic(path, stretch, titles))
    for turn in importer.group(counted, plan.settings, granularity, fallback_at, current, keep_open):
        plan.add(turn)
    return counted.count


def _second_half_process(path: Path, split: Stretch, titles: dict[str, str], settings, granularity: str,
                         fallback_at: float, spill, reading: int, writing: int) -> None:
    """The forked process: plan the second half, send it, and end without running anything of the parent's."""
    code = 1
    try:
        os.close(reading)
        half = _second_half(path, split, titles, settings, granularity, fallback_at, spill)
        with os.fdopen(writing, "wb") as pipe:
            pipe.write(pickle.dumps(half, protocol=pickle.HIGHEST_PROTOCOL))
        code = 0
    finally:
        os._exit(code)


def _second_half(path: Path, split: Stretch, titles: dict[str, str], settings, granularity: str,
                 fallback_at: float, spill) -> Half:
    plan = importer.Plan(spill, settings, bases=bytearray())
    half = Half()
    ended = False  # the half's lines are all read: what closes now was open at the source's end

    def watched(entries: Iterable[Entry]) -> Iterator[Entry]:
        nonlocal ended
        for entry in entries:
            if entry.session not in half.seen:
                if entry.role not in OPENS_A_TURN:
                    half.cannot = True  # it continues a turn of the first half
                    return
                half.seen[entry.session] = (half.closed, int(entry.where.rsplit(":", 1)[1]))
            yield entry
        ended = True

    counted = importer.Counted(watched(read_generic(path, split, titles)))
    try:
        for turn in importer.group(counted, settings, granularity, fallback_at):
            if half.cannot:
                return Half(cannot=True)
            plan.add(turn)  # counted within the half (its own plan holds nothing): skips are the join's
            half.closed += not ended
        if half.cannot:
            return Half(cannot=True)
        plan.flush()
        plan.spill.flush()
    except FormatError as exc:
        return Half(error=str(exc))
    half.entries = counted.count
    half.ats, half.offsets, half.lengths, half.keys = plan.ats, plan.offsets, plan.lengths, plan.keys
    half.occurrences, half.sizes, half.bases = plan.occurrences, plan.sizes, bytes(plan.bases or b"")
    half.redacted = plan.redacted
    half.long_turns, half.long_counts, half.long_sizes = plan.long_turns, plan.long_counts, plan.long_sizes
    return half


def _join(plan: importer.Plan, half: Half, spill, current: dict[str, list[Entry]], granularity: str,
          fallback_at: float) -> None:
    """Add the second half's turns to the plan, with the first half's open turns where they close."""
    plan.flush()
    base = plan.append_spill(spill)
    settings = plan.settings
    waiting = sorted((half.seen[session], session) for session in current if session in half.seen)
    never = [session for session in current if session not in half.seen]

    def close(session: str) -> None:
        entries = current.pop(session)
        turn = importer.plan_turn(entries, settings, granularity, fallback_at) if entries else None
        if turn is not None:
            plan.add(turn)

    at = 0
    for (before, _), session in waiting:  # a first-half turn closes just before the half's turn ``before``
        if before < half.closed:
            _take_half(plan, half, at, before, base)
            at = before
            close(session)
    _take_half(plan, half, at, half.closed, base)
    for (before, _), session in waiting:
        if before >= half.closed:
            close(session)
    for session in never:
        close(session)
    _take_half(plan, half, half.closed, len(half.ats), base)
    plan.flush()


def _take_half(plan: importer.Plan, half: Half, start: int, stop: int, base: int) -> None:
    """The half's turns ``[start, stop)`` into the plan, counted in the joined order; a run at once."""
    if start >= stop:
        return
    plan.flush()  # a first-half turn closed just before comes first
    keys = half.keys[start:stop]
    occurring, new = plan.count(keys)
    k = len(plan.ats)
    if new is None:
        taken: Sequence[int] = range(start, stop)
    else:  # the rest are in the memory already
        taken = [j for j, fresh in enumerate(new, start) if fresh]
        plan.skipped += (stop - start) - len(taken)
    if len(taken) == stop - start:  # the usual run: the arrays at once
        plan.ats.extend(half.ats[start:stop])
        plan.offsets.extend(map(base.__add__, half.offsets[start:stop]))
        plan.lengths.extend(half.lengths[start:stop])
        plan.keys.extend(keys)
        plan.occurrences.extend(occurring)
        plan.sizes.extend(half.sizes[start:stop])
        plan.messages += sum(half.sizes[start:stop])
    else:
        for j in taken:
            plan.ats.append(half.ats[j])
            plan.offsets.append(base + half.offsets[j])
            plan.lengths.append(half.lengths[j])
            plan.keys.append(half.keys[j])
            plan.occurrences.append(occurring[j - start])
            plan.sizes.append(half.sizes[j])
            plan.messages += half.sizes[j]
    if occurring != half.occurrences[start:stop].tolist():  # a turn counted anew has another id
        for n, j in enumerate(taken, k):
            if occurring[j - start] != half.occurrences[j]:
                plan.tids[n] = importer.turn_id(half.bases[16 * j:16 * j + 16].hex(), occurring[j - start])
    if half.redacted:
        for n, j in enumerate(taken, k):
            if j in half.redacted:
                plan.redacted[n] = half.redacted[j]
    # The run's turns with long messages, those taken: each where it lands in the plan.
    for at in range(bisect.bisect_left(half.long_turns, start), bisect.bisect_left(half.long_turns, stop)):
        j = half.long_turns[at]
        n = bisect.bisect_left(taken, j)
        if n < len(taken) and taken[n] == j:
            plan.long_turns.append(k + n)
            plan.long_counts.append(half.long_counts[at])
            plan.long_sizes.append(half.long_sizes[at])
            plan.long_messages += half.long_counts[at]
            plan.long_bytes += half.long_sizes[at]
