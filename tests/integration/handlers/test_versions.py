"""Versions through the API on every stack: documents declare versions in their sidecars, filters compare
them as versions, and a question naming a version prefers the documents valid for it."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.handlers.harness import Stack, claims, s3_notification

ALICE = claims("acme", "alice")
TEXT = "# Event loop policy\n\nSet the event loop policy before running the coroutine.\n"
PAGES: dict[str, dict[str, str]] = {
    "python/3.9/asyncio.md": {"version": "3.9"},
    "python/3.11/asyncio.md": {"version": "3.11"},
    "python/3.12/asyncio.md": {"version": "3.12"},
    "python/policy-helpers.md": {"introduced_in": "3.13"},
    "python/old-loop.md": {"deprecated_in": "3.10"},
    "notes/loop.md": {},
}


def _ingest(stack: Stack) -> None:
    for path, attributes in PAGES.items():
        key = f"tenants/acme/{path}"
        if attributes:
            sidecar = json.dumps({"metadataAttributes": attributes}).encode()
            stack.put_object(key + ".metadata.json", sidecar, content_type="application/json")
        stack.put_object(key, TEXT.encode())
        failures = stack.ingest(s3_notification("ObjectCreated:Put", key, size=len(TEXT)))
        assert failures == {"batchItemFailures": []}


def _search(stack: Stack, **body: Any) -> dict[str, Any]:
    status, answer = stack.api("POST", "/v1/search", body={"top_k": 10, **body}, identity=ALICE)
    assert status == 200, answer
    return answer


def _paths(answer: dict[str, Any]) -> list[str]:
    return [hit["chunk"]["document"]["path"] for hit in answer["hits"]]


def test_a_version_filter_compares_versions_not_strings(stack: Stack) -> None:
    # Given pages of Python 3.9, 3.11 and 3.12 ("3.9" > "3.12" as strings)
    _ingest(stack)

    # When filtered on versions from 3.10 on
    newer = {"versionGreaterThanOrEquals": {"key": "version", "value": "3.10"}}
    answer = _search(stack, query="event loop policy", filters=newer, route=False)

    # Then the 3.11 and 3.12 pages match, on every stack
    assert sorted(_paths(answer)) == ["python/3.11/asyncio.md", "python/3.12/asyncio.md"]


def test_a_version_filter_on_another_key_or_with_no_version_is_a_400(stack: Stack) -> None:
    for flt in (
        {"versionEquals": {"key": "year", "value": "3.12"}},
        {"versionLessThan": {"key": "version", "value": "latest"}},
    ):
        status, body = stack.api("POST", "/v1/search", body={"query": "loop", "filters": flt}, identity=ALICE)
        assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR", body


def test_a_question_naming_a_version_prefers_the_documents_valid_for_it(stack: Stack) -> None:
    # Given pages of several versions, one introduced later, one deprecated earlier, one with no version
    _ingest(stack)

    # When asked about Python 3.12
    answer = _search(stack, query="How do I set the event loop policy for Python 3.12?")

    # Then the pages valid for 3.12 (its own page and the page declaring no version) come first, the others
    # after them, none left out, and the routing report says which version and what it demoted
    paths = _paths(answer)
    assert sorted(paths[:2]) == ["notes/loop.md", "python/3.12/asyncio.md"]
    assert sorted(paths[2:]) == sorted(
        ["python/3.9/asyncio.md", "python/3.11/asyncio.md", "python/policy-helpers.md", "python/old-loop.md"]
    )
    versions = answer["routing"]["versions"]
    assert versions["versions"] == ["3.12"] and versions["phrases"] == ["Python 3.12"]
    assert len(versions["demoted_documents"]) == 4
    # And unrouted, or naming no version, nothing is preferred or reported
    assert _search(stack, query="How do I set the event loop policy?")["routing"]["versions"] is None
    assert _search(stack, query="event loop policy for Python 3.12", route=False)["routing"]["versions"] is None


def test_a_version_no_document_declares_reports_nothing(stack: Stack) -> None:
    # Given documents that declare no versions
    key = "tenants/acme/notes/loop.md"
    stack.put_object(key, TEXT.encode())
    assert stack.ingest(s3_notification("ObjectCreated:Put", key, size=len(TEXT))) == {"batchItemFailures": []}

    # When a question names a version / Then the search is as it was, and routing reports no preference
    answer = _search(stack, query="event loop policy in Python 3.12")
    assert _paths(answer) == ["notes/loop.md"] and answer["routing"]["versions"] is None
