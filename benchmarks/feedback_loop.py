"""Does the feedback ranking signal help? A simulated feedback loop over a BEIR dataset (issue 31, item 5).

Usage: python -m benchmarks.feedback_loop [--dataset ../shared/datasets/scifact-train] [--home DIR]
       [--cited 3] [--json PATH]

1. The corpus is ingested as `citewise eval` does (the same index folder under `--home`, reused).
2. The judged queries are split by a fixed seed into two halves, A and B. On the feedback half, each query
   is searched with the signal off and its `--cited` best documents stand for the citations a user sees;
   each gets a vote from the qrels (helpful if judged relevant, not helpful otherwise) for its document's
   source, as `POST /v1/feedback` on a citation would count it. The tallies are the ones a `FeedbackStore`
   would hold.
3. On the other half, every query is searched with the signal off and then on (`Signals.feedback_weight`
   in `WEIGHTS`, the tallies above, the default prior and minimum volume, and a minimum of 1), through the
   library's own `Retriever` (fusion, re-scoring, the cut), and nDCG@10, Recall@10 and Recall@50 are
   compared per query. Then the halves swap roles: a weight chosen on one direction is checked on the other.

SciFact has no sources, so a document's source is defined here (`GROUPINGS`), each a different honest
answer to "what would a source be":
- `document`: every document is its own source (the degenerate case: feedback on a document helps only a
  later query that retrieves the same document);
- `hash-50`: documents bucketed into 50 pseudo-sources by a hash of their id (sources unrelated to
  relevance: what the signal should not, and must not, gain or lose much from);
- `topic-50`: documents grouped into 50 pseudo-sources by the nearest of 50 seed documents in the
  embedding space (a source as a body of related content, the closest SciFact has to a documentation site).
It prints a Markdown table (stdout) and writes everything as JSON (`--json`).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from citewise.domain.models import Caller, Filter, SearchRequest, Vector
from citewise.ports.feedback import SOURCE_ID_KEY, SourceTally
from citewise.ports.index import ScoredChunk, VectorIndex
from citewise.query.ranking import FeedbackPrior, Signals
from citewise.query.retrieval import Retriever
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from citewise_local import evaluation

SEED = 31
WEIGHTS = (0.1, 0.25, 0.5, 1.0)
MIN_VOTES = (FeedbackPrior().min_votes, 1)
CLUSTERS = 50
DEPTH = 50  # Recall@50: the deepest a request may ask (`SearchRequest.top_k`)


class PseudoSources:
    """The index with each hit's document carrying its pseudo-source as `source_id` (what feedback keys).
    Each list is read once and replayed: every setting ranks the same lists, as `Retriever` would read them."""

    def __init__(self, index: VectorIndex, source_of: Callable[[str], str]) -> None:
        self._index = index
        self._source_of = source_of
        self._read: dict[tuple[str, bytes | str, int], list[ScoredChunk]] = {}

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        key = ("keyword", query, limit)
        if key not in self._read:
            self._read[key] = [self._labelled(hit) for hit in self._index.keyword_search(caller, query, filters, limit)]
        return self._read[key]

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        key = ("vector", np.asarray(vector, dtype=np.float32).tobytes(), limit)
        if key not in self._read:
            self._read[key] = [self._labelled(hit) for hit in self._index.vector_search(caller, vector, filters, limit)]
        return self._read[key]

    def sources(self, caller: Caller) -> list[str]:
        return []

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        return {}

    def _labelled(self, found: ScoredChunk) -> ScoredChunk:
        chunk = found.chunk
        corpus_id = evaluation.corpus_id_of(chunk.document.path)
        attributes = {**chunk.document.attributes, SOURCE_ID_KEY: self._source_of(corpus_id)}
        document = chunk.document.model_copy(update={"attributes": attributes})
        return ScoredChunk(chunk.model_copy(update={"document": document}), found.score)


def hash_buckets(buckets: int) -> Callable[[str], str]:
    """A source per bucket of a stable hash of the corpus id."""
    return lambda corpus_id: f"h{int(hashlib.sha256(corpus_id.encode()).hexdigest(), 16) % buckets}"


def topic_regions(services: Services, dataset: evaluation.Dataset, regions: int) -> Callable[[str], str]:
    """A source per region of the embedding space: each document goes to the nearest (cosine, through the
    index's own vector search) of `regions` seed documents drawn with a fixed seed. One pass of k-means'
    assignment step, from the vectors the index already holds: nothing is embedded again but the seeds."""
    seeds = random.Random(SEED).sample(sorted(dataset.corpus), regions)  # noqa: S311 - reproducible, not a secret
    vectors = services.embedder.embed_documents([f"{dataset.corpus[i][0]}\n{dataset.corpus[i][1]}" for i in seeds])
    best: dict[str, tuple[float, int]] = {}
    paths: dict[str, str] = {}
    for region, vector in enumerate(vectors):
        for found in services.index.vector_search(evaluation.CALLER, vector, None, len(dataset.corpus) * 2):
            if found.doc_id not in paths:
                paths[found.doc_id] = evaluation.corpus_id_of(found.chunk.document.path)
            corpus_id = paths[found.doc_id]
            if found.score > best.get(corpus_id, (-2.0, 0))[0]:
                best[corpus_id] = (found.score, region)
    return lambda corpus_id: f"t{best[corpus_id][1]}" if corpus_id in best else "t-none"


def configured(
    services: Services, index: PseudoSources, signals: Signals, tally: Mapping[str, SourceTally]
) -> Retriever:
    """The settings' own retriever (fusion, depth, weights) over `index`, with `signals` and these tallies."""
    retriever = copy.copy(services.retriever)
    retriever.index = index  # type: ignore[assignment]
    retriever.signals = signals
    retriever.feedback_tallies = lambda _: tally
    return retriever


def ranked(retriever: Retriever, query: str) -> list[str]:
    """The corpus ids of the query's best documents (by their best chunk, as `citewise eval` ranks them)."""
    hits = retriever.search(evaluation.CALLER, SearchRequest(query=query, top_k=DEPTH, route=False))
    return list(dict.fromkeys(evaluation.corpus_id_of(hit.chunk.document.path) for hit in hits))


def tallies(
    retriever: Retriever, dataset: evaluation.Dataset, ids: Sequence[str], source_of: Callable[[str], str], cited: int
) -> dict[str, SourceTally]:
    """The votes of the feedback half: each query's `cited` best documents, rated by the qrels."""
    votes: dict[str, Counter[bool]] = {}
    for query_id in ids:
        for corpus_id in ranked(retriever, dataset.queries[query_id])[:cited]:
            votes.setdefault(source_of(corpus_id), Counter())[corpus_id in dataset.qrels[query_id]] += 1
    return {source: SourceTally(helpful=c[True], not_helpful=c[False]) for source, c in votes.items()}


def scores(retriever: Retriever, dataset: evaluation.Dataset, ids: Sequence[str]) -> dict[str, list[float]]:
    """nDCG@10, Recall@10 and Recall@50 of each query of `ids`."""
    found: dict[str, list[float]] = {"ndcg@10": [], "recall@10": [], "recall@50": []}
    for query_id in ids:
        ranking, grades = ranked(retriever, dataset.queries[query_id]), dataset.qrels[query_id]
        found["ndcg@10"].append(evaluation.ndcg_at_k(ranking, grades, 10))
        found["recall@10"].append(evaluation.recall_at_k(ranking, grades, 10))
        found["recall@50"].append(evaluation.recall_at_k(ranking, grades, 50))
    return found


def paired(on: Sequence[float], off: Sequence[float]) -> dict[str, float]:
    """The mean difference, its 95% paired bootstrap interval, and the queries it moved either way."""
    differences = [a - b for a, b in zip(on, off, strict=True)]
    rng = random.Random(SEED)  # noqa: S311 - a reproducible resample, not a secret
    means = sorted(statistics.fmean(rng.choices(differences, k=len(differences))) for _ in range(1000))
    return {
        "delta": round(statistics.fmean(differences), 4),
        "low": round(means[25], 4),
        "high": round(means[974], 4),
        "better": sum(d > 1e-9 for d in differences),
        "worse": sum(d < -1e-9 for d in differences),
    }


def run(dataset_path: Path, settings: Settings, cited: int, log: Callable[[str], None]) -> dict[str, Any]:
    """The loop above for every grouping, both directions, every weight and minimum volume."""
    dataset = evaluation.load_beir(dataset_path)
    with evaluation.indexed(dataset, settings, log) as services:
        judged = sorted(query_id for query_id in dataset.queries if dataset.qrels.get(query_id))
        random.Random(SEED).shuffle(judged)  # noqa: S311 - a reproducible split, not a secret
        halves = {"A": sorted(judged[: len(judged) // 2]), "B": sorted(judged[len(judged) // 2 :])}
        groupings = {"document": lambda corpus_id: corpus_id, "hash-50": hash_buckets(CLUSTERS)}
        log("grouping the documents by their nearest seed document")
        groupings["topic-50"] = topic_regions(services, dataset, CLUSTERS)
        rows = []
        baseline: dict[str, dict[str, list[float]]] = {}
        for grouping, source_of in groupings.items():
            index = PseudoSources(services.index, source_of)
            plain = configured(services, index, Signals(), {})
            for given, measured in (("A", "B"), ("B", "A")):
                tally = tallies(plain, dataset, halves[given], source_of, cited)
                if measured not in baseline:
                    baseline[measured] = scores(plain, dataset, halves[measured])
                off = baseline[measured]
                log(
                    f"{grouping}: feedback from {given} ({sum(t.rated for t in tally.values())} votes), measured on "
                    f"{measured}"
                )
                for min_votes in MIN_VOTES:
                    for weight in WEIGHTS:
                        signals = Signals(feedback_weight=weight, feedback_prior=FeedbackPrior(min_votes=min_votes))
                        on = scores(configured(services, index, signals, tally), dataset, halves[measured])
                        rows.append(
                            {
                                "grouping": grouping,
                                "feedback_from": given,
                                "measured_on": measured,
                                "sources_rated": len(tally),
                                "sources_ranking": sum(t.rated >= min_votes for t in tally.values()),
                                "min_votes": min_votes,
                                "weight": weight,
                                "ndcg@10_off": round(statistics.fmean(off["ndcg@10"]), 4),
                                "ndcg@10_on": round(statistics.fmean(on["ndcg@10"]), 4),
                                **{f"{metric}": paired(on[metric], off[metric]) for metric in on},
                            }
                        )
        return {
            "dataset": dataset.name,
            "queries": {half: len(ids) for half, ids in halves.items()},
            "cited": cited,
            "prior_votes": FeedbackPrior().prior_votes,
            "embedder": settings.embedder,
            "fusion": settings.fusion_method,
            "rows": rows,
        }


def markdown(report: Mapping[str, Any]) -> str:
    lines = [
        "| grouping | feedback -> measured | min votes | weight | sources ranking | nDCG@10 off -> on | "
        "ΔnDCG@10 [95% CI] | ΔR@10 | ΔR@50 | queries better / worse |",
        "|" + " --- |" * 10,
    ]
    for row in report["rows"]:
        ndcg = row["ndcg@10"]
        lines.append(
            f"| {row['grouping']} | {row['feedback_from']} -> {row['measured_on']} | {row['min_votes']} | "
            f"{row['weight']} | {row['sources_ranking']}/{row['sources_rated']} | {row['ndcg@10_off']} -> "
            f"{row['ndcg@10_on']} | {ndcg['delta']:+.4f} [{ndcg['low']:+.4f}, {ndcg['high']:+.4f}] | "
            f"{row['recall@10']['delta']:+.4f} | {row['recall@50']['delta']:+.4f} | "
            f"{ndcg['better']} / {ndcg['worse']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact-train"))
    parser.add_argument("--home", type=Path, help="CITEWISE_HOME of the eval index (default: the setting)")
    parser.add_argument("--cited", type=int, default=3, help="documents of each answer a user rates (default 3)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    settings = Settings.model_validate({"home": args.home} if args.home else {})
    report = run(args.dataset, settings, args.cited, lambda message: print(message, file=sys.stderr, flush=True))
    print(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
