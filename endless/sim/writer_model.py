"""A scripted summary writer: answers ``Compaction:`` requests the way real small models do.

A writer call (DESIGN §3.2) ends with a task message that opens with the marker
``Compaction:``, names its job (``compress message 41`` or ``merge lines 40+1
and 41+1``), states a limit in bytes (and roughly in words), draws a ruler and
holds the input between ``<input>`` tags.  A retry is a later user message in
the same conversation ("too long", "wrong language", an invented fact …); the
input is then found in the task message before it.

Each try is drawn from a seeded mix of outcomes:

``fit``
    a line of real spans of the input (its own sentences and clauses, cut at
    word boundaries), at most the stated limit;
``over``
    (off by default) between the limit and 1.25 times it, which a writer accepts;
``too_long``
    1.3 to 2 times the task's original limit, which a writer rejects;
``wrong_script``
    a line in a CJK script the input does not use (its numbers kept);
``malformed``
    empty, an echo of the task's ``<input>`` or ``Compaction:``, or a refusal.

Independently, a try that carries content names a number that appears nowhere
in the request (``invented_rate``), the way a model asked about port 5433
writes 5432.  Lines otherwise hold only whole tokens of the input, so every
number, identifier, path and quoted string in them is one of the input's.

The outcome of every try is kept (``last_outcome``, ``last_outcomes``,
``tries``, ``counts``) and handed to ``on_try`` so tests and benchmarks can
count.  ``force(...)`` queues outcomes or whole replies (a 429, a stall) for
the next tries.  Everything is drawn from one ``random.Random(seed)`` in
request order: the same seed and the same requests give the same replies.

Batched calls (several jobs in one task, each with its own ``<input>``) get
one line per job, in order; when the task shows the reply form
``<line id="k">…</line>`` each line comes back in its tag.  A retry naming one
job (``Job 3 only``, or a lone ``<line id="3">`` form) answers that job alone.
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from endless.sim.model import ChatMessage, SimReply, SimRequest

MARKER = "Compaction:"
CATEGORIES = ("fit", "over", "too_long", "wrong_script", "malformed")
DEFAULT_MIX: dict[str, float] = {"fit": 0.62, "too_long": 0.30, "wrong_script": 0.05,
                                 "malformed": 0.03}
DEFAULT_RETRY_MIX: dict[str, float] = {"fit": 0.88, "too_long": 0.08, "wrong_script": 0.01,
                                       "malformed": 0.03}
MALFORMED_KINDS = ("empty", "echo_input", "echo_task", "refusal")
REFUSALS = (
    "I'm sorry, but I can't help with that request.",
    "I cannot summarise this conversation.",
    "As an AI language model, I am unable to complete this task.",
)

_JOB = re.compile(r"(compress\s+message\s+\d+|merge\s+lines\s+\d+\+\d+\s+and\s+\d+\+\d+)", re.I)
_BYTES = re.compile(r"(?<![\d,])(\d{1,3}(?:,\d{3})+|\d+)[\s-]*$")
_LIMIT_WORDS = re.compile(
    r"(at\s+most|limit|within|up\s+to|no\s+more\s+than|not\s+more\s+than|under|below|"
    r"maximum|max\.?|≤|<=|fit\s+in|in\s+at\s+most|shorter\s+than|aim\s+for|target)", re.I)
_JOB_TAG = re.compile(r"<job\s+id\s*=\s*[\"']?(\d+)[\"']?\s*>", re.I)
_LINE_FORM = re.compile(r"<line\s+id\s*=\s*[\"']?(\d+)[\"']?\s*>", re.I)
_ONLY_JOB = re.compile(r"\bjob\s+(\d+)\s+only\b", re.I)
_HEAD = re.compile(r"^\d+\+\d+\|", re.M)
_CHAT = re.compile(r"<chat>.*?</chat>", re.S)
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_TAG = re.compile(r"^[^\s:|]{1,40}:\s")
_CJK = {
    "han": re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
    "kana": re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]"),
    "hangul": re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]"),
}
_CJK_WORDS = {
    "han": ("用户", "要求", "检查", "配置", "端口", "文件", "错误", "结果", "修改", "运行",
            "测试", "决定", "保留", "问题", "说明", "路径", "版本", "服务器"),
    "kana": ("ユーザー", "ファイル", "設定", "ポート", "エラー", "テスト", "結果", "確認",
             "して", "ください", "です", "ました"),
    "hangul": ("사용자", "파일", "설정", "포트", "오류", "테스트", "결과", "확인", "요청",
               "변경", "했습니다", "입니다"),
}


def is_task_text(text: str) -> bool:
    """A writer task opens with ``Compaction:`` (leading blanks allowed)."""
    return text.lstrip().startswith(MARKER)


def _task_index(messages: Sequence[ChatMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and message.tool_call_id is None and is_task_text(message.text):
            return index
    return None


def is_writer_request(request: SimRequest) -> bool:
    """The last user message opens with ``Compaction:``, or it answers a writer try.

    A retry ("too long", "wrong language" …) is a later user message in a
    conversation whose task opened with the marker and a job, after at least
    one assistant try.
    """
    messages = request.messages
    users = [i for i, m in enumerate(messages) if m.role == "user" and m.tool_call_id is None]
    if not users:
        return False
    if is_task_text(messages[users[-1]].text):
        return True
    task = _task_index(messages)
    if task is None or not _JOB.search(messages[task].text[:4000]):
        return False
    return any(m.role == "assistant" for m in messages[task + 1:users[-1]])


@dataclass
class WriterTry:
    """One job's answer in one reply: what the scripted writer meant to do."""

    index: int  # the writer's try counter, from 0
    request: int  # the writer's request counter, from 0
    job: str  # "compress message 41", "merge lines 40+1 and 41+1", or "" when unnamed
    key: str  # the job's id in a batched reply ("1" …), or "" alone
    attempt: int  # 1 for the task's first try, 2 after one feedback, …
    category: str  # one of CATEGORIES, or "forced" for a forced whole reply
    detail: str = ""  # the malformed kind, or the script used for wrong_script
    limit: int = 0  # the limit this try was asked for, in bytes
    original_limit: int = 0  # the task's own limit
    size: int = 0  # UTF-8 bytes of the line
    invented: str | None = None  # the invented number, if any
    head: bool = False  # an id+n| head was copied in front
    text: str = ""


