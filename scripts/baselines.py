"""The harness's own ways, replayed on the transcript of an Endless run: same turns, same replies, same times.

(a) ``harness``: each chat's full history until a request passes half the
    window, then one summarisation call that replaces the older part with a
    summary and keeps a recent tail (Hermes 0.19.0's compressor), plus a
    background review call every ten turns of a chat that resends the history.
(b) ``drop``: each chat's full history, the oldest turns dropped once a
    request would pass the window.

Every request is tokenized message by message (each message once), laid out
as the harness would (system prompt and tools, then messages), and sent to
fresh instances of the four cache models at the Endless run's own times, with
the marks such a harness sets: Anthropic's ``system_and_3`` (the system prompt
and the last three messages), OpenAI's implicit breakpoint at the latest
message, none for the automatic caches.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from endless.demo.replay import CONTEXT, HARNESS_SYSTEM, HARNESS_TOOLS, PRICED, median
from endless.sim.cache import make_cache
from endless.sim.tokens import TOKEN_TYPECODE, default_tokenizer
from endless.writer.offline import offline_leaf
from endless.llm.client import Usage
from endless.writer.usage import cost

MODELS = ("deepseek", "openai-auto", "openai-breakpoints", "anthropic")
SUMMARY_PROMPT = "Summarise the conversation above for your own later use. Keep decisions, facts and open tasks."
REVIEW_PROMPT = "Review the conversation above: is there anything worth saving to long-term memory or skills?"
REVIEW_EVERY = 10
REVIEW_OUTPUT = 300
OUTPUT_RESERVE = 4096


@dataclass
class Msg:
    text: str
    tokens: array


@dataclass
class BaselineResult:
    name: str
    first_share: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODELS})
    read: dict[str, int] = field(default_factory=lambda: {m: 0 for m in MODELS})
    input: int = 0
    cost: dict[str, float] = field(default_factory=lambda: {m: 0.0 for m in MODELS})
    waits: list[float] = field(default_factory=list)
    summaries: int = 0
    reviews: int = 0
    facts_reachable: int = 0
    largest_request: int = 0


class _Encoder:
    def __init__(self) -> None:
        self.tokenizer = default_tokenizer()
        self.cache: dict[str, array] = {}

    def __call__(self, text: str) -> Msg:
        tokens = self.cache.get(text)
        if tokens is None:
            tokens = array(TOKEN_TYPECODE, self.tokenizer.encode(text))
            self.cache[text] = tokens
        return Msg(text, tokens)


def _concat(messages: list[Msg]) -> tuple[array, list[int]]:
    out = array(TOKEN_TYPECODE)
    ends = []
    for m in messages:
        out.extend(m.tokens)
        ends.append(len(out))
    return out, ends


class _Bill:
    """Sends one request to all four cache models and adds up reads, input and cost."""

    def __init__(self, result: BaselineResult) -> None:
        self.result = result
        self.caches = {m: make_cache(m) for m in MODELS}

    def send(self, messages: list[Msg], key: str, at: float, output: int, first: bool = False) -> None:
        tokens, ends = _concat(messages)
        length = len(tokens)
        self.result.input += length
        self.result.largest_request = max(self.result.largest_request, length)
        marks_for = {
            "anthropic": {e: "5m" for e in ([ends[0]] + ends[-3:])},
            "openai-breakpoints": {ends[-1]: "breakpoint"},
        }
        for name, model in self.caches.items():
            marks = marks_for.get(name, {})
            got = model.request(tokens, ends, marks, key, at, at + 1.0, at + 2.0)
            self.result.read[name] += got.read
            usage = Usage(cached=got.read, uncached=got.uncached, cache_write=got.write, output=output,
                          cache_write_long=got.write_1h)
            self.result.cost[name] += cost(PRICED[name], usage, at)
            if first:
                self.result.first_share[name].append(got.read / length if length else 1.0)


def replay_baseline(kind: str, transcript: list[dict], outputs: dict[tuple[int, int], int],
                    times: dict[tuple[int, int], float], window: int, facts: list[str]) -> BaselineResult:
    """``outputs``/``times``: output tokens and send time of the Endless run's request (turn, step)."""
    encode = _Encoder()
    import orjson

    head = [encode(orjson.dumps(HARNESS_TOOLS).decode() + "\n" + HARNESS_SYSTEM), *(encode(c) for c in CONTEXT)]
    result = BaselineResult(kind)
    bill = _Bill(result)
    histories: dict[int, list[list[Msg]]] = {}  # chat -> turns -> messages
    summaries: dict[int, Msg | None] = {}
    turns_of: dict[int, int] = {}
    half = window // 2

    def size(messages: list[Msg]) -> int:
        return sum(len(m.tokens) for m in messages)

    for number, turn in enumerate(transcript):
        chat = turn["chat"]
        key = f"chat-{chat}"
        history = histories.setdefault(chat, [])
        current = [encode(turn["person"])]
        wait = 0.0
        steps = turn["steps"]
        for step in range(len(steps) + 1):
            at = times.get((number, step), turn["at"])
            summary = summaries.get(chat)
            messages = head + ([summary] if summary else []) + [m for t in history for m in t] + current
            if kind == "harness" and size(messages) > half:
                # Compress: keep the newest turns within a quarter of the window, summarise the rest.
                keep: list[list[Msg]] = []
                kept = 0
                for t in reversed(history):
                    if kept + size(t) > window // 4:
                        break
                    keep.insert(0, t)
                    kept += size(t)
                old = history[:len(history) - len(keep)]
                if old:
                    old_messages = ([summary] if summary else []) + [m for t in old for m in t]
                    old_tokens = size(old_messages)
                    out_tokens = min(4000, max(500, old_tokens // 20))
                    bill.send(head + old_messages + [encode(SUMMARY_PROMPT)], key, at, out_tokens)
                    text = offline_leaf("note: " + "\n".join(m.text for m in old_messages), out_tokens * 4)
                    summaries[chat] = summary = encode("Summary of the earlier conversation: " + text)
                    histories[chat] = history = keep
                    result.summaries += 1
                    wait += 2.0 + out_tokens / 50.0 + old_tokens / 5000.0
                    messages = head + [summary] + [m for t in history for m in t] + current
            if kind == "drop":
                while history and size(messages) > window - OUTPUT_RESERVE:
                    history.pop(0)
                    messages = head + [m for t in history for m in t] + current
            bill.send(messages, key, at + wait, outputs.get((number, step), 0), first=step == 0)
            if step < len(steps):
                current = current + [encode(steps[step]["arguments"]), encode(steps[step]["result"])]
        current.append(encode(turn["reply"]))
        history.append(current)
        result.waits.append(wait)
        turns_of[chat] = turns_of.get(chat, 0) + 1
        if kind == "harness" and turns_of[chat] % REVIEW_EVERY == 0:
            summary = summaries.get(chat)
            review = head + ([summary] if summary else []) + [m for t in history for m in t] + [encode(REVIEW_PROMPT)]
            bill.send(review, key, turn["at"] + 5.0, REVIEW_OUTPUT)
            result.reviews += 1
    final_texts = []
    for chat, history in histories.items():
        summary = summaries.get(chat)
        final_texts.extend([summary.text] if summary else [])
        final_texts.extend(m.text for t in history for m in t)
    whole = "\n".join(final_texts)
    result.facts_reachable = sum(1 for f in facts if f in whole)
    return result


def first_share_median(result: BaselineResult, model: str) -> float:
    return median(result.first_share[model])
