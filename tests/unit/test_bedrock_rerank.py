"""The Bedrock reranker: what it asks the Rerank API, how it reads the answer, and how it fails.

Calls go through a real `bedrock-agent-runtime` client answered by a `Stubber`, which checks each request
and each response against botocore's model of the Rerank API (the conformance check of tests/conftest.py
checks the request again, as it does every call). Answers the API's model would refuse (a missing score,
an index outside the request) come from a plain double, since the Stubber cannot send them.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber

from citewise.aws import bedrock_rerank
from citewise.aws import clients as aws
from citewise.aws.bedrock_rerank import AMAZON_RERANK_V1, COHERE_RERANK_V3_5, BedrockReranker
from citewise.domain import deadline
from citewise.domain.errors import SearchBackendError, ThrottledError
from citewise.ports.reranker import Relevance

REGION = "us-west-2"
AMAZON_ARN = f"arn:aws:bedrock:{REGION}::foundation-model/{AMAZON_RERANK_V1}"
DOCUMENTS = ["Invoices > Late payment\n\nOverdue invoices accrue interest.", "Volcanoes\n\nMagma rises."]


@pytest.fixture
def agent_client(aws_credentials: None) -> Any:
    return boto3.client("bedrock-agent-runtime", region_name=REGION)


@pytest.fixture
def agent_stub(agent_client: Any) -> Any:
    with Stubber(agent_client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def expected_request(query: str, documents: list[str], model_arn: str = AMAZON_ARN) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}}}
            for text in documents
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "modelConfiguration": {"modelArn": model_arn},
                "numberOfResults": len(documents),
            },
        },
    }


def results(*pairs: tuple[int, float]) -> dict[str, Any]:
    return {"results": [{"index": index, "relevanceScore": score} for index, score in pairs]}


def test_the_request_scores_every_document_with_the_models_arn_in_the_clients_region(
    agent_client: Any, agent_stub: Stubber
) -> None:
    # Given a reranker of Amazon Rerank 1.0 and an API that prefers the second document
    agent_stub.add_response("rerank", results((1, 0.91), (0, 0.12)), expected_request("overdue interest", DOCUMENTS))
    # When it reranks two documents
    scores = BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank("overdue interest", DOCUMENTS)
    # Then the request holds the query, each document as an inline text source and the model's ARN, and
    # the answer is every document's score, best first
    assert scores == [Relevance(index=1, score=0.91), Relevance(index=0, score=0.12)]


def test_cohere_and_a_configured_arn_are_sent_as_such(agent_client: Any, agent_stub: Stubber) -> None:
    cohere_arn = f"arn:aws:bedrock:{REGION}::foundation-model/{COHERE_RERANK_V3_5}"
    agent_stub.add_response("rerank", results((0, 0.5)), expected_request("q", ["a"], cohere_arn))
    assert BedrockReranker(COHERE_RERANK_V3_5, client=agent_client).rerank("q", ["a"]) == [Relevance(0, 0.5)]
    other = "arn:aws:bedrock:eu-central-1::foundation-model/amazon.rerank-v1:0"
    agent_stub.add_response("rerank", results((0, 0.5)), expected_request("q", ["a"], other))
    assert BedrockReranker(other, client=agent_client).rerank("q", ["a"]) == [Relevance(0, 0.5)]


def test_texts_are_cut_to_the_apis_limit_and_a_blank_one_is_still_sent(agent_client: Any, agent_stub: Stubber) -> None:
    long = "x" * (bedrock_rerank.MAX_TEXT_CHARS + 5)
    cut = "x" * bedrock_rerank.MAX_TEXT_CHARS
    agent_stub.add_response("rerank", results((0, 0.2), (1, 0.1)), expected_request(cut, [cut, " "]))
    assert len(BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank(long, [long, ""])) == 2


def test_a_next_token_is_followed_with_the_same_request(agent_client: Any, agent_stub: Stubber) -> None:
    # Given an API that answers in two pages
    first = expected_request("q", DOCUMENTS)
    agent_stub.add_response("rerank", {**results((1, 0.9)), "nextToken": "page-2"}, first)
    agent_stub.add_response("rerank", results((0, 0.3)), {**first, "nextToken": "page-2"})
    # Then both pages make the answer
    scores = BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank("q", DOCUMENTS)
    assert scores == [Relevance(1, 0.9), Relevance(0, 0.3)]


def test_no_documents_means_no_call(agent_client: Any, agent_stub: Stubber) -> None:
    assert BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank("q", []) == []


def test_more_sources_than_the_api_takes_are_refused_before_any_call(agent_client: Any, agent_stub: Stubber) -> None:
    with pytest.raises(SearchBackendError, match="at most 1000 sources"):
        BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank("q", ["a"] * 1001)


def test_the_default_client_is_made_on_first_use_in_the_rerankers_region_failing_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[str, str | None, dict[str, int]]] = []

    class Meta:
        partition = "aws"
        region_name = "ca-central-1"

    class Client:
        meta = Meta()

        def rerank(self, **request: Any) -> dict[str, Any]:
            arn = request["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"]["modelArn"]
            assert arn == "arn:aws:bedrock:ca-central-1::foundation-model/amazon.rerank-v1:0"
            return results((0, 1.0))

    def fake_client(service: str, *, region: str | None = None, **config: int) -> Client:
        made.append((service, region, config))
        return Client()

    monkeypatch.setattr(aws, "client", fake_client)
    reranker = BedrockReranker(AMAZON_RERANK_V1, region="ca-central-1", read_timeout=4)
    assert made == []
    reranker.rerank("q", ["a"])
    reranker.rerank("q", ["a"])
    assert made == [("bedrock-agent-runtime", "ca-central-1", {"max_attempts": 2, "read_timeout": 4})]


def test_an_empty_model_id_is_refused_at_configuration() -> None:
    with pytest.raises(ValueError, match="model id"):
        BedrockReranker("")


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("AccessDeniedException", 403, SearchBackendError),
        ("ValidationException", 400, SearchBackendError),
        ("ResourceNotFoundException", 404, SearchBackendError),
        ("ThrottlingException", 429, ThrottledError),
        ("ServiceQuotaExceededException", 400, ThrottledError),
    ],
)
def test_api_errors_are_translated_with_the_aws_error(
    agent_client: Any, agent_stub: Stubber, code: str, status: int, error: type[Exception]
) -> None:
    agent_stub.add_client_error(
        "rerank", service_error_code=code, http_status_code=status, expected_params=expected_request("q", DOCUMENTS)
    )
    with pytest.raises(error) as raised:
        BedrockReranker(AMAZON_RERANK_V1, client=agent_client).rerank("q", DOCUMENTS)
    assert raised.value.details == {"aws_error": code, "action": "bedrock:Rerank"}  # type: ignore[attr-defined]


def test_a_read_timeout_is_a_backend_error(aws_credentials: None) -> None:
    client = aws.client("bedrock-agent-runtime", region=REGION, max_attempts=1)

    def time_out(request: Any, **_: Any) -> None:
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.bedrock-agent-runtime.Rerank", time_out)
    with pytest.raises(SearchBackendError, match="ReadTimeoutError"):
        BedrockReranker(AMAZON_RERANK_V1, client=client).rerank("q", DOCUMENTS)


def test_no_request_is_sent_when_the_budget_is_spent(aws_credentials: None) -> None:
    # Given an invocation with less time left than any call needs
    client = aws.client("bedrock-agent-runtime", region=REGION)
    with deadline.budget(int((deadline.MIN_CALL_SECONDS / 2 + deadline.RESERVE_SECONDS) * 1000)):
        # Then the attempt is refused before it is sent (a sent one would fail to connect instead)
        with pytest.raises(SearchBackendError, match="did not finish in the function's time budget") as raised:
            BedrockReranker(AMAZON_RERANK_V1, client=client).rerank("q", DOCUMENTS)
    assert raised.value.details == {"aws_error": "none", "action": "bedrock:Rerank"}


class Answering:
    """A client that answers `response` whatever it is asked (what the API's model would not let a Stubber say)."""

    class meta:  # noqa: N801 - botocore's attribute name
        partition = "aws"
        region_name = REGION

    def __init__(self, response: Any) -> None:
        self.response = response

    def rerank(self, **_: Any) -> Any:
        return self.response


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({}, "no results"),
        ([], "no results"),
        ({"results": None}, "no results"),
        ({"results": [{"index": 2, "relevanceScore": 0.5}]}, "names no source"),
        ({"results": [{"index": -1, "relevanceScore": 0.5}]}, "names no source"),
        ({"results": [{"index": True, "relevanceScore": 0.5}]}, "names no source"),
        ({"results": ["0"]}, "names no source"),
        ({"results": [{"index": 0}]}, "no numeric relevanceScore"),
        ({"results": [{"index": 0, "relevanceScore": "high"}]}, "no numeric relevanceScore"),
        ({"results": [{"index": 0, "relevanceScore": float("nan")}]}, "no numeric relevanceScore"),
    ],
)
def test_malformed_answers_are_backend_errors(response: Any, problem: str) -> None:
    with pytest.raises(SearchBackendError, match=problem):
        BedrockReranker(AMAZON_RERANK_V1, client=Answering(response)).rerank("q", DOCUMENTS)


def test_endless_pages_are_a_backend_error() -> None:
    endless = Answering({"results": [], "nextToken": "again"})
    with pytest.raises(SearchBackendError, match="pages"):
        BedrockReranker(AMAZON_RERANK_V1, client=endless).rerank("q", DOCUMENTS)