@dataclass
class _Job:
    key: str
    job: str
    input: str
    limit: int | None


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _mix(mix: Mapping[str, float]) -> tuple[list[str], list[float]]:
    unknown = set(mix) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown outcome categories: {sorted(unknown)}")
    names = [c for c in CATEGORIES if mix.get(c, 0) > 0]
    total = sum(mix[c] for c in names)
    if total <= 0:
        raise ValueError("the mix needs at least one category with a positive weight")
    cumulative, running = [], 0.0
    for name in names:
        running += mix[name] / total
        cumulative.append(running)
    cumulative[-1] = 1.0
    return names, cumulative


def _pick(rng: random.Random, table: tuple[list[str], list[float]]) -> str:
    names, cumulative = table
    draw = rng.random()
    for name, edge in zip(names, cumulative):
        if draw < edge:
            return name
    return names[-1]


def _parse_limit(text: str) -> int | None:
    """The limit in bytes a task or feedback states; the ruler's length if it states none.

    Only the words before the first ``<input>`` count, so sizes named inside
    the input (or a view) are never taken for the limit.
    """
    opening = text.find("<input>")
    plain = text[:opening] if opening >= 0 else text
    if "<chat>" in plain:
        plain = _CHAT.sub(" ", plain)
    stated, preferred = [], []
    lowered = plain.lower()
    at = lowered.find("byte")
    while at >= 0:
        match = _BYTES.search(plain[max(0, at - 24):at])
        at_end = lowered.find("byte", at + 4)
        if match:
            value = int(match.group(1).replace(",", ""))
            if value > 0:
                stated.append(value)
                start = max(0, at - 24) + match.start()
                if _LIMIT_WORDS.search(plain[max(0, start - 40):start]):
                    preferred.append(value)
        at = at_end
    if preferred:
        return min(preferred)
    if stated:
        return min(stated)
    longest, at = 0, plain.find("-" * 64)
    while at >= 0:
        stop = at
        while stop < len(plain) and plain[stop] == "-":
            stop += 1
        longest = max(longest, stop - at)
        at = plain.find("-" * 64, stop)
    return longest or None


