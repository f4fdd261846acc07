"""Feedback over the query function, on every stack (SQLite; DynamoDB under moto, every call held to the
function's role): only the user who asked gives feedback on an answer, once per citation (again: replaced),
it counts for the cited documents' sources (a web page's `source_id`, an upload's `source`), the stats of a
source say so, and the feedback ranking signal reads them when a tenant turns it on."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.handlers.harness import Stack, claims

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
ALICE_OF_GLOBEX = claims("globex", "alice")
ADMIN = claims("acme", "root", groups="admin")
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n"
DOCS_PAGE = b"# Signing keys\n\nSigning keys are rotated by the rotate-keys job; it keeps the old key a week.\n"


@pytest.fixture(autouse=True)
def _settings_read_each_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant's settings and tallies are cached a minute per function: here each request reads them."""
    monkeypatch.setenv("CITEWISE_TENANT_SETTINGS_TTL", "0")


def _ask(stack: Stack, identity: dict[str, str] = ALICE) -> dict[str, Any]:
    status, answer = stack.api(
        "POST", "/v1/query", body={"query": "How often are signing keys rotated?"}, identity=identity
    )
    assert status == 200, answer
    assert answer["citations"], answer
    return answer


def _give(stack: Stack, identity: dict[str, str] = ALICE, **body: Any) -> tuple[int, Any]:
    return stack.api("POST", "/v1/feedback", body=body, identity=identity)


def _cited_sources(answer: dict[str, Any]) -> dict[int, str]:
    """[n] -> what its document counts for: its `source_id` attribute, else its `source`."""
    found = {}
    for citation in answer["citations"]:
        document = answer["sources"][citation["source"] - 1]["chunk"]["document"]
        found[citation["source"]] = document["attributes"].get("source_id") or document["source"]
    return found


def test_the_asker_rates_a_citation_and_the_source_counts_it_once(stack: Stack) -> None:
    # Given an upload under runbooks/ (its source) and a page of a registered web source (its source_id)
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    stack.upload_and_ingest(ALICE, "pages/keys.md", DOCS_PAGE, metadata={"source_id": "s-docs"})
    # And each source has documents and no feedback yet: stats of zero
    for source in ("runbooks", "s-docs"):
        status, stats = stack.api("GET", f"/v1/sources/{source}/stats", identity=BOB)
        assert status == 200, stats
        assert (stats["rated"], stats["helpful_share"], stats["effectiveness"], stats["ranks"]) == (0, None, 0.5, False)
    # When alice asks and rates the first citation unhelpful
    answer = _ask(stack)
    response_id = answer["conversation"]["response_id"]
    assert response_id == f"{answer['conversation']['conversation_id']}-1"
    cited = _cited_sources(answer)
    first = min(cited)
    status, receipt = _give(stack, response_id=response_id, citation=first, helpful=False, comment="too vague")
    # Then it is kept, counting for that citation's source
    assert status == 200, receipt
    assert receipt["replaced"] is False
    kept = receipt["feedback"]
    assert (kept["citation"], kept["helpful"], kept["comment"], kept["sources"]) == (
        first,
        False,
        "too vague",
        [cited[first]],
    )
    status, stats = stack.api("GET", f"/v1/sources/{cited[first]}/stats", identity=BOB)
    assert status == 200
    assert (stats["helpful"], stats["not_helpful"], stats["helpful_share"]) == (0, 1, 0.0)
    # When she changes her mind, then it replaces the first: the source counts her once, as helpful
    status, receipt = _give(stack, response_id=response_id, citation=first, helpful=True)
    assert status == 200 and receipt["replaced"] is True
    status, stats = stack.api("GET", f"/v1/sources/{cited[first]}/stats", identity=ALICE)
    assert (stats["helpful"], stats["not_helpful"], stats["rated"], stats["helpful_share"]) == (1, 0, 1, 1.0)
    assert stats["effectiveness"] == pytest.approx(3 / 5)  # (1 + 2) / (1 + 4): the prior of 4 votes at 0.5
    # And feedback on the whole answer counts for every source it cited
    status, receipt = _give(stack, response_id=response_id, helpful=True)
    assert status == 200 and receipt["feedback"]["sources"] == sorted(set(cited.values()))
    # And the turn kept what it cited, for feedback given later
    status, shown = stack.api("GET", f"/v1/conversations/{answer['conversation']['conversation_id']}", identity=ALICE)
    assert {int(n): source for n, source in shown["history"][0]["cited_sources"].items()} == cited


