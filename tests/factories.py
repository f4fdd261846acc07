"""Factories for test data: in-memory source objects and an embedder that counts its work."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import AttributeValue, Chunk, DocumentMetadata, SearchHit, Vector, Visibility
from citewise.domain.objects import SourceObject


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting every text it is asked to embed."""

    def __init__(self, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.embedded_texts = 0
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.calls += 1
        self.embedded_texts += len(texts)
        return super().embed_documents(texts)


def source(
    tenant_id: str,
    path: str,
    data: bytes,
    *,
    owner: str = "alice",
    visibility: Visibility = Visibility.SHARED,
    version: str | None = None,
    attributes: dict[str, AttributeValue] | None = None,
) -> SourceObject:
    """A SourceObject over in-memory bytes; the version defaults to the content itself."""
    return SourceObject(
        tenant_id=tenant_id,
        path=path,
        size=len(data),
        version=version or hashlib.sha256(data).hexdigest(),
        load=lambda: data,
        owner=owner,
        visibility=visibility,
        attributes=dict(attributes or {}),
    )


def hit(
    number: int, text: str, *, page: int | None = None, heading: tuple[str, ...] = (), relevance: float = 0.5
) -> SearchHit:
    """A search hit on document `d<number>` (path `docs/<number>.md`) whose one chunk is `text`, of calibrated
    relevance `relevance` (by default a middling one: retrieval found it, and it may or may not answer)."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id=f"d{number}",
        owner="alice",
        source="test",
        path=f"docs/{number}.md",
        title=f"Doc {number}",
        created_at=now,
        updated_at=now,
    )
    chunk = Chunk(
        chunk_id=f"d{number}-00000",
        ordinal=0,
        text=text,
        start=0,
        end=len(text),
        heading_path=heading,
        page=page,
        content_hash="h",
        document=document,
    )
    return SearchHit(chunk=chunk, score=1.0 / number, relevance_score=relevance)
