"""Routing through the API on both stacks: constraint phrases narrow the search, `route: false` does not."""

from __future__ import annotations

from tests.integration.handlers.harness import Stack, claims

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
    }


def test_routing_only_narrows_the_callers_own_filter(stack: Stack) -> None:
    _ingest(stack)
    own = {"equals": {"key": "source", "value": "confluence"}}
    status, body = stack.api(
        "POST", "/v1/search", body={"query": "queue retries in Jira", "filters": own}, identity=ALICE
    )
    assert status == 200 and body["hits"] == []  # jira AND confluence: nothing, never the union


def test_an_identifier_pins_its_document_and_the_answer_reports_routing(stack: Stack) -> None:
    ids = _ingest(stack)
    status, answer = stack.api(
        "POST", "/v1/query", body={"query": "what does PROJ-3 say about retries?"}, identity=ALICE
    )
    assert status == 200, answer
    assert answer["routing"]["pinned_documents"] == [ids["jira/PROJ-3.md"]]
    assert answer["sources"][0]["chunk"]["document"]["path"] == "jira/PROJ-3.md"
