"""Every tunable number and name of Endless, in one place (DESIGN §7).

Values are layered: built-in defaults, then the TOML file (XDG config dir, or
``ENDLESS_CONFIG``), then ``ENDLESS_*`` environment variables, then whatever a
harness passes.  Each value remembers which layer set it, so ``endless config``
can say why a number is what it is.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from endless.core.meanings import MEANINGS  # noqa: F401 (its own module for size; callers name it here)


def search_workers(settings: "Settings") -> int:
    """How many search worker processes the RPC starts (``rpc_search_workers``, 0: automatic)."""
    return settings.rpc_search_workers or max(1, (os.cpu_count() or 2) - 1)


# Bytes a sawtooth plans for the "id+n|" head and newline of a merge line not written yet (the
# line itself is planned at line_budget); a head is at most about this long for any real history.
PLANNED_HEAD_BYTES = 12
# A view's size is kept summed by blocks of this many parts (endless.core.view.sizes), for this many part
# lists at once (the two views, and one more that a merge is replacing).
VIEW_SUM_BLOCK = 256
SUMS_KEPT = 3
# Sizes read one by one from view files trusted at an open before they are all taken into arrays at
# once (a search of the file's arrays each, about a microsecond; all of them at 1M messages, 0.3 s).
STORED_LOOKUPS_BEFORE_TAKING = 16_384
# Tree lines written since a view file was saved that an open reads to go on trusting the file (each
# line's head, about a microsecond; past this the file is checked part by part, 0.4 s at 1M messages).
TRUSTED_TREE_GROWTH_BYTES = 64 << 20
VIEW_RARE_LEVEL_SHARE = 16  # a stored view's level held by fewer than one part in this many is picked by position
# Lines the offline writer writes and stores at once (one fsync): after an import tens of thousands are ready,
# and written all at once they held the memory's lock for seconds and starved the lease's renewal.
OFFLINE_STORE_LINES = 512
# Merges stored since the writer's queue ordered its ready merges, passed inside that order at one look,
# before it is made again (those at its front are dropped at once).
STALE_ORDER_ENTRIES = 4096
LINE_BUDGET = 512  # bytes of one summary line (DESIGN §2.3); the default of the line_budget setting
WRITER_REPLY_TOKENS = 1024  # the reply tokens a writer call allows each line it asks for
# A search pattern is refused before compiling past these (endless.core.search.pattern_guard): the regex engine
# expands counted repeats, about 260 bytes a piece, so 20,000 pieces stay near 5 MB.
PATTERN_CHARS_MAX = 2_000
PATTERN_WEIGHT_MAX = 20_000
MOMENT_MIN, MOMENT_MAX = 0.0, 7_258_118_400.0  # a time a memory shows: 1970-01-01 to 2200-01-01 UTC
LONG_NEEDLE_BYTES = 256  # a literal longer than this is searched with a linear-time method
# The full-text index (endless.core.search.index): messages a catch-up transaction indexes (other
# processes' commits wait at most one batch), how long a writer waits for another's transaction,
# and how many SQLite steps pass between two looks at a query's deadline.
INDEX_BATCH_MESSAGES = 20_000
INDEX_PARSE_GROUP = 512  # log lines parsed with one map; a reader that stops early parsed at most this many more
# Bytes of the log read at once to parse its records: a window is held three times over while its
# lines are parsed (read, cut, split), and an import's index helper reads two batches at once (8 MB
# windows: 34 MB more at its peak, no faster).
RECORDS_READ_WINDOW = 1 << 20
INDEX_BUSY_SECONDS = 5.0
INDEX_PROGRESS_STEPS = 2_000
# A catch-up an import started in the background stops when no writer call has been answered for this long
# (a dead route would hold the memory's writer lease and retry forever); doctor then says why.
CATCH_UP_GIVE_UP_SECONDS = 600.0
IMPORT_FOLLOWER_FROM = 20_000  # messages: an import this long leaves its search index to a helper process
SPILL_READ_WINDOW = 4 << 20  # bytes of an import's spill read at once when its commit reads it back in order
PLAN_HALVES_FROM = 4 << 20  # bytes: a generic import source this long is planned by two processes, a half each
# The first half's share of such a source's bytes, so both halves end together: a line costs either
# process about the same, and the second half's process also sends its plan back (measured at 1M
# realistic records: 0.55 left the first half planning 1.2 s after the second ended; 0.49 ends them
# within 0.1 s, and the plan takes 6.2 s, not 6.9).
PLAN_FIRST_SHARE = 0.49
IMPORT_SCAN_BLOCK = 8 << 20  # bytes read at once when an import source is searched for a marker
# The longest line an import source may have (a message of 5 MB, a transcript line holding images, are far
# shorter): past it the line is a bad line, so a source without newlines (/dev/zero) is refused after
# reading this much, instead of growing in memory until the process dies.
IMPORT_LINE_BYTES_MAX = 64 << 20
# Coding agents' hooks (Claude Code, Codex): a hook waits HOOK_WAIT_SECONDS at most for the capture it started
# (none: the host goes on at once, the capture in its own process); a capture waits CAPTURE_LOCK_SECONDS for
# another capture of the same transcript.
HOOK_WAIT_SECONDS = 0.0
HOOK_INPUT_MAX = 4 << 20  # bytes of a hook's JSON read at most (a Stop hook carries the last reply)
CAPTURE_NICE = 10  # a hook's capture runs this much below the agent's priority (it yields the CPU to the agent)
CAPTURE_LOCK_SECONDS = 60.0
CAPTURE_READ_MAX = 512 << 20  # bytes of a transcript read in one capture (the rest: the next one)
# A folder's identity (endless.core.store.folder_keys): the file a person may commit to name a folder's memory
# on every machine, and the most of it read.
ID_FILE = ".endless-id"
ID_FILE_BYTES = 4096
HANDOVER_BYTES = 4096  # the hand-over block at a session's start, at most
HANDOVER_GIT_SECONDS = 1.5  # all its git commands together
# How long Codex waits for an optional MCP server before a session's first request (its own default does not
# wait, so Endless's tools, ready about 1 s after start, were missing from every `codex exec`); a server that
# fails to start is not waited for, one that hangs costs this once per session.
CODEX_MCP_GRACE_MS = 5000
FOLLOWER_POLL_SECONDS = 0.2  # how often that helper looks for the import's new turns
FOLLOWER_WAIT_SECONDS = 900.0  # how long the import waits for it to index the rest (then the next search does)
RETENTION_CHECK_SECONDS = 3600.0  # how often the writer's process looks for messages past forget_after_days
FORGET_CHECKPOINT_TRIES = 20  # a forget's WAL checkpoint waits for readers this many times
INDEX_CACHE_KIB = 32_768  # the index connection's page cache (at most; filled only as pages are read)
# The page cache of an import's index helper, which only adds rows: a bigger one made it no faster
# and was a fifth of its peak (609,913 messages: 150 MB with 32 MB, 126 MB with 8 MB).
FOLLOWER_CACHE_KIB = 8_192
# FTS5's merge thresholds for a new index (its defaults are 4 and 16): segments are merged in bigger,
# rarer steps.  An import's index helper over 609,913 messages: 11.0 s with the defaults, 10.0 s with
# these (the mean of three runs each); a ranked query reads as fast (41.4 and 41.5 ms median), the file as large.
INDEX_AUTOMERGE = 8
INDEX_CRISISMERGE = 32
# How much new text FTS5 holds in memory before it writes a segment (its default is 1 MiB).  A batch of
# the index's (INDEX_BATCH_MESSAGES, about 7 MB of realistic messages) is then written as one segment,
# not seven: fewer, bigger segments to merge.  The index helper's inserts of 609,913 messages: 6.2 s of
# CPU with the default, 4.7 s with this.
INDEX_PENDING_BYTES = 16 << 20
# The PostgreSQL store (endless.core.store.postgres): how long a connection may take to open, how long a
# change waits for another machine's lock, the largest row one append stores (a bulk import is cut into
# rows of about this size, whole records each), and the rows one read of the shared log fetches at once.
STORE_CONNECT_SECONDS = 10
STORE_LOCK_SECONDS = 60.0
STORE_ROW_BYTES = 4 << 20
STORE_FETCH_ROWS = 64
# How often a process waiting for a memory's file lock tries it again (filelock's own default, 50 ms, made
# four processes committing at once slower than one: the lock is held about 2 ms; a try is one syscall).
STORE_LOCK_RETRY_SECONDS = 0.001
# libpq's TCP settings where the URL gives none: a server that vanishes mid-statement (its host down, the
# network cut) is noticed in about 30 s (unacknowledged data, or 10 s idle + 4 probes 5 s apart) instead of
# the system's two hours, and the statement fails with what to do.
STORE_PURGE_WAIT_SECONDS = 30.0  # how long a forget's VACUUM FULL waits for other machines' reads to end
STORE_LISTEN_CHECK_SECONDS = 1.0  # how often a listening thread looks whether its memory was closed
STORE_TCP_PARAMS = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 4,
                    "tcp_user_timeout": 30_000}
# A ranked search first ranks the messages holding all its words, at any size; the rest of a page
# comes from the words OR'ed, which looks at every row holding one of them: that part takes the
# rarest words while their rows stay under this many (measured on 2 cores: about 2 ms per 1,000 rows
# at 1M messages).  STOPWORDS (below) are dropped first.
SEARCH_POSTINGS_MAX = 12_000
# Ranking a question (endless.core.search.ranking): the best this many messages holding any of its
# words are scored again with the messages around them in their chat: a message within
# SEARCH_NEIGHBOUR_WIDTH of a hit in the same chat gains SEARCH_NEIGHBOUR_WEIGHT of that hit's score
# (times SEARCH_NEIGHBOUR_DECAY for each step past the first), since an answer is often the reply to
# the message that holds the question's words.  A message inside a time the question names ("last
# Tuesday") has its score times 1 + SEARCH_TIME_BOOST.  Measured by scripts/bench_meaning.py (a pool
# of 50, 100 or 1,000 finds the same; the neighbours' weight 0.85 gains a point on LoCoMo, loses 5 on ours).
SEARCH_POOL = 100
SEARCH_NEIGHBOUR_WIDTH = 2
SEARCH_NEIGHBOUR_WEIGHT = 0.7
SEARCH_NEIGHBOUR_DECAY = 0.5
SEARCH_TIME_BOOST = 1.0
# Messages holding none of the words (brought by a neighbour or a line) take at most this share of any
# first n hits, so a page keeps the weaker messages that do hold them (measured: +1 at 20 on ours).
SEARCH_ALONE_SHARE = 0.4
# Written summary lines as a second scope: the best SEARCH_LINE_POOL lines holding a question's words
# (of at most 2**SEARCH_LINE_LEVEL_MAX messages each) give each message they cover SEARCH_LINE_WEIGHT
# of the best message's score, in proportion to their own (a wider, coarser neighbourhood).
SEARCH_LINE_POOL = 100
SEARCH_LINE_LEVEL_MAX = 4
SEARCH_LINE_WEIGHT = 0.3
# Pseudo-relevance feedback: the words most typical of the best SEARCH_FEEDBACK_DOCS messages (at most
# SEARCH_FEEDBACK_WORDS of them) are searched for too, their scores weighed SEARCH_FEEDBACK_WEIGHT.
SEARCH_FEEDBACK_DOCS = 10
SEARCH_FEEDBACK_WORDS = 8
SEARCH_FEEDBACK_WEIGHT = 0.3
# Speakers (endless.core.search.speakers): a name in a question is a side's when, among the newest
# SEARCH_SPEAKER_SAMPLE messages holding it, at least SEARCH_SPEAKER_ADDRESSED_MIN address someone by
# it and SEARCH_SPEAKER_SHARE of those are the other side's; that side's messages then score
# 1 + SEARCH_SPEAKER_BOOST times as much.
SEARCH_SPEAKER_SAMPLE = 100
SEARCH_SPEAKER_ADDRESSED_MIN = 3
SEARCH_SPEAKER_SHARE = 0.8
SEARCH_SPEAKER_BOOST = 0.5
# Query expansion by the writer's model (endless.writer.expand): at most this many of its words are
# searched, weighed as much as the question's own (a guess at the answer's words, not measured here:
# no model answers offline); the call gets this many seconds, else the search goes on without it.
SEARCH_EXPANSION_WORDS = 12
SEARCH_EXPANSION_WEIGHT = 1.0
SEARCH_EXPANSION_SECONDS = 8.0
# A PostgreSQL memory's index ranks a word's rows a stretch of the newest messages at a time, each stretch
# holding about this many of them (pg_index.PgSearchIndex.ranked), and counts its words among this many
# stretches of 8,192 messages (the newest).
STORE_SEARCH_WINDOW_ROWS = 1_500
STORE_SEARCH_SAMPLE_STRETCHES = 4
KEPT_CLAIM_SECONDS = 6 * 3600.0  # a turn's claim on kept messages lapses after this long (its process alive)
KEPT_SHARE_BYTES = 2_000  # a kept message's bytes in a head where the kept ones do not fit whole (zoom reads the rest)
SEARCH_TERMS_MAX = 16  # words a ranked query keeps (the rarest); more only slow it
SEARCH_PHRASE_CHARS_MAX = 10_000
SPAN_CHARS = 100_000  # a hit's words are marked within its first this many characters
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can can't could couldn't did didn't do does doesn't doing don't down during each few
for from further had hadn't has hasn't have haven't having he her here hers herself him himself his how
i if in into is isn't it it's its itself just let's me more most my myself no nor not now of off on once
only or other ought our ours ourselves out over own same she should shouldn't so some such than that
that's the their theirs them themselves then there there's these they this those through to too under
until up very was wasn't we were weren't what what's when where which while who whom why will with won't
would wouldn't you your yours yourself yourselves also ever tell said say says know remember recall
again please thing things something anything did does whats us
""".split())
# Words that frame a question rather than name what it asks about ("what kind of…", "how likely…"):
# dropped from a ranked query, like STOPWORDS, when other words remain.
QUESTION_WORDS = frozenset("""
likely kind kinds type types sort sorts way ways think thinks thought much many often long ago
happen happened happening get got go went going make made give gave take took come came specific
""".split())
# Seconds the offline writer takes for a line on this project's 2-core reference machine, store and
# view passes included, for the import's estimate (measured: `endless catch-up` after importing 1M
# realistic records wrote 555,835 lines in 540 s, 0.97 ms a line).
OFFLINE_LINE_SECONDS = 0.001
# What Endless wraps around the memory's text (DESIGN §4): the names of its tags (the view's
# <chat>, the writer task's <input>, <job> and <line>), the per-turn state's opening, and the
# writer task's marker.  Memory text is neutralised against all of them where it is rendered
# (endless.core.view.render.neutralise).
# A writer's try that repeats the task's own instructions or feedback is junk (a model that echoes
# its prompt): rejected when at least PROMPT_ECHO_SHARE of its word 5-grams occur in the texts of
# prompts/ and not in its sources.  Why 0.3: a faithful line copies its input, and a 5-word run of
# the instructions turns up in one only by chance, one or two at a time (of the ~65 a 512-byte
# line has); an echoed retry message scores about 0.6 to 1.0, and a try that is a third
# instructions already stores them as memory.  A message that quotes the instructions is safe:
# runs its sources hold are not counted.
PROMPT_ECHO_WORDS = 5
PROMPT_ECHO_SHARE = 0.3
FRAME_TAGS = ("chat", "input", "job", "line")
STATE_MARKER = "[now:"
TASK_MARKER = "Compaction:"


