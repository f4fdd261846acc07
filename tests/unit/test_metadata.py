"""Sidecar metadata: what a `<file>.metadata.json` may hold, and the clear errors for what it may not."""

from __future__ import annotations

import pytest

from citewise.domain.errors import ValidationError
from citewise.domain.metadata import (
    MAX_ATTRIBUTES,
    MAX_LIST_ITEMS,
    MAX_SIDECAR_BYTES,
    MAX_VALUE_CHARS,
    check_limits,
    parse_sidecar,
)


def _sidecar(value: str) -> bytes:
    return ('{"metadataAttributes": {"x": ' + value + "}}").encode()


def test_typed_values_are_kept() -> None:
    data = b'{"metadataAttributes": {"team": "a", "year": 2026, "ratio": 0.5, "ok": true, "tags": ["q1"]}}'
    assert parse_sidecar(data, "a.md.metadata.json") == {
        "team": "a",
        "year": 2026,
        "ratio": 0.5,
        "ok": True,
        "tags": ["q1"],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "cannot be stored"),
        ("Infinity", "cannot be stored"),
        ("-Infinity", "cannot be stored"),
        ("1e999", "finite"),
        ("9" * 5000, "cannot be stored"),
        (str(2**63), "64-bit"),
        (str(-(2**63) - 1), "64-bit"),
    ],
    ids=["NaN", "Infinity", "-Infinity", "overflowing float", "5000 digits", "2**63", "-2**63-1"],
)
def test_numbers_that_cannot_be_stored_are_clear_validation_errors(value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        parse_sidecar(_sidecar(value), "a.md.metadata.json")
    assert raised.value.message.startswith("a.md.metadata.json: ")


def test_the_64_bit_range_itself_is_accepted() -> None:
    assert parse_sidecar(_sidecar(str(2**63 - 1)), "s") == {"x": 2**63 - 1}
    assert parse_sidecar(_sidecar(str(-(2**63))), "s") == {"x": -(2**63)}


def test_json_nested_past_the_parser_is_a_validation_error() -> None:
    depth = MAX_SIDECAR_BYTES // 2 - 20
    data = b'{"metadataAttributes": {"x": ' + b"[" * depth + b"]" * depth + b"}}"
    assert len(data) <= MAX_SIDECAR_BYTES
    with pytest.raises(ValidationError, match="nested too deeply"):
        parse_sidecar(data, "s")


def test_the_attribute_caps_are_inclusive() -> None:
    # Exactly at each cap is accepted; one past it is refused with the limit in the details
    at_caps = {f"k{n}": n for n in range(MAX_ATTRIBUTES - 2)}
    at_caps |= {"list": ["x" * MAX_VALUE_CHARS] * MAX_LIST_ITEMS, "text": "y" * MAX_VALUE_CHARS}
    check_limits(at_caps)
    with pytest.raises(ValidationError) as raised:
        check_limits(at_caps | {"one_more": True})
    assert raised.value.details == {"limit": MAX_ATTRIBUTES, "count": MAX_ATTRIBUTES + 1}
