"""S3 event notifications, as the ingest queue delivers them, turned into pipeline calls.

An SQS message body is an S3 notification (`{"Records": [...]}`) or S3's `s3:TestEvent`, which carries
nothing to do. Keys arrive URL-encoded and must lie under `tenants/{tenant_id}/`: the tenant comes from
the key, never from anything a client wrote into the object. A key outside that layout is refused with
a ValidationError (the caller logs it; it is never indexed). A sidecar `<file>.metadata.json` event
re-ingests the file it describes.

Where an object lands, ownership is checked again: an object that ingestion REFUSES (it was written for
someone who may not modify the registered document) is undone in the store, bringing back the version it
displaced, and logged with the reason. A sidecar not signed for its document's owner is ignored, and
logged.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from citewise.domain.errors import NotFoundError, ValidationError
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Frozen
from citewise.domain.provenance import channel_of
from citewise.domain.tenancy import document_id
from citewise.ingest.pipeline import Ingestor, IngestResult, Outcome
from citewise.ports.blobstore import BlobStore, described_document

logger = logging.getLogger(__name__)
KeyToLocation = Callable[[str], tuple[str, str]]


class S3Event(Frozen):
    """One record of a notification, reduced to what the pipeline needs."""

    kind: Literal["created", "removed"]
    bucket: str
    key: str = Field(description="URL-encoded, as S3 sends it.")


def parse_notification(body: str) -> list[S3Event]:
    """The records of an SQS message body holding an S3 notification; [] for `s3:TestEvent`."""
    try:
        message = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"the message is not JSON: {exc.msg}") from exc
    if not isinstance(message, dict):
        raise ValidationError("the message is not an S3 notification")
    if message.get("Event") == "s3:TestEvent":
        return []
    records = message.get("Records")
    if not isinstance(records, list):
        raise ValidationError("the message is not an S3 notification: no Records")
    try:
        return [_event(record) for record in records]
    except (KeyError, TypeError, PydanticValidationError) as exc:
        raise ValidationError(f"malformed S3 notification record: {exc}") from exc


def _event(record: dict[str, Any]) -> S3Event:
    name = str(record["eventName"])
    # An S3 Lifecycle expiration removes an object (or a version) as a client's delete does; `apply`
    # reconciles with what the bucket holds either way, so it is a removal too.
    if not name.startswith(("ObjectCreated:", "ObjectRemoved:", "LifecycleExpiration:")):
        raise ValidationError(f"unexpected S3 event {name!r}")
    s3 = record["s3"]
    return S3Event(
        kind="created" if name.startswith("ObjectCreated:") else "removed",
        bucket=s3["bucket"]["name"],
        key=s3["object"]["key"],
    )


def apply(event: S3Event, ingestor: Ingestor, blobs: BlobStore, key_to_location: KeyToLocation) -> IngestResult | None:
    """Bring the document at the event's key up to the object's current state; None if nothing changed.

    Every event, created or removed, is reconciled against what the bucket holds now: notifications
    arrive late, twice and out of order, and a removed version may not be the current one (deleting an
    old version of a versioned object leaves the document in place). So an existing object is ingested
    (a no-op for a version already indexed) and a missing one is removed from the index and registry.

    Raises ValidationError for a key outside `tenants/{tenant_id}/` (only for the key: an object that
    cannot be read as a document becomes a FAILED record), and what `Ingestor.ingest` raises.
    """
    tenant_id, key_path = key_to_location(event.key)
    # Metadata of a document changed (or went away): the document itself is what gets re-ingested.
    path = described_document(key_path)
    read_at = ingestor.clock()  # before the read: a delete after it makes this worker's writes stale
    try:
        stored = blobs.get(tenant_id, path)
    except NotFoundError:
        doc_id = document_id(tenant_id, path)
        existing = ingestor.registry.get(tenant_id, doc_id)
        if existing is not None and channel_of(existing) != blobs.channel:
            return None  # a document from elsewhere (a local folder) that this store never held
        ingestor.delete(tenant_id, doc_id)  # chunks go even if the record is already gone
        return IngestResult(Outcome.DELETED, existing) if existing is not None else None
    if stored.refused_sidecar is not None:
        # Undo it if it displaced the document's own sidecar; a sidecar planted first just stays inert.
        restored = blobs.restore_previous(tenant_id, path + SIDECAR_SUFFIX, stored.refused_sidecar.version)
        logger.warning(
            "sidecar ignored: not written for the document's owner",
            extra={"path": path, "sidecar_owner": stored.refused_sidecar.owner, "restored": restored},
        )
        if restored:
            stored = blobs.get(tenant_id, path)
    result = ingestor.ingest(dataclasses.replace(stored, read_at=read_at))
    if result.outcome is Outcome.REFUSED:
        restored = blobs.restore_previous(tenant_id, path, stored.version)
        logger.warning(
            "upload refused",
            extra={"doc_id": result.document.doc_id, "reason": result.reason, "restored": restored},
        )
    return result