class SettingsError(ValueError):
    """A settings file, variable or harness value could not be used."""


@dataclass(frozen=True)
class Settings:
    """The effective settings; ``sources`` maps each field name to its layer."""

    # Lines and views (DESIGN §2.3, §2.4).
    line_budget: int = LINE_BUDGET
    line_accept_ratio: float = 1.25
    line_retry_ratio: float = 0.75
    view_ceiling: int = 128_000
    view_floor: int = 64_000
    view_shrink_slack: int = 16_000
    # A shrinking view waiting for many parents (after a long import) is re-planned once this share
    # of them is built, not at every one (see ViewKeeper._run_sawtooth); a short wait re-plans at each.
    shrink_replan_share: float = 1 / 32
    writer_view_floor: int = 16_000
    writer_view_ceiling: int = 32_000
    smallest_window_tokens: int = 32_768
    # The writer (DESIGN §3).
    writer_calls: int = 8
    unwritten_ahead: int = 8
    tries_per_line: int = 3
    content_rounds: int = 3
    lines_per_call: int = 6
    retry_seconds: float = 10.0
    # A writer failing this long (no call answered) is told to the person once, in the host's notice.
    writer_failing_notice_seconds: float = 180.0
    call_timeout_seconds: float = 300.0
    writer_poll_seconds: float = 1.0
    cache_warm_seconds: float = 300.0
    rate_limit_backoff_max: float = 120.0
    spend_cap_per_day: float | None = None
    writer_route: str = ""
    reasoning_effort: str = "lowest"
    # Turns (DESIGN §4).  A turn waits while the recent block is past its limit, only as long as the
    # writer stores a line every turn_stall_seconds, and at most turn_wait_seconds; then it goes on
    # with a bounded head.
    turn_wait_seconds: float = 15.0
    turn_stall_seconds: float = 5.0
    reply_room_tokens: int = 8_192  # the window's share kept for the reply when the harness names none
    recent_block_bytes: int = 16_384
    long_turn_fraction: float = 0.25
    default_window_tokens: int = 200_000  # when the harness does not say its model's window
    # Messages (DESIGN §2.2).
    granularity: str = "turn"
    result_cap_chars: int = 15_000
    trace_cap_chars: int = 30_000
    message_split_chars: int = 30_000
    # What one writer call reads of a tool message (not in DESIGN §7; see README "Limits and costs"):
    # each result inside it keeps its first and last writer_result_keep_chars, the whole its first
    # and last writer_input_keep_chars.  The log keeps every character; zoom shows them.
    writer_result_keep_chars: int = 1_500
    writer_input_keep_chars: int = 6_000
    # Tools (DESIGN §5).
    zoom_page_chars: int = 25_000
    regex_seconds: float = 2.0
    search_hits_tool: int = 20
    search_hits_rpc: int = 50
    recall_search: bool = True
    # Secrets (API keys, tokens, private keys, passwords in URLs) replaced by [redacted: kind] before
    # a message is kept (endless.core.privacy.redact); the turn that carried them reaches the model as sent.
    redact_secrets: bool = True
    # Coding agents (endless.faces.importers.live): a Claude Code session's sub-agents captured as chats of
    # their own beside it (their transcripts under <session>/subagents/), or left out.
    capture_subagents: bool = True
    # After a coding agent's turn is captured, its background process writes the memory's summary lines once
    # unwritten_ahead of them wait (all of them when the session ends): no chat runs a writer there.
    capture_catch_up: bool = True
    # After `endless import`, its lines written by the same command when the offline writer is quick enough,
    # else by a detached `endless catch-up` that outlives it (false: left for `endless catch-up` or a chat's
    # writer; `endless import --no-catch-up` leaves them once).
    import_catch_up: bool = True
    # The offline writer writes an import's lines in the import itself when that takes about this long at
    # most; longer, or by a model, a detached `endless catch-up` does it (`endless doctor` shows it running).
    import_catch_up_wait_seconds: float = 30.0
    # Retention (endless.core.privacy.forget): messages older than this many days are forgotten automatically
    # by the process running the writer (not set: kept forever).
    forget_after_days: float | None = None
    # Processes (DESIGN §2.5).
    lease_renew_seconds: float = 5.0
    lease_expiry_seconds: float = 30.0
    settle_poll_seconds: float = 0.05
    # Names.
    agent_name: str = "Assistant"
    person_tag: str = "you"
    home: str = ""
    # Where memories are kept: empty, the files under ``home`` (the embedded store); a
    # ``postgresql://`` URL, a PostgreSQL database shared by several machines (endless.core.store.postgres).
    store: str = field(default="", repr=False)  # (a password may be in it: never in a repr or a log)
    # TLS for a PostgreSQL store, passed to the driver as libpq's parameters of the same names (each may also be
    # in the URL's query; a setting given here wins): sslmode (disable, allow, prefer, require, verify-ca,
    # verify-full), the root certificate to check the server with, and this machine's certificate and key.
    store_sslmode: str = ""
    store_sslrootcert: str = ""
    store_sslcert: str = ""
    store_sslkey: str = ""
    # `endless store copy`: bytes one step of a copy moves (one transaction, or one write and fsync).
    store_copy_chunk_bytes: int = 4 << 20
    rpc_port: int = 8765
    # Hermes: past this many messages in Hermes's own transcript, it is compacted in place at a turn's start.
    hermes_transcript_messages: int = 120
    # The host RPC and History page (DESIGN §6).
    rpc_body_bytes: int = 65_536  # largest request body accepted
    rpc_request_seconds: float = 10.0  # a request still running after this is answered endless/timeout
    # A connection whose request line and headers (or whose body) have not all arrived after this is
    # closed: a half-sent request would otherwise hold its slot for ever.
    rpc_header_seconds: float = 5.0
    rpc_body_seconds: float = 5.0
    # Open connections one local user (or, off Linux, one address) may hold; past it a new one is
    # answered 503, so one user cannot take every slot from the others.
    rpc_connections_per_client: int = 256
    rpc_page_token_seconds: float = 600.0  # a page address not opened within this has expired
    # Worker processes for searches and history pages; 0: one less than the CPUs (at least one), so
    # view and zoom keep a core on a small machine (measured on 2 cores: p99 105 ms with 2, 81 ms with 1).
    rpc_search_workers: int = 0
    rpc_search_nice: int = 10  # the workers' niceness: view and zoom go first on a busy machine
    rpc_search_queue: int = 256  # searches and history pages waiting beyond this are answered endless/busy
    history_limit: int = 50  # turns a history page holds when the caller names no limit
    history_limit_max: int = 200
    history_page_bytes: int = 2_000_000  # a history page stops before this many bytes of JSON
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def memory_root(self) -> Path:
        """Where memories live: ``home`` if set, else the XDG data dir + ``/endless``."""
        if self.home:
            return Path(self.home).expanduser()
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "endless"

    def window_limits(self, window_tokens: int | None) -> tuple[int, int]:
        """Ceiling and floor for a model's window: 1 byte per token at most."""
        ceiling = self.view_ceiling
        if window_tokens is not None:
            ceiling = min(ceiling, int(window_tokens))
        floor = ceiling * self.view_floor // self.view_ceiling
        return ceiling, floor

    @property
    def planned_line_bytes(self) -> int:
        """What a sawtooth assumes an unwritten merge line weighs, when planning a batch."""
        return self.line_budget + PLANNED_HEAD_BYTES

    def serves_window(self, window_tokens: int | None) -> bool:
        return window_tokens is None or window_tokens >= self.smallest_window_tokens

    def replace(self, **values: Any) -> "Settings":
        """A copy with ``values`` applied as the harness layer."""
        return _apply(self, values, "harness")


