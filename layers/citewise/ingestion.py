"""The ingestion pipeline: object -> registry PENDING -> parse -> chunk -> embed -> index -> INDEXED.

Idempotent on (tenant, path, version): the same version with the same access metadata is skipped
without being parsed. A changed document is re-chunked, but only chunks whose embedded text is new are
embedded; the rest reuse their stored vectors. The index swaps a document's chunks in one atomic step,
so no stale chunk survives an update and a crash never leaves half a document.

Failures are recorded, never lost: a document that cannot be indexed is FAILED in the registry with a
reason and none of its chunks stay searchable. Permanent problems (bad input) are returned as FAILED
results; transient ones (a throttled or failing backend) are recorded and then re-raised, so a queue
can retry the message.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from citewise.chunking import Chunker, embedding_text
from citewise.embeddings.base import Embedder
from citewise.errors import CitewiseError, ConflictError, PayloadTooLargeError, ValidationError
from citewise.index.base import VectorIndex
from citewise.models import (
    AttributeValue,
    Chunk,
    Document,
    DocumentMetadata,
    DocumentStatus,
    Vector,
    Visibility,
)
from citewise.parsing import parse
from citewise.registry.base import DocumentRegistry
from citewise.tenancy import document_id, validate_path, validate_tenant_id

logger = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What one ingest call did, as counted in the CLI's summary."""

    NEW = "new"
    MODIFIED = "modified"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    DELETED = "deleted"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class SourceObject:
    """A document to ingest. `load` is called only when the content is needed (not for unchanged ones)."""

    tenant_id: str
    path: str
    size: int
    version: str
    load: Callable[[], bytes]
    source: str = "local"
    owner: str = "system"
    visibility: Visibility = Visibility.SHARED
    content_type: str | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class IngestResult:
    """The outcome and the registry record after it; `embedded`/`reused` count vectors."""

    outcome: Outcome
    document: Document
    embedded: int = 0
    reused: int = 0


@dataclass(frozen=True)
class Limits:
    """Input limits that turn oversized documents into clear FAILED records instead of exhaustion."""

    max_document_bytes: int = 50 * 1024 * 1024
    max_pages: int = 2000


