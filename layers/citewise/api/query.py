"""POST /v1/query and POST /v1/search, and the conversations: the routes of the query function.

A query is a turn of a conversation (`citewise.query.conversations`): begun before retrieval (the
caller's conversation or a new one; a follow-up rewritten into a standalone question, which retrieval
and the answer use), recorded once the answer is whole. A failed answer records nothing.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.metrics import MetricUnit

from citewise.api.app import SECURED, request_id, responses
from citewise.api.audit import note
from citewise.api.conversations import add_conversation_routes
from citewise.api.identity import request_scope
from citewise.api.schemas import QueryResponse, SearchResponse
from citewise.domain.models import QueryRequest, SearchRequest
from citewise.query.conversations import answer_in_conversation
from citewise.query.metering import query_usage, search_usage
from citewise.query.notices import no_hits_notice
from citewise.runtime.observability import count_reranking, metrics, timed

_RESPONSES = responses(400, 401, 403, 409, 415, 429, 502)
_QUERY_RESPONSES = responses(400, 401, 403, 404, 409, 415, 429, 502)


def add_query_routes(app: APIGatewayRestResolver) -> None:
    """Register the query function's routes on `app`: query, search and the conversations."""

    @app.post(
        "/v1/query",
        operation_id="query",
        summary="Answer a question with citations",
        description=(
            "Retrieves chunks inside your access (your tenant's shared documents and your own private "
            "ones), then answers with inline [n] markers; citation n quotes source n verbatim. `grounded` is "
            "true only when every sentence is supported by a source it cites; otherwise `notice` says why (nothing "
            "indexed for you, no document matched the filters, nothing answers, unsupported sentences). Every answer "
            "is a turn of a conversation: `conversation.conversation_id` continues it, and a follow-up is rewritten "
            "into the standalone question `conversation.standalone_question` first. Unknown fields are rejected."
        ),
        tags=["query"],
        security=SECURED,
        responses=_QUERY_RESPONSES,
    )
    def query(request: QueryRequest) -> QueryResponse:
        services, caller = request_scope(app)
        services.quotas.admit_query(caller.tenant_id, generative=True)
        with timed("QueryLatency"):
            answer, turn = answer_in_conversation(
                services.conversations,
                services.retriever,
                services.synthesizer,
                caller,
                request,
                stage=lambda name: timed(f"{name.title()}Latency"),
            )
        count_reranking(answer.reranking)
        services.meter.record(caller.tenant_id, query_usage(answer, "rest"))
        documents = [hit.chunk.document.doc_id for hit in answer.sources]
        note(app, question=request.query, resources=[turn.conversation_id, *documents])
        for key, metric in (("input_tokens", "InputTokens"), ("output_tokens", "OutputTokens")):
            if answer.usage and key in answer.usage:
                metrics.add_metric(name=metric, unit=MetricUnit.Count, value=answer.usage[key])
        return QueryResponse.model_validate(
            {**answer.model_dump(), "conversation": turn, "request_id": request_id(app)}
        )

    @app.post(
        "/v1/search",
        operation_id="search",
        summary="Rank chunks for a query (retrieval only)",
        description=(
            "The same request as /v1/query; returns the ranked chunks with the fused score and the separate "
            "vector and keyword scores, and each chunk's document metadata; without hits, `notice` says why."
        ),
        tags=["query"],
        security=SECURED,
        responses=_RESPONSES,
    )
    def search(request: SearchRequest) -> SearchResponse:
        services, caller = request_scope(app)
        services.quotas.admit_query(caller.tenant_id, generative=False)
        with timed("RetrievalLatency"):
            retrieval = services.retriever.retrieve(caller, request)
        count_reranking(retrieval.reranking)
        services.meter.record(caller.tenant_id, search_usage(retrieval.reranking, "rest"))
        note(app, question=request.query, resources=[hit.chunk.document.doc_id for hit in retrieval.hits])
        notice = None if retrieval.hits else no_hits_notice(services.retriever, caller, request, retrieval)
        return SearchResponse(
            hits=retrieval.hits,
            routing=retrieval.routing,
            reranking=retrieval.reranking,
            notice=notice,
            request_id=request_id(app),
        )

    add_conversation_routes(app)
