"""What a caller may do with documents: read, delete, and request an upload URL.

The rules, one place for the API and the CLI:
- a document the caller may not read (another tenant's, or another user's private one) is NOT_FOUND,
  exactly like a document that does not exist, so an id reveals nothing;
- a readable document may be deleted, or replaced by an upload to its path, by its owner or by a member
  of the tenant's admin group; others get FORBIDDEN (they can see it, so saying so leaks nothing);
- an upload to a path held by a document the caller cannot read is a CONFLICT: the path is taken, and
  nothing else about that document is told.
"""

from __future__ import annotations

from pydantic import Field

from citewise.blobstore.base import BlobStore, PresignedUpload
from citewise.errors import ConflictError, ForbiddenError, NotFoundError
from citewise.ingestion import Ingestor
from citewise.models import Caller, Document, Frozen, Visibility
from citewise.parsing import check_supported
from citewise.registry.base import DocumentRegistry
from citewise.tenancy import document_id, validate_path

ADMIN_GROUP = "admin"


class UploadRequest(Frozen):
    """A request for a presigned PUT. The tenant and owner come from the caller, never from here."""

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


def readable(caller: Caller, document: Document) -> bool:
    """Shared documents of the caller's tenant, and the caller's own private ones."""
    return document.tenant_id == caller.tenant_id and (
        document.visibility is Visibility.SHARED or document.owner == caller.user_id
    )


def visible_document(registry: DocumentRegistry, caller: Caller, doc_id: str) -> Document:
    """The document if the caller may read it; NotFoundError otherwise, whether or not it exists."""
    document = registry.get(caller.tenant_id, doc_id)
    if document is None or not readable(caller, document):
        raise NotFoundError("no such document", details={"id": doc_id})
    return document


def _check_may_modify(caller: Caller, document: Document) -> None:
    if document.owner != caller.user_id and ADMIN_GROUP not in caller.groups:
        raise ForbiddenError(
            "only the document's owner or a tenant admin may change it", details={"id": document.doc_id}
        )


def delete_document(ingestor: Ingestor, blobs: BlobStore, caller: Caller, doc_id: str) -> Document:
    """Remove the stored object, the chunks and the record; returns what was deleted.

    The object goes first: if the chunk removal then fails, the object's removal event (on AWS) or a retry
    finishes the job, whereas chunks removed first could come back from a re-ingest of the object.
    """
    document = visible_document(ingestor.registry, caller, doc_id)
    _check_may_modify(caller, document)
    blobs.delete(document.tenant_id, document.path)
    ingestor.delete(document.tenant_id, document.doc_id)
    return document


def request_upload(
    registry: DocumentRegistry, blobs: BlobStore, caller: Caller, request: UploadRequest
) -> PresignedUpload:
    """A presigned PUT for `request.filename` in the caller's tenant, owned by the caller."""
    path = validate_path(request.filename)
    check_supported(path, request.content_type)
    existing = registry.get(caller.tenant_id, document_id(caller.tenant_id, path))
    if existing is not None:
        if not readable(caller, existing):
            raise ConflictError("another document already uses this path", details={"path": path})
        _check_may_modify(caller, existing)
    return blobs.presign_put(
        caller.tenant_id,
        path,
        owner=caller.user_id,
        content_type=request.content_type,
        size=request.size,
        visibility=request.visibility,
        metadata=request.metadata,
    )
