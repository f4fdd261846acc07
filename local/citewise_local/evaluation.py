"""Retrieval quality on a BEIR-format dataset: nDCG@10, Recall@10/100 and MRR@10, through the real pipeline.

The corpus goes through the same ingestion as any document (each record becomes a Markdown document,
`# title` then the text), into a local index kept under `$CITEWISE_HOME/eval/`, one per dataset,
embedder and chunking: a second run with the same settings re-ingests nothing. Queries run through
`Retriever.rank`, and a document's rank is that of its best chunk.

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
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from citewise.domain.errors import ValidationError
from citewise.domain.models import Caller
from citewise.domain.objects import SourceObject
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.runtime.services import Services
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
    per_query: list[QueryResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The one-object JSON form of `--json`."""
        return {
            "mode": self.mode,
            "embedder": self.embedder,
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
    mode: str, embedder: str, ingest_s: float, results: list[QueryResult], fusion: dict[str, Any] | None = None
) -> Report:
    """Means over the judged queries and latency percentiles; `fusion` describes the settings used."""
    if not results:
        raise ValidationError("no query of the dataset has relevance judgements")
    latencies = [r.latency_ms for r in results]
    p95 = statistics.quantiles(latencies, n=20)[18] if len(latencies) > 1 else latencies[0]
    return Report(
        mode=mode,
        embedder=embedder,
        queries=len(results),
        metrics={name: statistics.fmean(r.metrics[name] for r in results) for name in results[0].metrics},
        ingest_s=ingest_s,
        query_p50_ms=statistics.median(latencies),
        query_p95_ms=p95,
        fusion=fusion or {},
        per_query=results,
    )