class Ingestor:
    """Runs the pipeline for one object at a time against injected ports."""

    def __init__(
        self,
        index: VectorIndex,
        registry: DocumentRegistry,
        embedder: Embedder,
        chunker: Chunker,
        *,
        limits: Limits | None = None,
        embed_batch_size: int = 64,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.index = index
        self.registry = registry
        self.embedder = embedder
        self.chunker = chunker
        self.limits = limits or Limits()
        self.embed_batch_size = embed_batch_size
        self.clock = clock
        self._index_ready = False

    def ingest(self, obj: SourceObject) -> IngestResult:
        """Bring the index and registry up to date with `obj`; raises only for invalid ids/paths."""
        validate_tenant_id(obj.tenant_id)
        validate_path(obj.path)
        self.ensure_index()
        doc_id = document_id(obj.tenant_id, obj.path)
        previous = self.registry.get(obj.tenant_id, doc_id)
        if previous is not None and _unchanged(previous, obj):
            return IngestResult(Outcome.UNCHANGED, previous)
        now = self.clock()
        pending = Document(
            tenant_id=obj.tenant_id,
            doc_id=doc_id,
            path=obj.path,
            source=obj.source,
            title=previous.title if previous else None,
            owner=obj.owner,
            visibility=obj.visibility,
            status=DocumentStatus.PENDING,
            version=obj.version,
            tags=_tags(obj.attributes),
            attributes=obj.attributes,
            created_at=previous.created_at if previous else now,
            updated_at=now,
        )
        self.registry.put(pending)
        try:
            indexed, embedded, reused = self._index(obj, pending)
        except ConflictError:
            # A newer version owns the record now: leave its chunks and its status alone.
            latest = self.registry.get(obj.tenant_id, doc_id)
            return IngestResult(Outcome.SUPERSEDED, latest or pending)
        except CitewiseError as exc:
            failed = self._fail(pending, f"{exc.code}: {exc.message}")
            if isinstance(exc, ValidationError | PayloadTooLargeError):
                return IngestResult(Outcome.FAILED, failed)
            raise
        except Exception as exc:
            logger.exception("unexpected failure ingesting %s", doc_id)
            return IngestResult(Outcome.FAILED, self._fail(pending, f"INTERNAL_ERROR: {type(exc).__name__}"))
        outcome = Outcome.NEW if previous is None else Outcome.MODIFIED
        return IngestResult(outcome, indexed, embedded, reused)

    def delete(self, tenant_id: str, doc_id: str) -> bool:
        """Remove the document's chunks and record; False if it was not registered."""
        existed = self.registry.get(tenant_id, doc_id) is not None
        self.index.delete_document(tenant_id, doc_id)
        self.registry.delete(tenant_id, doc_id)
        return existed

    def ensure_index(self) -> None:
        """Create the index for this embedder (or check it matches), once per process, on first use.

        Not at construction: building the pipeline stays free of network calls at a Lambda's cold start.
        """
        if not self._index_ready:
            self.index.ensure(self.embedder.name, self.embedder.dimension)
            self._index_ready = True

    def _index(self, obj: SourceObject, pending: Document) -> tuple[Document, int, int]:
        if obj.size > self.limits.max_document_bytes:
            raise PayloadTooLargeError(
                f"document is {obj.size} bytes; the limit is {self.limits.max_document_bytes}",
                details={"size": obj.size, "limit": self.limits.max_document_bytes},
            )
        data = obj.load()
        parsed = parse(data, obj.path, obj.content_type, max_pages=self.limits.max_pages)
        title = parsed.title or obj.path.rsplit("/", 1)[-1]
        metadata = DocumentMetadata(
            tenant_id=obj.tenant_id,
            doc_id=pending.doc_id,
            owner=obj.owner,
            visibility=obj.visibility,
            source=obj.source,
            path=obj.path,
            title=title,
            tags=pending.tags,
            created_at=pending.created_at,
            updated_at=pending.updated_at,
            attributes=obj.attributes,
        )
        chunks = self.chunker.split(parsed, metadata)
        vectors, embedded = self._vectors(obj.tenant_id, chunks)
        self.index.replace_document(obj.tenant_id, pending.doc_id, chunks, vectors)
        indexed = pending.model_copy(
            update={
                "status": DocumentStatus.INDEXED,
                "title": title,
                "content_hash": hashlib.sha256(data).hexdigest(),
                "chunk_count": len(chunks),
                "page_count": parsed.page_count,
                "error": None,
            }
        )
        self.registry.put(indexed)
        return indexed, embedded, len(chunks) - embedded

    def _vectors(self, tenant_id: str, chunks: list[Chunk]) -> tuple[list[Vector], int]:
        """One vector per chunk, embedding only the texts whose hash has no stored vector."""
        known = self.index.vectors_by_hash(tenant_id, {c.content_hash for c in chunks})
        missing: dict[str, str] = {}
        for chunk in chunks:
            if chunk.content_hash not in known:
                missing[chunk.content_hash] = embedding_text(chunk.document.title, chunk.heading_path, chunk.text)
        hashes = list(missing)
        for start in range(0, len(hashes), self.embed_batch_size):
            batch = hashes[start : start + self.embed_batch_size]
            known.update(zip(batch, self.embedder.embed_documents([missing[h] for h in batch]), strict=True))
        return [known[c.content_hash] for c in chunks], len(missing)

    def _fail(self, pending: Document, reason: str) -> Document:
        """Record the failure and make sure none of the document's old chunks stay searchable."""
        self.index.delete_document(pending.tenant_id, pending.doc_id)
        failed = pending.model_copy(update={"status": DocumentStatus.FAILED, "error": reason, "chunk_count": 0})
        self.registry.put(failed)
        return failed


def _unchanged(previous: Document, obj: SourceObject) -> bool:
    return (
        previous.status is DocumentStatus.INDEXED
        and previous.version == obj.version
        and previous.owner == obj.owner
        and previous.visibility == obj.visibility
        and previous.attributes == obj.attributes
        and previous.source == obj.source
    )


def _tags(attributes: dict[str, AttributeValue]) -> tuple[str, ...]:
    tags = attributes.get("tags", [])
    return tuple(tags) if isinstance(tags, list) else (str(tags),)
