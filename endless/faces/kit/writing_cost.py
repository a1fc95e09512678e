"""What writing a memory's missing lines will take: lines, calls, price and time, for the writer chosen.

Told before anything is spent, with the spend cap that bounds it: by
``endless import`` (``--dry-run``, and after the import, before its catch-up
starts) and by ``endless catch-up`` with the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from endless.core.settings import Settings
from endless.core.words import agree, count
from endless.faces.kit.choose import ChoiceError

WRITERS = ("offline", "model")


@dataclass(frozen=True)
class CatchUp:
    """What writing an import's lines takes: lines, calls, cost and time, for the writer chosen."""

    writer: str  # "offline" or "model"
    lines: int
    message_lines: int
    merges: int
    calls: int
    cost: float
    seconds: float | None
    route: str
    rate: str  # where the time comes from
    cap: float | None = None  # the spend cap, USD per memory and day (None: none set)

    def to_json(self) -> dict:
        return {"writer": self.writer, "lines": self.lines, "messageLines": self.message_lines,
                "merges": self.merges, "calls": self.calls, "cost": self.cost, "seconds": self.seconds,
                "route": self.route, "rate": self.rate, "spendCapPerDay": self.cap}

    def sentence(self) -> str:
        from endless.writer.pace import say_duration

        lines = (f"{count(self.lines, 'line')} to write ({count(self.message_lines, 'message')} too long to be "
                 f"{agree(self.message_lines, 'its', 'their')} own line, up to {count(self.merges, 'merge')})")
        if self.writer == "offline":
            return f"{lines} by the offline writer: no model calls, no cost, {say_duration(self.seconds)}"
        cap = (f"the spend cap ({self.cap:.2f} USD per memory and day) pauses it" if self.cap is not None
               else "no spend cap is set (spend_cap_per_day)")
        return (f"{lines} by the model on {self.route}: about {count(self.calls, 'call')}, about {self.cost:.4f} USD, "
                f"{say_duration(self.seconds)} ({self.rate}); {cap}")


def choose_writer(asked: str | None, settings: Settings) -> str:
    """The writer of the imported stretch: as asked, else the model when a writer route is set."""
    configured = bool(settings.writer_route.strip())
    if asked == "model" and not configured:
        raise ChoiceError("--writer model needs a writer route, and none is set: set writer_route in the "
                          "settings file (~/.config/endless/config.toml; `endless config` lists the settings) or "
                          "ENDLESS_WRITER_ROUTE='{\"provider\": \"openai\", \"model\": …}', "
                          "or import with --writer offline (free, no model)")
    writer = asked or ("model" if configured else "offline")
    if writer == "model":
        from endless.llm.routes import Route, RouteError

        try:
            Route.from_json(settings.writer_route)
        except RouteError as exc:
            raise ChoiceError(f"the writer_route setting is unusable: {exc}; fix it (`endless config` shows it) "
                              "or use --writer offline") from None
    return writer


def catch_up_cost(settings: Settings, writer: str, leaves: int, merges: int, long_bytes: int,
                  folder: Path | None, now: float) -> CatchUp:
    from endless.core.settings import OFFLINE_LINE_SECONDS

    budget = settings.line_budget
    lines = leaves + merges
    if writer == "offline":
        return CatchUp("offline", lines, leaves, merges, 0, 0.0, lines * OFFLINE_LINE_SECONDS,
                       "offline writer", "measured offline")
    from endless.llm.routes import Route, RouteError
    from endless.writer.pace import measured_pace, time_to_done
    from endless.writer.usage import cost

    try:
        route = Route.from_json(settings.writer_route)
    except RouteError as exc:
        raise ChoiceError(f"the writer_route setting is unusable: {exc}") from None
    calls = math.ceil(lines / settings.lines_per_call) if lines else 0
    view_tokens = (settings.writer_view_floor + settings.writer_view_ceiling) // 2 // 4
    usage = {"cached": calls * view_tokens,
             "uncached": long_bytes // 4 + merges * 2 * budget // 4 + calls * 400,
             "output": lines * budget // 4}
    pace = measured_pace(folder, now) if folder is not None else None
    if pace is not None:
        seconds = time_to_done(lines, pace.lines_per_minute(settings))
        rate = f"at this memory's measured {pace.seconds_per_call:.1f} s a call, {settings.writer_calls} at once"
    else:
        seconds = None
        rate = "no call measured on this memory yet"
    return CatchUp("model", lines, leaves, merges, calls, round(cost(route, usage), 4), seconds,
                   route.describe(), rate, settings.spend_cap_per_day)

