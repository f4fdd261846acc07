"""Local hybrid query latency at 10k and 100k chunks with a tenant filter, beside the exact-search floor.

Builds a synthetic index straight through the VectorIndex port (random unit vectors, text drawn from a
Zipf-like vocabulary so BM25 has common and rare terms), spread over 10 tenants with one large tenant
holding half the chunks, then times `Retriever.search` in hybrid mode for the large tenant. The floor is
one numpy matrix-vector product over the same tenant's vectors: the cost of exact search alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from citewise.embeddings.hashing import HashingEmbedder
from citewise.index.local import LocalIndex
from citewise.models import Caller, Chunk, DocumentMetadata, SearchRequest, Visibility
from citewise.retrieval import Retriever

DIMENSION = 384
CHUNKS_PER_DOC = 50
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def build(index: LocalIndex, total: int, rng: random.Random) -> None:
    vocabulary = [f"term{i}" for i in range(20_000)]
    weights = [1.0 / (i + 1) for i in range(len(vocabulary))]
    np_rng = np.random.default_rng(7)
    for doc in range(total // CHUNKS_PER_DOC):
        tenant = "big" if doc % 2 == 0 else f"t{doc % 9}"
        meta = DocumentMetadata(
            tenant_id=tenant,
            doc_id=f"d{doc}",
            owner=f"u{doc % 5}",
            visibility=Visibility.PRIVATE if doc % 7 == 0 else Visibility.SHARED,
            source="bench",
            path=f"docs/{doc}.md",
            title=f"Document {doc}",
            created_at=NOW,
            updated_at=NOW,
        )
        chunks = []
        for i in range(CHUNKS_PER_DOC):
            text = " ".join(rng.choices(vocabulary, weights, k=120))
            chunks.append(
                Chunk(chunk_id=f"d{doc}-{i}", ordinal=i, text=text, start=0, end=len(text), content_hash=f"{doc}-{i}", document=meta)
            )
        vectors = np_rng.standard_normal((CHUNKS_PER_DOC, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.replace_document(tenant, meta.doc_id, chunks, vectors.tolist())


def measure(total: int, queries: int, rng: random.Random) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        index = LocalIndex(Path(home) / "index.db")
        index.ensure("hashing-384", DIMENSION)
        started = time.perf_counter()
        build(index, total, rng)
        build_s = time.perf_counter() - started
        retriever = Retriever(index, HashingEmbedder(DIMENSION))
        caller = Caller(tenant_id="big", user_id="u1")
        retriever.search(caller, SearchRequest(query="term1 term50"))  # loads the matrix
        hybrid, floor = [], []
        matrix = np.asarray(index._current_matrix().vectors)  # noqa: SLF001 - the floor uses the same vectors
        lo, hi = index._current_matrix().tenant_slices["big"]  # noqa: SLF001
        for _ in range(queries):
            query = " ".join(f"term{rng.randint(0, 5000)}" for _ in range(rng.randint(2, 6)))
            started = time.perf_counter()
            retriever.search(caller, SearchRequest(query=query, top_k=10))
            hybrid.append((time.perf_counter() - started) * 1000)
            vector = np.asarray(HashingEmbedder(DIMENSION).embed_query(query), dtype=np.float32)
            started = time.perf_counter()
            scores = matrix[lo:hi] @ vector
            np.argpartition(-scores, 10)[:10]
            floor.append((time.perf_counter() - started) * 1000)
        index.close()
    p50, p95 = statistics.median(hybrid), statistics.quantiles(hybrid, n=20)[18]
    floor_p50 = statistics.median(floor)
    return {
        "chunks": total,
        "tenant_chunks": hi - lo,
        "build_s": round(build_s, 1),
        "hybrid_p50_ms": round(p50, 2),
        "hybrid_p95_ms": round(p95, 2),
        "floor_p50_ms": round(floor_p50, 3),
        "ratio_p50": round(p50 / floor_p50, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(42)
    for size in args.sizes:
        print(json.dumps(measure(size, args.queries, rng)))


if __name__ == "__main__":
    main()
