"""Routing through the API on both stacks: constraint phrases narrow the search, `route: false` does not."""

from __future__ import annotations

import re
from typing import Any

import pytest

from citewise.domain.models import (
    MAX_FILTER_BRANCHES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_NODES,
    SCHEMA_GROUP_BRANCHES,
    Filter,
)
from tests.integration.handlers.harness import Stack, claims
from tests.integration.handlers.test_mcp import tool

ALICE = claims("acme", "alice")
DOCUMENTS = {
    "jira/PROJ-7.md": "2024-05-01",
    "jira/PROJ-3.md": "2023-02-01",
    "confluence/queues.md": "2024-06-01",
}


def _ingest(stack: Stack) -> dict[str, str]:
    ids = {}
    for path, updated in DOCUMENTS.items():
        body = f"---\nupdated: {updated}\n---\n# Queue retries\n\nQueue retries back off exponentially.\n"
        ids[path] = stack.upload_and_ingest(ALICE, path, body.encode())
    return ids


def _paths(body: dict[str, object]) -> list[str]:
    return sorted({hit["chunk"]["document"]["path"] for hit in body["hits"]})  # type: ignore[attr-defined,index]


def test_a_routed_search_returns_only_documents_inside_the_constraint(stack: Stack) -> None:
    # Given documents of two sources and two years
    _ingest(stack)
    # When a question names a source and a year
    status, body = stack.api("POST", "/v1/search", body={"query": "queue retries in Jira in 2024"}, identity=ALICE)
    # Then only that source's documents of that year come back, and the response says why
    assert status == 200, body
    assert _paths(body) == ["jira/PROJ-7.md"]
    routing = body["routing"]
    assert routing["router"] == "deterministic" and routing["consumed_phrases"] == ["in Jira", "in 2024"]
    assert routing["pinned_documents"] == []
    assert {"in": {"key": "source", "value": ["jira"]}} in routing["applied_filters"]["andAll"]
    for hit in body["hits"]:
        assert hit["chunk"]["document"]["source_date"].startswith("2024-05-01")
    # And the same question with route: false searches everything
    status, body = stack.api(
        "POST", "/v1/search", body={"query": "queue retries in Jira in 2024", "route": False}, identity=ALICE
    )
    assert status == 200 and _paths(body) == sorted(DOCUMENTS)
    assert body["routing"] == {
        "applied_filters": None,
        "consumed_phrases": [],
        "pinned_documents": [],
        "router": "off",
        "fallback": None,
        "filter_fallback": None,
        "versions": None,
    }


def test_routing_only_narrows_the_callers_own_filter(stack: Stack) -> None:
    _ingest(stack)
    own = {"equals": {"key": "source", "value": "confluence"}}
    status, body = stack.api(
        "POST", "/v1/search", body={"query": "queue retries in Jira", "filters": own}, identity=ALICE
    )
    # jira AND confluence match nothing, so the routed filter is dropped (issue 26); the caller's own filter
    # never is: confluence only, never the union
    assert status == 200 and _paths(body) == ["confluence/queues.md"]
    assert body["routing"]["applied_filters"] is None
    assert body["routing"]["filter_fallback"]["reason"] == "NO_MATCH"


def test_an_identifier_pins_its_document_and_the_answer_reports_routing(stack: Stack) -> None:
    ids = _ingest(stack)
    status, answer = stack.api(
        "POST", "/v1/query", body={"query": "what does PROJ-3 say about retries?"}, identity=ALICE
    )
    assert status == 200, answer
    paths = [source["chunk"]["document"]["path"] for source in answer["sources"]]
    if stack.vectors is not None:
        # S3 Vectors cannot find an id inside a path (no substring filter): nothing is pinned (a 400
        # before), and the question is answered by its ranking alone, which finds the document, not first
        assert answer["routing"]["pinned_documents"] == []
        assert "jira/PROJ-3.md" in paths
        return
    assert answer["routing"]["pinned_documents"] == [ids["jira/PROJ-3.md"]]
    assert paths[0] == "jira/PROJ-3.md"


def no_pins_in_s3vectors(stack: Stack, request: pytest.FixtureRequest) -> None:
    """Expect the test to fail in search mode s3vectors, which pins no identifier (no substring filter)."""
    if stack.vectors is not None:
        reason = "search mode s3vectors pins no identifier: S3 Vectors has no substring filter (stringContains)"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


# --- issue 32: routing at the filter limits, and the floor over pinned documents --------------------------


