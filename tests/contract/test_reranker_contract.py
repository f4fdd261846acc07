"""One Reranker contract, run against every adapter: Bedrock Rerank on a fake service that scores the
request it is sent (checked against botocore's model of the Rerank API) by the words each source shares
with the query, so any number of documents gets a scripted answer.

What the retriever relies on (`citewise.ports.reranker.Reranker`): a score for every document, each index
once (in any order: the retriever sorts); no documents, no call; a failure is a `CitewiseError`, which
the retriever turns into the fused order with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.aws.bedrock_rerank import AMAZON_RERANK_V1, BedrockReranker
from citewise.domain.errors import CitewiseError
from citewise.ports.reranker import Reranker, reranked_order

RERANK = botocore.session.get_session().get_service_model("bedrock-agent-runtime").operation_model("Rerank")


class FakeRerankApi:
    """Answers Rerank as the service would, scoring each source by the words it shares with the query; with
    `fail`, answers nothing but that error. Counts the calls."""

    class meta:  # noqa: N801 - botocore's attribute name
        partition = "aws"
        region_name = "us-west-2"

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.calls = 0

    def rerank(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        report = ParamValidator().validate(request, RERANK.input_shape)
        assert not report.has_errors(), report.generate_report()
        if self.fail is not None:
            raise self.fail
        query = set(request["queries"][0]["textQuery"]["text"].split())
        texts = [source["inlineDocumentSource"]["textDocument"]["text"] for source in request["sources"]]
        scores = [len(query & set(text.split())) / (1 + len(query)) for text in texts]
        order = sorted(range(len(texts)), key=lambda index: -scores[index])
        return {"results": [{"index": index, "relevanceScore": scores[index]} for index in order]}


def _bedrock(api: FakeRerankApi) -> Reranker:
    return BedrockReranker(AMAZON_RERANK_V1, client=api)


ADAPTERS: dict[str, Callable[[FakeRerankApi], Reranker]] = {"bedrock": _bedrock}


@pytest.fixture(params=sorted(ADAPTERS))
def make(request: pytest.FixtureRequest) -> Callable[[FakeRerankApi], Reranker]:
    return ADAPTERS[request.param]


WORDS = st.sampled_from(["queue", "retry", "invoice", "lava", "key", "rotation", "the"])
TEXTS = st.lists(st.lists(WORDS, max_size=6).map(" ".join), min_size=1, max_size=120)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # a factory
@given(query=st.lists(WORDS, min_size=1, max_size=4).map(" ".join), documents=TEXTS)
def test_every_document_is_scored_exactly_once(
    make: Callable[[FakeRerankApi], Reranker], query: str, documents: Sequence[str]
) -> None:
    relevances = make(FakeRerankApi()).rerank(query, documents)
    assert sorted(relevance.index for relevance in relevances) == list(range(len(documents)))
    # which is what the retriever checks before it uses the order
    assert len(reranked_order(relevances, len(documents))) == len(documents)


def test_no_documents_no_call(make: Callable[[FakeRerankApi], Reranker]) -> None:
    api = FakeRerankApi()
    assert make(api).rerank("queue retries", []) == []
    assert api.calls == 0


def test_the_reranker_has_a_name_for_the_reports(make: Callable[[FakeRerankApi], Reranker]) -> None:
    assert make(FakeRerankApi()).name


@pytest.mark.parametrize("code", ["AccessDeniedException", "ThrottlingException", "ValidationException"])
def test_a_failure_of_the_service_is_a_citewise_error(make: Callable[[FakeRerankApi], Reranker], code: str) -> None:
    failure = ClientError({"Error": {"Code": code, "Message": "refused"}}, "Rerank")
    with pytest.raises(CitewiseError) as raised:
        make(FakeRerankApi(fail=failure)).rerank("q", ["a"])
    assert raised.value.details["aws_error"] == code
