"""Local hybrid query latency at 10k and 100k chunks with a tenant filter, beside the exact-search floor.

Builds a synthetic index straight through the VectorIndex port (random unit vectors, text drawn from a
Zipf-like vocabulary so BM25 has common and rare terms), spread over 10 tenants with one large tenant
holding half the chunks, then times `Retriever.search` in hybrid mode for the large tenant. The floor is
one numpy matrix-vector product over the same tenant's vectors: the cost of exact search alone. It is
the product the index itself computes (`einsum`, one thread): a BLAS `matrix @ vector` wakes OpenBLAS's
worker threads, and on a loaded machine that wake-up alone took ~7 ms, more than the product itself.

Beside it, the same data and queries on a real OpenSearch node (`scripts/opensearch/opensearch.sh`: 2.19.1
with k-NN, the production mapping, faiss HNSW, one shard, no replica) through the AWS adapter, the same
`Retriever`: the engine's own figure on this machine, HTTP round trips included. The node is the one
`CITEWISE_OPENSEARCH_URL` names, else one started here and stopped at the end; if none can start, those
figures are left out with the reason printed.

The index is built once per size; the same queries are then replayed for `rounds` rounds and each figure
is the median over rounds, so a noisy moment on a shared machine moves one round, not the result.
`python -m benchmarks.query_latency` runs it alone; `benchmarks/run.py` calls `run()`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.common import REPO, Section, log, run_command
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Caller, Chunk, DocumentMetadata, SearchRequest, Visibility
from citewise.ports.index import VectorIndex
from citewise.query.retrieval import Retriever
from citewise.runtime.settings import Settings
from citewise_local.index import LocalIndex

DIMENSION = 384
CHUNKS_PER_DOC = 50
NOW = datetime(2026, 1, 1, tzinfo=UTC)
NODE_SCRIPT = REPO / "scripts" / "opensearch" / "opensearch.sh"


def documents(total: int, rng: random.Random) -> Iterator[tuple[str, str, list[Chunk], list[list[float]]]]:
    """The synthetic corpus, a document (tenant, id, chunks, vectors) at a time: the same for the same `rng`."""
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
                Chunk(
                    chunk_id=f"d{doc}-{i}",
                    ordinal=i,
                    text=text,
                    start=0,
                    end=len(text),
                    content_hash=f"{doc}-{i}",
                    document=meta,
                )
            )
        vectors = np_rng.standard_normal((CHUNKS_PER_DOC, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield tenant, meta.doc_id, chunks, vectors.tolist()


def build(index: VectorIndex, total: int, rng: random.Random) -> None:
    """Write the corpus through the port, a document at a time."""
    for tenant, doc_id, chunks, vectors in documents(total, rng):
        index.replace_document(tenant, doc_id, chunks, vectors)


def build_opensearch(client: Any, name: str, total: int, rng: random.Random) -> None:
    """Write the corpus into the OpenSearch index `name` as a bulk load would: the adapter's own bulk
    bodies (`opensearch_queries.bulk_actions`, one generation per document, as `replace_document`
    writes), 20 documents per request and no refresh until the end. Through the port, each document
    waits for a refresh and searches for its old chunks: 100k chunks took minutes, only to build."""
    from citewise.aws import opensearch_queries as q

    actions: list[tuple[q.Body, q.Body | None]] = []
    for number, (_, _, chunks, vectors) in enumerate(documents(total, rng), start=1):
        actions += q.bulk_actions(chunks, vectors, generation=q.new_generation(time.time_ns()), serverless=False)
        if number % 20 == 0 or number * CHUNKS_PER_DOC >= total:
            for body, _ in q.bulk_payloads(actions):
                if client.bulk(body=body, index=name)["errors"]:
                    raise RuntimeError("a bulk write into the benchmark index failed")
            actions = []
    client.indices.refresh(index=name)


def measure(
    total: int, queries: int, rng: random.Random, rounds: int = 1, candidates: int | None = None
) -> dict[str, Any]:
    """Build an index of `total` chunks, then time `queries` hybrid queries and their floor, `rounds` times;
    `candidates` is the depth of each list before fusion (default: the setting's default)."""
    with tempfile.TemporaryDirectory() as home:
        index = LocalIndex(Path(home) / "index.db")
        index.ensure("hashing-384", DIMENSION)
        started = time.perf_counter()
        build(index, total, rng)
        build_s = time.perf_counter() - started
        embedder = HashingEmbedder(DIMENSION)
        retriever = _retriever(index, embedder, candidates)
        caller = Caller(tenant_id="big", user_id="u1")
        retriever.search(caller, SearchRequest(query="term1 term50"))  # loads the matrix
        matrix = np.asarray(index._current_matrix().vectors)  # noqa: SLF001 - the floor uses the same vectors
        lo, hi = index._current_matrix().tenant_slices["big"]  # noqa: SLF001
        texts = [" ".join(f"term{rng.randint(0, 5000)}" for _ in range(rng.randint(2, 6))) for _ in range(queries)]
        vectors = [np.asarray(embedder.embed_query(text), dtype=np.float32) for text in texts]
        per_round = [_round(retriever, caller, matrix[lo:hi], texts, vectors) for _ in range(rounds)]
        index.close()
    return {
        "chunks": total,
        "candidates": retriever.candidates,
        "tenant_chunks": hi - lo,
        "build_s": round(build_s, 1),
        "rounds": rounds,
        "hybrid_p50_ms": round(statistics.median(r["hybrid_p50_ms"] for r in per_round), 2),
        "hybrid_p95_ms": round(statistics.median(r["hybrid_p95_ms"] for r in per_round), 2),
        "floor_p50_ms": round(statistics.median(r["floor_p50_ms"] for r in per_round), 3),
        "ratio_p50": round(statistics.median(r["hybrid_p50_ms"] / r["floor_p50_ms"] for r in per_round), 1),
        "ratio_p95": round(statistics.median(r["hybrid_p95_ms"] / r["floor_p50_ms"] for r in per_round), 1),
        "per_round": per_round,
    }


def _retriever(index: VectorIndex, embedder: HashingEmbedder, candidates: int | None = None) -> Retriever:
    """The retriever both indexes are measured through: the default settings, as the query function runs."""
    defaults = Settings()
    return Retriever(
        index,
        embedder,
        fusion=defaults.fusion_method,
        rrf_k=defaults.rrf_k,
        keyword_weight=defaults.keyword_weight,
        vector_weight=defaults.vector_weight,
        candidates=candidates or defaults.candidates,
    )


def measure_opensearch(url: str, total: int, queries: int, rng: random.Random, rounds: int = 1) -> dict[str, Any]:
    """The same build and hybrid queries as `measure` (the same `rng` state gives the same data), in a fresh
    index on the node at `url`, deleted afterwards."""
    from opensearchpy import OpenSearch

    from citewise.aws.opensearch import OpenSearchIndex

    client = OpenSearch(hosts=[url], timeout=120, pool_maxsize=10)
    name = f"citewise-bench-{uuid.uuid4().hex[:12]}"
    index = OpenSearchIndex(client, name, serverless=False, replicas=0, timeout=120)
    try:
        index.ensure("hashing-384", DIMENSION)
        started = time.perf_counter()
        build_opensearch(client, name, total, rng)
        build_s = time.perf_counter() - started
        embedder = HashingEmbedder(DIMENSION)
        retriever = _retriever(index, embedder)
        caller = Caller(tenant_id="big", user_id="u1")
        texts = [" ".join(f"term{rng.randint(0, 5000)}" for _ in range(rng.randint(2, 6))) for _ in range(queries)]
        for text in texts[:20]:  # loads the graph into the node's native memory, warms the caches
            retriever.search(caller, SearchRequest(query=text, top_k=10))
        per_round = []
        for _ in range(rounds):
            timings = []
            for text in texts:
                began = time.perf_counter()
                retriever.search(caller, SearchRequest(query=text, top_k=10))
                timings.append((time.perf_counter() - began) * 1000)
            per_round.append(
                {"hybrid_p50_ms": statistics.median(timings), "hybrid_p95_ms": statistics.quantiles(timings, n=20)[18]}
            )
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)
        client.close()
    return {
        "chunks": total,
        "build_s": round(build_s, 1),
        "rounds": rounds,
        "hybrid_p50_ms": round(statistics.median(r["hybrid_p50_ms"] for r in per_round), 2),
        "hybrid_p95_ms": round(statistics.median(r["hybrid_p95_ms"] for r in per_round), 2),
        "per_round": per_round,
    }