def _deepest() -> dict[str, Any]:
    """A filter exactly `MAX_FILTER_DEPTH` levels deep, true of every document here."""
    flt: dict[str, Any] = {"notEquals": {"key": "source", "value": "zendesk"}}
    for _ in range(MAX_FILTER_DEPTH - 1):
        flt = {"andAll": [flt]}
    return flt


def _largest() -> dict[str, Any]:
    """A filter of exactly `MAX_FILTER_NODES` objects, true of every document here."""
    groups = [
        {"andAll": [{"notEquals": {"key": "source", "value": f"none-{g}-{i}"}} for i in range(SCHEMA_GROUP_BRANCHES)]}
        for g in range(MAX_FILTER_BRANCHES)
    ]
    return {"orAll": groups}


@pytest.mark.parametrize("own", [_deepest(), _largest()], ids=["deepest", "largest"])
def test_a_filter_at_the_limits_is_still_routed_and_pinned(
    stack: Stack, own: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    no_pins_in_s3vectors(stack, request)
    # Given a filter at a limit (a 500 and INTERNAL_ERROR before: the routed filter or the pins' filter
    # ANDed with it was validated as if the caller had sent it)
    parsed = Filter.model_validate(own)
    assert parsed.depth == MAX_FILTER_DEPTH or parsed.node_count == MAX_FILTER_NODES
    ids = _ingest(stack)
    # When a question adds a routed source, a routed year and a pinned id to it
    question = "what does PROJ-3 say about queue retries in Jira in 2024?"
    status, body = stack.api("POST", "/v1/search", body={"query": question, "filters": own}, identity=ALICE)
    # Then the search answers: the pinned document first, then what the constraints leave
    assert status == 200, body
    assert body["routing"]["consumed_phrases"] == ["in Jira", "in 2024"]
    assert body["routing"]["pinned_documents"] == [ids["jira/PROJ-3.md"]]
    assert [hit["chunk"]["document"]["path"] for hit in body["hits"]][:2] == ["jira/PROJ-3.md", "jira/PROJ-7.md"]
    assert _paths(body) == ["jira/PROJ-3.md", "jira/PROJ-7.md"]
    # And the same through the MCP search tool
    result = tool(stack, "search", {"query": question, "filters": own})
    assert not result.is_error, result
    found = result.structured_content or {}
    assert found["routing"]["pinned_documents"] == [ids["jira/PROJ-3.md"]]
    assert {hit["path"] for hit in found["hits"]} == {"jira/PROJ-3.md", "jira/PROJ-7.md"}


def test_min_score_holds_for_a_pinned_document(stack: Stack, request: pytest.FixtureRequest) -> None:
    no_pins_in_s3vectors(stack, request)
    # Given a pinned document and its relevance to the question
    ids = _ingest(stack)
    question = {"query": "what does PROJ-3 say about retries?"}
    status, body = stack.api("POST", "/v1/search", body=question, identity=ALICE)
    assert status == 200 and body["routing"]["pinned_documents"] == [ids["jira/PROJ-3.md"]]
    score = body["hits"][0]["relevance_score"]
    assert body["hits"][0]["chunk"]["document"]["path"] == "jira/PROJ-3.md" and score < 1
    # When the same question sets a floor above it (a profile's floor arrives as this same min_score)
    status, body = stack.api("POST", "/v1/search", body={**question, "min_score": (score + 1) / 2}, identity=ALICE)
    # Then the pinned document is left out like any other below the floor
    assert status == 200, body
    assert body["routing"]["pinned_documents"] == []
    assert all(hit["chunk"]["document"]["path"] != "jira/PROJ-3.md" for hit in body["hits"])
    assert all(hit["relevance_score"] >= (score + 1) / 2 for hit in body["hits"])


# --- issue 26: a routed filter never empties an answer silently ------------------------------------------

PYDANTIC = (
    "---\nupdated: 2026-02-01\n---\n# Pydantic support\n\n"
    "Support for Pydantic version 2 was added to FastAPI in 2023, in release 0.100.0.\n"
)
INVOICES = "---\nupdated: 2023-05-01\n---\n# Invoices\n\nAn invoice lists amounts owed, payment terms and tax.\n"
CONTENT_DATE = "Which Pydantic version support was added in 2023?"
ROUTED_DATE = "Pydantic version support in 2023"


def test_a_routed_date_that_no_document_carries_falls_back_to_the_whole_question(stack: Stack) -> None:
    # Given documentation dated 2026 that says what happened in 2023
    stack.upload_and_ingest(ALICE, "docs/pydantic.md", PYDANTIC.encode())
    # When a question names 2023 in words the router reads as a document date
    status, body = stack.api("POST", "/v1/search", body={"query": ROUTED_DATE}, identity=ALICE)
    # Then the routed filter, which matched nothing, is dropped, the whole question is searched, and the
    # report says what was dropped and why
    assert status == 200, body
    assert _paths(body) == ["docs/pydantic.md"]
    routing = body["routing"]
    assert routing["applied_filters"] is None and routing["consumed_phrases"] == []
    fallback = routing["filter_fallback"]
    assert fallback["reason"] == "NO_MATCH"
    assert fallback["dropped_phrases"] == ["in 2023"]
    assert fallback["dropped_filters"]["andAll"][0]["greaterThanOrEquals"]["key"] == "source_date"
    assert "matched no document" in fallback["message"]
    # And the answer is made from it, not refused with NO_FILTER_MATCH
    status, answer = stack.api("POST", "/v1/query", body={"query": ROUTED_DATE}, identity=ALICE)
    assert status == 200, answer
    assert answer["routing"]["filter_fallback"]["reason"] == "NO_MATCH"
    assert {source["chunk"]["document"]["path"] for source in answer["sources"]} == {"docs/pydantic.md"}
    assert (answer["notice"] or {}).get("code") != "NO_FILTER_MATCH"


def test_a_date_of_something_added_is_about_the_content_and_is_not_routed(stack: Stack) -> None:
    # Given documentation dated 2026 that says what happened in 2023
    stack.upload_and_ingest(ALICE, "docs/pydantic.md", PYDANTIC.encode())
    # When the question of issue 26 asks when something was added
    status, answer = stack.api("POST", "/v1/query", body={"query": CONTENT_DATE}, identity=ALICE)
    # Then "in 2023" stays in the searched text, adds no filter, and the documentation answers
    assert status == 200, answer
    assert answer["routing"]["consumed_phrases"] == [] and answer["routing"]["applied_filters"] is None
    assert answer["routing"]["filter_fallback"] is None
    assert {source["chunk"]["document"]["path"] for source in answer["sources"]} == {"docs/pydantic.md"}
    assert answer["notice"] is None


def test_a_routed_result_much_weaker_than_the_unrouted_one_falls_back(stack: Stack) -> None:
    # Given the documentation (2026) and an unrelated document that does carry the date 2023
    stack.upload_and_ingest(ALICE, "docs/pydantic.md", PYDANTIC.encode())
    stack.upload_and_ingest(ALICE, "finance/invoices.md", INVOICES.encode())
    # When a question about content is routed to the 2023 document only
    status, body = stack.api("POST", "/v1/search", body={"query": ROUTED_DATE}, identity=ALICE)
    # Then the routed result, far less likely relevant than the unrouted one, is dropped and the report
    # gives both relevances
    assert status == 200, body
    assert body["hits"][0]["chunk"]["document"]["path"] == "docs/pydantic.md"
    fallback = body["routing"]["filter_fallback"]
    assert fallback["reason"] == "WEAKER" and fallback["dropped_phrases"] == ["in 2023"]
    routed, unrouted = map(float, re.findall(r"relevance (\S+) against (\S+)\)", fallback["message"])[0])
    assert routed < 0.01 and routed * 10 < unrouted, fallback
    assert body["routing"]["applied_filters"] is None


def test_a_routed_result_as_relevant_as_the_unrouted_one_stays_routed(stack: Stack) -> None:
    # Given three documents saying the same of different sources and years
    _ingest(stack)
    # When the question names one source and year
    status, body = stack.api("POST", "/v1/search", body={"query": "queue retries in Jira in 2024"}, identity=ALICE)
    # Then the narrowing holds and no fallback is reported
    assert status == 200 and _paths(body) == ["jira/PROJ-7.md"]
    assert body["routing"]["filter_fallback"] is None


def test_a_fallback_stays_inside_the_callers_access(stack: Stack) -> None:
    # Given Bob's private document that answers the question, and Alice's documentation dated 2026
    bob = claims("acme", "bob")
    stack.upload_and_ingest(bob, "bob/pydantic.md", PYDANTIC.encode(), visibility="private")
    stack.upload_and_ingest(ALICE, "docs/pydantic.md", PYDANTIC.encode())
    # When Alice's routed filter matches nothing and falls back
    status, body = stack.api("POST", "/v1/search", body={"query": ROUTED_DATE}, identity=ALICE)
    # Then she still sees only what she may read
    assert status == 200, body
    assert body["routing"]["filter_fallback"]["reason"] == "NO_MATCH"
    assert _paths(body) == ["docs/pydantic.md"]
