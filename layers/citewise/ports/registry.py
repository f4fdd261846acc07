"""The DocumentRegistry port: one record per document with its status, version and counts.

Writes are ordered, in every adapter (`refused_write` is the rule, one place for all of them):
- a newer record wins: a write whose `updated_at` is older than the stored record's is refused, so a
  slow worker never overwrites what a later one wrote;
- a terminal status (INDEXED, FAILED) completes a PENDING record of the same version, or repeats itself
  (a retried write): it cannot resurrect a deleted record, nor mark another version's record;
- a delete is a write too: it leaves a `Tombstone` holding the deleted record's ordering key
  (`updated_at`, version) and the delete's own time. A later write is refused unless it is newer than
  both (strictly newer than the delete), so an ingest that started before the delete (its PENDING or
  INDEXED write, or a redelivered older S3 event) cannot bring the document back, while an object
  uploaded again after the delete is recorded and replaces the tombstone. Tombstones are invisible:
  `get` and `list` never return them. They expire after a retention (`TOMBSTONE_RETENTION` by default)
  far longer than a queue keeps a message, so no event old enough to be refused outlives its tombstone;
- a refused write raises `StaleVersionError`, a ConflictError: the stored record moved on, so the
  writer's work is superseded, not failed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import NonNegativeInt

from citewise.domain.errors import ConflictError
from citewise.domain.models import Document, DocumentStatus, Frozen
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.erasure import ERASE_BATCH

TERMINAL = frozenset({DocumentStatus.INDEXED, DocumentStatus.FAILED})
TOMBSTONE_RETENTION = timedelta(days=90)
"""How long a delete's tombstone is kept by default: far beyond SQS's longest retention (14 days)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class StaleVersionError(ConflictError):
    """A registry write lost to a newer one, or completes a record that is no longer pending.

    Not a ValidationError: the write was well-formed, the stored record moved on. A worker that gets
    this should drop its work, not record a failure (the newer writer owns the record now).
    """


class DeletedDocumentError(StaleVersionError):
    """A registry write refused by a delete's tombstone: the document was deleted after the writer read
    it, so its work is moot (and a later upload brings its own event)."""


