"""A fused candidate on its way to becoming a `SearchHit`: ids and scores now, the chunk only if asked.

Retrieval fuses up to two lists of 100 candidates, re-scores them, may rerank the best, then cuts to
`top_k` (about ten). Building a pydantic `SearchHit` and parsing its chunk for every candidate cost more
than the cut needs (docs/benchmarks.md, 9e), so fusion, `rescore`, the reranker and the cut pass these
light tuples, and `hit()` makes the `SearchHit` for the few returned. What needs a chunk (ranking signals,
the reranker's texts) reads `chunk`, which parses it once (`citewise.ports.index.ScoredChunk`).
"""

from __future__ import annotations

from typing import NamedTuple

from citewise.domain.models import Chunk, ScoreComponents, SearchHit
from citewise.ports.index import ScoredChunk


class Candidate(NamedTuple):
    """One chunk of the fused ranking and the scores its `SearchHit` will carry.

    A named tuple rather than a pydantic model: it is made for every candidate of every query, and
    building one costs a fraction of a model's validation.
    """

    scored: ScoredChunk
    """The chunk's entry in the first list that ranked it (ids, raw score, the chunk on demand)."""
    score: float
    """What candidates are ordered by: the fused score, or the final one once ranking signals applied."""
    relevance_score: float
    vector_score: float | None = None
    keyword_score: float | None = None
    fused: float | None = None
    """The fused score once `rescore` ran (then the hit reports its components); None before, and for a
    pinned document's chunk that did not rank."""
    freshness: float | None = None
    credibility: float | None = None
    feedback: float | None = None
    rerank_score: float | None = None

    @property
    def chunk_id(self) -> str:
        return self.scored.chunk_id

    @property
    def doc_id(self) -> str:
        return self.scored.doc_id

    @property
    def chunk(self) -> Chunk:
        """The chunk, parsed on first access (SearchBackendError if its stored body is malformed)."""
        return self.scored.chunk

    @property
    def components(self) -> ScoreComponents | None:
        """How `score` was made, once re-scored: the fused score, the signals (None when off), the final."""
        if self.fused is None:
            return None
        return ScoreComponents(
            fused=self.fused,
            freshness=self.freshness,
            credibility=self.credibility,
            feedback=self.feedback,
            final=self.score,
        )

    def hit(self) -> SearchHit:
        """The `SearchHit` the API returns for this candidate (its chunk parsed now if it was not yet)."""
        return SearchHit(
            chunk=self.chunk,
            score=self.score,
            relevance_score=self.relevance_score,
            vector_score=self.vector_score,
            keyword_score=self.keyword_score,
            components=self.components,
            rerank_score=self.rerank_score,
        )
