"""The DocumentRegistry port: one record per document with its status, version and counts."""

from __future__ import annotations

from typing import Protocol

from citewise.models import Document, DocumentStatus, Frozen


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
        """Create or replace the record of `document.doc_id` in its tenant."""
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
