"""Re-queue a tenant's quota-refused documents: nothing a quota refused is lost.

A document refused at ingest by a storage or page quota is recorded FAILED with an error starting
`QUOTA_EXCEEDED:` and its object stays stored. Once the operator raised the quota (or the tenant made
room), `requeue_refused` sends each such document back to ingestion (`citewise.ports.requeue`): on AWS
to the ingest queue, locally straight to the pipeline (`DirectIngestQueue`). The ingest checks the quotas
again, so a document that still does not fit is refused again, its object still kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote_plus

from citewise.domain.models import Document, DocumentStatus, Frozen
from citewise.domain.quotas import QuotaExceededError
from citewise.ports.blobstore import BlobStore, key_to_location, object_key
from citewise.ports.registry import DocumentRegistry
from citewise.ports.requeue import IngestQueue

if TYPE_CHECKING:  # the documents function loads this module, and never the pipeline (its cold start)
    from citewise.ingest.pipeline import Ingestor

QUOTA_REFUSED = f"{QuotaExceededError.code}:"
"""How the error of a quota-refused record starts (the pipeline records `CODE: message`)."""


class RequeueReport(Frozen):
    """What a re-queue sent back to ingestion."""

    tenant_id: str
    requeued: int
    paths: list[str]


def quota_refused(registry: DocumentRegistry, tenant_id: str) -> Iterator[Document]:
    """The tenant's documents recorded FAILED by a quota, in path order."""
    cursor = None
    while True:
        page = registry.list(tenant_id, status=DocumentStatus.FAILED, limit=1000, cursor=cursor)
        yield from (document for document in page.items if (document.error or "").startswith(QUOTA_REFUSED))
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def requeue_refused(registry: DocumentRegistry, queue: IngestQueue, tenant_id: str) -> RequeueReport:
    """Send every quota-refused document of the tenant back to ingestion."""
    paths = []
    for document in quota_refused(registry, tenant_id):
        queue.requeue(tenant_id, document.path)
        paths.append(document.path)
    return RequeueReport(tenant_id=tenant_id, requeued=len(paths), paths=paths)


class DirectIngestQueue:
    """An `IngestQueue` that ingests at once, as the ingest function would take the object's notification
    (the local backend, where the pipeline runs in the same process)."""

    def __init__(self, ingestor: Ingestor, blobs: BlobStore) -> None:
        self._ingestor = ingestor
        self._blobs = blobs

    def requeue(self, tenant_id: str, path: str) -> None:
        # Here, not at the top: the documents function loads this module for the operator's route and never
        # runs the pipeline there (on AWS the re-queue is a message), so its cold start does not load it.
        from citewise.ingest.s3events import S3Event, apply

        event = S3Event(kind="created", bucket="local", key=quote_plus(object_key(tenant_id, path), safe="/"))
        apply(event, self._ingestor, self._blobs, key_to_location)
