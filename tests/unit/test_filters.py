"""The Bedrock Knowledge Bases filter grammar: the `Filter` model and its evaluation on a chunk's metadata.

`matches` is what the local index applies inside the access filter, so each operator is checked for a
match, a non-match, a missing key and a type mismatch, on custom attributes and on system fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError as PydanticValidationError

from citewise.domain.matching import MetadataView, matches, metadata_view
from citewise.domain.models import Chunk, DocumentMetadata, Filter, Visibility

CREATED = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
UPDATED = datetime(2024, 6, 15, 12, 0, tzinfo=UTC)


def _chunk(page: int | None = None) -> Chunk:
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id="doc-1",
        owner="alice",
        visibility=Visibility.SHARED,
        source="wiki",
        path="handbook/security/policy.md",
        title="Security Policy",
        tags=("security", "onboarding"),
        created_at=CREATED,
        updated_at=UPDATED,
        attributes={
            "dept": "engineering",
            "year": 2023,
            "rating": 4.5,
            "public": True,
            "regions": ["eu", "us"],
            # A custom attribute may not shadow a system field: the view must show the real owner.
            "owner": "mallory",
        },
    )
    return Chunk(
        chunk_id="doc-1-00000",
        ordinal=0,
        text="Rotate keys every ninety days.",
        start=0,
        end=30,
        page=page,
        content_hash="h",
        document=document,
    )


@pytest.fixture
def view() -> MetadataView:
    return metadata_view(_chunk())


def _flt(operator: str, key: str, value: Any) -> Filter:
    return Filter.model_validate({operator: {"key": key, "value": value}})


def test_metadata_view_exposes_attributes_and_system_fields_with_system_fields_winning() -> None:
    # Given a chunk whose custom attributes include an `owner` that tries to shadow the real one
    chunk = _chunk(page=3)

    # When its filterable view is built
    view = metadata_view(chunk)

    # Then custom attributes and system fields are both present, dates as ISO strings, system fields win
    assert view["dept"] == "engineering"
    assert view["year"] == 2023
    assert view["rating"] == 4.5
    assert view["public"] is True
    assert view["regions"] == ["eu", "us"]
    assert view["owner"] == "alice"
    assert view["visibility"] == "shared"
    assert view["source"] == "wiki"
    assert view["path"] == "handbook/security/policy.md"
    assert view["title"] == "Security Policy"
    assert view["tags"] == ["security", "onboarding"]
    assert view["created_at"] == "2024-03-01T09:30:00+00:00"
    assert view["updated_at"] == "2024-06-15T12:00:00+00:00"
    assert view["doc_id"] == "doc-1"
    assert view["page"] == 3
    assert "tenant_id" not in view


# --- one operator at a time -----------------------------------------------------------------------

CASES: list[tuple[str, str, Any, bool]] = [
    # equals: same value and kind; numbers compare across int/float; a list equals a value it contains
    ("equals", "dept", "engineering", True),
    ("equals", "dept", "Engineering", False),
    ("equals", "year", 2023, True),
    ("equals", "year", 2023.0, True),
    ("equals", "year", 2022, False),
    ("equals", "rating", 4.5, True),
    ("equals", "public", True, True),
    ("equals", "public", False, False),
    ("equals", "regions", "eu", True),
    ("equals", "regions", "apac", False),
    ("equals", "regions", ["eu", "us"], True),
    ("equals", "source", "wiki", True),
    ("equals", "owner", "alice", True),
    ("equals", "owner", "mallory", False),
    ("equals", "tags", "security", True),
    ("equals", "created_at", "2024-03-01T09:30:00+00:00", True),
    # notEquals: the negation of equals
    ("notEquals", "dept", "sales", True),
    ("notEquals", "dept", "engineering", False),
    ("notEquals", "year", 2023, False),
    ("notEquals", "public", False, True),
    ("notEquals", "tags", "security", False),
    ("notEquals", "tags", "finance", True),
    # greaterThan / greaterThanOrEquals: numbers, and ISO date strings compared as strings
    ("greaterThan", "year", 2020, True),
    ("greaterThan", "year", 2023, False),
    ("greaterThan", "rating", 4, True),
    ("greaterThan", "rating", 4.5, False),
    ("greaterThan", "created_at", "2024-01-01", True),
    ("greaterThan", "created_at", "2024-12-31", False),
    ("greaterThanOrEquals", "year", 2023, True),
    ("greaterThanOrEquals", "year", 2024, False),
    ("greaterThanOrEquals", "rating", 4.5, True),
    ("greaterThanOrEquals", "updated_at", "2024-06-15T12:00:00+00:00", True),
    # lessThan / lessThanOrEquals
    ("lessThan", "year", 2024, True),
    ("lessThan", "year", 2023, False),
    ("lessThan", "rating", 5, True),
    ("lessThan", "created_at", "2024-03-02", True),
    ("lessThan", "created_at", "2024-03-01", False),
    ("lessThanOrEquals", "year", 2023, True),
    ("lessThanOrEquals", "year", 2022, False),
    ("lessThanOrEquals", "rating", 4.5, True),
    ("lessThanOrEquals", "rating", 4.49, False),
    # in / notIn: membership of a scalar, or of any element of a list attribute
    ("in", "dept", ["engineering", "ops"], True),
    ("in", "dept", ["ops", "sales"], False),
    ("in", "source", ["s3", "wiki"], True),
    ("in", "regions", ["us", "apac"], True),
    ("in", "regions", ["apac"], False),
    ("in", "tags", ["security"], True),
    ("notIn", "dept", ["ops", "sales"], True),
    ("notIn", "dept", ["engineering"], False),
    ("notIn", "regions", ["apac"], True),
    ("notIn", "regions", ["eu"], False),
    # startsWith: string prefixes only
    ("startsWith", "path", "handbook/", True),
    ("startsWith", "path", "security/", False),
    ("startsWith", "dept", "eng", True),
    ("startsWith", "title", "security", False),
    ("startsWith", "created_at", "2024-03", True),
    # stringContains: substrings of a string, or of any string in a list
    ("stringContains", "title", "Policy", True),
    ("stringContains", "title", "policy", False),
    ("stringContains", "path", "security/pol", True),
    ("stringContains", "tags", "board", True),
    ("stringContains", "tags", "finance", False),
    ("stringContains", "regions", "u", True),
    # listContains: exact elements of a list attribute only
    ("listContains", "tags", "security", True),
    ("listContains", "tags", "secur", False),
    ("listContains", "regions", "eu", True),
    ("listContains", "regions", "apac", False),
    ("listContains", "dept", "engineering", False),
]


@pytest.mark.parametrize(("operator", "key", "value", "expected"), CASES)
def test_each_operator_on_present_keys(view: MetadataView, operator: str, key: str, value: Any, expected: bool) -> None:
    # Given the metadata view of a chunk with custom attributes and system fields
    flt = _flt(operator, key, value)

    # When the single-operator filter is evaluated
    result = matches(flt, view)

    # Then it matches exactly when the grammar says so
    assert result is expected


POSITIVE_ON_MISSING: list[tuple[str, Any]] = [
    ("equals", "x"),
    ("greaterThan", 1),
    ("greaterThanOrEquals", 1),
    ("lessThan", 1),
    ("lessThanOrEquals", 1),
    ("in", ["x"]),
    ("startsWith", "x"),
    ("stringContains", "x"),
    ("listContains", "x"),
]


@pytest.mark.parametrize(("operator", "value"), POSITIVE_ON_MISSING)
@pytest.mark.parametrize("key", ["no_such_key", "page"])
def test_positive_operators_never_match_a_missing_or_null_key(
    view: MetadataView, operator: str, value: Any, key: str
) -> None:
    # Given a key the chunk does not have (or has as null, like `page` of an unpaged document)
    flt = _flt(operator, key, value)

    # When a positive operator names it
    result = matches(flt, view)

    # Then it does not match
    assert result is False


@pytest.mark.parametrize(("operator", "value"), [("notEquals", "x"), ("notEquals", 3), ("notIn", ["x"])])
@pytest.mark.parametrize("key", ["no_such_key", "page"])
def test_negated_operators_always_match_a_missing_or_null_key(
    view: MetadataView, operator: str, value: Any, key: str
) -> None:
    # Given a key the chunk does not have (or has as null)
    flt = _flt(operator, key, value)

    # When a negated operator names it
    result = matches(flt, view)

    # Then it matches, as OpenSearch's must_not does
    assert result is True


TYPE_MISMATCHES: list[tuple[str, str, Any]] = [
    ("equals", "year", "2023"),
    ("equals", "dept", 2023),
    ("equals", "public", 1),
    ("equals", "year", True),
    ("greaterThan", "dept", 5),
    ("greaterThan", "year", "2000"),
    ("greaterThanOrEquals", "rating", "1"),
    ("lessThan", "rating", "9"),
    ("lessThanOrEquals", "created_at", 99999999),
    ("greaterThan", "public", False),
    ("lessThan", "regions", "zz"),
    ("in", "year", ["2023"]),
    ("startsWith", "year", "20"),
    ("stringContains", "year", "20"),
    ("stringContains", "dept", 5),
    ("listContains", "year", "2023"),
]


@pytest.mark.parametrize(("operator", "key", "value"), TYPE_MISMATCHES)
def test_values_of_another_type_do_not_match(view: MetadataView, operator: str, key: str, value: Any) -> None:
    # Given a comparison whose value has another type than the stored one (string vs number, bool vs int)
    flt = _flt(operator, key, value)

    # When it is evaluated
    result = matches(flt, view)

    # Then it does not match, even when the two print the same
    assert result is False


def test_not_equals_across_types_matches(view: MetadataView) -> None:
    # Given a string compared with a stored number
    flt = _flt("notEquals", "year", "2023")

    # When evaluated / Then the values are not equal, so notEquals holds
    assert matches(flt, view) is True


# --- logical operators ----------------------------------------------------------------------------


def test_and_all_needs_every_child(view: MetadataView) -> None:
    # Given two true comparisons and one false one
    true_a = {"equals": {"key": "dept", "value": "engineering"}}
    true_b = {"greaterThan": {"key": "year", "value": 2020}}
    false_c = {"listContains": {"key": "tags", "value": "finance"}}

    # When combined with andAll / Then all true children match and one false child fails the whole
    assert matches(Filter.model_validate({"andAll": [true_a, true_b]}), view) is True
    assert matches(Filter.model_validate({"andAll": [true_a, true_b, false_c]}), view) is False


def test_or_all_needs_any_child(view: MetadataView) -> None:
    # Given one true and two false comparisons
    true_a = {"startsWith": {"key": "path", "value": "handbook/"}}
    false_b = {"equals": {"key": "source", "value": "s3"}}
    false_c = {"lessThan": {"key": "rating", "value": 1}}

    # When combined with orAll / Then one true child suffices and all false children fail
    assert matches(Filter.model_validate({"orAll": [false_b, true_a, false_c]}), view) is True
    assert matches(Filter.model_validate({"orAll": [false_b, false_c]}), view) is False


def test_nested_logical_operators(view: MetadataView) -> None:
    # Given (source = s3 OR (dept = engineering AND year >= 2023)) AND NOT region apac
    flt = Filter.model_validate(
        {
            "andAll": [
                {
                    "orAll": [
                        {"equals": {"key": "source", "value": "s3"}},
                        {
                            "andAll": [
                                {"equals": {"key": "dept", "value": "engineering"}},
                                {"greaterThanOrEquals": {"key": "year", "value": 2023}},
                            ]
                        },
                    ]
                },
                {"notIn": {"key": "regions", "value": ["apac"]}},
            ]
        }
    )

    # When evaluated / Then the tree matches, and flipping one leaf flips the result
    assert matches(flt, view) is True
    flipped = Filter.model_validate(
        {
            "andAll": [
                {"equals": {"key": "source", "value": "s3"}},
                {"notIn": {"key": "regions", "value": ["apac"]}},
            ]
        }
    )
    assert matches(flipped, view) is False


# --- the Filter model -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({}, id="no-operator"),
        pytest.param(
            {
                "equals": {"key": "a", "value": "x"},
                "notEquals": {"key": "b", "value": "y"},
            },
            id="two-comparisons",
        ),
        pytest.param(
            {"andAll": [{"equals": {"key": "a", "value": "x"}}], "equals": {"key": "b", "value": "y"}},
            id="logical-and-comparison",
        ),
        pytest.param({"like": {"key": "a", "value": "x"}}, id="unknown-operator"),
        pytest.param({"andAll": []}, id="empty-andAll"),
        pytest.param({"orAll": [{"equals": {"key": "a", "value": "x"}}] * 21}, id="orAll-over-20"),
        pytest.param({"equals": {"key": "", "value": "x"}}, id="empty-key"),
        pytest.param({"equals": {"key": "a"}}, id="missing-value"),
        pytest.param({"equals": {"key": "a", "value": "x", "extra": 1}}, id="extra-comparison-field"),
        pytest.param({"equals": {"key": "a", "value": {"nested": "object"}}}, id="object-value"),
        pytest.param({"andAll": [{}]}, id="empty-child"),
    ],
)
def test_malformed_filters_are_rejected(raw: dict[str, Any]) -> None:
    # Given a filter object that breaks the grammar
    # When it is validated / Then pydantic refuses it
    with pytest.raises(PydanticValidationError):
        Filter.model_validate(raw)


@pytest.mark.parametrize("operator", ["equals", "in", "andAll", "orAll"])
def test_an_operator_given_as_null_is_not_an_operator(operator: str) -> None:
    # Given a JSON body naming an operator with a null operand (no operator in substance)
    raw = {operator: None}

    # When it is validated / Then it is rejected like an empty object, instead of being accepted with
    # a None operand that later crashes `keys()` and `matches` with TypeError/AttributeError
    with pytest.raises(PydanticValidationError):
        Filter.model_validate(raw)


def test_in_is_accepted_by_its_wire_name_and_by_field_name() -> None:
    # Given the wire spelling `in` (a Python keyword, stored as `in_`) and the field name
    by_alias = Filter.model_validate({"in": {"key": "dept", "value": ["ops", "eng"]}})
    by_name = Filter.model_validate({"in_": {"key": "dept", "value": ["ops", "eng"]}})

    # When inspected / Then both are the `in` operator with the same operand, and evaluate alike
    assert by_alias.operator == "in"
    assert by_name.operator == "in"
    assert by_alias.operand == by_name.operand
    assert by_alias.operand.key == "dept"
    assert by_alias.operand.value == ["ops", "eng"]
    assert by_alias.model_dump(by_alias=True, exclude_none=True) == {"in": {"key": "dept", "value": ["ops", "eng"]}}
    assert matches(by_alias, {"dept": "eng"}) is True
    assert matches(by_alias, {"dept": "sales"}) is False


def test_keys_names_every_key_of_the_tree() -> None:
    # Given a nested filter naming four keys, one of them twice
    flt = Filter.model_validate(
        {
            "andAll": [
                {"equals": {"key": "source", "value": "wiki"}},
                {
                    "orAll": [
                        {"in": {"key": "dept", "value": ["a"]}},
                        {"andAll": [{"greaterThan": {"key": "year", "value": 1}}]},
                        {"notEquals": {"key": "source", "value": "s3"}},
                    ]
                },
                {"listContains": {"key": "tags", "value": "x"}},
            ]
        }
    )

    # When its keys are listed / Then each appears once
    assert flt.keys() == {"source", "dept", "year", "tags"}
    assert _flt("startsWith", "path", "a/").keys() == {"path"}


def test_operator_and_operand_of_a_logical_filter() -> None:
    # Given an orAll of two comparisons
    flt = Filter.model_validate(
        {"orAll": [{"equals": {"key": "a", "value": 1}}, {"lessThan": {"key": "b", "value": 2.5}}]}
    )

    # When inspected / Then the operand is the list of child filters, values keeping their types
    assert flt.operator == "orAll"
    assert [child.operator for child in flt.operand] == ["equals", "lessThan"]
    assert flt.operand[0].operand.value == 1
    assert isinstance(flt.operand[0].operand.value, int)
    assert flt.operand[1].operand.value == 2.5
