"""A calibrated relevance score: the estimated probability, 0-1, that a hit is relevant to the query.

The fused score ranks well but means nothing across queries (its top is 1.0 for every query, however bad
the match). This score is a logistic model of evidence that does mean the same thing everywhere:

- `cosine`: the chunk's cosine similarity to the query (absolute; a chunk outside the vector list counts
  that list's lowest cosine, which it did not beat);
- `cosine_gap`: the cosine minus the best cosine of the query (how far below this query's best it is);
- `keyword`: the chunk's BM25 score over the best BM25 score of the query (0-1; 0 outside the list).
  Raw BM25 differs between backends and analyzers (FTS5, Lucene), its ratio to the best far less.

The fused score is deliberately not a feature: it changes with the fusion method and weights, and the
relevance of a hit should not.

    relevance = 1 / (1 + exp(-(intercept + sum(coefficient * feature))))

The same model is the default *fusion* (`relevance`, `citewise.query.fusion`): hits ranked by the estimate
itself beat every normalised-score fusion on held-out data (docs/evaluation.md), and `score` then says what
`relevance_score` says.

The coefficients were fitted by `python -m benchmarks.fusion_tuning` on the tuning part of SciFact train
(MiniLM vectors, the default fusion) over the top 10 documents of each query, one model per search mode
(a mode without a list has fewer features); docs/evaluation.md gives what thresholds keep on the
held-out part. They are plain constants, so Lambda needs no model file and no numpy. They belong to the
embedder they were fitted with: another embedder's cosines sit elsewhere, and its scores are ordered but
not calibrated until it is fitted the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from citewise.ports.index import ScoredChunk

FEATURES = ("cosine", "cosine_gap", "keyword")


@dataclass(frozen=True)
class Calibration:
    """A logistic model over `FEATURES` (a feature without a coefficient does not count)."""

    intercept: float
    coefficients: Mapping[str, float]

    def probability(self, features: Mapping[str, float]) -> float:
        """sigmoid(intercept + coefficients . features), unrounded (fusion orders by it)."""
        z = self.intercept + sum(weight * features[name] for name, weight in self.coefficients.items())
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


CALIBRATIONS: dict[frozenset[str], Calibration] = {
    frozenset({"keyword", "vector"}): Calibration(
        -7.2143, {"cosine": 2.2948, "cosine_gap": 13.8304, "keyword": 6.4988}
    ),
    frozenset({"keyword"}): Calibration(-10.99, {"keyword": 10.8754}),
    frozenset({"vector"}): Calibration(-5.2041, {"cosine": 7.6576, "cosine_gap": 20.9185}),
}
"""One model per set of rankings fused (hybrid, BM25 alone, vectors alone)."""


def evidence(rankings: Mapping[str, Sequence[ScoredChunk]]) -> Callable[[Mapping[str, float]], dict[str, float]]:
    """The features of a hit from its raw scores in each list, against these lists."""
    vectors = [scored.score for scored in rankings.get("vector", ())]
    keywords = [scored.score for scored in rankings.get("keyword", ())]
    best_cosine, floor_cosine = (max(vectors), min(vectors)) if vectors else (0.0, 0.0)
    best_keyword = max(keywords, default=0.0)

    def features(raw: Mapping[str, float]) -> dict[str, float]:
        cosine = raw.get("vector", floor_cosine)
        keyword = raw.get("keyword", 0.0)
        return {
            "cosine": cosine,
            "cosine_gap": cosine - best_cosine,
            "keyword": keyword / best_keyword if best_keyword > 0 else 0.0,
        }

    return features


def estimates(rankings: Mapping[str, Sequence[ScoredChunk]]) -> Callable[[Mapping[str, float]], float]:
    """The estimated relevance of a hit (its raw score in each list it is in) among these rankings."""
    calibration = CALIBRATIONS[frozenset(rankings)]
    features = evidence(rankings)
    return lambda raw: calibration.probability(features(raw))


def relevance_scores(rankings: Mapping[str, Sequence[ScoredChunk]]) -> Callable[[Mapping[str, float]], float]:
    """`estimates` rounded to 4 places: the `relevance_score` a hit reports."""
    estimate = estimates(rankings)
    return lambda raw: round(estimate(raw), 4)
