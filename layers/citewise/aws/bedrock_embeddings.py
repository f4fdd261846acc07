"""Embedders on Amazon Bedrock (InvokeModel): Titan Text Embeddings v2 and Cohere Embed v3.

Request and response bodies follow the Bedrock model-parameter pages:

- Titan v2 takes one text per call, `{"inputText", "dimensions", "normalize"}`, and answers
  `{"embedding": [...], "inputTextTokenCount": n, ...}`. Its input limit is 8,192 tokens or 50,000
  characters, so a longer text is cut into pieces (see `split_for_titan`) whose vectors are averaged.
- Cohere v3 takes up to 96 texts per call, `{"texts", "input_type", "truncate"}`, and answers
  `{"embeddings": [[...], ...], "id", "response_type": "embeddings_floats", "texts"}`. Each text may be
  at most 2,048 characters: `truncate` only drops tokens beyond the model's 512-token window, the
  character limit is checked before that and fails the whole call, so longer texts are clipped here.

Every vector is re-normalised before it is returned: the `Embedder` port promises unit vectors and the
index compares them by dot product, whatever a model (or a future model version) sends back.
Retries and back-off are botocore's (adaptive mode, `citewise.aws.clients.client_config`); what still fails
becomes a `ThrottledError` or an `EmbeddingServiceError`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import EmbeddingServiceError, ValidationError
from citewise.domain.models import Vector
from citewise.domain.textutil import count_tokens

logger = logging.getLogger(__name__)

ACTION = "bedrock:InvokeModel"
JSON = "application/json"
# Bedrock reports the billed input tokens of every InvokeModel call in this response header (botocore
# lower-cases header names); Titan also puts the count in its body, Cohere only here.
INPUT_TOKENS_HEADER = "x-amzn-bedrock-input-token-count"

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000
TITAN_MAX_TOKENS = 8_192
# Titan's tokenizer is not public, so a piece's tokens are estimated as the larger of its words and
# punctuation marks (`count_tokens`) and one token per 4 ASCII characters plus one per other character
# (scripts written without spaces, such as Chinese or Japanese, take about a token per character). AWS
# quotes 4.7 characters per token for English, so prose is over-counted a little: an extra piece costs a
# call, not tokens (tokens are billed). Text that tokenizes more densely still (long digit strings) can
# exceed the limit, and then fails as an EmbeddingServiceError carrying Bedrock's ValidationException.
TITAN_CHARS_PER_TOKEN = 4
DEFAULT_WORKERS = 4

COHERE_ENGLISH_V3 = "cohere.embed-english-v3"
COHERE_MULTILINGUAL_V3 = "cohere.embed-multilingual-v3"
COHERE_DIMENSION = 1024
COHERE_BATCH = 96
COHERE_MAX_CHARS = 2_048

_WORD_RE = re.compile(r"\S+")
_T = TypeVar("_T")
_R = TypeVar("_R")


class _InvokeModel:
    """One model behind InvokeModel with JSON in and out, on a client made on first use.

    The default client is created lazily so that importing or configuring an embedder (at cold start,
    in the factory) costs nothing until a text is actually embedded. Counts input tokens thread-safely.
    """

    def __init__(self, model_id: str, client: Any | None, region: str | None) -> None:
        self.model_id = model_id
        self._client = client
        self._region = region
        self._lock = threading.Lock()
        self.input_tokens = 0

    def client(self) -> Any:
        """The injected client, or `citewise.aws.clients.client("bedrock-runtime")` made once."""
        with self._lock:
            if self._client is None:
                self._client = aws.client("bedrock-runtime", region=self._region)
            return self._client

    def invoke(self, body: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        """The model's JSON answer and the input-token count from the response header (if any)."""
        try:
            response = self.client().invoke_model(
                modelId=self.model_id, body=json.dumps(body), contentType=JSON, accept=JSON
            )
            # The body streams: a read can time out too, and is translated like the call itself.
            raw = response["body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, EmbeddingServiceError, ACTION) from exc
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise self.malformed("the response body is not JSON") from exc
        if not isinstance(payload, dict):
            raise self.malformed("the response body is not a JSON object")
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        return payload, _as_count(headers.get(INPUT_TOKENS_HEADER))

    def count(self, tokens: int) -> None:
        """Add billed input tokens to the running total."""
        with self._lock:
            self.input_tokens += tokens

    def malformed(self, problem: str) -> EmbeddingServiceError:
        """The error for an answer that parsed but cannot be used (a model or API change, not ours)."""
        return EmbeddingServiceError(
            f"{ACTION} returned an unusable answer: {problem}", details={"action": ACTION, "model": self.model_id}
        )

    def vector(self, value: Any, dimension: int) -> Vector:
        """`value` as a unit vector of `dimension` finite floats, or EmbeddingServiceError."""
        if not isinstance(value, list) or len(value) != dimension:
            size = len(value) if isinstance(value, list) else type(value).__name__
            raise self.malformed(f"expected an embedding of {dimension} numbers, got {size}")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value):
            raise self.malformed("the embedding holds something other than finite numbers")
        unit = _normalised([float(x) for x in value])
        if unit is None:
            raise self.malformed("the embedding is all zeros")
        return unit


