"""The OpenAPI document states the rules the API enforces: what its schemas accept, the code accepts.

Checked with the JSON Schema validator schemathesis itself uses (jsonschema_rs, ECMA-262 patterns), against
the same functions the handlers call, so a pattern cannot drift from the rule it describes. The document is
the checked-in one, which a handler test keeps equal to the generated one (importing the API modules here
would create the Powertools metrics at collection time, before the handler tests set their namespace)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from citewise.domain.errors import ValidationError
from citewise.domain.models import MAX_FILTER_BRANCHES, SearchRequest
from citewise.domain.tenancy import MAX_PATH_BYTES, validate_path
from citewise.ingest.documents import UploadRequest

DOCUMENT: dict[str, Any] = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())


def _validator(component: str) -> Any:
    document = DOCUMENT
    return jsonschema_rs.Draft202012Validator(
        {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    )


SEARCH = _validator("SearchRequest")
UPLOAD = _validator("UploadRequest")
LEAF = {"equals": {"key": "dept", "value": "ops"}}


@pytest.mark.parametrize(
    "filters",
    [
        {"equals": {"key": "dept", "value": "ops"}, "notEquals": {"key": "dept", "value": "hr"}},
        {"equals": None},
        {},
        {"andAll": []},
        {"andAll": [LEAF] * (MAX_FILTER_BRANCHES + 1)},
        {"equals": {"key": "year", "value": 2**53 + 2}},
        {"in": {"key": "dept", "value": ["x"] * 1001}},
        {"nope": LEAF},
        {"versionEquals": {"key": "year", "value": "3.12"}},
        {"versionLessThan": {"key": "version", "value": "latest"}},
        {"versionLessThan": {"key": "version", "value": 3.12}},
    ],
    ids=[
        "two-operators",
        "null-operator",
        "no-operator",
        "empty-and",
        "too-wide",
        "huge-number",
        "long-list",
        "unknown",
        "version-of-another-key",
        "no-version",
        "version-as-number",
    ],
)
def test_the_filter_schema_refuses_what_the_model_refuses(filters: dict[str, Any]) -> None:
    body = {"query": "q", "filters": filters}
    assert not SEARCH.is_valid(body)
    with pytest.raises(ValueError, match="validation error"):
        SearchRequest.model_validate(body)


@pytest.mark.parametrize(
    "filters",
    [
        LEAF,
        {"in": {"key": "dept", "value": ["ops", "hr"]}},
        {"andAll": [LEAF, {"orAll": [LEAF] * 5}]},
        {"orAll": [{"andAll": [LEAF] * 5}] * MAX_FILTER_BRANCHES},
        {"andAll": [{"versionGreaterThanOrEquals": {"key": "introduced_in", "value": "v2.0.0-rc.1+build.7"}}]},
    ],
)
def test_the_filter_schema_accepts_what_the_model_accepts(filters: dict[str, Any]) -> None:
    body = {"query": "q", "filters": filters}
    assert SEARCH.is_valid(body)
    SearchRequest.model_validate(body)


def _upload(filename: str, content_type: str = "text/markdown") -> dict[str, Any]:
    return {"filename": filename, "content_type": content_type, "size": 10}


PATH_ALPHABET = st.sampled_from(["a", "Z", "0", ".", "/", "\\", " ", "\x00", "\x1f", "\x7f", "é", "-"])


@given(st.text(PATH_ALPHABET, min_size=1, max_size=12).map(lambda name: name + ".md"))
def test_the_filename_pattern_is_validate_path(filename: str) -> None:
    try:
        validate_path(filename)
        accepted = True
    except ValidationError:
        accepted = False
    assert UPLOAD.is_valid(_upload(filename)) is accepted


@pytest.mark.parametrize("filename", ["../x.md", "/x.md", "a//b.md", "a/./b.md", "a\\b.md", "a\nb.md", "x.md\n"])
def test_paths_that_could_escape_their_prefix_are_outside_the_schema(filename: str) -> None:
    assert not UPLOAD.is_valid(_upload(filename))


def test_the_path_limit_is_in_bytes_and_the_schema_says_so() -> None:
    schema = DOCUMENT["components"]["schemas"]["UploadRequest"]["properties"]["filename"]
    assert schema["maxLength"] == MAX_PATH_BYTES and f"{MAX_PATH_BYTES} bytes of UTF-8" in schema["description"]


@pytest.mark.parametrize(
    ("filename", "content_type", "valid"),
    [
        ("notes/a.MD", "application/octet-stream", True),  # the extension decides, in any case
        ("notes/a", "Text/Markdown; charset=utf-8", True),  # else the media type
        ("notes/a.bin", "application/pdf", True),
        ("notes/a.bin", "application/octet-stream", False),  # neither: 415
        ("notes/.md", "application/octet-stream", False),  # a hidden file has no extension
        ("notes/a.md", "text markdown", False),  # not a media type
        ("notes/a.pdf.metadata.json", "application/json", True),  # a document's sidecar
        ("notes/.metadata.json", "application/json", False),  # the sidecar of no document
    ],
)
def test_the_schema_states_which_formats_are_supported(filename: str, content_type: str, valid: bool) -> None:
    assert UPLOAD.is_valid(_upload(filename, content_type)) is valid


@pytest.mark.parametrize(
    ("metadata", "valid"),
    [
        ({"team": "ops", "year": "2024"}, True),
        ({"owner": "mallory"}, False),  # reserved
        ({"Team": "ops"}, False),  # S3 lower-cases keys
        ({"team": "caf\u00e9"}, False),  # headers carry printable ASCII only
        ({f"k{n}": "v" for n in range(9)}, False),  # the schema keeps every map inside S3's 2 KB
    ],
)
def test_the_schema_states_the_metadata_rules(metadata: dict[str, str], valid: bool) -> None:
    assert UPLOAD.is_valid(_upload("a.md") | {"metadata": metadata}) is valid


def test_the_cursor_parameter_has_the_form_of_an_issued_cursor() -> None:
    parameters = DOCUMENT["paths"]["/v1/documents"]["get"]["parameters"]
    cursor = next(parameter for parameter in parameters if parameter["name"] == "cursor")["schema"]["anyOf"][0]
    assert re.fullmatch(cursor["pattern"], "eyJ0IjoiYWNtZSJ9") and not re.search(cursor["pattern"], "eyJ0=")
    assert cursor["maxLength"] == 8192


def test_every_operation_has_a_chosen_readable_unique_id() -> None:
    """A generated client names its methods after the operationIds: `listDocuments`, not the resolver's
    `list_documents_v1_documents_get`."""
    ids = [operation["operationId"] for item in DOCUMENT["paths"].values() for operation in item.values()]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", operation_id) for operation_id in ids), ids


@pytest.mark.parametrize("component", ["SearchRequest", "UploadRequest"])
def test_the_request_examples_are_valid_requests(component: str) -> None:
    """Swagger UI pre-fills "Try it out" with the schema's example: it must be a request the API accepts."""
    examples = DOCUMENT["components"]["schemas"][component]["examples"]
    assert examples
    for example in examples:
        _validator(component).validate(example)
    model = SearchRequest if component == "SearchRequest" else UploadRequest
    assert all(model.model_validate(example) for example in examples)


def test_every_request_field_is_described() -> None:
    """The explorer shows each field's description next to it."""
    for component in ("SearchRequest", "UploadRequest"):
        properties = DOCUMENT["components"]["schemas"][component]["properties"]
        assert [name for name, schema in properties.items() if not schema.get("description")] == [], component


def test_every_tenant_operation_declares_the_409_of_a_tenant_being_erased() -> None:
    # Every route that asks for a tenant's identity refuses it while the tenant is erased (409
    # TENANT_ERASING, `citewise.api.identity.request_scope`): the document says so where it can happen
    tenant_operations = {
        f"{method.upper()} {path}": operation
        for path, operations in DOCUMENT["paths"].items()
        if not path.startswith("/v1/admin/")
        for method, operation in operations.items()
        if operation.get("security")
    }
    assert len(tenant_operations) >= 12
    assert [name for name, operation in tenant_operations.items() if "409" not in operation["responses"]] == []
