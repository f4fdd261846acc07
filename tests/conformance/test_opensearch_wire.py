"""The specification check itself: it must catch what OpenSearch would refuse, and pass what it takes."""

from __future__ import annotations

import json

import pytest

from tests.conformance.opensearch_wire import SPEC, _spec, problems
from tests.doubles.opensearch_server import Recorded


def recorded(method: str, path: str, body: object = None, **params: str) -> Recorded:
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return Recorded(method, path, params, raw, 200)


def test_the_vendored_specification_is_pinned_and_holds_the_operations_citewise_sends() -> None:
    spec = _spec()
    assert len(spec["commit"]) == 40
    assert set(spec["operations"]) == {
        "HEAD /{index}",
        "PUT /{index}",
        "GET /{index}/_mapping",
        "POST /{index}/_refresh",
        "POST /{index}/_bulk",
        "POST /{index}/_search",
    }


def test_the_vendored_extract_travels_with_the_upstream_licence_and_notice() -> None:
    # Apache-2.0 section 4: a redistribution gives its recipients the licence and the NOTICE file
    directory = SPEC.parent
    licence = (directory / "LICENSE.txt").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in licence
    assert "Copyright OpenSearch Contributors" in (directory / "NOTICE.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "request_",
    [
        recorded("POST", "/chunks/_search", {"size": 3, "query": {"term": {"doc_id": "d"}}, "sort": ["chunk_id"]}),
        recorded("POST", "/chunks/_bulk", b'{"delete":{"_id":"a"}}\n{"index":{}}\n{"x":1}\n', refresh="true"),
        recorded("HEAD", "/chunks"),
    ],
)
def test_conforming_requests_pass(request_: Recorded) -> None:
    assert problems(request_) == []


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (recorded("POST", "/chunks/_search", {"size": "many"}), "size"),
        (recorded("POST", "/chunks/_search", {"query": {"knn": []}}), "knn"),
        (recorded("POST", "/chunks/_bulk", b'{"delete":{"_id":"a"}}\n', refresh="maybe"), "refresh"),
        (recorded("POST", "/chunks/_search", {}, scroll_everything="1"), "undeclared query parameter"),
        (recorded("POST", "/chunks/_delete_by_query", {}), "not an operation"),
        (recorded("GET", "/chunks/_mapping", {"a": 1}), "takes none"),
    ],
)
def test_requests_outside_the_specification_are_reported(request_: Recorded, expected: str) -> None:
    found = problems(request_)
    assert found and any(expected in problem for problem in found), found