def _head_for(job: str) -> str:
    match = re.match(r"compress\s+message\s+(\d+)", job, re.I)
    if match:
        return f"{match.group(1)}+1|"
    match = re.match(r"merge\s+lines\s+(\d+)\+(\d+)\s+and\s+\d+\+\d+", job, re.I)
    if match:
        return f"{match.group(1)}+{2 * int(match.group(2))}|"
    return "0+1|"


def _job_starts(task: str) -> list[tuple[int, str]]:
    """Where each job's own text begins: a job name at a line's start or right after the marker."""
    lowered = task.lower()
    starts = []
    for word in ("compress message", "merge lines"):
        at = lowered.find(word)
        while at >= 0:
            prefix = task[task.rfind("\n", 0, at) + 1:at].strip()
            if not prefix or prefix.endswith(MARKER):
                name = _JOB.match(task, at)
                if name:
                    starts.append((at, _norm_job(name.group(1))))
            at = lowered.find(word, at + len(word))
    return sorted(starts)


def _jobs_of(task: str) -> list[_Job]:
    """The task's jobs, each with its input and stated limit, in order.

    The task is cut at each job name that opens a line (or follows the
    marker); a piece holding ``<input>`` is a job, its input running from
    the first ``<input>`` to the last ``</input>`` of the piece, so a message
    that itself mentions the tags stays whole.
    """
    starts = _job_starts(task)
    bounds = [at for at, _ in starts] + [len(task)]
    jobs: list[_Job] = []
    previous_end = 0
    for index, (at, name) in enumerate(starts):
        piece = task[at:bounds[index + 1]]
        opening = piece.find("<input>")
        if opening < 0:
            continue
        closing = piece.rfind("</input>")
        body = piece[opening + len("<input>"):closing if closing > opening else len(piece)]
        if body.startswith("\n"):
            body = body[1:]
        if body.endswith("\n"):
            body = body[:-1]
        tags = _JOB_TAG.findall(task[previous_end:at])
        key = tags[-1] if tags else str(len(jobs) + 1)
        jobs.append(_Job(key, name, body, _parse_limit(piece[:opening])))
        previous_end = at + (closing if closing > opening else len(piece))
    if jobs:
        return jobs
    opening = task.find("<input>")
    if opening < 0:
        return [_Job("1", "", task.strip(), _parse_limit(task))]
    closing = task.rfind("</input>")
    body = task[opening + len("<input>"):closing if closing > opening else len(task)].strip("\n")
    return [_Job("1", "", body, _parse_limit(task[:opening]))]


def _norm_job(job: str) -> str:
    return " ".join(job.split())


# ---------------------------------------------------------------------------
# Lines built from the input


_FACTY = re.compile(r"\d|/|_|[a-z][A-Z]|\w[.\-]\w")


def _fact_tokens(text: str) -> list[str]:
    """Whitespace tokens carrying a digit, a path or an identifier-like shape."""
    out = []
    for token in text.split():
        bare = token.strip(".,;:!?()[]{}<>\"'`«»“”‘’")
        if bare and _FACTY.search(bare):
            out.append(bare)
    return out


@dataclass(frozen=True)
class _Source:
    spans: tuple[str, ...]
    sizes: tuple[int, ...]
    weights: tuple[float, ...]  # how much each span is worth keeping before the random part
    numbers: tuple[str, ...]
    facts: tuple[str, ...]