@contextmanager
def opensearch_node() -> Iterator[str | None]:
    """The URL of the node `CITEWISE_OPENSEARCH_URL` names, else of one started now (stopped on exit), else
    None with the reason logged."""
    given = os.environ.get("CITEWISE_OPENSEARCH_URL")
    if given:
        yield given
        return
    run_dir = tempfile.mkdtemp(prefix="citewise-bench-opensearch-")
    started = run_command(["bash", str(NODE_SCRIPT), "start", run_dir])
    if started.returncode != 0:
        reason = (started.stderr.strip().splitlines() or ["no output"])[-1]
        log(f"  query latency on OpenSearch skipped: the node did not start ({reason})")
        yield None
        return
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        run_command(["bash", str(NODE_SCRIPT), "stop", run_dir])


def _round(
    retriever: Retriever,
    caller: Caller,
    matrix: NDArray[np.float32],
    texts: list[str],
    vectors: list[NDArray[np.float32]],
) -> dict[str, float]:
    """One pass over the queries: each hybrid search, then the exact-search floor for the same query."""
    hybrid, floor = [], []
    for text, vector in zip(texts, vectors, strict=True):
        started = time.perf_counter()
        retriever.search(caller, SearchRequest(query=text, top_k=10))
        hybrid.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        scores = np.einsum("ij,j->i", matrix, vector)
        np.argpartition(-scores, 10)[:10]
        floor.append((time.perf_counter() - started) * 1000)
    return {
        "hybrid_p50_ms": statistics.median(hybrid),
        "hybrid_p95_ms": statistics.quantiles(hybrid, n=20)[18],
        "floor_p50_ms": statistics.median(floor),
    }


