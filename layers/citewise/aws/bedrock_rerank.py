"""The Reranker on Amazon Bedrock's Rerank API (`bedrock-agent-runtime` Rerank).

One request scores the query against every candidate with a reranker model (Amazon Rerank 1.0,
`amazon.rerank-v1:0`; Cohere Rerank 3.5, `cohere.rerank-v3-5:0`): the query as a TEXT query, each
candidate as an INLINE TEXT source, `numberOfResults` as many as there are candidates (a reranker here
orders, it never drops), the model by its foundation-model ARN in the client's region. The API answers
`results` of `index` (the source's position) and `relevanceScore`, best first, and a `nextToken` when
more results remain, which is followed.

IAM (docs/deploy.md): `bedrock:Rerank` (an action without resource-level permissions) and
`bedrock:InvokeModel` on the reranker model's ARN. Bedrock bills a query per 100 candidates.

Anything wrong (throttling, access, validation, a timeout, an answer that does not fit the API's
shape) raises a `SearchBackendError` (or `ThrottledError`); the retriever then keeps the fused order.
The client fails fast: two attempts and a short read timeout, both cut to the invocation's budget
(`citewise.aws.clients`), so a slow reranker costs the query a few seconds, not its answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import SearchBackendError
from citewise.ports.reranker import Relevance

ACTION = "bedrock:Rerank"
MAX_TEXT_CHARS = 32_000
"""The API's limit on the query and on each text source (`RerankTextDocument.text`)."""
MAX_SOURCES = 1000
"""The API's limit on sources in one request."""
MAX_PAGES = 10
"""`nextToken` pages followed at most: with `numberOfResults` = the candidates, one page is the norm."""
MAX_ATTEMPTS = 2

AMAZON_RERANK_V1 = "amazon.rerank-v1:0"
COHERE_RERANK_V3_5 = "cohere.rerank-v3-5:0"
REGIONS: dict[str, frozenset[str]] = {
    AMAZON_RERANK_V1: frozenset({"ap-northeast-1", "ca-central-1", "eu-central-1", "us-west-2"}),
    COHERE_RERANK_V3_5: frozenset({"ap-northeast-1", "ca-central-1", "eu-central-1", "us-east-1", "us-west-2"}),
}
"""Where each reranker model is offered (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-supported.html,
November 2026): the stack refuses a model in a region missing here, naming the regions to choose from."""


class BedrockReranker:
    """The `Reranker` over `bedrock-agent-runtime` Rerank."""

    def __init__(
        self, model_id: str, *, client: Any | None = None, region: str | None = None, read_timeout: int = 5
    ) -> None:
        """Configure only: the client (`citewise.aws.clients.client`) is created on the first query.

        `model_id` is a reranker model id (`amazon.rerank-v1:0`) or its full foundation-model ARN;
        `region` (None: the environment's) is where the reranker runs, which may differ from the
        function's where the model is not offered in it.
        """
        if not model_id:
            raise ValueError("a reranker needs a model id")
        self.name = model_id
        self._client = client
        self._region = region
        self._read_timeout = read_timeout

    def rerank(self, query: str, documents: Sequence[str]) -> list[Relevance]:
        """The model's score of every document, best first; no call for no documents."""
        if not documents:
            return []
        if len(documents) > MAX_SOURCES:
            raise SearchBackendError(
                f"{ACTION} takes at most {MAX_SOURCES} sources, not {len(documents)}", details={"action": ACTION}
            )
        client = self._runtime()
        request = self._request(client, query, documents)
        relevances: list[Relevance] = []
        for _ in range(MAX_PAGES):
            try:
                response = client.rerank(**request)
            except (ClientError, BotoCoreError) as exc:
                raise aws.translate(exc, SearchBackendError, ACTION) from exc
            relevances += _relevances(response, len(documents))
            token = response.get("nextToken")
            if not token:
                return relevances
            request = {**request, "nextToken": token}
        raise _unusable(f"more than {MAX_PAGES} pages of results")

    def _runtime(self) -> Any:
        if self._client is None:
            self._client = aws.client(
                "bedrock-agent-runtime",
                region=self._region,
                max_attempts=MAX_ATTEMPTS,
                read_timeout=self._read_timeout,
            )
        return self._client

    def _request(self, client: Any, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {
            "queries": [{"type": "TEXT", "textQuery": {"text": _text(query)}}],
            "sources": [
                {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": _text(document)}}}
                for document in documents
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "modelConfiguration": {"modelArn": self._model_arn(client)},
                    "numberOfResults": len(documents),
                },
            },
        }

    def _model_arn(self, client: Any) -> str:
        """The model's ARN in the client's region and partition (a configured ARN is used as it is)."""
        if self.name.startswith("arn:"):
            return self.name
        meta = client.meta
        return f"arn:{meta.partition}:bedrock:{meta.region_name}::foundation-model/{self.name}"


def _text(value: str) -> str:
    """A text the API accepts: 1 to `MAX_TEXT_CHARS` characters (a blank chunk is scored as one space)."""
    return value[:MAX_TEXT_CHARS] or " "


def _relevances(response: Any, count: int) -> list[Relevance]:
    """The `results` of one response, each checked against the API's shape and the request."""
    results = response.get("results") if isinstance(response, dict) else None
    if not isinstance(results, list):
        raise _unusable("the response has no results")
    relevances = []
    for result in results:
        index = result.get("index") if isinstance(result, dict) else None
        score = result.get("relevanceScore") if isinstance(result, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise _unusable(f"a result names no source of the {count} sent")
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise _unusable("a result has no numeric relevanceScore")
        relevances.append(Relevance(index=index, score=float(score)))
    return relevances


def _unusable(problem: str) -> SearchBackendError:
    return SearchBackendError(f"{ACTION} returned an unusable answer: {problem}", details={"action": ACTION})