@functools.lru_cache(maxsize=1024)
def _analyse(text: str) -> _Source:
    """The input cut into spans, each weighed by its facts; cached, since retries reread it."""
    spans = _spans(text)
    weights = []
    for position, span in enumerate(spans):
        tagged = position == 0 or bool(_TAG.match(span))
        weights.append((3.0 if tagged else 0.0) + 1.5 * len(_fact_tokens(span)) - position * 0.05)
    return _Source(tuple(spans), tuple(_utf8_len(span) for span in spans), tuple(weights), tuple(sorted(_numbers(text))),
                   tuple(_fact_tokens(text)))


def _balance(span: str) -> str:
    """Cut a span before an unclosed quote, so no quoted string spans two joined pieces."""
    for _ in range(8):
        cut = None
        for quote in ('"', "`"):
            if span.count(quote) % 2:
                cut = span.rfind(quote) if cut is None else min(cut, span.rfind(quote))
        if span.count("“") != span.count("”"):
            pos = span.rfind("“")
            if pos >= 0:
                cut = pos if cut is None else min(cut, pos)
        if span.count("«") != span.count("»"):
            pos = span.rfind("«")
            if pos >= 0:
                cut = pos if cut is None else min(cut, pos)
        tokens = span.split(" ")
        opens = [i for i, t in enumerate(tokens) if t.startswith("'") and len(t) > 1]
        closes = [t for t in tokens if t.endswith("'") and len(t) > 1]
        if len(opens) > len(closes):
            pos = len(" ".join(tokens[:opens[-1]]))
            cut = pos if cut is None else min(cut, pos)
        if cut is None:
            return span
        # Cut at the whitespace before the token that holds the quote.
        space = span.rfind(" ", 0, cut + 1)
        span = span[:space].rstrip() if space > 0 else ""
    return span


def _spans(text: str) -> list[str]:
    """The input's sentences (long ones split at clauses), heads stripped, newlines folded."""
    spans: list[str] = []
    for raw_line in _HEAD.sub("", text).splitlines():
        line = " ".join(raw_line.split())
        if not line:
            continue
        for sentence in re.split(r"(?<=[.!?…])\s+", line):
            if not sentence:
                continue
            if _utf8_len(sentence) <= 220:
                spans.append(sentence)
                continue
            for clause in re.split(r"(?<=[,;])\s+", sentence):
                if clause:
                    spans.append(clause)
    out: list[str] = []
    for span in spans:
        span = _balance(span)
        if span and span not in out:
            out.append(span)
    return out


def _cut_words(text: str, limit: int) -> str:
    """The longest prefix of whole words within ``limit`` bytes (never inside a character)."""
    if _utf8_len(text) <= limit:
        return text
    cut = text.encode("utf-8")[:limit + 1].decode("utf-8", "ignore")
    space = cut.rfind(" ")
    if space <= 0:
        return ""
    return _balance(cut[:space].rstrip())


def _join(pieces: Iterable[str]) -> str:
    out = ""
    for piece in pieces:
        if not out:
            out = piece
        elif out[-1] in ".!?…;:":
            out += " " + piece
        else:
            out += "; " + piece
    return out


def _joined_size(pieces: Sequence[str]) -> int:
    return _utf8_len(_join(pieces))


def _line_from(source: _Source, rng: random.Random, limit: int) -> str:
    """A line of at most ``limit`` bytes: the first span, then fact-rich spans, in input order.

    Sizes are counted with two bytes per join (the most ``_join`` adds), so
    the line never passes the limit.
    """
    spans, sizes = source.spans, source.sizes
    if not spans:
        return ""
    scored = sorted(((weight + rng.random() * 2.0, position)
                     for position, weight in enumerate(source.weights)), reverse=True)
    first = _cut_words(spans[0], limit)
    chosen: dict[int, str] = {0: first} if first else {}
    used = _utf8_len(first) if first else -2
    for _, position in scored:
        if position == 0:
            continue
        room = limit - used - 2
        if room < 24:
            break
        if sizes[position] <= room:
            chosen[position] = spans[position]
            used += 2 + sizes[position]
            continue
        part = _cut_words(spans[position], room)
        if part:
            chosen[position] = part
            used += 2 + _utf8_len(part)
    return _join(chosen[p] for p in sorted(chosen))


