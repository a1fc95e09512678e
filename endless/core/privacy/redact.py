"""Secrets replaced before they are kept (issue 19): keys, tokens, private keys, passwords in URLs.

A message is redacted before it reaches the journal or the log, so no file
of the memory, no summary line and no later request ever holds the secret;
the turn that carried it still reached the model as the harness sent it.
Each secret becomes ``[redacted: kind]``.

Detectors are the published formats of the services themselves (a fixed
prefix and length, or a PEM block), plus passwords written into URLs,
assignments such as ``password = "…"``, ``DB_PASSWORD=…``, ``api_key: …`` or
``--token …`` (quoted or not, any case), ``Authorization:`` headers and
``Bearer`` tokens.  An unquoted value counts only when it looks like a
credential (a digit or a symbol in it, or a run of letters right after
``=``), so prose ("the password field", "secret: patience") and code
(``password=password``, ``token = get_token()``) keep their words.  Entropy guesses are left out on
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

# Names under which a secret is written (DB_PASSWORD, x-api-key, client_secret, GITHUB_TOKEN, …):
# the name must end at the separator, so token_count, password_hash or max_tokens are other things.
_SECRET_NAMES = (r"(?:pass(?:word|wd|phrase)|pwd|secret(?:[_-]?key)?|client[_-]?secret|api[_ -]?key|apikey"
                 r"|access[_-]?key|private[_-]?key|(?:access|auth|refresh|api|session|bearer)[_-]?token|token)")
# An unquoted value: up to a space, a quote or a delimiter; taken whole (possessive), and followed by
# no opening bracket (``password = get_password()`` and ``token = tokens[0]`` are code, not secrets).
_UNQUOTED = r"[^\s\"'`,;&(){}\[\]<>|\\]{4,200}+(?![(\[{<\\])"

# (kind, needles, pattern, group): the regular expression runs only on a text holding one of the
# needles (in any case), so a 30 KB paste costs a few substring searches; the group holds the secret
# (0: the whole match; a name: a value :func:`_looks_secret` still has to accept).
_DETECTORS: list[tuple[str, tuple[str, ...], re.Pattern[str], int | str]] = [
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
    # password = "…" / "api_key": "…" / token: '…' with a quoted value of 4+ characters.
    ("password", ("passw", "pwd", "secret", "key", "token"),
     re.compile(r"(?i)(?<![a-z0-9])" + _SECRET_NAMES + r"[\"']?\s*[:=]\s*[\"']([^\"'\s]{4,200})[\"']"), 1),
    # the same unquoted (password=…, API_KEY: …, --token …); _looks_secret decides what is a secret
    ("password", ("passw", "pwd", "secret", "key", "token"),
     re.compile(r"(?i)(?:(?<![a-z0-9])" + _SECRET_NAMES + r"(?P<sep>\s*[:=]\s*)|(?<![\w-])--[a-z0-9-]*?"
                + _SECRET_NAMES + r"(?P<flag>\s+))(?P<value>" + _UNQUOTED + r")"), "value"),
    # Authorization: Bearer …, Basic …, Token …, or the bare credential after the header's name
    ("authorization", ("authorization",),
     re.compile(r"(?i)(?<![a-z0-9])(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?P<scheme>(?>(?:bearer|basic|"
                r"token|digest|apikey|key)\s+)?)(?P<value>" + _UNQUOTED + r")"), "value"),
    # a Bearer token anywhere else (curl -H, code building the header, prose)
    ("bearer-token", ("bearer",),
     re.compile(r"(?i)(?<![a-z0-9])bearer\s+(?P<value>[A-Za-z0-9._~+/-]{8,}+=*)"), "value"),
]


_TRAILING = ".,:;!?"
# Values written where a secret goes that are not one: placeholders, code's constants, the key's name.
_PLACEHOLDERS = frozenset({"none", "null", "nil", "true", "false", "undefined", "required", "optional", "hidden",
                           "masked", "redacted", "example", "placeholder", "string", "value", "secret", "password",
                           "token", "apikey", "api_key", "credentials", "your_token", "your_password", "empty"})
_NAME_WORDS = ("pass", "pwd", "secret", "key", "token")  # password=password, token=authToken: a variable
_SYMBOLS = frozenset("!@#$%^&*+=~?/-")


def _looks_secret(kind: str, found: re.Match[str], value: str) -> bool:
    """Whether an unquoted ``value`` after a secret's name (or a Bearer) is a credential, not prose or code.

    A credential has a digit or a symbol in it; a run of letters after ``password=``
    (no spaces: how a setting is written) counts too, unless it names a variable
    (``password=password``, ``token=authToken``).  After ``password:`` or
    ``--password`` a plain word is prose ("secret: patience", "password: required").
    """
    lowered = value.lower()
    if (len(value) < 4 or value[0] in "$%*#./~-@:=" or "://" in value or len(set(lowered)) <= 2
            or lowered.strip("_-") in _PLACEHOLDERS):
        return False
    marked = any(c.isdigit() or c in _SYMBOLS for c in value)
    if kind == "bearer-token":  # an opaque token; "Bearer token-based auth" is prose
        return len(value) >= 8 and (any(c.isdigit() or c in "._~+/=" for c in value)
                                    or (len(value) >= 20 and not value.islower() and not value.isupper()))
    if kind == "authorization":
        return bool(found.group("scheme")) or marked  # after "Basic " any credential; bare: a marked one
    if len(value) < 6:
        return False
    if marked:
        return True
    return (found.group("sep") == "=" and value.isalpha()
            and not any(word in lowered for word in _NAME_WORDS))


# each needle is looked for once (some serve two detectors); most messages hold none and stop there
_ALL_NEEDLES = tuple(sorted({needle for _, needles, _, _ in _DETECTORS for needle in needles}))

# The "password" family's needles are everyday words ("key", "token"), and its patterns (any case, every
# name of a secret, at every position) are the slowest: an import of a realistic coding chat ran them on
# a third of its messages, for a third of its planning time.  A match needs one of its needles followed,
# within the name, by ``[:=]`` (``password = …``) or preceded by ``--`` (``--token …``), so a text where
# neither stands is passed over.  Looked for in the case-folded text: every character the patterns match
# to a needle's letter in any case folds to that letter (checked over all of Unicode), so no text the
# patterns would redact is passed over.
_ASSIGNED = re.compile(r"(?:passw|pwd|secret|key|token)[^\s\"':=]*[\"']?\s*[:=]")
_FLAGGED = re.compile(r"--[\s\S]*?(?:passw|pwd|secret|key|token)")


def _may_hold_a_password(text: str) -> bool:
    if ":" not in text and "=" not in text and "--" not in text:  # (casefolding makes none of these)
        return False
    folded = text.casefold()
    return _ASSIGNED.search(folded) is not None or _FLAGGED.search(folded) is not None


# The detectors whose needles a text holds, in their order, by the set of needles found: an import's
# texts hold few sets (most often one everyday word, "token" or "key"), each asked a million times.
_FOR_NEEDLES: dict[frozenset[str], tuple] = {}
_FOR_NEEDLES_KEPT = 4096


def _detectors_for(present: set[str]) -> tuple:
    key = frozenset(present)
    found = _FOR_NEEDLES.get(key)
    if found is None:
        found = tuple(detector for detector in _DETECTORS if not key.isdisjoint(detector[1]))
        if len(_FOR_NEEDLES) < _FOR_NEEDLES_KEPT:
            _FOR_NEEDLES[key] = found
    return found


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
    passwords: bool | None = None  # whether the password family may match (looked at once, when needed)
    for kind, needles, pattern, group in _detectors_for(present):
        if kind == "password":
            if passwords is None:
                passwords = _may_hold_a_password(text)
            if not passwords:
                continue
        if not pattern.search(text):
            continue
        mark = MARK.format(kind=kind)

        def swap(found: re.Match[str], kind: str = kind, group: int | str = group, mark: str = mark) -> str:
            whole = found.group(0)
            secret = found.group(group)
            if isinstance(group, str):
                secret = secret.rstrip(_TRAILING)  # the full stop of a sentence is not the password's
                if not _looks_secret(kind, found, secret):
                    return whole
            kinds[kind] += 1
            if group == 0:
                return mark
            start = found.start(group) - found.start(0)
            return whole[:start] + mark + whole[start + len(secret):]

        text = pattern.sub(swap, text)
    return Redacted(text, kinds)


# The needles of detectors whose patterns are case-sensitive, looked for as those patterns write them, in
# the texts as they are: a dozen searches instead of one per needle (an import looks in a million
# messages), each one's needles sharing a pattern.  Each match names the needles it stands for.
_EXACT = [(re.compile(pattern), names) for pattern, names in (
    (r"://", lambda m: ("://",)),
    (r"_(?:live|test)_", lambda m: (m.group(0),)),
    (r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA|Iza)", lambda m: (m.group(0).lower(),)),
    (r"eyJ", lambda m: ("eyj",)),
    (r"gh[oprsu]_|github_pat_", lambda m: (m.group(0),)),
    (r"glpat-", lambda m: ("glpat-",)),
    (r"hf_", lambda m: ("hf_",)),
    (r"npm_", lambda m: ("npm_",)),
    (r"xox", lambda m: ("xox",)),
    (r"hooks\.slack\.com", lambda m: ("hooks.slack.com",)),
    (r"sk-(?:ant-)?", lambda m: ("sk-", "sk-ant-") if len(m.group(0)) > 3 else ("sk-",)),
    (r"PRIVATE KEY", lambda m: ("private key",)),
)]
# The needles of patterns that match in any case, looked for in the lowered texts.
_FOLDED = ("authorization", "bearer", "key", "passw", "pwd", "secret", "token")


def _check_needles() -> None:
    """Every needle of a detector is found by one of the two ways (a new detector must say which)."""
    exact = {"://", "_live_", "_test_", "eyj", "glpat-", "hf_", "npm_", "xox", "hooks.slack.com", "sk-", "sk-ant-",
             "private key", "github_pat_", *(f"gh{c}_" for c in "oprsu"),
             *(a.lower() for a in ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "AIza"))}
    missing = set(_ALL_NEEDLES) - exact - set(_FOLDED)
    if missing:
        raise RuntimeError(f"needles looked for nowhere: {sorted(missing)}")


_check_needles()


def needles_in(texts: list[str]) -> list[set[str] | None]:
    """For each text, the needles it holds (None: none), looked for in all the texts at once.

    An import redacts messages by the hundred thousand, most of them short and
    without a needle: one search over the batch's texts joined by NUL (which no
    needle holds, so no match spans two texts) costs a fraction of a search
    per message.  A case-sensitive detector's needles are looked for as its
    pattern writes them, a dozen patterns in the texts as they are; the others'
    in the lowered texts.  (A needle said present only narrows nothing: each
    detector still runs its own pattern.)
    """
    found: list[set[str] | None] = [None] * len(texts)

    def mark(k: int, names: tuple[str, ...]) -> None:
        held = found[k]
        if held is None:
            found[k] = set(names)
        else:
            held.update(names)

    starts = list(accumulate((len(t) + 1 for t in texts), initial=0))
    joined = "\0".join(texts)
    for pattern, names in _EXACT:
        for match in pattern.finditer(joined):
            mark(bisect_right(starts, match.start()) - 1, names(match))
    if joined.isascii():  # (the usual batch) lowered at once: each text keeps its length
        joined = joined.lower()
    else:  # per text: lowering may change a text's length
        lowered = [t.lower() for t in texts]
        starts = list(accumulate((len(t) + 1 for t in lowered), initial=0))
        joined = "\0".join(lowered)
    for needle in _FOLDED:
        at = joined.find(needle)
        while at >= 0:
            k = bisect_right(starts, at) - 1
            mark(k, (needle,))
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
