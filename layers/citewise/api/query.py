"""POST /v1/query and POST /v1/search, and the conversations: the routes of the query function.

A query is a turn of a conversation (`citewise.query.conversations`): begun before retrieval (the
caller's conversation or a new one; a follow-up rewritten into a standalone question, which retrieval
and the answer use), recorded once the answer is whole, returned or streamed; a streamed answer the
reader left is recorded as interrupted. A failed answer records nothing."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.metrics import MetricUnit

from citewise.api.app import SECURED, request_id, responses
from citewise.api.audit import AuditNote, note
from citewise.api.conversations import add_conversation_routes
from citewise.api.feedback import add_feedback_routes
from citewise.api.identity import request_scope
from citewise.api.schemas import QueryResponse, SearchResponse
from citewise.api.streaming import EVENT_STREAM, STREAM_HEADERS, StreamSlot, sse_frames, wants_stream
from citewise.domain.models import Answer, Caller, QueryRequest, SearchRequest
from citewise.query.answering import stream_question
from citewise.query.conversations import TurnDraft, answer_in_conversation, standalone
from citewise.query.metering import query_usage, search_usage
from citewise.query.notices import no_hits_notice
from citewise.runtime.observability import count_reranking, logger, metrics, timed
from citewise.runtime.services import Services

_RESPONSES = responses(400, 401, 403, 409, 415, 429, 502)
# One event of the stream (OpenAPI 3.1 has no `itemSchema`: as schema-driven tools read it, `schema` is the
# shape of each parsed event); its data is JSON, described per event in docs/api.md.
_EVENT_SCHEMA = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["sources", "text", "citation", "answer", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
_QUERY_RESPONSES = responses(400, 401, 403, 404, 409, 415, 429, 502) | {
    200: {
        "description": 'The answer; with `Accept: text/event-stream` or `"stream": true`, server-sent events '
        "(`sources`, `text`, `citation`, then `answer` holding this same object, or `error`; docs/api.md).",
        "content": {"application/json": {"model": QueryResponse}, EVENT_STREAM: {"schema": _EVENT_SCHEMA}},
    }
}


def streamed_answer_ended(services: Services, draft: TurnDraft, answer: Answer | None) -> None:
    """The one place a streamed answer ends: `answer` when it was sent whole, None when the reader left or
    it failed part-way (the text sent so far is then no answer): the conversation records its turn,
    whole or interrupted."""
    if answer is None:
        logger.info("streamed answer interrupted")
        services.conversations.interrupt(draft)
    else:
        services.conversations.record(draft, answer)


def _account(services: Services, caller: Caller, answer: Answer, audit: AuditNote | None) -> None:
    """What every answer given leaves: reranking and token metrics, the tenant's usage, the audited ids."""
    count_reranking(answer.reranking)
    services.meter.record(caller.tenant_id, query_usage(answer, "rest"))
    if audit is not None:
        audit.resources.extend(hit.chunk.document.doc_id for hit in answer.sources)
    for key, metric in (("input_tokens", "InputTokens"), ("output_tokens", "OutputTokens")):
        if answer.usage and key in answer.usage:
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=answer.usage[key])


def _streamed(app: APIGatewayRestResolver, services: Services, caller: Caller, request: QueryRequest) -> Response[str]:
    """The status and headers of a streamed answer; its events go in the invocation's `StreamSlot`."""
    slot: StreamSlot = app.context["stream"]
    audit: AuditNote | None = app.context.get("audit")
    with timed("RewriteLatency"):
        draft = services.conversations.begin(caller, request.conversation_id, request.query)
    if audit is not None:
        audit.resources.append(draft.context.conversation_id)
    events = stream_question(
        services.retriever,
        services.synthesizer,
        caller,
        standalone(request, draft.standalone_question),
        stage=lambda name: timed(f"{name.title()}Latency"),
    )

    def ended(answer: Answer | None) -> None:
        if answer is not None:
            _account(services, caller, answer, audit)
        streamed_answer_ended(services, draft, answer)

    final = {"conversation": draft.context.model_dump(mode="json"), "request_id": request_id(app)}
    slot.frames = sse_frames(events, final, ended)
    return Response(status_code=200, content_type=STREAM_HEADERS["Content-Type"], body="", headers=STREAM_HEADERS)


def add_query_routes(app: APIGatewayRestResolver) -> None:
    """Register the query function's routes on `app`: query, search, the conversations and the feedback."""

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
    def query(request: QueryRequest) -> Response[Any]:
        services, caller = request_scope(app)
        services.quotas.admit_query(caller.tenant_id, generative=True)
        note(app, question=request.query)
        if wants_stream(app.current_event.headers.get("accept"), request.stream):
            return _streamed(app, services, caller, request)
        with timed("QueryLatency"):
            answer, turn = answer_in_conversation(
                services.conversations,
                services.retriever,
                services.synthesizer,
                caller,
                request,
                stage=lambda name: timed(f"{name.title()}Latency"),
            )
        note(app, resources=[turn.conversation_id])
        _account(services, caller, answer, app.context.get("audit"))
        body = QueryResponse.model_validate(
            {**answer.model_dump(), "conversation": turn, "request_id": request_id(app)}
        )
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)

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
    add_feedback_routes(app)
