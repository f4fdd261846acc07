"""Fusing named ranked lists (BM25, k-NN) into one: by estimated relevance, by reciprocal rank, or by
normalised scores.

- `relevance` (the default): score(c) = the calibrated probability that c is relevant, from its cosine, its
  cosine's gap to the query's best and its BM25 score over the query's best (`citewise.query.relevance`; a
  chunk absent from a list counts that list's floor there). The evidence model is fitted, not a weighted
  sum, so list weights do not apply (settings refuse them). It ranked best on held-out SciFact queries and
  makes `score` an absolute figure: the same value means the same thing for every query.

- `rrf`: score(c) = sum_i w_i / (k + rank_i(c)), scaled so rank 1 in every list is 1.0.
- `minmax`: each list's scores mapped to 0-1 by its own min and max; `zscore`: each list's scores minus
  their mean over their standard deviation. A chunk absent from a list gets that list's floor (0 for
  min-max, the list's lowest z for z-score): it scored no better than the list's last entry. The fused
  score is the weighted sum, scaled to 0-1 (min-max: over the sum of weights, so 1.0 is the top of every
  list; z-score: between the lowest and highest fused value of this query).

Fusion reads each entry's chunk id and score only, never its chunk: the local index leaves the bodies of
the candidates unparsed until a hit needs one (`citewise.ports.index.ScoredChunk`).

This is what OpenSearch's normalization processor does for a `hybrid` query (min_max, or l2 for a norm,
then a weighted arithmetic mean). It runs here, in the client, so the local index, an OpenSearch domain
and Serverless fuse the same lists the same way (docs/aws.md says why not the search pipeline).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from citewise.ports.index import ScoredChunk
from citewise.query.relevance import estimates

FusionMethod = Literal["relevance", "rrf", "minmax", "zscore"]
Fused = list[tuple[ScoredChunk, float, dict[str, float]]]
"""Each chunk once, best first: the chunk, its fused score (0-1) and its raw score in each list it is in."""


@dataclass(frozen=True)
class Fusion:
    """How rankings are fused: the method, each list's weight (not `relevance`: a fitted model), and the RRF
    constant (RRF only)."""

    method: FusionMethod = "relevance"
    weights: Mapping[str, float] | None = None
    rrf_k: int = 60

    def weight(self, name: str) -> float:
        """The weight of the list `name` (1.0 unless set)."""
        return 1.0 if self.weights is None else self.weights.get(name, 1.0)

    def fuse(self, rankings: Mapping[str, Sequence[ScoredChunk]]) -> Fused:
        """The lists fused by this method; ties keep the order of first appearance."""
        if self.method == "relevance":
            return _by_relevance(rankings)
        if self.method == "rrf":
            return _fuse(rankings, {name: self._rrf(ranking) for name, ranking in rankings.items()}, self, 0.0)
        normalise = _minmax if self.method == "minmax" else _zscore
        normalised = {name: normalise([scored.score for scored in ranking]) for name, ranking in rankings.items()}
        return _fuse(rankings, normalised, self, None)

    def _rrf(self, ranking: Sequence[ScoredChunk]) -> list[float]:
        # Scaled by k + 1 so rank 1 is 1.0 and a weighted sum over weights is 0-1, like min-max.
        return [(self.rrf_k + 1) / (self.rrf_k + rank) for rank in range(1, len(ranking) + 1)]


def _minmax(scores: list[float]) -> list[float]:
    """0-1 by the list's own range; a list of equal scores is all 1 (each entry is as good as the best)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    return [(s - low) / (high - low) if high > low else 1.0 for s in scores]


def _zscore(scores: list[float]) -> list[float]:
    """(s - mean) / standard deviation; a list of fewer than two distinct scores is all 0."""
    if len(scores) < 2:
        return [0.0] * len(scores)
    spread = statistics.pstdev(scores)
    mean = statistics.fmean(scores)
    return [(s - mean) / spread if spread > 0 else 0.0 for s in scores]


def _entries(
    rankings: Mapping[str, Sequence[ScoredChunk]], values: Mapping[str, Sequence[float]]
) -> list[tuple[ScoredChunk, dict[str, float], dict[str, float]]]:
    """Each chunk once, in order of first appearance: its first entry, its value in each list (from `values`,
    parallel to the rankings) and its raw score there. A list naming a chunk twice counts its best entry."""
    entries: dict[str, tuple[ScoredChunk, dict[str, float], dict[str, float]]] = {}
    for name, ranking in rankings.items():
        for scored, value in zip(ranking, values[name], strict=True):
            first, parts, raw = entries.get(scored.chunk_id) or (scored, {}, {})
            if name not in parts:
                parts[name], raw[name] = value, scored.score
            entries[scored.chunk_id] = (first, parts, raw)
    return list(entries.values())


def _by_relevance(rankings: Mapping[str, Sequence[ScoredChunk]]) -> Fused:
    """Each chunk scored by its estimated relevance among these rankings, best first."""
    estimate = estimates(rankings)
    raw_scores = {name: [scored.score for scored in ranking] for name, ranking in rankings.items()}
    fused = [(first, estimate(raw), raw) for first, _, raw in _entries(rankings, raw_scores)]
    fused.sort(key=lambda entry: -entry[1])
    return fused


def _fuse(
    rankings: Mapping[str, Sequence[ScoredChunk]],
    normalised: Mapping[str, list[float]],
    fusion: Fusion,
    floor: float | None,
) -> Fused:
    """The weighted sum of normalised scores, a missing entry counting its list's floor (`floor`, or the
    list's lowest normalised score when None), scaled to 0-1 as the module says."""
    floors = {name: (floor if floor is not None else min(values, default=0.0)) for name, values in normalised.items()}
    totals = [
        (first, sum(fusion.weight(name) * parts.get(name, floors[name]) for name in rankings), raw)
        for first, parts, raw in _entries(rankings, normalised)
    ]
    totals.sort(key=lambda entry: -entry[1])
    return [(scored, _scaled(total, totals, fusion, rankings), raw) for scored, total, raw in totals]


def _scaled(total: float, totals: Fused, fusion: Fusion, rankings: Mapping[str, Sequence[ScoredChunk]]) -> float:
    if fusion.method != "zscore":
        best_possible = sum(fusion.weight(name) for name in rankings)
        return total / best_possible if best_possible > 0 else 0.0
    high, low = totals[0][1], totals[-1][1]
    return (total - low) / (high - low) if high > low else 1.0
