"""The pure half of the S3 Vectors adapter: index names, vector metadata and the filter translation
(docs/s3vectors-design.md). Whether the translated filters select what citewise's grammar says is the
index contract suite's job (tests/contract/test_index_contract.py, on the double); here the shapes and
the refusals."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from citewise.aws import s3vectors_requests as r
from citewise.domain.errors import ValidationError
from citewise.domain.models import AttributeValue, Caller, Chunk, DocumentMetadata, Filter, Visibility

INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # the service model's own pattern


def _chunk(attributes: dict[str, AttributeValue] | None = None, path: str = "handbook/security/policy.md") -> Chunk:
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id="doc-1",
        owner="alice",
        visibility=Visibility.SHARED,
        source="wiki",
        path=path,
        title="Security Policy",
        created_at=datetime(2024, 3, 1, 9, 30, tzinfo=UTC),
        updated_at=datetime(2024, 6, 15, 12, tzinfo=UTC),
        attributes=attributes or {},
    )
    return Chunk(
        chunk_id="doc-1-00000", ordinal=0, text="Rotate keys.", start=0, end=12, content_hash="h", document=document
    )


@pytest.mark.parametrize(
    "tenant_id", ["acme", "Acme", "ACME", "a", "tenant_with_underscores", "é" * 40, "x" * 64, "--"]
)
def test_index_names_fit_the_service_pattern_and_keep_tenants_apart(tenant_id: str) -> None:
    name = r.index_name(tenant_id)
    assert INDEX_NAME.fullmatch(name) and len(name) <= 63
    assert name == r.index_name(tenant_id)  # stable: a tenant's index is found again after a restart


def test_tenants_differing_only_by_case_or_punctuation_get_different_indexes() -> None:
    names = {r.index_name(tenant) for tenant in ("acme", "Acme", "acme_", "acme-", "acme.", "acme-2")}
    assert len(names) == 6
    assert r.index_name("Acme Corp").startswith("t-acme-corp-")  # readable in a listing


def test_a_chunk_carries_the_filterable_view_derived_keys_and_its_body_non_filterable() -> None:
    # Given a chunk with a list attribute, a null page and an empty tag list
    chunk = _chunk({"regions": ["eu", "us"], "year": 2023, "owner": "mallory"})

    # When its metadata is built
    metadata = r.chunk_metadata(chunk, "g1")

    # Then system fields win over attributes, nulls and empty lists are absent, and the derived keys are set
    assert metadata["owner"] == "alice" and metadata["year"] == 2023
    assert "page" not in metadata and "tags" not in metadata
    assert metadata[r.KIND_KEY] == "chunk" and metadata[r.GENERATION_KEY] == "g1" and metadata[r.HASH_KEY] == "h"
    assert metadata[r.PATH_PREFIXES_KEY] == ["handbook/", "handbook/security/"]
    assert metadata["#created_at"] == datetime(2024, 3, 1, 9, 30, tzinfo=UTC).timestamp()
    assert metadata[r.LIST_KEYS_KEY] == ["regions"]
    assert Chunk.model_validate_json(metadata[r.CHUNK_KEY]) == chunk
    assert metadata[r.TEXT_KEY].endswith("Rotate keys.") and "Security Policy" in metadata[r.TEXT_KEY]


def test_too_many_attributes_are_refused_naming_them() -> None:
    attributes: dict[str, AttributeValue] = {f"k{n}": n for n in range(45)}
    with pytest.raises(ValidationError) as refused:
        r.chunk_metadata(_chunk(attributes), "g")
    assert "50 metadata keys" in refused.value.message and refused.value.details["mode"] == "s3vectors"
    assert set(refused.value.details["attributes"]) == set(attributes)


def test_filterable_metadata_over_2_kb_is_refused_naming_the_largest_attributes_first() -> None:
    attributes: dict[str, AttributeValue] = {"small": "x", "big": "y" * 1500, "medium": "z" * 600}
    with pytest.raises(ValidationError) as refused:
        r.chunk_metadata(_chunk(attributes), "g")
    assert "2048 bytes of filterable metadata" in refused.value.message
    assert refused.value.details["attributes"] == ["big", "medium", "small"]


def test_attribute_names_longer_than_the_service_allows_are_refused() -> None:
    with pytest.raises(ValidationError, match="longer than 63"):
        r.chunk_metadata(_chunk({"k" * 64: 1}), "g")


def test_every_read_filters_by_kind_and_access_and_ands_the_users_filter() -> None:
    flt = Filter.model_validate({"equals": {"key": "dept", "value": "ops"}})
    assert r.read_filter(Caller(tenant_id="acme", user_id="bob"), flt) == {
        "$and": [
            {"#kind": {"$eq": "chunk"}},
            {"$or": [{"visibility": {"$eq": "shared"}}, {"owner": {"$eq": "bob"}}]},
            {"dept": {"$eq": "ops"}},
        ]
    }


def test_a_source_marker_carries_the_documents_source_and_access_and_sources_are_read_inside_the_access() -> None:
    # A document's marker: what `sources` needs, under the key only its own document writes and deletes
    assert r.source_key("doc-1") == "m:doc-1"
    assert r.source_metadata(_chunk().document, "g1") == {
        "#kind": "source",
        "#generation": "g1",
        "doc_id": "doc-1",
        "source": "wiki",
        "visibility": "shared",
        "owner": "alice",
    }
    # and the listing is the access filter of every read, on markers, past the sources already found
    bob = Caller(tenant_id="acme", user_id="bob")
    access = {"$or": [{"visibility": {"$eq": "shared"}}, {"owner": {"$eq": "bob"}}]}
    assert r.sources_filter(bob, []) == {"$and": [{"#kind": {"$eq": "source"}}, access]}
    assert r.sources_filter(bob, ["jira", "wiki"]) == {
        "$and": [{"#kind": {"$eq": "source"}}, access, {"source": {"$nin": ["jira", "wiki"]}}]
    }


@pytest.mark.parametrize(
    ("raw", "translated"),
    [
        ({"equals": {"key": "year", "value": 2023}}, {"year": {"$eq": 2023}}),
        (
            {"notEquals": {"key": "dept", "value": "ops"}},
            {"$or": [{"dept": {"$exists": False}}, {"dept": {"$ne": "ops"}}]},
        ),
        ({"in": {"key": "dept", "value": ["a", "b"]}}, {"dept": {"$in": ["a", "b"]}}),
        ({"in": {"key": "dept", "value": []}}, r.NOTHING),
        ({"notIn": {"key": "dept", "value": []}}, r.EVERYTHING),
        ({"greaterThan": {"key": "year", "value": 2020}}, {"year": {"$gt": 2020}}),
        ({"greaterThan": {"key": "public", "value": False}}, r.NOTHING),
        (
            {"greaterThan": {"key": "created_at", "value": "2024-03-01"}},
            {"#created_at": {"$gte": datetime(2024, 3, 1, tzinfo=UTC).timestamp()}},
        ),
        (
            {"lessThanOrEquals": {"key": "created_at", "value": "2024-03-01"}},
            {"#created_at": {"$lt": datetime(2024, 3, 1, tzinfo=UTC).timestamp()}},
        ),
        (
            {"lessThanOrEquals": {"key": "updated_at", "value": "2024-06-15T12:00:00+00:00"}},
            {"#updated_at": {"$lte": datetime(2024, 6, 15, 12, tzinfo=UTC).timestamp()}},
        ),
        ({"startsWith": {"key": "path", "value": "handbook/"}}, {"#path_prefixes": {"$eq": "handbook/"}}),
        (
            {"startsWith": {"key": "created_at", "value": "2024-12"}},
            {
                "$and": [
                    {"#created_at": {"$gte": datetime(2024, 12, 1, tzinfo=UTC).timestamp()}},
                    {"#created_at": {"$lt": datetime(2025, 1, 1, tzinfo=UTC).timestamp()}},
                ]
            },
        ),
        (
            {"listContains": {"key": "tags", "value": "x"}},
            {"$and": [{"tags": {"$eq": "x"}}, {"#lists": {"$eq": "tags"}}]},
        ),
        (
            {"orAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "b", "value": True}}]},
            {"$or": [{"a": {"$eq": 1}}, {"b": {"$eq": True}}]},
        ),
    ],
)
def test_operators_translate_as_the_design_table_says(raw: dict[str, Any], translated: dict[str, Any]) -> None:
    assert r.translate_filter(Filter.model_validate(raw)) == translated


@pytest.mark.parametrize(
    ("operator", "key", "value"),
    [
        ("stringContains", "title", "Policy"),
        ("startsWith", "dept", "eng"),
        ("startsWith", "path", "handbook/sec"),
        ("startsWith", "created_at", "2024-13"),
        ("greaterThan", "dept", "a"),
        ("greaterThan", "created_at", "yesterday"),
        ("equals", "regions", ["eu", "us"]),
    ],
)
def test_what_s3_vectors_cannot_evaluate_is_a_400_naming_operator_key_and_mode(
    operator: str, key: str, value: Any
) -> None:
    nested = Filter.model_validate(
        {"andAll": [{"equals": {"key": "a", "value": 1}}, {operator: {"key": key, "value": value}}]}
    )
    with pytest.raises(ValidationError) as refused:
        r.translate_filter(nested)
    assert refused.value.http_status == 400
    assert refused.value.details == {"operator": operator, "key": key, "mode": "s3vectors"}
    assert refused.value.message.startswith(f"{operator} on '{key}' is not supported in search mode s3vectors")


def test_each_version_attribute_is_stored_as_two_numbers_and_a_non_version_as_none() -> None:
    # Given a chunk declaring a version and when it was introduced, and one whose version is no version
    metadata = r.chunk_metadata(_chunk({"version": "3.12.1", "introduced_in": "3.8"}), "g1")
    legacy = r.chunk_metadata(_chunk({"version": "latest"}), "g1")

    # Then each version has its high and low numbers, exact integers; a value that is none has neither
    assert metadata["#vh:version"] == 300012_00001 and metadata["#vl:version"] == 400000000
    assert metadata["#vh:introduced_in"] == 300008_00000 and "#vh:deprecated_in" not in metadata
    assert metadata["version"] == "3.12.1"  # the attribute itself stays as written, for equals and in
    assert not any(key.startswith(("#vh:", "#vl:")) for key in legacy)


@pytest.mark.parametrize(
    ("raw", "translated"),
    [
        (
            {"versionEquals": {"key": "version", "value": "3.12"}},
            {"$and": [{"#vh:version": {"$eq": 300012_00000}}, {"#vl:version": {"$eq": 400000000}}]},
        ),
        (
            {"versionNotEquals": {"key": "version", "value": "3.12"}},
            {
                "$or": [
                    {"#vh:version": {"$exists": False}},
                    {"#vh:version": {"$ne": 300012_00000}},
                    {"#vl:version": {"$ne": 400000000}},
                ]
            },
        ),
        (
            {"versionGreaterThan": {"key": "deprecated_in", "value": "3.12"}},
            {
                "$or": [
                    {"#vh:deprecated_in": {"$gt": 300012_00000}},
                    {"$and": [{"#vh:deprecated_in": {"$eq": 300012_00000}}, {"#vl:deprecated_in": {"$gt": 400000000}}]},
                ]
            },
        ),
        (
            {"versionLessThanOrEquals": {"key": "introduced_in", "value": "3.12rc1"}},
            {
                "$or": [
                    {"#vh:introduced_in": {"$lt": 300012_00000}},
                    {
                        "$and": [
                            {"#vh:introduced_in": {"$eq": 300012_00000}},
                            {"#vl:introduced_in": {"$lte": 300010000}},
                        ]
                    },
                ]
            },
        ),
    ],
)
def test_version_operators_become_native_comparisons_of_the_stored_pair(
    raw: dict[str, Any], translated: dict[str, Any]
) -> None:
    assert r.translate_filter(Filter.model_validate(raw)) == translated
