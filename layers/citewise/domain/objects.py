"""The document object: what a blob store reads and what the ingestion pipeline takes, one model for both.

It comes from a bucket (`citewise.ports.blobstore`), a folder (`citewise_local.folders`) or a test; the
pipeline needs only the first fields, the stores fill in the rest. Its bytes are loaded on demand, so an
unchanged version is never read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from citewise.domain.errors import CitewiseError
from citewise.domain.models import AttributeValue, Visibility

DEFAULT_OWNER = "system"
"""The owner of an object written without owner metadata (by an S3 client that is not citewise)."""


@dataclass(frozen=True)
class RefusedSidecar:
    """A sidecar that was not applied: whom it was signed for, and its version (to undo it)."""

    owner: str
    version: str


@dataclass(frozen=True)
class SourceObject:
    """A document's facts from one metadata read, and its bytes on demand (`load`).

    `version` is what the registry records: the S3 VersionId (ETag on unversioned buckets) or the SHA-256
    of a local file; `etag` is what a conditional write compares (S3's ETag, the same SHA-256 locally;
    None for a folder's file). `metadata` is the user metadata as stored; `attributes` the validated
    document attributes from it and the sidecar. `defect` is why the object cannot be a document (over a
    size limit, invalid metadata or sidecar): the pipeline records it FAILED under the object's own owner.
    `refused_sidecar` is a sidecar ignored for not being signed for the document's owner. `channel` is how
    the object arrived (`citewise.domain.provenance`); `last_modified` the store's time of the object,
    the last resort for the document's `source_date`. `read_at` is when a caller with a clock (the S3
    event handler) read these facts: the registry orders the document's writes by it, so a worker that
    read the object before a delete cannot record it after.
    """

    tenant_id: str
    path: str
    size: int
    version: str
    load: Callable[[], bytes]
    last_modified: datetime | None = None
    channel: str = "local"
    owner: str = DEFAULT_OWNER
    visibility: Visibility = Visibility.SHARED
    content_type: str | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    defect: CitewiseError | None = None
    etag: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    refused_sidecar: RefusedSidecar | None = None
    read_at: datetime | None = None