def run(plan: tuple[tuple[int, int], ...] = ((10_000, 5), (100_000, 3)), queries: int = 200) -> Section:
    """The figures for `make bench`: for each (chunks, rounds), p50/p95, the floor, and p50 and p95 over it."""
    section = Section("query_latency", "Local hybrid query latency with a tenant filter (hashing vectors, 384 dims)")
    rng = random.Random(42)  # noqa: S311 - synthetic data, not security
    for total, rounds in plan:
        log(f"  query latency: building {total:,} chunks, then {rounds} rounds of {queries} queries")
        result = measure(total, queries, rng, rounds)
        size = f"{total // 1000}k"
        per_round = result["per_round"]
        section.add(
            f"hybrid_p50_ms_{size}", f"{size} chunks: hybrid p50", "ms", [r["hybrid_p50_ms"] for r in per_round]
        )
        section.add(
            f"hybrid_p95_ms_{size}", f"{size} chunks: hybrid p95", "ms", [r["hybrid_p95_ms"] for r in per_round]
        )
        section.add(
            f"floor_p50_ms_{size}",
            f"{size} chunks: exact-search floor p50",
            "ms",
            [r["floor_p50_ms"] for r in per_round],
        )
        section.add(
            f"ratio_p50_{size}",
            f"{size} chunks: hybrid p50 / floor p50",
            "x",
            [r["hybrid_p50_ms"] / r["floor_p50_ms"] for r in per_round],
        )
        section.add(
            f"ratio_p95_{size}",
            f"{size} chunks: hybrid p95 / floor p50 (issue 17's ratio)",
            "x",
            [r["hybrid_p95_ms"] / r["floor_p50_ms"] for r in per_round],
        )
        section.context[size] = {k: v for k, v in result.items() if k != "per_round"} | {"queries": queries}
    with opensearch_node() as url:
        if url is None:
            section.context["opensearch"] = "skipped: the node did not start (see the log)"
            return section
        rng = random.Random(42)  # noqa: S311 - drawn in the same order: the local runs' data and queries
        for total, rounds in plan:
            log(f"  query latency on OpenSearch: building {total:,} chunks, then {rounds} rounds of {queries} queries")
            result = measure_opensearch(url, total, queries, rng, rounds)
            size = f"{total // 1000}k"
            for stat in ("p50", "p95"):
                section.add(
                    f"opensearch_hybrid_{stat}_ms_{size}",
                    f"{size} chunks: hybrid {stat} on OpenSearch",
                    "ms",
                    [r[f"hybrid_{stat}_ms"] for r in result["per_round"]],
                )
            section.context[f"opensearch_{size}"] = {k: v for k, v in result.items() if k != "per_round"}
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--candidates", type=int, nargs="+", default=[None], help="list depths to compare")
    parser.add_argument(
        "--opensearch", action="store_true", help="on the real OpenSearch node instead of the local index"
    )
    args = parser.parse_args()
    if args.opensearch:
        with opensearch_node() as url:
            for size in args.sizes:
                if url is None:
                    break
                result = measure_opensearch(url, size, args.queries, random.Random(42), args.rounds)  # noqa: S311
                print(json.dumps({k: v for k, v in result.items() if k != "per_round"}), flush=True)
        return
    for size in args.sizes:
        for candidates in args.candidates:
            rng = random.Random(42)  # noqa: S311 - synthetic data, not security; the same data per depth
            result = measure(size, args.queries, rng, args.rounds, candidates)
            print(json.dumps({k: v for k, v in result.items() if k != "per_round"}), flush=True)


if __name__ == "__main__":
    main()
