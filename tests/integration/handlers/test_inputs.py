"""No input is a 5xx: bodies, parameters, filters, identities and methods the API cannot take are answered
with a 4xx in the one error shape, by the real handlers on both stacks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citewise.domain.models import (
    MAX_FILTER_BRANCHES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_LIST_VALUES,
    MAX_FILTER_NODES,
    Filter,
)
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims

ALICE = claims("acme", "alice")
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n"
HUGE = "9" * 5000  # longer than Python's 4300-digit limit for converting a string to an int
DOC_ID = "0" * 32


def _error(response: dict[str, Any], event: dict[str, Any], status: int, code: str) -> dict[str, Any]:
    """The error object of a response, after checking its status, code, shape and request id."""
    body = json.loads(response["body"])
    assert (response["statusCode"], body["error"]["code"]) == (status, code), body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "details", "request_id"}
    assert error["request_id"] == event["requestContext"]["requestId"]
    return error


def _call(stack: Stack, function: str, event: dict[str, Any]) -> dict[str, Any]:
    return stack.handler(function)(event, LambdaContext())


def _leaf(n: int = 0) -> dict[str, Any]:
    return {"equals": {"key": "dept", "value": f"d{n}"}}


def _nested(depth: int) -> dict[str, Any]:
    """A chain of `andAll`s `depth` filter objects deep, ending in a comparison."""
    tree = _leaf()
    for _ in range(depth - 1):
        tree = {"andAll": [tree]}
    return tree


@pytest.mark.parametrize(
    ("function", "path", "body"),
    [
        ("query", "/v1/query", '{"query": "keys", "top_k": @}'),
        ("query", "/v1/search", '{"query": "keys", "min_score": @}'),
        ("query", "/v1/search", '{"query": "keys", "min_score": 0.@}'),
        ("query", "/v1/query", '{"query": "keys", "max_sources": -@}'),
        ("query", "/v1/search", '{"query": "keys", "filters": {"equals": {"key": "year", "value": @}}}'),
        ("query", "/v1/search", '{"query": "keys", "filters": {"equals": {"key": "year", "value": 1e400}}}'),
        ("query", "/v1/search", '{"query": "keys", "filters": {"equals": {"key": "year", "value": NaN}}}'),
        ("documents", "/v1/uploads", '{"filename": "a.md", "content_type": "text/markdown", "size": @}'),
    ],
)
def test_a_number_of_thousands_of_digits_is_a_validation_error(
    stack: Stack, function: str, path: str, body: str
) -> None:
    event = api_event("POST", path, body=body, identity=ALICE)
    _error(_call(stack, function, event), event, 400, "VALIDATION_ERROR")


@pytest.mark.parametrize(
    "value", [10**30, -(2**60), 2**53 + 1, 1e300, ["x"] * (MAX_FILTER_LIST_VALUES + 1), "x" * 1025]
)
def test_a_filter_value_beyond_what_both_backends_compare_alike_is_refused(stack: Stack, value: Any) -> None:
    # Given a JSON-valid value that SQLite-side Python and OpenSearch's doubles would not compare alike
    body = {"query": "keys", "filters": {"greaterThan": {"key": "year", "value": value}}}
    event = api_event("POST", "/v1/search", body=body, identity=ALICE)
    # Then it never reaches an index
    _error(_call(stack, "query", event), event, 400, "VALIDATION_ERROR")


def test_a_huge_page_size_parameter_is_a_validation_error(stack: Stack) -> None:
    event = api_event("GET", "/v1/documents", query={"limit": HUGE}, identity=ALICE)
    _error(_call(stack, "documents", event), event, 400, "VALIDATION_ERROR")


@pytest.mark.parametrize("levels", [40, 1_000, 100_000])
def test_json_nested_too_deep_is_a_validation_error(stack: Stack, levels: int) -> None:
    body = '{"query": "keys", "filters": ' + "[" * levels + "]" * levels + "}"
    event = api_event("POST", "/v1/search", body=body, identity=ALICE)
    error = _error(_call(stack, "query", event), event, 400, "VALIDATION_ERROR")
    assert "nested more than" in error["message"]


def test_filters_at_their_limits_work_on_both_backends(stack: Stack) -> None:
    # Given a document, and filters as large as the limits allow in every direction
    stack.upload_and_ingest(ALICE, "runbook.md", RUNBOOK, metadata={"dept": "ops"})
    groups = [{"andAll": [_leaf(n * 5 + m) for m in range(5)]} for n in range(MAX_FILTER_BRANCHES)]
    full = {"orAll": groups}  # the largest tree the OpenAPI document's form allows: MAX_FILTER_NODES objects
    assert Filter.model_validate(full).node_count == MAX_FILTER_NODES
    deep = _nested(MAX_FILTER_DEPTH)
    in_list = {"in": {"key": "dept", "value": ["ops"] + [f"d{n}" for n in range(MAX_FILTER_LIST_VALUES - 1)]}}
    for filters, hits in ((full, 0), (deep, 0), (in_list, 1), ({"orAll": [in_list, _nested(MAX_FILTER_DEPTH - 1)]}, 1)):
        # When each is searched with
        status, body = stack.api("POST", "/v1/search", body={"query": "keys", "filters": filters}, identity=ALICE)
        # Then it is accepted and applied
        assert status == 200, body
        assert len(body["hits"]) == hits


@pytest.mark.parametrize(
    ("filters", "limit"),
    [
        # 20 x 20 x 20 leaves: within every per-level limit, 8,421 filter objects in all
        ({"andAll": [{"orAll": [{"andAll": [_leaf()] * 20}] * 20}] * 20}, "at most 121 filter objects"),
        ({"orAll": [{"andAll": [_leaf()] * 6}] * 20}, "at most 121 filter objects"),
        (_nested(MAX_FILTER_DEPTH + 1), "at most 8 levels"),
        ({"andAll": [_leaf()] * 21}, "at most 20 items"),
        ({"notIn": {"key": "dept", "value": ["x"] * (MAX_FILTER_LIST_VALUES + 1)}}, "at most 1000 items"),
        ({"equals": {"key": "dept", "value": "ops"}, "notEquals": {"key": "dept", "value": "hr"}}, "exactly one"),
    ],
)
def test_filters_over_a_limit_are_refused_naming_it(stack: Stack, filters: dict[str, Any], limit: str) -> None:
    event = api_event("POST", "/v1/search", body={"query": "keys", "filters": filters}, identity=ALICE)
    error = _error(_call(stack, "query", event), event, 400, "VALIDATION_ERROR")
    assert any(limit in problem["msg"] for problem in error["details"]["errors"]), error


@pytest.mark.parametrize(
    "identity",
    [claims("acme", "u" * 257), claims("acme", "alice\nbob"), claims("acme", "\x00")],
    ids=["too-long", "newline", "nul"],
)
def test_a_cognito_user_id_the_models_cannot_hold_is_unauthorized(stack: Stack, identity: dict[str, str]) -> None:
    event = api_event("GET", "/v1/documents", identity=identity)
    _error(_call(stack, "documents", event), event, 401, "UNAUTHORIZED")


def test_an_iam_principal_arn_longer_than_a_user_id_is_unauthorized(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = "arn:aws:iam::123456789012:user/" + "division/" * 30 + "ops"
    monkeypatch.setenv("CITEWISE_AUTH_MODE", "iam")
    monkeypatch.setenv("CITEWISE_TENANT_MAP", json.dumps({arn: "acme"}))
    event = api_event("GET", "/v1/documents", iam_arn=arn)
    _error(_call(stack, "documents", event), event, 401, "UNAUTHORIZED")


@pytest.mark.parametrize("content_type", ["Application/JSON", "APPLICATION/JSON; charset=UTF-8", "application/json"])
def test_json_is_json_in_any_letter_case(stack: Stack, content_type: str) -> None:
    body = {"filename": "a.md", "content_type": "text/markdown", "size": 3}
    event = api_event("POST", "/v1/uploads", body=body, identity=ALICE, content_type=content_type)
    response = _call(stack, "documents", event)
    assert response["statusCode"] == 200, response["body"]


@pytest.mark.parametrize(
    ("function", "path", "body", "content_type"),
    [
        # bodies Powertools would parse as forms and validate as if they were JSON
        ("query", "/v1/search", "query=keys", "application/x-www-form-urlencoded"),
        (
            "documents",
            "/v1/uploads",
            "filename=a.md&content_type=text%2Fmarkdown&size=3",
            "application/x-www-form-urlencoded",
        ),
        (
            "query",
            "/v1/search",
            '--b\r\nContent-Disposition: form-data; name="query"\r\n\r\nkeys\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
        ),
        ("query", "/v1/search", '{"query": "keys"}', "text/plain"),
        ("query", "/v1/search", '{"query": "keys"}', "application/jsonp"),
    ],
)
def test_a_body_that_is_not_json_is_unsupported_media_type(
    stack: Stack, function: str, path: str, body: str, content_type: str
) -> None:
    event = api_event("POST", path, body=body, identity=ALICE, content_type=content_type)
    _error(_call(stack, function, event), event, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    ("function", "method", "path", "allowed"),
    [
        ("query", "PUT", "/v1/query", "POST"),
        ("query", "GET", "/v1/search", "POST"),
        ("documents", "PATCH", f"/v1/documents/{DOC_ID}", "DELETE, GET"),
        ("documents", "POST", "/v1/documents", "GET"),
        ("documents", "DELETE", "/v1/health", "GET"),
    ],
)
def test_an_undeclared_method_on_a_known_path_is_405_with_allow(
    stack: Stack, function: str, method: str, path: str, allowed: str
) -> None:
    event = api_event(method, path, identity=ALICE)
    response = _call(stack, function, event)
    error = _error(response, event, 405, "METHOD_NOT_ALLOWED")
    assert response["multiValueHeaders"]["Allow"] == [allowed] or response.get("headers", {}).get("Allow") == allowed
    assert error["details"] == {"method": method, "allowed": allowed.split(", ")}


@pytest.mark.parametrize("groups", ["ops admin", "[admin]", "admin]", "[admin", "admins"])
def test_a_group_that_merely_contains_admin_cannot_delete_anothers_document(stack: Stack, groups: str) -> None:
    # Given alice's document
    doc_id = stack.upload_and_ingest(ALICE, "runbook.md", RUNBOOK)
    # When a caller of the same tenant whose group only resembles `admin` deletes it
    status, body = stack.api("DELETE", f"/v1/documents/{doc_id}", identity=claims("acme", "mallory", groups=groups))
    # Then it is forbidden, and the document stays
    assert status == 403 and body["error"]["code"] == "FORBIDDEN"
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)[0] == 200
