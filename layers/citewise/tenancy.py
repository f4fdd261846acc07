"""Tenant ids, document keys and document ids: the identifiers isolation depends on.

Everything that becomes part of a storage key or an index filter passes through here first, so a
tenant id with `/` or `*`, or a key with `..`, is refused before it can reach S3, SQLite or OpenSearch.
"""

from __future__ import annotations

import hashlib
import re

from citewise.errors import ValidationError
from citewise.models import TENANT_ID_PATTERN

_TENANT_RE = re.compile(TENANT_ID_PATTERN)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# S3 keys and DynamoDB sort keys are limited to 1,024 UTF-8 bytes; `tenants/{64-char tenant}/` takes 73.
MAX_PATH_BYTES = 950


def validate_tenant_id(tenant_id: str) -> str:
    """Return `tenant_id` if it is 1-64 letters, digits, `_`, `-` or `.` starting alphanumerically."""
    if not _TENANT_RE.fullmatch(tenant_id):
        raise ValidationError(
            "tenant id must be 1-64 characters of letters, digits, '_', '-' or '.', starting with a letter or digit",
            details={"field": "tenant_id"},
        )
    return tenant_id


def validate_path(path: str) -> str:
    """Return a document path (relative, `/`-separated) or refuse one that could escape its prefix."""
    problem = _path_problem(path)
    if problem:
        raise ValidationError(f"invalid document path: {problem}", details={"field": "path"})
    return path


def _path_problem(path: str) -> str | None:
    if not path:
        return "it is empty"
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes of UTF-8"
    if _CONTROL_RE.search(path):
        return "it contains control characters"
    if path.startswith("/") or "\\" in path:
        return "it must be relative and use '/' separators"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "it must not contain empty, '.' or '..' segments"
    return None


def document_id(tenant_id: str, path: str) -> str:
    """A stable id for the document at `path`: re-ingesting the same path updates the same document."""
    return hashlib.sha256(f"{tenant_id}\x00{path}".encode()).hexdigest()[:32]
