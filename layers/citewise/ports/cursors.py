"""Opaque paging cursors shared by both registries: where a listing resumes, bound to its tenant.

A cursor is base64url JSON of the last document's tenant, path and id. Decoding refuses anything this
module did not issue for this tenant and path prefix, so a cursor can never move a listing into another
tenant, and both registries answer a forged or stale cursor the same way: VALIDATION_ERROR.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import NamedTuple

from citewise.domain.errors import ValidationError
from citewise.domain.models import Document

MAX_CURSOR_CHARS = 8192  # a 1024-byte path, base64-encoded, with room to spare


class Position(NamedTuple):
    """The (path, doc_id) a listing resumes after, in path order."""

    path: str
    doc_id: str


def encode(last: Document) -> str:
    """A cursor resuming after `last`."""
    payload = json.dumps({"t": last.tenant_id, "p": last.path, "d": last.doc_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode(cursor: str, tenant_id: str, path_prefix: str | None) -> Position:
    """The position of a cursor, or ValidationError if it was not issued for this tenant and prefix."""
    try:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError("too long")
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(payload, dict) or set(payload) != {"t", "p", "d"}:
            raise ValueError("unexpected shape")
        tenant, path, doc_id = payload["t"], payload["p"], payload["d"]
        if not all(isinstance(value, str) and value for value in (tenant, path, doc_id)):
            raise ValueError("unexpected values")
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as exc:
        raise ValidationError("invalid cursor", details={"field": "cursor"}) from exc
    if tenant != tenant_id or (path_prefix and not path.startswith(path_prefix)):
        raise ValidationError("invalid cursor", details={"field": "cursor"})
    return Position(path, doc_id)
