"""The DocumentRegistry port: one record per document with its status, version and counts.

Writes are ordered, in every adapter (`refused_write` is the rule, one place for all of them):
- a newer record wins: a write whose `updated_at` is older than the stored record's is refused, so a
  slow worker never overwrites what a later one wrote;
- a terminal status (INDEXED, FAILED) completes a PENDING record of the same version, or repeats itself
  (a retried write): it cannot resurrect a deleted record, nor mark another version's record;
- a refused write raises `StaleVersionError`, a ConflictError: the stored record moved on, so the
  writer's work is superseded, not failed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from citewise.domain.errors import ConflictError
from citewise.domain.models import Document, DocumentStatus, Frozen
from citewise.domain.tenant_settings import TenantSettings

TERMINAL = frozenset({DocumentStatus.INDEXED, DocumentStatus.FAILED})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class StaleVersionError(ConflictError):
    """A registry write lost to a newer one, or completes a record that is no longer pending.

    Not a ValidationError: the write was well-formed, the stored record moved on. A worker that gets
    this should drop its work, not record a failure (the newer writer owns the record now).
    """


def microseconds(moment: datetime) -> int:
    """`moment` as integer microseconds since the epoch (naive datetimes are taken as UTC), exactly."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def refused_write(stored: Document | None, document: Document) -> StaleVersionError | None:
    """Why writing `document` over `stored` (None: no record) breaks the ordering rules, or None."""
    details: dict[str, Any] = {"doc_id": document.doc_id, "version": document.version, "status": document.status.value}
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


class DocumentPage(Frozen):
    """One page of a listing; pass `next_cursor` back to get the next page (None on the last)."""

    items: list[Document]
    next_cursor: str | None = None


class DocumentRegistry(Protocol):
    """Where each document is in its lifecycle: PENDING -> INDEXED or FAILED (with the reason)."""

    def get(self, tenant_id: str, doc_id: str) -> Document | None:
        """The record, or None. Access checks are the caller's job: the pipeline sees every record."""
        ...

    def put(self, document: Document) -> None:
        """Create or replace the record of `document.doc_id` in its tenant, atomically checked against
        the stored one by the ordering rules (module docstring); StaleVersionError if they refuse it."""
        ...

    def delete(self, tenant_id: str, doc_id: str) -> None:
        """Remove the record, if any."""
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

    # --- the tenant's settings document (ranking signals, routing vocabulary) ----------------------

    def tenant_settings(self, tenant_id: str) -> TenantSettings | None:
        """The tenant's settings document, or None if it never saved one. Never a document record: the
        settings live beside the records, and no listing returns them."""
        ...

    def put_tenant_settings(self, tenant_id: str, settings: TenantSettings) -> None:
        """Store the tenant's settings document, replacing the previous one (last write wins)."""
        ...