_ENV_PREFIX = "ENDLESS_"
_NOT_SETTINGS = {"sources"}
# Environment names that mean something else than a field of the same name.
_ENV_SKIP = {"ENDLESS_CONFIG"}


def setting_names() -> list[str]:
    return [f.name for f in fields(Settings) if f.name not in _NOT_SETTINGS]


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get("ENDLESS_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "endless" / "config.toml"


def load_settings(
    harness: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    path: Path | None = None,
) -> Settings:
    """Defaults, then the TOML file, then ``ENDLESS_*``, then ``harness``."""
    env = os.environ if environ is None else environ
    settings = Settings()
    toml_path = path if path is not None else config_path(env)
    if toml_path.exists():
        import tomllib  # (only when there is a file: it loads datetime, a cost every hook process would pay)

        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"cannot read the settings file {toml_path}: {exc}. "
                                "Fix its TOML syntax or point ENDLESS_CONFIG elsewhere.") from exc
        table = data.get("endless", data)
        if not isinstance(table, dict):
            raise SettingsError(f"the settings file {toml_path} has 'endless' = {table!r}; "
                                "settings go in an [endless] table or at the top level")
        settings = _apply(settings, table, f"file {toml_path}")
    env_values = {}
    for key, raw in env.items():
        if key.startswith(_ENV_PREFIX) and key not in _ENV_SKIP:
            env_values[key[len(_ENV_PREFIX):].lower()] = raw
    settings = _apply(settings, env_values, "env", from_text=True, strict=False)
    if harness:
        settings = _apply(settings, harness, "harness")
    return settings


