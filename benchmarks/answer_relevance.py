"""Check the extractive answerer's refusal thresholds (`citewise.builtin.extractive.AnswerModel.threshold`)
on other questions than the SQuAD ones it was fitted on.

Usage: python -m benchmarks.answer_relevance [--scifact DIR] [--cache DIR]

For each question it retrieves the top 5 chunks as `citewise query` does and takes the best estimate of
any passage among them (its probability of answering), then prints, per threshold, how many questions
would be answered:
- the sample corpus (samples/corpus, MiniLM) with `samples/calibration.json`: questions it answers, and
  off-corpus questions it does not;
- SciFact-train's claims (BM25 over the corpus, no sentence vectors: the hashing embedder's mean
  nothing): "relevant in top 5" (a judged abstract is among the hits), "hard negative" (the same
  ranking with the judged abstracts removed: the nearest abstracts that do not address the claim) and
  "off-topic" (the top 5 of another claim).
A good threshold answers the first kind and refuses the others.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import REPO, log
from citewise.builtin.extractive import VECTOR_MODELS, WORDS_MODEL, ExtractiveSynthesizer, candidates
from citewise.domain.models import Caller, SearchHit, SearchRequest, Visibility
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import load_settings
from citewise_local import evaluation
from citewise_local.folders import scan
from citewise_local.progress import Bars

THRESHOLDS = (0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
TOP = 5


def best(answerer: ExtractiveSynthesizer, question: str, hits: Sequence[SearchHit]) -> float:
    """The estimate of the best passage among the hits (0 without any)."""
    return max(answerer.probabilities(question, hits, candidates(hits)), default=0.0)


def sample_corpus(cache: Path) -> dict[str, list[float]]:
    services = build_services(load_settings(home=cache / "samples", embedder="minilm"))
    try:
        caller = Caller(tenant_id="calibration", user_id="calibration")
        found = scan([REPO / "samples" / "corpus"], caller.tenant_id, caller.user_id, Visibility.SHARED)
        list(services.ingestor.ingest_many(found.objects))
        questions = json.loads((REPO / "samples" / "calibration.json").read_text(encoding="utf-8"))
        answerer = ExtractiveSynthesizer(services.embedder)
        return {
            f"samples: {kind}": [
                best(answerer, q, services.retriever.search(caller, SearchRequest(query=q, top_k=TOP)))
                for q in questions[kind]
            ]
            for kind in ("answerable", "unanswerable")
        }
    finally:
        services.close()


def scifact(folder: Path, cache: Path) -> dict[str, list[float]]:
    dataset = evaluation.load_beir(folder)
    settings = load_settings(home=cache / "scifact", embedder="hashing", search_mode="bm25")
    services: Services = build_services(settings)
    try:
        evaluation.ingest(services, dataset, Bars(quiet=True))
        path_to_id = {evaluation.document_path(corpus_id): corpus_id for corpus_id in dataset.corpus}
        rankings = []
        for query_id, grades in dataset.qrels.items():
            text = dataset.queries[query_id]
            hits = services.retriever.rank(evaluation.CALLER, text, None, 30)
            relevant = {doc for doc, grade in grades.items() if grade > 0}
            rankings.append((text, hits[:TOP], [h for h in hits if path_to_id[h.chunk.document.path] not in relevant]))
        scores: dict[str, list[float]] = {"scifact: relevant in top 5": [], "hard negative": [], "off-topic": []}
        answerer = ExtractiveSynthesizer()
        for number, (text, top, others) in enumerate(rankings):
            if len(top) != len([h for h in top if h in others]):
                scores["scifact: relevant in top 5"].append(best(answerer, text, top))
            scores["hard negative"].append(best(answerer, text, others[:TOP]))
            scores["off-topic"].append(best(answerer, text, rankings[(number + 1) % len(rankings)][2][:TOP]))
        return scores
    finally:
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "datasets" / "scifact-train")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "citewise-calibration")
    args = parser.parse_args()
    log("sample corpus ...")
    groups = sample_corpus(args.cache)
    log("scifact-train (first run ingests 5,183 abstracts) ...")
    groups |= scifact(args.scifact, args.cache)
    width = max(len(name) for name in groups)
    print(f"{'answered at threshold':<{width}}  n    " + "  ".join(f"{t:>5}" for t in THRESHOLDS))
    for name, scores in groups.items():
        shares = [sum(s >= t for s in scores) / len(scores) for t in THRESHOLDS]
        print(f"{name:<{width}}  {len(scores):<4} " + "  ".join(f"{share:>5.0%}" for share in shares))
    thresholds = {name: model.threshold for name, model in VECTOR_MODELS.items()} | {"words": WORDS_MODEL.threshold}
    print(f"current thresholds: {thresholds} (samples: MiniLM's; SciFact: words)")


if __name__ == "__main__":
    main()
