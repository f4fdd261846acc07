"""The VectorIndex port: chunks with vectors in, ranked chunks out, always inside one caller's access.

Every read takes the `Caller`, so an adapter cannot be asked a question without the tenant and access
filter: `tenant_id = caller.tenant_id AND (visibility = shared OR owner = caller.user_id)`, with the
user's filter ANDed inside it. Writes take the tenant explicitly: they come from the pipeline, which
derived it from the object's key.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from citewise.domain.models import Caller, Chunk, Filter, Frozen, Vector


class ScoredChunk(Frozen):
    """A chunk and its score in one ranked list (BM25 or cosine similarity)."""

    chunk: Chunk
    score: float


class VectorIndex(Protocol):
    """Hybrid (BM25 + vector) chunk index with tenant isolation."""

    def ensure(self, embedder_name: str, dimension: int) -> None:
        """Create the index for this vector space, or fail if it holds vectors of another space."""
        ...

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        """Atomically make `chunks` the document's only chunks: no reader sees a half-replaced document."""
        ...

    def delete_document(self, tenant_id: str, doc_id: str) -> int:
        """Remove every chunk of the document; the number removed."""
        ...

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        """Stored vectors of the tenant's chunks with these content hashes, to skip re-embedding."""
        ...

    def keyword_search(self, caller: Caller, query: str, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        """BM25 ranking of the chunks the caller may read that match `filters`."""
        ...

    def vector_search(self, caller: Caller, vector: Vector, filters: Filter | None, limit: int) -> list[ScoredChunk]:
        """Cosine-similarity ranking of the chunks the caller may read that match `filters`."""
        ...

    def sources(self, caller: Caller) -> list[str]:
        """The distinct non-empty `source` values of the documents the caller may read, sorted: the
        vocabulary the router recognises sources from."""
        ...
