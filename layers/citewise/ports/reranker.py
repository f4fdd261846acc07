"""The Reranker port: a query and candidate texts in, a relevance score for each candidate out.

A reranker (a cross-encoder behind an API: Amazon Rerank, Cohere Rerank on Bedrock) reads the query and
each candidate together, which the two first-stage rankings cannot, so it orders the fused top
candidates better than their fused scores do. It only orders: it never adds a candidate, never drops
one, and never sees anything the caller's access filter did not already let through (it is given the
hits of `citewise.query.retrieval.Retriever`, nothing else).

A reranker may fail (no model access, throttling, a time budget running out); the retriever then keeps
the fused order and says why (`citewise.domain.models.Reranking.fallback`), so a query never fails
because of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Relevance:
    """The reranker's score of one candidate, by its position in the list it was given."""

    index: int
    score: float


class Reranker(Protocol):
    """Scores candidate texts against a query."""

    name: str
    """What the reports name the reranker by (its model id)."""

    def rerank(self, query: str, documents: Sequence[str]) -> list[Relevance]:
        """A score for every one of `documents`, each index once, in any order (the caller sorts).

        Raises a `CitewiseError` when the scores cannot be had; the caller falls back to its own order.
        """
        ...


def reranked_order(relevances: Sequence[Relevance], count: int) -> list[Relevance]:
    """`relevances` best first (ties in the candidates' own order), checked to score each of `count`
    candidates exactly once.

    Raises ValueError otherwise: an order that lost or repeated a candidate would drop or duplicate a hit.
    """
    indices = sorted(relevance.index for relevance in relevances)
    if indices != list(range(count)):
        raise ValueError(f"the reranker scored positions {_summary(indices)} of {count} candidates")
    return sorted(relevances, key=lambda relevance: (-relevance.score, relevance.index))


def _summary(indices: list[int]) -> str:
    shown = ", ".join(map(str, indices[:10]))
    return f"[{shown}{', ...' if len(indices) > 10 else ''}]"