def microseconds(moment: datetime) -> int:
    """`moment` as integer microseconds since the epoch (naive datetimes are taken as UTC), exactly."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def moment(us: int) -> datetime:
    """The UTC datetime `us` microseconds after the epoch: the inverse of `microseconds`."""
    return _EPOCH + timedelta(microseconds=us)


class Tombstone(Frozen):
    """What a delete leaves in a document's place: the ordering keys a later write must be newer than.

    `version` and `updated_at` are the deleted record's (None when nothing was registered), `deleted_at`
    the delete's own time (the latest of several deletes).
    """

    tenant_id: str
    doc_id: str
    version: str | None = None
    updated_at: datetime | None = None
    deleted_at: datetime


def refused_write(stored: Document | Tombstone | None, document: Document) -> StaleVersionError | None:
    """Why writing `document` over `stored` (a record, a delete's tombstone, or None: nothing) breaks
    the ordering rules, or None."""
    details: dict[str, Any] = {"doc_id": document.doc_id, "version": document.version, "status": document.status.value}
    if isinstance(stored, Tombstone):
        return _refused_by_tombstone(stored, document, details)
    if document.status in TERMINAL and stored is None:
        return StaleVersionError(
            f"no pending record of version {document.version} to mark {document.status.value}",
            details=details | {"reason": "missing"},
        )
    if stored is None:
        return None
    details |= {"stored_version": stored.version, "stored_status": stored.status.value}
    if document.status in TERMINAL and not (
        stored.version == document.version and stored.status in (DocumentStatus.PENDING, document.status)
    ):
        return StaleVersionError(
            f"cannot mark the record {document.status.value}: it is {stored.status.value} for version {stored.version}",
            details=details | {"reason": "transition"},
        )
    if microseconds(stored.updated_at) > microseconds(document.updated_at):
        return StaleVersionError(
            "a newer write of this document is already stored", details=details | {"reason": "stale"}
        )
    return None


def _refused_by_tombstone(
    tombstone: Tombstone, document: Document, details: dict[str, Any]
) -> StaleVersionError | None:
    written = microseconds(document.updated_at)
    stale = written <= microseconds(tombstone.deleted_at) or (
        tombstone.updated_at is not None and written < microseconds(tombstone.updated_at)
    )
    if not stale and document.status not in TERMINAL:
        return None
    return DeletedDocumentError(
        "the document was deleted after this write began",
        details=details
        | {"reason": "deleted", "deleted_version": tombstone.version, "deleted_at": tombstone.deleted_at.isoformat()},
    )


class DocumentPage(Frozen):
    """One page of a listing; pass `next_cursor` back to get the next page (None on the last)."""

    items: list[Document]
    next_cursor: str | None = None


class TenantSummary(Frozen):
    """A tenant as the registry knows it (what the operator's listing shows of each)."""

    tenant_id: str


class TenantPage(Frozen):
    """One page of the tenants, by id; pass `next_cursor` back to get the next page (None on the last)."""

    items: list[TenantSummary]
    next_cursor: str | None = None


class StoredTotals(Frozen):
    """What a tenant stores now: its records (any status), their chunks, and the bytes of their originals.

    Every record counts, PENDING and FAILED included: its object is stored either way (a FAILED document
    keeps its object). A record's chunks are its `chunk_count` (0 until its version is INDEXED) and its
    bytes its `size_bytes`; a delete's tombstone counts nothing."""

    documents: NonNegativeInt = 0
    chunks: NonNegativeInt = 0
    bytes: NonNegativeInt = 0


def contribution(document: Document | None) -> StoredTotals:
    """What one record adds to its tenant's `StoredTotals` (nothing for no record)."""
    if document is None:
        return StoredTotals()
    return StoredTotals(documents=1, chunks=document.chunk_count, bytes=document.size_bytes or 0)


class DocumentRegistry(Protocol):
    """Where each document is in its lifecycle: PENDING -> INDEXED or FAILED (with the reason)."""

    def get(self, tenant_id: str, doc_id: str) -> Document | None:
        """The record, or None. Access checks are the caller's job: the pipeline sees every record."""
        ...

    def put(self, document: Document) -> None:
        """Create or replace the record of `document.doc_id` in its tenant, atomically checked against
        the stored one by the ordering rules (module docstring); StaleVersionError if they refuse it."""
        ...

    def delete(self, tenant_id: str, doc_id: str, *, deleted_at: datetime) -> None:
        """Remove the record, if any, leaving a tombstone stamped `deleted_at` (the deleter's clock), so
        no write that began before the delete can recreate it (module docstring). Deleting again, or
        deleting a document never registered, is fine: the tombstone keeps the latest delete's time."""
        ...

    def list(
        self,
        tenant_id: str,
        *,
        visible_to: str | None = None,
        status: DocumentStatus | None = None,
        source: str | None = None,
        path_prefix: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> DocumentPage:
        """Records of a tenant ordered by path; `visible_to` keeps shared ones and that user's own.

        The filters are ANDed. `status` and `source` match exactly (`source` is `Document.source`, e.g.
        `local` or `s3`; None lists every source), `path_prefix` matches path prefixes. Pass the same
        filters with a page's `cursor` to get the next one.
        """
        ...

    def list_tenants(self, *, limit: int = 100, cursor: str | None = None) -> TenantPage:
        """Every tenant that has ever registered a document, ordered by id: a tenant is known from its first
        PENDING record on, and stays listed after its documents are deleted (erasing a tenant is what
        removes it). For the platform operator only: no tenant's request may reach it."""
        ...

    # --- the tenant's settings document (ranking signals, routing vocabulary) ----------------------

    def tenant_settings(self, tenant_id: str) -> TenantSettings | None:
        """The tenant's settings document, or None if it never saved one. Never a document record: the
        settings live beside the records, and no listing returns them."""
        ...

    def put_tenant_settings(self, tenant_id: str, settings: TenantSettings) -> None:
        """Store the tenant's settings document, replacing the previous one (last write wins)."""
        ...

    # --- erasing a tenant (`citewise.ports.erasure`) -------------------------------------------------

    def has_tenant(self, tenant_id: str) -> bool:
        """Whether the tenants' catalogue lists the tenant (what `list_tenants` would show): one point read."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's items: records, tombstones, the settings document and,
        once nothing else is left, its catalogue entry (so the tenant stays listed until the end). Never
        its usage counters, which `UsageMeter` owns. How many were deleted; 0 only when none was left."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """The tenant's records, tombstones, settings document and catalogue entry that remain."""
        ...

    # --- the tenant's stored totals and the operator's quota overrides ------------------------------

    def stored_totals(self, tenant_id: str) -> StoredTotals:
        """What the tenant stores now (`StoredTotals`): exact under concurrent writers of its records, and
        current as soon as a `put` or `delete` returns."""
        ...

    def tenant_quotas(self, tenant_id: str) -> QuotaOverrides | None:
        """The operator's quota overrides of the tenant, or None if it set none."""
        ...

    def put_tenant_quotas(self, tenant_id: str, overrides: QuotaOverrides) -> None:
        """Store the tenant's quota overrides, replacing the previous ones (last write wins)."""
        ...