def _apply(settings: Settings, values: Mapping[str, Any], layer: str, *,
           from_text: bool = False, strict: bool = True) -> Settings:
    known = {f.name: f for f in fields(Settings) if f.name not in _NOT_SETTINGS}
    changes: dict[str, Any] = {}
    sources = dict(settings.sources)
    for name, raw in values.items():
        key = name.replace("-", "_")
        if key not in known:
            if strict:
                raise SettingsError(f"unknown setting {name!r} in {layer}; "
                                    f"known settings: {', '.join(sorted(known))}")
            continue
        label = f"ENDLESS_{key.upper()}" if layer == "env" else layer
        changes[key] = _coerce(key, raw, known[key].default, label, from_text)
        sources[key] = layer if layer != "env" else f"env ENDLESS_{key.upper()}"
    result = dataclasses.replace(settings, **changes, sources=sources)
    _check(result)
    return result


def _coerce(name: str, raw: Any, default: Any, where: str, from_text: bool) -> Any:
    kind = type(default)
    if name in ("spend_cap_per_day", "forget_after_days"):
        kind = float
        if raw is None or (from_text and str(raw).strip().lower() in ("", "none", "off")):
            return None
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if kind is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError("expected a whole number")
            return int(str(raw).replace("_", "")) if isinstance(raw, str) else int(raw)
        if kind is float:
            if isinstance(raw, bool):
                raise ValueError("expected a number")
            return float(raw)
        if not isinstance(raw, str) and not from_text:
            raise ValueError("expected text")
        return str(raw)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"setting {name} from {where} has the value {raw!r}: {exc}") from exc


