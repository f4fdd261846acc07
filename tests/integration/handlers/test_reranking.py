"""Reranking through the query function on both stacks: the Bedrock reranker's order reaches the API, and a
reranker that fails (no model access) leaves the fused order, a warning, a field and a metric.

The Rerank API is a real `bedrock-agent-runtime` client answered by a `Stubber` (moto has no Bedrock);
the client factory hands it to the adapter when the handler first reranks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from citewise.aws import clients as aws
from tests.integration.handlers.harness import Output, Stack, claims

ALICE = claims("acme", "alice")
PATHS = ("a.md", "b.md", "c.md")


@pytest.fixture
def rerank_api(monkeypatch: pytest.MonkeyPatch, aws_credentials: None) -> Iterator[Stubber]:
    """The Rerank API the query function will reach, as a Stubber; reranking turned on."""
    client = boto3.client("bedrock-agent-runtime", region_name="us-west-2")
    made = aws.client

    def client_for(service: str, **kwargs: Any) -> Any:
        return client if service == "bedrock-agent-runtime" else made(service, **kwargs)

    monkeypatch.setattr(aws, "client", client_for)
    monkeypatch.setenv("CITEWISE_RERANKER", "bedrock")
    monkeypatch.setenv("CITEWISE_RERANK_REGION", "us-west-2")
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def _ingest(stack: Stack) -> None:
    for path in PATHS:
        stack.upload_and_ingest(ALICE, path, f"# {path}\n\nQueue retries back off.\n".encode())


def _search(stack: Stack, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], dict[str, Any], Output]:
    capsys.readouterr()
    status, body = stack.api("POST", "/v1/search", body={"query": "queue retries", "route": False}, identity=ALICE)
    assert status == 200, body
    return [hit["chunk"]["document"]["path"] for hit in body["hits"]], body, Output.parse(capsys.readouterr().out)


def test_the_rerankers_order_is_the_apis(
    stack: Stack, rerank_api: Stubber, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three one-chunk documents, and their fused order with reranking off
    _ingest(stack)
    monkeypatch.setenv("CITEWISE_RERANKER", "none")
    fused, _, _ = _search(stack, capsys)
    stack.handlers.clear()  # the next call is a new cold start, with reranking on
    monkeypatch.setenv("CITEWISE_RERANKER", "bedrock")
    # When the Rerank API reverses that order
    answer = {"results": [{"index": 2, "relevanceScore": 0.9}, {"index": 1, "relevanceScore": 0.5}]}
    answer["results"].append({"index": 0, "relevanceScore": 0.1})
    rerank_api.add_response("rerank", answer)
    paths, body, output = _search(stack, capsys)
    # Then the hits come in its order, with its scores, the report names the model, and it is counted
    assert paths == fused[::-1]
    assert [hit["rerank_score"] for hit in body["hits"]] == [0.9, 0.5, 0.1]
    assert body["reranking"] == {"reranker": "amazon.rerank-v1:0", "candidates": 3, "fallback": None}
    assert output.metric("Reranked") == [1.0] and output.metric("RerankFallbacks") == []


def test_a_reranker_without_model_access_leaves_the_fused_order(
    stack: Stack, rerank_api: Stubber, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model the account has no access to
    _ingest(stack)
    for _ in range(2):
        rerank_api.add_client_error("rerank", service_error_code="AccessDeniedException", http_status_code=403)
    # When a question is asked
    capsys.readouterr()
    status, body = stack.api("POST", "/v1/query", body={"query": "queue retries", "route": False}, identity=ALICE)
    output = Output.parse(capsys.readouterr().out)
    # Then it is answered from the fused order, and the answer, a warning and a metric say why
    assert status == 200, body
    assert body["grounded"] is True
    reason = "SEARCH_BACKEND_ERROR (AccessDeniedException)"
    assert body["reranking"] == {"reranker": "amazon.rerank-v1:0", "candidates": 3, "fallback": reason}
    assert all(source["rerank_score"] is None for source in body["sources"])
    (warning,) = output.messages("reranking failed, the fused order is kept")
    assert warning["level"] == "WARNING" and warning["reason"] == reason
    assert output.metric("RerankFallbacks") == [1.0] and output.metric("Reranked") == []
    # And a search gets the same order as with reranking off
    paths, body, _ = _search(stack, capsys)
    assert body["reranking"]["fallback"] == reason
    stack.handlers.clear()
    monkeypatch.setenv("CITEWISE_RERANKER", "none")
    fused, body, _ = _search(stack, capsys)
    assert paths == fused and len(fused) == len(PATHS) and body["reranking"] is None