class TitanEmbedder:
    """The `Embedder` for Amazon Titan Text Embeddings v2 (one text per call, calls run in parallel).

    Texts beyond Titan's input limit are not truncated: they are split at whitespace into pieces within
    the limit (`split_for_titan`), each piece is embedded, and the text's vector is the average of the
    piece vectors weighted by piece length in characters, re-normalised. That keeps every part of a
    long text in its vector (truncation would silently drop the end) at the cost of a blurrier vector;
    chunks of a few hundred tokens, which the ingestion pipeline makes, never need it.
    """

    def __init__(
        self,
        *,
        dimension: int = 1024,
        model_id: str = TITAN_V2,
        client: Any | None = None,
        region: str | None = None,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        """Configure only: the client (default `citewise.aws.clients.client`) is created on the first call.

        `dimension` is one of Titan v2's 256, 512 or 1024. `workers` is how many InvokeModel calls run
        at once: Titan embeds one text per call, so a batch of chunks is latency-bound, not CPU-bound;
        a small pool keeps a batch fast without running into the requests-per-minute quota.
        """
        if dimension not in TITAN_DIMENSIONS:
            raise ValueError(f"Titan v2 dimension must be one of {TITAN_DIMENSIONS}, not {dimension}")
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._dimension = dimension
        self._model = _InvokeModel(model_id, client, region)
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def name(self) -> str:
        """`bedrock:<model id>:<dimension>`: the dimension is part of the space, Titan's sizes differ."""
        return f"bedrock:{self._model.model_id}:{self._dimension}"

    @property
    def dimension(self) -> int:
        """The configured output size (256, 512 or 1024)."""
        return self._dimension

    @property
    def usage(self) -> int:
        """Input tokens billed so far (Titan's `inputTextTokenCount`, summed over every call)."""
        return self._model.input_tokens

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One unit vector per text, in order; every text is checked before any call is made."""
        for text in texts:
            _require_text(text)
        if not texts:
            return []
        pieces = [(index, piece) for index, text in enumerate(texts) for piece in split_for_titan(text)]
        self._model.client()  # create the client once, before worker threads race to do it
        vectors = self._map(self._embed_piece, [piece for _, piece in pieces])
        grouped: list[list[tuple[str, Vector]]] = [[] for _ in texts]
        for (index, piece), vector in zip(pieces, vectors, strict=True):
            grouped[index].append((piece, vector))
        return [self._combine(parts) for parts in grouped]

    def embed_query(self, text: str) -> Vector:
        """The query's unit vector (Titan embeds queries and documents alike)."""
        return self.embed_documents([text])[0]

    def _embed_piece(self, piece: str) -> Vector:
        payload, header_tokens = self._model.invoke(
            {"inputText": piece, "dimensions": self._dimension, "normalize": True}
        )
        vector = self._model.vector(payload.get("embedding"), self._dimension)
        body_tokens = _as_count(payload.get("inputTextTokenCount"))
        self._model.count(body_tokens if body_tokens is not None else header_tokens or 0)
        return vector

    def _combine(self, parts: list[tuple[str, Vector]]) -> Vector:
        """The length-weighted mean of the piece vectors, re-normalised (one piece: itself)."""
        if len(parts) == 1:
            return parts[0][1]
        total = [0.0] * self._dimension
        for piece, vector in parts:
            for i, x in enumerate(vector):
                total[i] += len(piece) * x
        unit = _normalised(total)
        if unit is None:
            raise EmbeddingServiceError(
                "the pieces of a long text have vectors that cancel out", details={"action": ACTION}
            )
        return unit

    def _map(self, fn: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """`fn` over `items` in order; in the calling thread for one item (a query: lowest latency)."""
        if len(items) <= 1 or self._workers == 1:
            return [fn(item) for item in items]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="titan")
            pool = self._pool
        # Each piece runs in a copy of this context, so the worker threads keep the invocation's budget.
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        try:
            return [future.result() for future in futures]
        finally:
            # One failure fails the whole call: do not spend requests on pieces not yet started.
            for future in futures:
                future.cancel()


class CohereEmbedder:
    """The `Embedder` for Cohere Embed v3 (English or multilingual) on Bedrock, 96 texts per call.

    Documents are embedded with `input_type` "search_document" and queries with "search_query", as
    Cohere requires for retrieval. Texts longer than 2,048 characters are clipped to their first 2,048
    characters at a word boundary (see the module docstring); the model would drop the same end anyway
    (`truncate` "END"), since 2,048 characters are about its 512-token window.

    Token usage: Cohere's body carries no count; Bedrock's `X-Amzn-Bedrock-Input-Token-Count` response
    header does and is summed into `usage`. A response without that header adds nothing, so `usage` is
    then a lower bound.
    """

    def __init__(
        self,
        *,
        model_id: str = COHERE_ENGLISH_V3,
        client: Any | None = None,
        region: str | None = None,
        batch_size: int = COHERE_BATCH,
    ) -> None:
        """Configure only: the client (default `citewise.aws.clients.client`) is created on the first call."""
        if not 1 <= batch_size <= COHERE_BATCH:
            raise ValueError(f"batch_size must be between 1 and {COHERE_BATCH} (Cohere's limit per call)")
        self._model = _InvokeModel(model_id, client, region)
        self._batch_size = batch_size

    @property
    def name(self) -> str:
        """`bedrock:<model id>:1024`."""
        return f"bedrock:{self._model.model_id}:{COHERE_DIMENSION}"

    @property
    def dimension(self) -> int:
        """Cohere Embed v3 vectors have 1024 components."""
        return COHERE_DIMENSION

    @property
    def usage(self) -> int:
        """Input tokens billed so far, as reported in the response headers (a lower bound without them)."""
        return self._model.input_tokens

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One unit vector per text, in order, in calls of up to `batch_size` texts."""
        return self._embed(texts, "search_document")

    def embed_query(self, text: str) -> Vector:
        """The query's unit vector, embedded as a search query."""
        return self._embed([text], "search_query")[0]

    def _embed(self, texts: Sequence[str], input_type: str) -> list[Vector]:
        for text in texts:
            _require_text(text)
        clipped = [clip(text, COHERE_MAX_CHARS) for text in texts]
        shortened = sum(1 for before, after in zip(texts, clipped, strict=True) if before != after)
        if shortened:
            logger.info("clipped %d text(s) to Cohere's %d-character limit", shortened, COHERE_MAX_CHARS)
        vectors: list[Vector] = []
        for start in range(0, len(clipped), self._batch_size):
            batch = clipped[start : start + self._batch_size]
            payload, header_tokens = self._model.invoke({"texts": batch, "input_type": input_type, "truncate": "END"})
            embeddings = payload.get("embeddings")
            if isinstance(embeddings, dict):  # the "embeddings_by_type" shape, if embedding types were set
                embeddings = embeddings.get("float")
            if not isinstance(embeddings, list) or len(embeddings) != len(batch):
                got = len(embeddings) if isinstance(embeddings, list) else "none"
                raise self._model.malformed(f"expected {len(batch)} embeddings, got {got}")
            vectors.extend(self._model.vector(value, COHERE_DIMENSION) for value in embeddings)
            self._model.count(header_tokens or 0)
        return vectors


def split_for_titan(text: str, max_chars: int = TITAN_MAX_CHARS, max_tokens: int = TITAN_MAX_TOKENS) -> list[str]:
    """`text` as consecutive pieces within Titan's input limit, cut at whitespace.

    Pieces are filled greedily word by word; whitespace between two pieces belongs to neither. A run
    without whitespace (a URL, a base64 blob, unspaced CJK text) is first cut every
    `min(max_chars, max_tokens)` characters, within both limits even at one token per character.
    """
    if _fits(len(text), _non_ascii(text), count_tokens(text), max_chars, max_tokens):
        return [text]
    pieces: list[str] = []
    start = end = tokens = non_ascii = 0
    open_piece = False
    for word_start, word_end in _words(text, min(max_chars, max_tokens)):
        word = text[word_start:word_end]
        # Tokens never span whitespace, and whitespace is ASCII: a piece's counts are its words' sums.
        word_tokens, word_non_ascii = count_tokens(word), _non_ascii(word)
        if open_piece and not _fits(
            word_end - start, non_ascii + word_non_ascii, tokens + word_tokens, max_chars, max_tokens
        ):
            pieces.append(text[start:end])
            open_piece = False
        if not open_piece:
            start, tokens, non_ascii, open_piece = word_start, 0, 0, True
        end = word_end
        tokens += word_tokens
        non_ascii += word_non_ascii
    if open_piece:
        pieces.append(text[start:end])
    return pieces


def clip(text: str, max_chars: int) -> str:
    """`text`, or the longest prefix of whole words of its stripped form within `max_chars`.

    Without a space to cut at, the cut is hard at `max_chars`.
    """
    if len(text) <= max_chars:
        return text
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = max(text.rfind(space, 0, max_chars + 1) for space in (" ", "\n", "\t"))
    return text[:cut].rstrip() if cut > 0 else text[:max_chars]


def _words(text: str, longest: int) -> list[tuple[int, int]]:
    """Spans of the whitespace-separated words of `text`, runs longer than `longest` cut into slices."""
    spans: list[tuple[int, int]] = []
    for match in _WORD_RE.finditer(text):
        spans.extend((s, min(s + longest, match.end())) for s in range(match.start(), match.end(), longest))
    return spans


def _fits(chars: int, non_ascii: int, tokens: int, max_chars: int, max_tokens: int) -> bool:
    """Whether a span is within Titan's limit, by an over-estimate of its tokens (see TITAN_CHARS_PER_TOKEN).

    `chars` is its length, `non_ascii` how many of those are not ASCII, `tokens` its `count_tokens`.
    """
    by_chars = -(-(chars - non_ascii + TITAN_CHARS_PER_TOKEN * non_ascii) // TITAN_CHARS_PER_TOKEN)
    return chars <= max_chars and max(tokens, by_chars) <= max_tokens


def _non_ascii(text: str) -> int:
    return sum(1 for ch in text if ch > "\x7f")


def _require_text(text: str) -> None:
    """Empty input has no meaning to embed and Bedrock rejects it: fail before any call is made."""
    if not text.strip():
        raise ValidationError("cannot embed an empty text", details={"field": "text"})


def _normalised(vector: list[float]) -> Vector | None:
    """`vector` scaled to unit length, or None for the zero vector."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else None


def _as_count(value: Any) -> int | None:
    """A non-negative token count from a body field or a header string, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None
