"""The VectorIndex port: chunks with vectors in, ranked chunks out, always inside one caller's access.

Every read takes the `Caller`, so an adapter cannot be asked a question without the tenant and access
filter: `tenant_id = caller.tenant_id AND (visibility = shared OR owner = caller.user_id)`, with the
user's filter ANDed inside it. Writes take the tenant explicitly: they come from the pipeline, which
derived it from the object's key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from pydantic import ValidationError

from citewise.domain.errors import SearchBackendError
from citewise.domain.models import Caller, Chunk, Filter, Vector
from citewise.ports.erasure import ERASE_BATCH


class ScoredChunk:
    """One entry of a ranked list (BM25 or cosine similarity): the chunk's ids and score at once, the chunk
    itself on demand.

    A search returns its whole candidate depth (100 a list by default) but fusion and the cut read only ids
    and scores, and a query returns about ten hits: parsing every candidate's stored JSON into a `Chunk`
    was a large share of a local query (docs/benchmarks.md, 9e). So an adapter that reads the stored body
    hands it over unparsed (`stored`) and `chunk` parses it once, on first access; an adapter that has
    parsed the chunk anyway (to check access or a filter) passes it (`ScoredChunk(chunk, score)`). Either
    way the body was read in the search's own statement, inside the access filter: nothing is read later.
    """

    __slots__ = ("_body", "_chunk", "chunk_id", "doc_id", "score")

    chunk_id: str
    doc_id: str
    score: float
    _body: str | bytes | None
    _chunk: Chunk | None

    def __init__(self, chunk: Chunk, score: float) -> None:
        self._set(chunk.chunk_id, chunk.document.doc_id, score, None, chunk)

    @classmethod
    def stored(cls, chunk_id: str, doc_id: str, body: str | bytes, score: float) -> ScoredChunk:
        """An entry whose chunk is the JSON `body` (`Chunk.model_dump_json`), stored with these ids."""
        scored = cls.__new__(cls)
        scored._set(chunk_id, doc_id, score, body, None)
        return scored

    def _set(self, chunk_id: str, doc_id: str, score: float, body: str | bytes | None, chunk: Chunk | None) -> None:
        setter = object.__setattr__  # the class refuses `self.x = ...`: entries are shared between lists
        setter(self, "chunk_id", chunk_id)
        setter(self, "doc_id", doc_id)
        setter(self, "score", score)
        setter(self, "_body", body)
        setter(self, "_chunk", chunk)

    @property
    def chunk(self) -> Chunk:
        """The chunk, parsed from its stored body on first access.

        Raises SearchBackendError when the body is not a chunk, or not the one its ids name: a corrupt
        index is the backend's fault, reported as such, never a 500 of whoever read the chunk.
        """
        if self._chunk is None:
            try:
                chunk = Chunk.model_validate_json(self._body or "")
            except ValidationError as exc:
                raise self._malformed(f"{exc.error_count()} validation errors") from exc
            if (chunk.chunk_id, chunk.document.doc_id) != (self.chunk_id, self.doc_id):
                raise self._malformed(f"its body is chunk '{chunk.chunk_id}' of document '{chunk.document.doc_id}'")
            object.__setattr__(self, "_chunk", chunk)
            object.__setattr__(self, "_body", None)
            return chunk
        return self._chunk

    def _malformed(self, reason: str) -> SearchBackendError:
        return SearchBackendError(
            f"the index holds a malformed chunk '{self.chunk_id}': {reason}",
            details={"chunk_id": self.chunk_id, "doc_id": self.doc_id},
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ScoredChunk is immutable: cannot set '{name}'")

    def __repr__(self) -> str:
        return f"ScoredChunk(chunk_id={self.chunk_id!r}, doc_id={self.doc_id!r}, score={self.score!r})"


class VectorIndex(Protocol):
    """Hybrid (BM25 + vector) chunk index with tenant isolation."""

    def ensure(self, embedder_name: str, dimension: int) -> None:
        """Create the index for this vector space, or fail if it holds vectors of another space."""
        ...

    def replace_document(self, tenant_id: str, doc_id: str, chunks: Sequence[Chunk], vectors: Sequence[Vector]) -> None:
        """Atomically make `chunks` the document's only chunks: no reader sees a half-replaced document.
        The document's staged vectors are dropped (they are in `chunks` now, or no longer needed)."""
        ...

    def delete_document(self, tenant_id: str, doc_id: str, *, keep_staged: bool = False) -> int:
        """Remove every chunk of the document; the number removed. Its staged vectors go too, unless
        `keep_staged` (a transient failure keeps them for the retry)."""
        ...

    def stage_vectors(self, tenant_id: str, doc_id: str, vectors: Mapping[str, Vector]) -> None:
        """Keep vectors (by content hash) embedded for the document's next version, durably, before its
        chunks are written: the progress of a long ingest, one batch at a time.

        `vectors_by_hash` finds them from then on; no search, listing or count ever does (they are not
        chunks). The document's next `replace_document` or `delete_document` drops them."""
        ...

    def vectors_by_hash(self, tenant_id: str, hashes: Collection[str]) -> dict[str, Vector]:
        """Stored vectors of the tenant's chunks, and staged ones, with these content hashes, to skip
        re-embedding."""
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

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's entries (chunks and staged vectors) of every document;
        how many were deleted, 0 only when none was left (`citewise.ports.erasure`)."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """The tenant's entries (chunks and staged vectors) that remain."""
        ...