def _long_line_from(spans: Sequence[str], low: int, high: int) -> str:
    """A line between ``low`` and ``high`` bytes: the spans in order, again from the start if short."""
    if not spans:
        return ""
    pieces: list[str] = []
    for step in range(10_000):
        span = spans[step % len(spans)]
        size = _joined_size(pieces + [span])
        if size <= high:
            pieces.append(span)
            if size >= low:
                break
            continue
        room = high - _joined_size(pieces) - 2
        part = _cut_words(span, room) if room > 0 else ""
        if part:
            pieces.append(part)
        if _joined_size(pieces) >= low:
            break
    return _join(pieces)


def _numbers(text: str) -> set[str]:
    return {m.group(0).replace(",", "") for m in _NUMBER.finditer(text)}


def _invent_number(rng: random.Random, seen_text: str, known: Sequence[str]) -> str:
    """A number absent from the whole request, even as a substring: near one of the input's if it has any."""
    flat = seen_text.replace(",", "")
    candidates: list[int] = []
    for number in known:
        if number.isdigit():
            value = int(number)
            candidates += [value - 1, value + 1, value + 10, value * 2 + 7]
    rng.shuffle(candidates)
    for value in candidates:
        text = str(value)
        if value >= 10 and len(text) >= 3 and text not in flat:
            return text
    for _ in range(1000):
        text = str(rng.randint(1000, 99999))
        if text not in flat:
            return text
    return str(rng.randint(10**9, 10**10))  # pragma: no cover - a request holding every 5-digit number


def _with_number(line: str, number: str, rng: random.Random, known: Sequence[str]) -> str:
    """Put ``number`` in the line: in place of one of its numbers if it has one, else as a word."""
    tokens = line.split(" ")
    spots = [i for i, t in enumerate(tokens) if t.strip(".,;:!?()") in known and t.strip(".,;:!?()")]
    if spots:
        i = rng.choice(spots)
        bare = tokens[i].strip(".,;:!?()")
        tokens[i] = tokens[i].replace(bare, number, 1)
        return " ".join(tokens)
    position = rng.randint(1, max(1, len(tokens)))
    tokens.insert(position, number)
    return " ".join(tokens)


def _scripts_in(text: str) -> set[str]:
    return {name for name, pattern in _CJK.items() if pattern.search(text)}


def _cjk_line(rng: random.Random, used: set[str], facts: Sequence[str], limit: int) -> tuple[str, str]:
    script = next((s for s in ("han", "hangul", "kana") if s not in used), "han")
    words = _CJK_WORDS[script]
    target = int(limit * rng.uniform(0.4, 0.9))
    pieces: list[str] = []
    numbers = [f for f in facts if f.replace(",", "").replace(".", "").isdigit()]
    while True:
        piece = rng.choice(words)
        if numbers and rng.random() < 0.2:
            piece = f"{piece} {rng.choice(numbers)}"
        joined = ("，" if script == "han" else " ").join(pieces + [piece])
        if _utf8_len(joined) > target and pieces:
            break
        pieces.append(piece)
        if _utf8_len(joined) > target:
            break
    text = ("，" if script == "han" else " ").join(pieces) + ("。" if script != "hangul" else ".")
    while _utf8_len(text) > limit and len(pieces) > 1:
        pieces.pop()
        text = ("，" if script == "han" else " ").join(pieces) + "。"
    return text, script


# ---------------------------------------------------------------------------


