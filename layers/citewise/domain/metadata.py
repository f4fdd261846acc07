"""Per-document metadata from a sidecar `<file>.metadata.json`, the Bedrock Knowledge Bases convention.

`{"metadataAttributes": {"team": "platform", "year": 2026, "tags": ["design"]}}`: values are strings,
numbers, booleans or lists of strings. A `tags` list becomes the document's tags; `source` and
`updated_at` (the keys are settings) become the document's source and source date
(`citewise.domain.provenance`). Keys the system owns (tenant, owner, visibility, path, channel...) are
refused so a sidecar can never forge access metadata.

Numbers must be finite and integers must fit a signed 64-bit long: NaN or Infinity cannot be stored in
DynamoDB or written into an OpenSearch bulk line, and a larger integer overflows OpenSearch's `long`.
A document's attributes (S3 user metadata and sidecar together) are capped (`check_limits`): every one
becomes a nested entry of each chunk in the OpenSearch index and a field of the registry record, so one
upload must not be able to carry thousands. Keys are at most 100 characters already (both sources).

Who may write a sidecar is not decided here: the blob store only applies a sidecar signed for its
document's owner (see `citewise.ports.blobstore.stored_object`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from citewise.domain.errors import ValidationError
from citewise.domain.models import AttributeValue

SIDECAR_SUFFIX = ".metadata.json"
SYSTEM_KEYS = frozenset(
    {
        "tenant_id",
        "tenant",
        "tenantId",
        "doc_id",
        "owner",
        "visibility",
        "channel",
        "source_date",
        "path",
        "title",
        "created_at",
        "page",
        "chunk_id",
    }
)
_KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
MAX_ATTRIBUTES = 50
"""Attributes of one document (user metadata and sidecar keys together)."""
MAX_VALUE_CHARS = 2048
"""Characters of one string value, or of one element of a list value."""
MAX_LIST_ITEMS = 100
"""Elements of one list value."""
MAX_SIDECAR_BYTES = 64 * 1024
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def parse_sidecar(data: bytes, name: str) -> dict[str, AttributeValue]:
    """The validated `metadataAttributes` of a sidecar file, or a ValidationError naming the problem."""
    if len(data) > MAX_SIDECAR_BYTES:
        raise ValidationError(f"{name}: metadata file is larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8-sig"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{name}: metadata file is not valid UTF-8 JSON ({exc})") from exc
    except ValueError as exc:  # NaN/Infinity, or an integer past Python's digit limit for int()
        raise ValidationError(f"{name}: metadata file holds a number that cannot be stored ({exc})") from exc
    except RecursionError as exc:
        raise ValidationError(f"{name}: metadata file is nested too deeply") from exc
    if not isinstance(document, dict) or not isinstance(document.get("metadataAttributes"), dict):
        raise ValidationError(f'{name}: expected {{"metadataAttributes": {{...}}}}')
    return {key: _attribute(name, key, value) for key, value in document["metadataAttributes"].items()}


def _attribute(name: str, key: str, value: Any) -> AttributeValue:
    if key in SYSTEM_KEYS:
        raise ValidationError(f"{name}: metadata key '{key}' is reserved", details={"key": key})
    if not _KEY_RE.fullmatch(key):
        raise ValidationError(f"{name}: metadata key '{key}' must be 1-100 letters, digits or _.:-")
    if isinstance(value, str | bool):
        return value
    if isinstance(value, int) and not _LONG_MIN <= value <= _LONG_MAX:
        raise ValidationError(f"{name}: metadata '{key}' is outside the 64-bit integer range", details={"key": key})
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{name}: metadata '{key}' must be a finite number", details={"key": key})
    if isinstance(value, int | float):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise ValidationError(
        f"{name}: metadata '{key}' must be a string, number, boolean or list of strings", details={"key": key}
    )


def check_limits(attributes: Mapping[str, AttributeValue]) -> None:
    """Refuse a document whose attributes exceed `MAX_ATTRIBUTES`, `MAX_LIST_ITEMS` or `MAX_VALUE_CHARS`,
    naming the limit and the key (the pipeline records it as the document's FAILED reason)."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValidationError(
            f"a document may carry at most {MAX_ATTRIBUTES} metadata attributes; this one has {len(attributes)}",
            details={"limit": MAX_ATTRIBUTES, "count": len(attributes)},
        )
    for key, value in attributes.items():
        items = value if isinstance(value, list) else [value]
        if len(items) > MAX_LIST_ITEMS:
            raise ValidationError(
                f"metadata '{key}' is a list of {len(items)} values; at most {MAX_LIST_ITEMS} are allowed",
                details={"key": key, "limit": MAX_LIST_ITEMS},
            )
        if any(isinstance(item, str) and len(item) > MAX_VALUE_CHARS for item in items):
            raise ValidationError(
                f"metadata '{key}' has a value longer than {MAX_VALUE_CHARS} characters",
                details={"key": key, "limit": MAX_VALUE_CHARS},
            )


def _no_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not a number JSON allows")
