"""Secrets replaced before they are kept (issue 19): keys, tokens, private keys, passwords in URLs.

A message is redacted before it reaches the journal or the log, so no file
of the memory, no summary line and no later request ever holds the secret;
the turn that carried it still reached the model as the harness sent it.
Each secret becomes ``[redacted: kind]``.

Detectors are the published formats of the services themselves (a fixed
prefix and length, or a PEM block), plus passwords written into URLs and
assignments such as ``password = "…"``.  Entropy guesses are left out on
purpose: they flag hashes, UUIDs and ordinary identifiers, and a memory
that loses ordinary text is worse than one that keeps an unusual key.
(A general scanner, detect-secrets 1.5, was measured here at 1.2 ms a
line with its default plugins, about 0.6 s for a 30 KB paste, and flagged
every word of plain prose as high-entropy; these patterns run in
microseconds a message.)
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from itertools import accumulate
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from endless.core.store import durable
from endless.core.store import Message

if TYPE_CHECKING:
    from endless.core.settings import Settings

MARK = "[redacted: {kind}]"

# (kind, needles, pattern, group): the regular expression runs only on a text holding one of the
# needles (in any case), so a 30 KB paste costs a few substring searches; the group holds the secret
# (0: the whole match).
_DETECTORS: list[tuple[str, tuple[str, ...], re.Pattern[str], int]] = [
    ("private-key", ("private key",),
     re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                r"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"), 0),
    ("aws-access-key", ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
     re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"), 0),
    ("aws-secret-key", ("secret",),
     re.compile(r"(?i)aws.{0,20}?secret.{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"), 1),
    ("anthropic-key", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9]{2,12}-[A-Za-z0-9_-]{20,}"), 0),
    ("openai-key", ("sk-",),
     re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}"
                r"|\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|\bsk-[A-Za-z0-9]{48}\b"), 0),
    ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{60,255}\b"), 0),
    ("gitlab-token", ("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), 0),
    ("slack-token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("slack-webhook", ("hooks.slack.com",), re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"), 0),
    ("google-api-key", ("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), 0),
    ("stripe-key", ("_live_", "_test_"), re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"), 0),
    ("huggingface-token", ("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{34,}\b"), 0),
    ("npm-token", ("npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("jwt", ("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), 0),
    # user:password@ in a URL or connection string (the user and host are kept).
    ("url-password", ("://",), re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'<>]{1,100}:([^\s@/\"'<>]{3,200})@"), 1),
    # password = "…" / "api_key": "…" / token: '…' with a quoted value of 8+ characters.
    ("password", ("passw", "pwd", "secret", "key", "token"),
     re.compile(r"(?i)(?<![a-z])(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
                r"[\"']?\s*[:=]\s*[\"']([^\"'\s]{8,200})[\"']"), 1),
]


# each needle is looked for once (some serve two detectors); most messages hold none and stop there
_ALL_NEEDLES = tuple(sorted({needle for _, needles, _, _ in _DETECTORS for needle in needles}))


@dataclass(frozen=True)
class Redacted:
    text: str
    kinds: Counter  # kind -> how many were replaced


def redact(text: str, present: set[str] | None = None) -> Redacted:
    """``text`` with every secret the detectors know replaced by its marker; idempotent.

    ``present``: the needles the text holds, when the caller looked for them already.
    """
    if present is None:
        present = set(filter(text.lower().__contains__, _ALL_NEEDLES)) if text else set()
    if not present:
        return Redacted(text, Counter())
    kinds: Counter = Counter()
    for kind, needles, pattern, group in _DETECTORS:
        if present.isdisjoint(needles) or not pattern.search(text):
            continue
        mark = MARK.format(kind=kind)

        def swap(found: re.Match[str], kind: str = kind, group: int = group, mark: str = mark) -> str:
            kinds[kind] += 1
            if group == 0:
                return mark
            whole, start = found.group(0), found.start(group) - found.start(0)
            return whole[:start] + mark + whole[start + len(found.group(group)):]

        text = pattern.sub(swap, text)
    return Redacted(text, kinds)


def needles_in(texts: list[str]) -> list[set[str] | None]:
    """For each text, the needles it holds (None: none), looked for in all the texts at once.

    An import redacts messages by the hundred thousand, most of them short and
    without a needle: one search per needle over the batch's lowered texts
    (joined by NUL, which no needle holds, so no match spans two texts) costs
    a fraction of a search per needle per message.
    """
    lowered = [t.lower() for t in texts]  # per text: lowering may change a text's length
    starts = list(accumulate((len(t) + 1 for t in lowered), initial=0))
    joined = "\0".join(lowered)
    found: list[set[str] | None] = [None] * len(texts)
    for needle in _ALL_NEEDLES:
        at = joined.find(needle)
        while at >= 0:
            k = bisect_right(starts, at) - 1
            held = found[k]
            if held is None:
                found[k] = {needle}
            else:
                held.add(needle)
            at = joined.find(needle, starts[k + 1])  # the next text: this one holds the needle
    return found


def messages(kept: list[Message]) -> tuple[list[Message], Counter]:
    """:func:`message` for many messages at once (an import's batch), and what was replaced in all."""
    out, each = messages_each(kept)
    kinds: Counter = Counter()
    for found in each:
        if found is not None:
            kinds.update(found)
    return out, kinds


def messages_each(kept: list[Message]) -> tuple[list[Message], list[Counter | None]]:
    """:func:`messages`, with what was replaced in each message (None: nothing)."""
    texts: list[str] = []
    for m in kept:
        texts.append(m.text)
        if m.writer_text is not None:
            texts.append(m.writer_text)
    found = needles_in(texts)
    out: list[Message] = []
    each: list[Counter | None] = [None] * len(kept)
    k = 0
    for n, m in enumerate(kept):
        present = found[k]
        k += 1
        writer_present = None
        if m.writer_text is not None:
            writer_present = found[k]
            k += 1
        if present is None and writer_present is None:
            out.append(m)
            continue
        text = redact(m.text, present or set())
        writer = None if m.writer_text is None else redact(m.writer_text, writer_present or set())
        if not text.kinds and (writer is None or not writer.kinds):
            out.append(m)
            continue
        each[n] = text.kinds | (writer.kinds if writer is not None else Counter())  # a secret counts once
        out.append(Message(m.kind, text.text, m.at, None if writer is None else writer.text))
    return out, each


def message(kept: Message) -> tuple[Message, Counter]:
    """The message with its text (and writer text) redacted, and what was replaced."""
    out, kinds = messages([kept])
    return out[0], kinds


class Redacting(Protocol):
    """The memory a title is kept in (``Memory`` is one): its settings, and where redactions are counted."""

    settings: "Settings"

    def count_redactions(self, kinds: Counter) -> None: ...


def kept_title(memory: Redacting, title: str) -> str:
    """A chat's title as the memory keeps it: redacted like a message (a host titles a chat from its
    first message, secrets and all), counted with the commit's redactions."""
    if not title or not memory.settings.redact_secrets:
        return title
    found = redact(title)
    memory.count_redactions(found.kinds)
    return found.text


COUNTS = "redactions.json"  # secrets redacted in a memory, by kind (derived counts, for doctor)


def counts(folder: Path) -> dict[str, int]:
    """How many secrets of each kind the memory in ``folder`` has redacted."""
    try:
        stored = durable.read_json(folder / COUNTS)
    except (FileNotFoundError, ValueError):
        return {}
    return {k: v for k, v in stored.items() if isinstance(v, int)} if isinstance(stored, dict) else {}


def add_counts(folder: Path, kinds: Counter) -> None:
    """Add to the memory's counts (under the memory's lock, at a commit)."""
    total = Counter(counts(folder))
    total.update(kinds)
    durable.write_json(folder / COUNTS, dict(sorted(total.items())))
