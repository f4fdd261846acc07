"""Retrieval quality on a BEIR-format dataset: nDCG@10, Recall@10/100 and MRR@10, through the real pipeline.

The corpus goes through the same ingestion as any document (each record becomes a Markdown document,
`# title` then the text), into a local index kept under `$CITEWISE_HOME/eval/`, one per dataset,
embedder and chunking: a second run with the same settings re-ingests nothing. Queries run through
`Retriever.rank`, and a document's rank is that of its best chunk.

`--backend opensearch` runs the same pipeline into a fresh index on an OpenSearch node or domain (the
AWS adapter, `citewise.aws.opensearch`), created with the production mapping and deleted at the end
unless kept. Its chunks take their vectors from the local index of the same settings (built first when
missing, as above): the corpus is embedded once, and both backends rank the very same vectors, so a
difference between them is the engines' (BM25 scoring, approximate k-NN), not the embedding's.

Metric definitions follow BEIR (pytrec_eval): gains are the qrels' relevance grades, discounted by
log2(rank + 1), normalised by the ideal ordering of all judged documents cut at k; recall counts
documents with a grade above 0; queries without judgements are not scored.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from citewise.domain.errors import SearchBackendError, ValidationError
from citewise.domain.models import Caller, Chunk, Filter, Vector
from citewise.domain.objects import SourceObject
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.ports.index import ScoredChunk, VectorIndex
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from citewise_local.progress import Bars

EVAL_TENANT = "eval"
CALLER = Caller(tenant_id=EVAL_TENANT, user_id="eval")


@dataclass(frozen=True)
class Dataset:
    """A BEIR dataset: corpus id -> (title, text), query id -> text, query id -> {doc id: grade}."""

    name: str
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


@dataclass
class QueryResult:
    """One query's ranking and scores."""

    query_id: str
    ranked: list[str]
    metrics: dict[str, float]
    latency_ms: float


