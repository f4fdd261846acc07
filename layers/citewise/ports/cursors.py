"""Opaque paging cursors shared by both registries: where a listing resumes, bound to its tenant.

A cursor is base64url JSON of the last document's tenant, path and id (of a listing of tenants, the
operator's: of the last tenant id). Decoding refuses anything this
module did not issue for this tenant and path prefix, so a cursor can never move a listing into another
tenant, and both registries answer a forged or stale cursor the same way: VALIDATION_ERROR.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, NamedTuple

from citewise.domain.errors import ValidationError
from citewise.domain.models import TENANT_ID_PATTERN, Document

MAX_CURSOR_CHARS = 8192  # a 1024-byte path, base64-encoded, with room to spare
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
"""A cursor is base64url without padding; its content is opaque (and a document cursor tenant-bound)."""


class Position(NamedTuple):
    """The (path, doc_id) a listing resumes after, in path order."""

    path: str
    doc_id: str


def encode(last: Document) -> str:
    """A cursor resuming after `last`."""
    return _pack({"t": last.tenant_id, "p": last.path, "d": last.doc_id})


def decode(cursor: str, tenant_id: str, path_prefix: str | None) -> Position:
    """The position of a cursor, or ValidationError if it was not issued for this tenant and prefix."""
    try:
        payload = _unpack(cursor)
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


def encode_tenant(last_tenant_id: str) -> str:
    """A cursor of the tenants' listing resuming after `last_tenant_id`."""
    return _pack({"a": last_tenant_id})


def decode_tenant(cursor: str) -> str:
    """The tenant id a cursor of `encode_tenant` resumes after, or ValidationError."""
    try:
        payload = _unpack(cursor)
        tenant_id = payload["a"] if isinstance(payload, dict) and set(payload) == {"a"} else None
        if not isinstance(tenant_id, str) or not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
            raise ValueError("not a tenant cursor")
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as exc:
        raise ValidationError("invalid cursor", details={"field": "cursor"}) from exc
    return tenant_id


def encode_audit(tenant_id: str | None, position: str) -> str:
    """A cursor of an audit trail's reading (`citewise.ports.audit`) resuming at the adapter's `position`
    (a file offset, a CloudWatch Logs token), bound to the tenant read (None: every tenant)."""
    return _pack({"u": tenant_id or "", "q": position})


def decode_audit(cursor: str, tenant_id: str | None) -> str:
    """The adapter's position in a cursor of `encode_audit`, or ValidationError if it was not issued for
    this tenant: a cursor never moves an export into another tenant's trail."""
    try:
        payload = _unpack(cursor)
        if not isinstance(payload, dict) or set(payload) != {"u", "q"}:
            raise ValueError("not an audit cursor")
        tenant, position = payload["u"], payload["q"]
        if not isinstance(tenant, str) or not isinstance(position, str) or not position:
            raise ValueError("unexpected values")
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as exc:
        raise ValidationError("invalid cursor", details={"field": "cursor"}) from exc
    if tenant != (tenant_id or ""):
        raise ValidationError("invalid cursor", details={"field": "cursor"})
    return position


def _pack(payload: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def _unpack(cursor: str) -> Any:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise ValueError("too long")
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))


def encode_conversation(tenant_id: str, user_id: str, last_conversation_id: str) -> str:
    """A cursor of a user's conversations (`citewise.ports.conversations`) resuming after the given one."""
    return _pack({"t": tenant_id, "u": user_id, "c": last_conversation_id})


def decode_conversation(cursor: str, tenant_id: str, user_id: str) -> str:
    """The conversation id a cursor of `encode_conversation` resumes after, or ValidationError if it was not
    issued for this user of this tenant: a cursor never moves a listing to another owner's conversations."""
    try:
        payload = _unpack(cursor)
        if not isinstance(payload, dict) or set(payload) != {"t", "u", "c"}:
            raise ValueError("not a conversation cursor")
        if not all(isinstance(value, str) and value for value in payload.values()):
            raise ValueError("unexpected values")
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as exc:
        raise ValidationError("invalid cursor", details={"field": "cursor"}) from exc
    if (payload["t"], payload["u"]) != (tenant_id, user_id):
        raise ValidationError("invalid cursor", details={"field": "cursor"})
    return str(payload["c"])