def _check(s: Settings) -> None:
    problems = []
    if s.granularity not in ("turn", "step"):
        problems.append(f"granularity must be 'turn' or 'step', not {s.granularity!r}")
    for name in ("line_budget", "view_ceiling", "view_floor", "writer_view_floor",
                 "writer_view_ceiling", "writer_calls", "unwritten_ahead", "tries_per_line",
                 "content_rounds", "lines_per_call", "recent_block_bytes", "zoom_page_chars",
                 "search_hits_tool", "search_hits_rpc", "result_cap_chars", "trace_cap_chars",
                 "message_split_chars", "writer_result_keep_chars", "writer_input_keep_chars",
                 "rpc_body_bytes", "rpc_search_queue", "rpc_connections_per_client", "reply_room_tokens", "turn_stall_seconds",
                 "history_limit", "history_limit_max", "history_page_bytes"):
        if getattr(s, name) <= 0:
            problems.append(f"{name} must be positive")
    if s.store_sslmode and s.store_sslmode not in SSL_MODES:
        problems.append(f"store_sslmode must be one of {', '.join(SSL_MODES)}, not {s.store_sslmode!r}")
    if s.store_copy_chunk_bytes < 1024:
        problems.append("store_copy_chunk_bytes must be at least 1024")
    if s.store.strip() and not is_postgres_url(s.store):
        problems.append(f"store must be empty (files under home) or a postgresql:// URL, not "
                        f"{masked_store(s.store)!r}")
    if s.rpc_search_workers < 0:
        problems.append("rpc_search_workers must be 0 (automatic) or more")
    if s.import_catch_up_wait_seconds < 0:
        problems.append("import_catch_up_wait_seconds must be 0 (always in the background) or more")
    if s.view_floor >= s.view_ceiling:
        problems.append("view_floor must be below view_ceiling")
    if s.writer_view_floor >= s.writer_view_ceiling:
        problems.append("writer_view_floor must be below writer_view_ceiling")
    if s.forget_after_days is not None and not s.forget_after_days > 0:
        problems.append("forget_after_days must be a positive number of days (or not set)")
    if s.spend_cap_per_day is not None and s.spend_cap_per_day < 0:
        problems.append("spend_cap_per_day must not be negative")
    for f in fields(Settings):
        value = getattr(s, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{f.name} must be a finite number, not {value!r}")
        elif f.name.endswith("_seconds") and value < 0:
            problems.append(f"{f.name} must not be negative")
    for name in ("regex_seconds", "rpc_header_seconds", "rpc_body_seconds", "rpc_page_token_seconds",
                 "line_accept_ratio", "line_retry_ratio", "smallest_window_tokens",
                 "default_window_tokens"):
        if not getattr(s, name) > 0:
            problems.append(f"{name} must be positive")
    if s.hermes_transcript_messages < 8:
        problems.append("hermes_transcript_messages must be at least 8")
    if not 0 <= s.rpc_port <= 65535:
        problems.append("rpc_port must be a port number from 0 to 65535")
    if s.view_shrink_slack < 0:
        problems.append("view_shrink_slack must not be negative")
    if not 0 <= s.shrink_replan_share <= 1:
        problems.append("shrink_replan_share must be in [0, 1]")
    if not 0 < s.long_turn_fraction <= 1:
        problems.append("long_turn_fraction must be in (0, 1]")
    if problems:
        where = ", ".join(sorted(set(s.sources.values()))) or "defaults"
        raise SettingsError("invalid settings (" + where + "): " + "; ".join(problems))


def describe(settings: Settings) -> list[tuple[str, Any, str]]:
    """(name, value, source) for every setting, for ``endless config`` (the store's password masked)."""
    return [(name, masked_store(settings.store) if name == "store" else getattr(settings, name),
             settings.source(name)) for name in setting_names()]


SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
STORE_TLS = ("sslmode", "sslrootcert", "sslcert", "sslkey")  # each the store_<name> setting, libpq's <name>


def store_url(settings: "Settings") -> str:
    """The PostgreSQL store's URL as the driver gets it: the ``store`` setting with the ``store_ssl*``
    settings put in its query (a setting given wins over the URL's own).  Never shown: show
    :func:`masked_store` of it."""
    url = settings.store.strip()
    tls = {name: getattr(settings, f"store_{name}") for name in STORE_TLS if getattr(settings, f"store_{name}")}
    if not tls or not is_postgres_url(url):
        return url
    from urllib.parse import parse_qsl, urlencode

    base, _, fragment = url.partition("#")
    base, _, query = base.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in tls]
    pairs += sorted(tls.items())
    return f"{base}?{urlencode(pairs)}" + (f"#{fragment}" if fragment else "")


def is_postgres_url(store: str) -> bool:
    """Whether the ``store`` setting names a PostgreSQL database (else: the files)."""
    return store.strip().lower().startswith(("postgresql://", "postgres://"))


def masked_store(store: str) -> str:
    """The ``store`` setting as it may be shown or logged: the URL with its password replaced by ``***``.

    The password and every query parameter (one may be ``password=``, or a key file) are
    left out; what remains says which server and database, enough to act on an error."""
    if not is_postgres_url(store):
        return store
    scheme, _, rest = store.strip().partition("://")
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    at = rest.rfind("@")
    if at < 0:
        return f"{scheme}://{rest}"
    user = rest[:at].split(":", 1)[0]
    return f"{scheme}://{user}:***@{rest[at + 1:]}"
