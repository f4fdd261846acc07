"""What a caller may do with documents: read (the record, the original, the parsed text), delete, and
request an upload URL.

The rules (`citewise.domain.access`), applied here for the API and the CLI:
- a document the caller may not read (another tenant's, or another user's private one) is NOT_FOUND,
  exactly like a document that does not exist, so an id reveals nothing;
- a readable document may be deleted, or replaced by an upload to its path, by its owner or by a member
  of the tenant's admin group; others get FORBIDDEN (they can see it, so saying so leaks nothing);
- an upload to a path held by a document the caller cannot read is a CONFLICT: the path is taken, and
  nothing else about that document is told. A document counts from the moment its object is stored,
  before ingestion has registered it;
- a sidecar `<path>.metadata.json` is part of its document: writing it is modifying that document. For a
  document that does not exist yet, the first user to upload its sidecar holds it, and the sidecar then
  applies only to a document of that same owner;
- the URL is signed for the owner of the document it writes (a tenant admin's replacement keeps the
  owner), and conditionally: it cannot displace anything written to the path after it was issued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ConfigDict, Field

from citewise.domain.access import Owned, may_modify, may_read, require_write
from citewise.domain.errors import ConflictError, ForbiddenError, NotFoundError
from citewise.domain.models import Caller, Document, Frozen, Visibility
from citewise.domain.tenancy import document_id, validate_path
from citewise.ports.blobstore import (
    BlobStore,
    PresignedDownload,
    PresignedUpload,
    changed_since_indexed,
    described_document,
    is_sidecar,
)
from citewise.ports.quotas import UNLIMITED, QuotaGate
from citewise.ports.registry import DocumentRegistry

if TYPE_CHECKING:
    # The pipeline and the parsers are loaded by the functions that delete or upload (the documents
    # function, the CLI), not by a reader of documents: the MCP function's init skips them.
    from citewise.ingest.layout import DocumentText
    from citewise.ingest.pipeline import Ingestor


class UploadRequest(Frozen):
    """A request for a presigned PUT. The tenant and owner come from the caller, never from here."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"filename": "handbook/onboarding.md", "content_type": "text/markdown", "size": 2048, "metadata": {}}
            ]
        },
    )

    filename: str = Field(
        min_length=1,
        max_length=950,
        description="The document's path in the tenant, e.g. `reports/q1.pdf`; its extension picks the parser.",
    )
    content_type: str = Field(min_length=3, max_length=255, description="Sent as Content-Type with the PUT.")
    size: int = Field(ge=1, description="The exact byte length of the file: the PUT must send exactly this.")
    visibility: Visibility = Field(default=Visibility.SHARED, description="`private`: only you can read it.")
    metadata: dict[str, str] = Field(
        default_factory=dict, description="String attributes for filters (S3 user metadata, 2 KB in all)."
    )


def visible_document(registry: DocumentRegistry, caller: Caller, doc_id: str) -> Document:
    """The document if the caller may read it; NotFoundError otherwise, whether or not it exists."""
    document = registry.get(caller.tenant_id, doc_id)
    if document is None or not may_read(caller, document):
        raise NotFoundError("no such document", details={"id": doc_id})
    return document


def _check_may_modify(caller: Caller, document: Owned, doc_id: str) -> None:
    if not may_read(caller, document):
        raise ConflictError("another document already uses this path", details={"id": doc_id})
    if not may_modify(caller, document):
        raise ForbiddenError("only the document's owner or a tenant admin may change it", details={"id": doc_id})


def document_download(registry: DocumentRegistry, blobs: BlobStore, caller: Caller, doc_id: str) -> PresignedDownload:
    """A short-lived URL of the original the caller may read, at the version its record describes (the
    one indexed, once INDEXED): NotFoundError as `visible_document`, or when the file is gone;
    ConflictError when the file changed since (its new version is being ingested)."""
    document = visible_document(registry, caller, doc_id)
    return blobs.presign_get(caller.tenant_id, document.path, version=document.version)


def readable_text(
    ingestor: Ingestor, blobs: BlobStore, caller: Caller, doc_id: str, offset: int, limit: int
) -> DocumentText:
    """A window of the parsed text of a document the caller may read, with the spans its citations point
    into (`citewise.ingest.layout`); the errors of `document_download`, and ConflictError before INDEXED."""
    from citewise.ingest.layout import document_text

    document = visible_document(ingestor.registry, caller, doc_id)
    stored = blobs.get(caller.tenant_id, document.path)
    if stored.version != document.version:
        raise changed_since_indexed(document.path)
    return document_text(ingestor, stored, document, offset, limit)


def delete_document(ingestor: Ingestor, blobs: BlobStore, caller: Caller, doc_id: str) -> Document:
    """Remove the stored object, the chunks and the record; returns what was deleted.

    The object goes first: if the chunk removal then fails, the object's removal event (on AWS) or a retry
    finishes the job, whereas chunks removed first could come back from a re-ingest of the object.
    """
    require_write(caller)
    document = visible_document(ingestor.registry, caller, doc_id)
    _check_may_modify(caller, document, doc_id)
    blobs.delete(document.tenant_id, document.path)
    ingestor.delete(document.tenant_id, document.doc_id)
    return document


def request_upload(
    registry: DocumentRegistry,
    blobs: BlobStore,
    caller: Caller,
    request: UploadRequest,
    *,
    quotas: QuotaGate = UNLIMITED,
) -> PresignedUpload:
    """A presigned PUT for `request.filename` (a document, or a document's sidecar) in the caller's tenant.

    ConflictError if the path holds a document the caller cannot read (or, for a sidecar of a document
    not stored yet, another user's sidecar); ForbiddenError if it holds one the caller may not modify, or
    if the caller is a read-only credential; QuotaExceededError if the document would take the tenant over
    its documents or bytes quota (the size is declared, what it replaces is known), or the day's pages are
    spent. A sidecar is metadata, not a document: no quota applies to it.
    """
    require_write(caller)
    path = validate_path(request.filename)
    document_path = described_document(path)
    if not is_sidecar(path):
        from citewise.ingest.parsing import check_supported  # see TYPE_CHECKING above

        check_supported(path, request.content_type)
    doc_id = document_id(caller.tenant_id, document_path)
    stored = blobs.head(caller.tenant_id, document_path)
    # The document as registered or, not ingested yet, as stored: either way it has an owner already.
    registered = registry.get(caller.tenant_id, doc_id)
    document: Owned | None = registered or stored
    target = blobs.head(caller.tenant_id, path) if is_sidecar(path) else stored
    if document is None and target is not None and target.owner != caller.user_id:
        raise ConflictError("another user's metadata file is waiting for this document", details={"path": path})
    if document is not None:
        _check_may_modify(caller, document, doc_id)
    if not is_sidecar(path):
        quotas.check_storage(caller.tenant_id, registered, request.size)
        quotas.check_pages(caller.tenant_id, 0)
    return blobs.presign_put(
        caller.tenant_id,
        path,
        owner=document.owner if document is not None else caller.user_id,
        content_type=request.content_type,
        size=request.size,
        replaces=target.etag if target is not None else None,
        visibility=request.visibility,
        metadata=request.metadata,
    )
