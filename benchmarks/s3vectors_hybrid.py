"""S3 Vectors: the two queries citewise's fusion reads, or the service's one hybrid query (issue 28).

Usage: python -m benchmarks.s3vectors_hybrid [--dataset ../shared/datasets/scifact-train] [--queries 300]
       [--embedder minilm|hashing] [--only beir|squad] [--json PATH]

Both ways run through the `S3VectorsIndex` adapter's own requests against the query-semantics double
(`tests/doubles/s3vectors.py`, whose hybrid query is the documented one: each search `topK` deep, fused
by Reciprocal Rank Fusion, `bm25Scores` and `vectorDistance` per hit):
- two queries: `keyword_search` (BM25, scores) and `vector_search` (distances), 100 deep each, as the
  `Retriever` asks them;
- one query: a hybrid `QueryVectors` (`topK` 100, `returnScores`) from which the two lists are rebuilt:
  the hits with a `bm25Scores` entry by that score, the hits with a `vectorDistance` by `1 - distance`.
Each pair of lists is ranked by the `Retriever` itself (fusion, relevance, the cut; no routing), so the
final top 10 is what a query would answer. Reported per dataset: requests per query (counted on the
double), their cost at list prices (`REQUEST_PRICE`, `TB_PRICE`, docs/deploy.md), the overlap of the two
top 10s (documents), and nDCG@10 both ways. Corpus documents are one chunk each (title and text), in one
tenant index. The second dataset is the SQuAD sample bundled for `citewise eval --answers` (a paragraph
per document; an answerable question's paragraph is its relevant document).
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
import sys
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from citewise.aws import s3vectors_requests as r
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.domain.models import Caller, Chunk, DocumentMetadata, Filter, SearchRequest, Vector
from citewise.domain.textutil import embedding_text
from citewise.ports.embedder import Embedder
from citewise.ports.index import ScoredChunk
from citewise.query.retrieval import Retriever
from citewise.runtime.services import build_embedder
from citewise.runtime.settings import Settings
from citewise_local import evaluation, packaged
from citewise_local.answers import load_squad
from tests.doubles.s3vectors import FakeS3Vectors

BUCKET = "bench"
TENANT = "bench"
CALLER = Caller(tenant_id=TENANT, user_id="bench")
DEPTH = 100  # the Retriever's candidate depth, and S3 Vectors' largest topK
REQUEST_PRICE = 2.5 / 1_000_000  # $ per QueryVectors request, S3 pricing page (docs/deploy.md)
TB_PRICE = 0.004  # $ per TB of query data processed (the first 100,000 vectors of an index)


class Lists:
    """A `VectorIndex` for the `Retriever` that answers with lists read before (the fusion's input)."""

    def __init__(self, keyword: list[ScoredChunk], vector: list[ScoredChunk]) -> None:
        self._keyword, self._vector = keyword, vector

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        return self._keyword[:limit]

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        return self._vector[:limit]

    def sources(self, caller: Caller) -> list[str]:
        return []

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        return {}


def squad_dataset() -> evaluation.Dataset:
    """The bundled SQuAD sample as a retrieval set: its paragraphs (`load_squad`'s ids), its answerable
    questions, each relevant to the paragraph it was asked of."""
    path = packaged.squad_sample()
    squad = load_squad(path)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for article in json.loads(lzma.decompress(path.read_bytes()))["data"]:
        for number, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                if qa.get("answers"):
                    queries[str(qa["id"])] = str(qa["question"])
                    qrels[str(qa["id"])] = {f"{article['title']}-{number:03d}": 1}
    return evaluation.Dataset("squad-sample", squad.corpus, queries, qrels)


def load(embedder: Embedder, dataset: evaluation.Dataset) -> tuple[FakeS3Vectors, S3VectorsIndex]:
    """The dataset's documents, one chunk each, in one tenant's index on a fresh double."""
    fake = FakeS3Vectors()
    fake.create_bucket(BUCKET)
    index = S3VectorsIndex(fake.client(), BUCKET)
    index.ensure(embedder.name, embedder.dimension)
    ids = list(dataset.corpus)
    for start in range(0, len(ids), 200):
        batch = ids[start : start + 200]
        chunks = [_chunk(corpus_id, *dataset.corpus[corpus_id]) for corpus_id in batch]
        vectors = embedder.embed_documents([embedding_text(c.document.title, (), c.text) for c in chunks])
        for chunk, vector in zip(chunks, vectors, strict=True):
            index.replace_document(TENANT, chunk.document.doc_id, [chunk], [vector])
    return fake, index


def _chunk(corpus_id: str, title: str, text: str) -> Chunk:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    document = DocumentMetadata(
        tenant_id=TENANT,
        doc_id=f"d-{corpus_id}",
        owner="bench",
        source="bench",
        path=evaluation.document_path(corpus_id),
        title=title or corpus_id,
        created_at=moment,
        updated_at=moment,
    )
    body = text or title or corpus_id
    return Chunk(
        chunk_id=f"{TENANT}-{corpus_id}",
        ordinal=0,
        text=body,
        start=0,
        end=len(body),
        content_hash=f"h-{corpus_id}",
        document=document,
    )


def hybrid_lists(
    fake: FakeS3Vectors, index: S3VectorsIndex, query: str, vector: Vector
) -> tuple[list[ScoredChunk], list[ScoredChunk]]:
    """One hybrid QueryVectors, its hits split back into the BM25 list and the vector list."""
    answer = fake.client().query_vectors(
        vectorBucketName=BUCKET,
        indexName=r.index_name(TENANT),
        topK=DEPTH,
        queryVector={"float32": list(vector)},
        queryTexts=[{"metadataKey": r.TEXT_KEY, "text": query}],
        filter=r.read_filter(CALLER, None),
        returnScores=True,
        returnMetadata=True,
    )
    keyword, nearest = [], []
    for hit in answer["vectors"]:
        metadata, scores = hit["metadata"], hit["scores"]
        stored = (str(hit["key"])[2:], str(metadata["doc_id"]), str(metadata[r.CHUNK_KEY]))
        if bm25 := [part["score"] for part in scores.get("bm25Scores", []) if part["metadataKey"] == r.TEXT_KEY]:
            keyword.append(ScoredChunk.stored(*stored, float(sum(bm25))))
        if "vectorDistance" in scores:
            nearest.append(ScoredChunk.stored(*stored, 1.0 - float(scores["vectorDistance"])))
    keyword.sort(key=lambda scored: -scored.score)
    nearest.sort(key=lambda scored: -scored.score)
    return keyword, nearest


def top10(embedder: Embedder, query: str, keyword: list[ScoredChunk], nearest: list[ScoredChunk]) -> list[str]:
    """The corpus ids of the Retriever's final top 10 over these lists."""
    hits = Retriever(Lists(keyword, nearest), embedder).search(CALLER, SearchRequest(query=query, route=False))
    return [evaluation.corpus_id_of(hit.chunk.document.path) for hit in hits][:10]


def measure(embedder: Embedder, dataset: evaluation.Dataset, limit: int, log: Any) -> dict[str, Any]:
    log(f"{dataset.name}: loading {len(dataset.corpus)} documents")
    fake, index = load(embedder, dataset)
    index.keyword_search(CALLER, "warm", None, 1)  # the analyzer's status, asked once per process
    judged = sorted(q for q in dataset.queries if q in dataset.qrels)[:limit]
    calls = {"two": [], "one": []}
    overlap, ndcg_two, ndcg_one = [], [], []
    for number, query_id in enumerate(judged):
        if number % 50 == 0:
            log(f"  {number} of {len(judged)} queries")
        text = dataset.queries[query_id]
        vector = embedder.embed_query(text)
        fake.requests.clear()
        two = (index.keyword_search(CALLER, text, None, DEPTH), index.vector_search(CALLER, vector, None, DEPTH))
        calls["two"].append(len(fake.requests))
        fake.requests.clear()
        one = hybrid_lists(fake, index, text, vector)
        calls["one"].append(len(fake.requests))
        ranked_two, ranked_one = top10(embedder, text, *two), top10(embedder, text, *one)
        overlap.append(len(set(ranked_two) & set(ranked_one)) / max(1, len(ranked_two)))
        ndcg_two.append(evaluation.ndcg_at_k(ranked_two, dataset.qrels[query_id], 10))
        ndcg_one.append(evaluation.ndcg_at_k(ranked_one, dataset.qrels[query_id], 10))
    vectors = len(dataset.corpus) + 1  # the chunks and the tenant's one source marker
    processed_tb = vectors * (4 * embedder.dimension + 400) / 1e12  # vector, key and filterable metadata
    per_call = REQUEST_PRICE + processed_tb * TB_PRICE
    return {
        "dataset": dataset.name,
        "documents": len(dataset.corpus),
        "queries": len(judged),
        "requests_per_query": {way: statistics.mean(counted) for way, counted in calls.items()},
        "usd_per_1000_queries": {way: round(1000 * statistics.mean(n) * per_call, 4) for way, n in calls.items()},
        "identical_top10": sum(1 for share in overlap if share == 1.0) / len(overlap),
        "overlap_at_10": round(statistics.mean(overlap), 4),
        "ndcg_at_10": {"two": round(statistics.mean(ndcg_two), 4), "one": round(statistics.mean(ndcg_one), 4)},
    }


def markdown(rows: Sequence[Mapping[str, Any]], embedder: str) -> str:
    lines = [
        f"embedder: {embedder}",
        "",
        "| dataset | documents | queries | requests/query (two, one) | $ per 1,000 queries (two, one) "
        "| identical top 10 | overlap@10 | nDCG@10 (two, one) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        calls, usd, ndcg = row["requests_per_query"], row["usd_per_1000_queries"], row["ndcg_at_10"]
        lines.append(
            f"| {row['dataset']} | {row['documents']} | {row['queries']} | {calls['two']:g}, {calls['one']:g} "
            f"| {usd['two']}, {usd['one']} | {row['identical_top10']:.1%} | {row['overlap_at_10']:.3f} "
            f"| {ndcg['two']:.4f}, {ndcg['one']:.4f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact-train"))
    parser.add_argument("--queries", type=int, default=300, help="judged queries per dataset (sorted by id)")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--only", choices=["beir", "squad"], help="one dataset only")
    parser.add_argument("--json", type=Path, help="write the figures as JSON too")
    args = parser.parse_args()
    embedder = build_embedder(Settings(embedder=args.embedder))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    datasets = [evaluation.load_beir(args.dataset)] if args.only != "squad" else []
    datasets += [squad_dataset()] if args.only != "beir" else []
    rows = [measure(embedder, dataset, args.queries, log) for dataset in datasets]
    print(markdown(rows, embedder.name))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
