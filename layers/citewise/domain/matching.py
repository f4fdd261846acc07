"""Evaluate a Bedrock-KB-grammar filter against a chunk's metadata, for the embedded local index.

Semantics follow OpenSearch's translation of the same filter, so the local and AWS modes agree: a
missing key never matches a positive operator and always matches a negated one (`notEquals`,
`notIn`, `versionNotEquals`); comparing values of different types (a string with a number) does not
match. The version operators compare `Version.sort_key`s, the encoding the other backends store: a
stored value that is not a version counts as missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from citewise.domain.models import VERSION_OPERATORS, Chunk, Comparison, Filter
from citewise.domain.provenance import iso
from citewise.domain.versions import parse_version, try_version

MetadataView = dict[str, Any]


def metadata_view(chunk: Chunk) -> MetadataView:
    """The filterable fields of a chunk: custom attributes, overridden by the system fields."""
    return {**chunk.document.attributes, **system_fields(chunk), "title": chunk.document.title}


def system_fields(chunk: Chunk) -> MetadataView:
    """The fields citewise sets on every chunk (never a user's attribute), as JSON values: filterable, and
    stored as top-level fields of the OpenSearch chunk index."""
    doc = chunk.document
    return {
        "doc_id": doc.doc_id,
        "owner": doc.owner,
        "visibility": doc.visibility.value,
        "source": doc.source,
        "channel": doc.channel,
        "source_date": iso(doc.source_date) if doc.source_date is not None else None,
        "path": doc.path,
        "tags": list(doc.tags),
        "created_at": doc.created_at.isoformat(),
        "updated_at": doc.updated_at.isoformat(),
        "page": chunk.page,
    }


def matches(flt: Filter, metadata: MetadataView) -> bool:
    """True when `metadata` satisfies the whole filter tree."""
    operator, operand = flt.operator, flt.operand
    if operator == "andAll":
        return all(matches(child, metadata) for child in operand)
    if operator == "orAll":
        return any(matches(child, metadata) for child in operand)
    comparison: Comparison = operand
    if operator in VERSION_OPERATORS:
        return _versions(VERSION_OPERATORS[operator], metadata.get(comparison.key), comparison.value)
    if operator in _NEGATED:
        return not _POSITIVE[_NEGATED[operator]](metadata.get(comparison.key), comparison.value)
    if comparison.key not in metadata or metadata[comparison.key] is None:
        return False
    return _POSITIVE[operator](metadata[comparison.key], comparison.value)


def _versions(plain: str, actual: Any, expected: Any) -> bool:
    """A version operator, as the plain comparison it mirrors applied to the two sort keys."""
    stored = try_version(actual)
    if plain in _NEGATED:
        return stored is None or not _POSITIVE[_NEGATED[plain]](stored.sort_key, parse_version(expected).sort_key)
    return stored is not None and _POSITIVE[plain](stored.sort_key, parse_version(expected).sort_key)


def _same_kind(a: Any, b: Any) -> bool:
    numeric = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (isinstance(a, numeric) and isinstance(b, numeric)) or type(a) is type(b)


def _equals(actual: Any, expected: Any) -> bool:
    if isinstance(actual, list) and not isinstance(expected, list):
        return expected in actual  # a list attribute equals a value it contains, as a keyword array does
    return _same_kind(actual, expected) and actual == expected


def _ordered(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(actual: Any, expected: Any) -> bool:
        return _same_kind(actual, expected) and not isinstance(actual, list | bool) and test(actual, expected)

    return compare


def _in(actual: Any, expected: Any) -> bool:
    options = expected if isinstance(expected, list) else [expected]
    return any(_equals(actual, option) for option in options)


def _starts_with(actual: Any, expected: Any) -> bool:
    return isinstance(actual, str) and isinstance(expected, str) and actual.startswith(expected)


def _string_contains(actual: Any, expected: Any) -> bool:
    if not isinstance(expected, str):
        return False
    values = actual if isinstance(actual, list) else [actual]
    return any(isinstance(v, str) and expected in v for v in values)


def _list_contains(actual: Any, expected: Any) -> bool:
    return isinstance(actual, list) and expected in actual


_POSITIVE: dict[str, Callable[[Any, Any], bool]] = {
    "equals": _equals,
    "greaterThan": _ordered(lambda a, b: a > b),
    "greaterThanOrEquals": _ordered(lambda a, b: a >= b),
    "lessThan": _ordered(lambda a, b: a < b),
    "lessThanOrEquals": _ordered(lambda a, b: a <= b),
    "in": _in,
    "startsWith": _starts_with,
    "stringContains": _string_contains,
    "listContains": _list_contains,
}
_NEGATED = {"notEquals": "equals", "notIn": "in"}