@dataclass
class Report:
    """What `citewise eval` prints: means over judged queries, ingest time, query latency, and the retrieval
    settings that produced them (fusion method, weights, depth)."""

    mode: str
    embedder: str
    queries: int
    metrics: dict[str, float]
    ingest_s: float
    query_p50_ms: float
    query_p95_ms: float
    fusion: dict[str, Any] = field(default_factory=dict)
    backend: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    per_query: list[QueryResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The one-object JSON form of `--json`."""
        return {
            "mode": self.mode,
            "embedder": self.embedder,
            "backend": self.backend,
            "queries": self.queries,
            **{name: round(value, 4) for name, value in self.metrics.items()},
            "ingest_s": round(self.ingest_s, 1),
            "query_p50_ms": round(self.query_p50_ms, 1),
            "query_p95_ms": round(self.query_p95_ms, 1),
            "fusion": self.fusion,
        }


def fusion_settings(settings: Settings) -> dict[str, Any]:
    """The settings that shape a ranking: mode, fusion method (and k for RRF), list weights (not for the
    weightless `relevance` fusion), depth."""
    described: dict[str, Any] = {"search_mode": settings.search_mode, "method": settings.fusion_method}
    if settings.fusion_method == "rrf":
        described["rrf_k"] = settings.rrf_k
    if settings.fusion_method != "relevance":
        described.update(keyword_weight=settings.keyword_weight, vector_weight=settings.vector_weight)
    described["candidates"] = settings.candidates
    return described


COMPARED_RUN = "rrf60"
"""The off-the-shelf baseline `--compare` adds: plain reciprocal-rank fusion, k = 60, equal weights."""


def comparison(settings: Settings) -> dict[str, Settings]:
    """The runs of `citewise eval --compare`, by name: these settings in hybrid, BM25 and vector mode, and
    plain RRF (k = 60, equal weights) of the same two lists at the same depth."""
    runs = {mode: settings.model_copy(update={"search_mode": mode}) for mode in ("hybrid", "bm25", "vector")}
    runs[COMPARED_RUN] = settings.model_copy(
        update={
            "search_mode": "hybrid",
            "fusion_method": "rrf",
            "rrf_k": 60,
            "keyword_weight": 1.0,
            "vector_weight": 1.0,
        }
    )
    return runs


# --- loading -----------------------------------------------------------------------------------


def load_beir(folder: Path) -> Dataset:
    """Read `corpus.jsonl`, `queries.jsonl` and `qrels.tsv` (or BEIR's `qrels/test.tsv`) from `folder`."""
    qrels_path = next((p for p in (folder / "qrels.tsv", folder / "qrels" / "test.tsv") if p.is_file()), None)
    missing = [name for name in ("corpus.jsonl", "queries.jsonl") if not (folder / name).is_file()]
    missing += [] if qrels_path else ["qrels.tsv (or qrels/test.tsv)"]
    if missing or qrels_path is None:
        raise ValidationError(f"{folder} is not a BEIR dataset: missing {', '.join(missing)}")
    corpus = {
        str(record["_id"]): (str(record.get("title") or ""), str(record.get("text") or ""))
        for record in _jsonl(folder / "corpus.jsonl")
    }
    queries = {str(record["_id"]): str(record["text"]) for record in _jsonl(folder / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as stream:
        rows = csv.reader(stream, delimiter="\t")
        header = next(rows, None)
        if header is None or [h.strip().lower() for h in header[:3]] != ["query-id", "corpus-id", "score"]:
            raise ValidationError(f"{qrels_path}: expected a header line 'query-id  corpus-id  score'")
        for row in rows:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return Dataset(folder.resolve().name, corpus, queries, qrels)


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValidationError(f"{path}:{number}: not JSON ({exc.msg})") from exc


# --- metrics -----------------------------------------------------------------------------------


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain of the top k, with linear gains."""
    dcg = sum(grades.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k."""
    relevant = {doc for doc, grade in grades.items() if grade > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document in the top k (0 if none)."""
    return next((1.0 / rank for rank, doc in enumerate(ranked[:k], start=1) if grades.get(doc, 0) > 0), 0.0)


def score_query(ranked: Sequence[str], grades: Mapping[str, int]) -> dict[str, float]:
    """The four reported metrics for one query."""
    return {
        "ndcg@10": ndcg_at_k(ranked, grades, 10),
        "recall@10": recall_at_k(ranked, grades, 10),
        "recall@100": recall_at_k(ranked, grades, 100),
        "mrr@10": mrr_at_k(ranked, grades, 10),
    }


# --- running -----------------------------------------------------------------------------------


def index_home(home: Path, dataset: Dataset, embedder: str, chunk_tokens: int, chunk_overlap: int) -> Path:
    """Where this dataset's index lives for these settings; other settings get another folder."""
    key = f"{embedder}|{chunk_tokens}|{chunk_overlap}"
    return home / "eval" / f"{quote(dataset.name, safe='')}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


@contextmanager
def indexed(dataset: Dataset, settings: Settings, log: Callable[[str], None]) -> Iterator[Services]:
    """Services on the index `citewise eval` keeps for `dataset` under these settings (`index_home`), the
    corpus ingested into it (quick when it already is), closed after: where the tuning benchmarks start."""
    home = index_home(settings.home_dir, dataset, settings.embedder, settings.chunk_tokens, settings.chunk_overlap)
    services = build_services(settings.model_copy(update={"home": home}))
    try:
        started = time.perf_counter()
        ingest(services, dataset, Bars(quiet=True))
        log(f"index ready in {time.perf_counter() - started:.0f} s")
        yield services
    finally:
        services.close()


def document_path(corpus_id: str) -> str:
    """A valid document path for a corpus id (ids may hold any character)."""
    return f"{quote(corpus_id, safe='')}.md"


def corpus_id_of(path: str) -> str:
    """The corpus id of a document ingested at `document_path(corpus_id)`."""
    return unquote(path.removesuffix(".md"))


def ingest(services: Services, dataset: Dataset, bars: Bars) -> tuple[float, Counter[Outcome]]:
    """Ingest the corpus (unchanged documents are skipped): wall time in seconds and outcome counts."""
    outcomes: Counter[Outcome] = Counter()
    started = time.perf_counter()
    ingested = services.ingestor.ingest_many(_sources(dataset), progress=bars)
    for obj, outcome in bars.items(ingested, len(dataset.corpus), "ingest", "doc"):
        if not isinstance(outcome, IngestResult) or outcome.outcome is Outcome.FAILED:
            reason = outcome.document.error if isinstance(outcome, IngestResult) else outcome.message
            raise ValidationError(f"corpus document {obj.path!r} failed: {reason}")
        outcomes[outcome.outcome] += 1
    return time.perf_counter() - started, outcomes


def _sources(dataset: Dataset) -> Iterator[SourceObject]:
    """Each corpus record as a Markdown document: `# title`, then the text."""
    for corpus_id, (title, text) in dataset.corpus.items():
        body = (f"# {title}\n\n{text}" if title else text).encode("utf-8")
        yield SourceObject(
            tenant_id=EVAL_TENANT,
            path=document_path(corpus_id),
            size=len(body),
            version=hashlib.sha256(body).hexdigest(),
            load=lambda body=body: body,  # type: ignore[misc]
            channel="eval",
            owner=CALLER.user_id,
        )


# --- backends ----------------------------------------------------------------------------------


class Target:
    """Where an evaluation ingests and ranks: the local index of the dataset's settings (`index_home`)."""

    name = "local"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        """The evaluation's settings (home: the dataset's local index)."""

    def services(self, settings: Settings) -> Services:
        """The pipeline for one run's settings (search mode, fusion) on this target's index."""
        return build_services(settings)

    def ingest(self, services: Services, dataset: Dataset, bars: Bars) -> float:
        """Ingest the corpus (unchanged documents are skipped); wall time in seconds."""
        return ingest(services, dataset, bars)[0]

    def describe(self) -> dict[str, Any]:
        """What the report says ranked the documents."""
        return {"name": self.name}

    def close(self) -> None:
        """Nothing to release: each run's services are closed by the caller."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class OpenSearchTarget(Target):
    """A fresh OpenSearch index for one evaluation (`citewise-eval-<random>`, 0 replicas: it is scratch),
    deleted on close unless `keep`; the registry of its documents lives in a temporary folder with it.

    Vectors come from the local index of the same settings (see the module doc), which is brought up to
    date first: `ingest` reports the OpenSearch ingest alone.
    """

    name = "opensearch"

    def __init__(self, settings: Settings, url: str, *, keep: bool = False) -> None:
        # The AWS extra's client, imported here: the local evaluations run on the `local` extra alone.
        from opensearchpy.exceptions import TransportError

        from citewise.aws.opensearch import OpenSearchIndex

        super().__init__(settings)
        self.url = url
        self.keep = keep
        self.index_name = f"citewise-eval-{uuid.uuid4().hex[:12]}"
        self._client = opensearch_client(url, settings.aws_region)
        try:  # one question first: an unreachable node fails here, before anything is built
            self.version = str(self._client.info()["version"]["number"])
        except TransportError as exc:
            self._client.close()
            raise SearchBackendError(f"cannot reach OpenSearch at {url}: {exc}") from exc
        self._scratch = tempfile.TemporaryDirectory(prefix="citewise-eval-opensearch-")
        self._local = build_services(settings)
        self._index = OpenSearchIndex(self._client, self.index_name, serverless=False, replicas=0, timeout=120)
        self.index = ReusedVectors(self._index, vectors=self._local.index)
        """The OpenSearch index, its vectors taken from the local one."""

    def services(self, settings: Settings) -> Services:
        return Services(settings.model_copy(update={"home": Path(self._scratch.name)}), index=self.index)

    def ingest(self, services: Services, dataset: Dataset, bars: Bars) -> float:
        ingest(self._local, dataset, bars)  # the vectors
        seconds = ingest(services, dataset, bars)[0]
        # Writes become searchable at the node's next refresh (every second); the queries must see all.
        self._client.indices.refresh(index=self.index_name)
        return seconds

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "index": self.index_name, "kept": self.keep}

    def close(self) -> None:
        """Delete the index (unless kept), close the client, the local index and the scratch folder."""
        from opensearchpy.exceptions import TransportError

        try:
            if not self.keep:
                self._client.indices.delete(index=self.index_name, ignore_unavailable=True)
        except TransportError as exc:  # the run's own error, if any, is the one to report
            print(f"citewise eval: the index {self.index_name} was not deleted: {exc}", file=sys.stderr)
        finally:
            self._client.close()
            self._local.close()
            self._scratch.cleanup()


def opensearch_client(url: str, region: str | None) -> Any:
    """A client for `url`: plain HTTP for a node on this machine (no security plugin, as
    `scripts/opensearch/opensearch.sh` runs one), SigV4 with the default AWS credentials otherwise (a
    domain: `citewise.aws.opensearch.connect`; `region`: None for the environment's)."""
    from opensearchpy import OpenSearch

    from citewise.aws import clients
    from citewise.aws.opensearch import connect

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"--opensearch-url must be an http(s) URL: {url!r}")
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return OpenSearch(hosts=[url], timeout=120, pool_maxsize=10)
    return connect(url, region or clients.region(), timeout=120)


class ReusedVectors:
    """`index`, except that `vectors_by_hash` also answers from `vectors`: the ingest pipeline then
    embeds only chunks neither index holds (`citewise.ingest.pipeline`), and an evaluation on OpenSearch
    reuses the vectors of the local one."""

    def __init__(self, index: VectorIndex, *, vectors: VectorIndex) -> None:
        self._index = index
        self._vectors = vectors

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        found = self._index.vectors_by_hash(tenant_id, hashes)
        rest = [h for h in hashes if h not in found]
        return found | (self._vectors.vectors_by_hash(tenant_id, rest) if rest else {})

    def ensure(self, embedder_name: str, dimension: int) -> None:
        self._index.ensure(embedder_name, dimension)

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        self._index.replace_document(tenant_id, doc_id, chunks, vectors)

    def delete_document(self, tenant_id: str, doc_id: str) -> int:
        return self._index.delete_document(tenant_id, doc_id)

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        return self._index.keyword_search(caller, query, filters, limit)

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        return self._index.vector_search(caller, vector, filters, limit)

    def sources(self, caller: Caller) -> list[str]:
        return self._index.sources(caller)


def target(settings: Settings, backend: str, url: str | None, *, keep: bool = False) -> Target:
    """The target `citewise eval --backend` names."""
    if backend == "local":
        return Target(settings)
    if url is None:
        raise ValidationError("--backend opensearch needs --opensearch-url (e.g. http://127.0.0.1:9200)")
    return OpenSearchTarget(settings, url, keep=keep)


def run_queries(services: Services, dataset: Dataset, top_k: int, bars: Bars) -> list[QueryResult]:
    """Rank the corpus for every judged query; documents are ranked by their best chunk."""
    results = []
    judged = [q for q in dataset.queries if q in dataset.qrels]
    for query_id in bars.items(judged, len(judged), "queries", "q"):
        started = time.perf_counter()
        hits = services.retriever.rank(CALLER, dataset.queries[query_id], None, top_k)
        latency = (time.perf_counter() - started) * 1000
        ranked = list(dict.fromkeys(corpus_id_of(hit.chunk.document.path) for hit in hits))[:top_k]
        results.append(QueryResult(query_id, ranked, score_query(ranked, dataset.qrels[query_id]), latency))
    return results


def report(
    mode: str,
    embedder: str,
    ingest_s: float,
    results: list[QueryResult],
    fusion: dict[str, Any] | None = None,
    *,
    backend: dict[str, Any] | None = None,
) -> Report:
    """Means over the judged queries and latency percentiles; `fusion` describes the settings used,
    `backend` the engine (`Target.describe`)."""
    if not results:
        raise ValidationError("no query of the dataset has relevance judgements")
    latencies = [r.latency_ms for r in results]
    return Report(
        mode=mode,
        embedder=embedder,
        queries=len(results),
        metrics={name: statistics.fmean(r.metrics[name] for r in results) for name in results[0].metrics},
        ingest_s=ingest_s,
        query_p50_ms=statistics.median(latencies),
        query_p95_ms=p95(latencies),
        fusion=fusion or {},
        backend=backend or {"name": "local"},
        per_query=results,
    )


def p95(latencies: Sequence[float]) -> float:
    """The 95th percentile of one or more latencies (with one, that one)."""
    return statistics.quantiles(latencies, n=20)[18] if len(latencies) > 1 else latencies[0]