def test_only_the_asker_gives_feedback_and_bad_input_is_named(stack: Stack) -> None:
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    response_id = _ask(stack)["conversation"]["response_id"]
    # A colleague, the same user id in another tenant: 404 as for an answer that never was
    for someone in (BOB, ALICE_OF_GLOBEX):
        status, refused = _give(stack, someone, response_id=response_id, helpful=True)
        assert (status, refused["error"]["code"]) == (404, "NOT_FOUND")
    conversation_id, _, _ = response_id.rpartition("-")
    # No such turn, no such citation of the answer: 404 as well
    for body in ({"response_id": f"{conversation_id}-2"}, {"response_id": response_id, "citation": 99}):
        status, refused = _give(stack, **body, helpful=True)
        assert (status, refused["error"]["code"]) == (404, "NOT_FOUND"), body
    # A malformed id, a missing verdict, a verdict that is no boolean, a comment too long, a stray field: 400
    for body in (
        {"response_id": "r-1", "helpful": True},
        {"response_id": response_id},
        {"response_id": response_id, "helpful": "yes"},
        {"response_id": response_id, "helpful": True, "comment": "x" * 2001},
        {"response_id": response_id, "helpful": True, "tenant_id": "globex"},
    ):
        status, refused = _give(stack, **body)
        assert (status, refused["error"]["code"]) == (400, "VALIDATION_ERROR"), body
        assert refused["error"]["request_id"]
    # And a source nobody rated and no document carries is not found
    status, refused = stack.api("GET", "/v1/sources/s-unknown/stats", identity=ALICE)
    assert (status, refused["error"]["code"]) == (404, "NOT_FOUND")
    # And another tenant sees nothing of acme's sources
    _give(stack, response_id=response_id, helpful=True)
    status, _ = stack.api("GET", "/v1/sources/runbooks/stats", identity=ALICE_OF_GLOBEX)
    assert status == 404


def test_the_feedback_signal_scores_hits_by_their_sources_tally_once_a_tenant_turns_it_on(stack: Stack) -> None:
    # Given alice's answer, and feedback on it from her: unhelpful on every citation
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    answer = _ask(stack)
    cited = _cited_sources(answer)
    for n in cited:
        assert _give(stack, response_id=answer["conversation"]["response_id"], citation=n, helpful=False)[0] == 200
    effectiveness = (0 + 2) / (len(cited) + 4)  # no helpful vote of len(cited), and the prior of 4 votes at 0.5
    query = {"query": "How often are signing keys rotated?", "route": False}
    # When the tenant has not turned the signal on, then the hits say so (null)
    status, off = stack.api("POST", "/v1/search", body=query, identity=BOB)
    assert status == 200 and all(hit["components"]["feedback"] is None for hit in off["hits"])
    # When an admin turns it on with one rating enough
    settings = {"feedback_weight": 0.5, "feedback_min_votes": 1}
    assert stack.api("PUT", "/v1/settings", body=settings, identity=ADMIN)[0] == 200
    status, on = stack.api("POST", "/v1/search", body=query, identity=BOB)
    # Then each hit of runbooks carries its smoothed effectiveness, and its score is scaled by it
    assert status == 200
    runbooks = [hit for hit in on["hits"] if hit["chunk"]["document"]["source"] == "runbooks"]
    assert runbooks
    for hit in runbooks:
        parts = hit["components"]
        assert parts["feedback"] == pytest.approx(effectiveness, abs=1e-6)
        assert parts["final"] == pytest.approx(parts["fused"] * (1 - 0.5 * (1 - effectiveness)), abs=1e-5)
