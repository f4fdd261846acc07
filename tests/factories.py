"""Factories for test data: in-memory source objects and an embedder that counts its work."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from citewise.embeddings.hashing import HashingEmbedder
from citewise.ingestion import SourceObject
from citewise.models import AttributeValue, Vector, Visibility


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