class ScriptedWriter:
    """A Responder for writer requests, with a seeded mix of outcomes per try.

    Knobs (all seeded by ``seed``):

    - ``latency_median`` (2.0 s) and ``latency_sigma`` (0.5): each reply's
      duration is ``median · exp(sigma · N(0, 1))``, times
      ``1 + batch_latency · (jobs − 1)`` for a batched call; the first byte
      comes after ``first_byte_share`` (a range, default 0.15–0.4) of it.
    - ``mix``: first-try outcome weights over ``CATEGORIES`` (default 62% fit,
      30% too long, 5% wrong script, 3% malformed); ``retry_mix`` the same for
      a try after feedback (default 88% fit, 8% too long, 1% wrong script, 3%
      malformed).
    - ``invented_rate`` (0.02): the chance that a try with content names one
      number found nowhere in the request; ``head_rate`` (0.0): the chance a
      fitting line copies its ``id+n|`` head (a writer strips it).
    - ``fit_share`` (0.55–1.0 of the limit): how full a fitting line is;
      ``long_share`` (1.3–2.0 of the task's original limit) for a too-long one.
    - ``on_try``: called with each :class:`WriterTry`.
    """

    def __init__(self, seed: int = 0, latency_median: float = 2.0, mix: Mapping[str, float] | None = None,
                 *, retry_mix: Mapping[str, float] | None = None, invented_rate: float = 0.02,
                 head_rate: float = 0.0, latency_sigma: float = 0.5,
                 first_byte_share: tuple[float, float] = (0.15, 0.4), batch_latency: float = 0.5,
                 fit_share: tuple[float, float] = (0.55, 1.0),
                 long_share: tuple[float, float] = (1.3, 2.0), default_limit: int = 512,
                 on_try: Callable[[WriterTry], None] | None = None, keep_tries: bool = True) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.latency_median = latency_median
        self.latency_sigma = latency_sigma
        self.first_byte_share = first_byte_share
        self.batch_latency = batch_latency
        self.mix = dict(DEFAULT_MIX if mix is None else mix)
        self.retry_mix = dict(DEFAULT_RETRY_MIX if retry_mix is None else retry_mix)
        self._first_table = _mix(self.mix)
        self._retry_table = _mix(self.retry_mix)
        self.invented_rate = invented_rate
        self.head_rate = head_rate
        self.fit_share = fit_share
        self.long_share = long_share
        self.default_limit = default_limit
        self.on_try = on_try
        self.keep_tries = keep_tries
        self.tries: list[WriterTry] = []
        self.counts: Counter[str] = Counter()
        self.invented_count = 0
        self.requests = 0
        self.try_count = 0
        self.last_outcome: WriterTry | None = None
        self.last_outcomes: list[WriterTry] = []
        self._forced: list[str | SimReply] = []

    # -- scripting ------------------------------------------------------------

    def force(self, *outcomes: str | SimReply) -> None:
        """Queue the next tries' outcomes: a category name per job, or a whole reply (errors, stalls)."""
        for outcome in outcomes:
            if isinstance(outcome, str) and outcome not in CATEGORIES:
                raise ValueError(f"unknown category {outcome!r}")
            self._forced.append(outcome)

    # -- the Responder --------------------------------------------------------

    def reply(self, request: SimRequest, now: float) -> SimReply:
        number = self.requests
        self.requests += 1
        if self._forced and isinstance(self._forced[0], SimReply):
            forced = self._forced.pop(0)
            assert isinstance(forced, SimReply)
            outcome = WriterTry(self.try_count, number, "", "", 0, "forced",
                                detail=f"status {forced.status}" if forced.status != 200 else "reply",
                                text=forced.text)
            self.try_count += 1
            self.last_outcomes = [outcome]
            self._record(outcome)
            return forced
        messages = request.messages
        task_at = _task_index(messages)
        task = messages[task_at].text if task_at is not None else request.last_user_text()
        last = request.last_user_text()
        attempt = 1 + (sum(1 for m in messages[task_at + 1:] if m.role == "assistant")
                       if task_at is not None else 0)
        jobs = _jobs_of(task)
        retry = attempt > 1
        if retry:
            jobs = self._retry_jobs(jobs, last)
        task_limit = _parse_limit(task) or self.default_limit
        feedback_limit = _parse_limit(last) if retry else None
        seen = request.prompt_text() or "\n".join(m.text for m in messages)
        lines: list[tuple[_Job, str]] = []
        outcomes: list[WriterTry] = []
        for job in jobs:
            original = job.limit or task_limit
            limit = feedback_limit or original
            outcome = self._one_try(number, job, attempt, limit, original, task, seen)
            lines.append((job, outcome.text))
            outcomes.append(outcome)
        text = self._format(lines, tagged=bool(_LINE_FORM.search(task) or _LINE_FORM.search(last)))
        self.last_outcomes = outcomes
        duration = self.latency_median * math.exp(self.latency_sigma * self.rng.gauss(0.0, 1.0))
        duration *= 1.0 + self.batch_latency * (len(jobs) - 1)
        first = duration * self.rng.uniform(*self.first_byte_share)
        for outcome in outcomes:
            self._record(outcome)
        return SimReply(text=text, first_byte=first, duration=duration)

    # -- internals ------------------------------------------------------------

    def _record(self, outcome: WriterTry) -> None:
        self.last_outcome = outcome
        self.counts[outcome.category] += 1
        if outcome.invented:
            self.invented_count += 1
        if self.keep_tries:
            self.tries.append(outcome)
        if self.on_try is not None:
            self.on_try(outcome)

    def _retry_jobs(self, jobs: list[_Job], feedback: str) -> list[_Job]:
        if len(jobs) <= 1:
            return jobs
        asked = _ONLY_JOB.findall(feedback) or _LINE_FORM.findall(feedback)
        if asked:
            wanted = set(asked)
            picked = [job for job in jobs if job.key in wanted]
            if picked:
                return picked
        return jobs

    def _one_try(self, request: int, job: _Job, attempt: int, limit: int, original: int,
                 task: str, seen: str) -> WriterTry:
        rng = self.rng
        forced = None
        if self._forced and isinstance(self._forced[0], str):
            forced = self._forced.pop(0)
        category = forced or _pick(rng, self._retry_table if attempt > 1 else self._first_table)
        source = job.input
        analysed = _analyse(source)
        spans = analysed.spans
        known = analysed.numbers
        outcome = WriterTry(self.try_count, request, job.job, job.key, attempt, category,
                            limit=limit, original_limit=original)
        self.try_count += 1
        if category == "malformed":
            kind = rng.choice(MALFORMED_KINDS)
            outcome.detail = kind
            if kind == "empty":
                text = rng.choice(("", " ", "\n"))
            elif kind == "echo_input":
                text = "<input>\n" + _cut_words(" ".join(source.split()), max(32, limit - 20)) + "\n</input>"
            elif kind == "echo_task":
                name = job.job or "compress message 0"
                text = f"{MARKER} {name}\n" + _line_from(analysed, rng, max(32, limit - 40))
            else:
                text = rng.choice(REFUSALS)
            outcome.text, outcome.size = text, _utf8_len(text)
            return outcome
        if category == "wrong_script":
            text, script = _cjk_line(rng, _scripts_in(seen), analysed.facts, limit)
            outcome.detail, outcome.text, outcome.size = script, text, _utf8_len(text)
            return outcome
        invent = rng.random() < self.invented_rate
        number = _invent_number(rng, seen, known) if invent else None
        reserve = (len(number) + 1) if number else 0
        if category == "fit":
            target = max(24, int(limit * rng.uniform(*self.fit_share)) - reserve)
            text = _line_from(analysed, rng, target)
        elif category == "over":
            text = _long_line_from(spans, int(limit * 1.02) + 1, int(limit * 1.25) - reserve)
        else:  # too_long: past 1.25 times the task's own limit, whatever the feedback asked
            low = int(original * rng.uniform(*self.long_share)) + 1
            high = max(low + 16, int(low * 1.1))
            text = _long_line_from(spans, low, high)
        if number:
            text = _with_number(text, number, rng, known)
            outcome.invented = number
        if category == "fit" and self.head_rate and rng.random() < self.head_rate:
            text = _head_for(job.job) + text
            outcome.head = True
        outcome.text, outcome.size = text, _utf8_len(_HEAD.sub("", text, count=1))
        return outcome

    def _format(self, lines: list[tuple[_Job, str]], tagged: bool) -> str:
        if tagged:
            return "\n".join(f'<line id="{job.key}">{text}</line>' for job, text in lines)
        if len(lines) == 1:
            return lines[0][1]
        return "\n".join(text for _, text in lines)

