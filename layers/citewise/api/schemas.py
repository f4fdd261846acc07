"""Response bodies of the v1 API that are not library models already (the OpenAPI document shows them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from citewise.domain.models import Answer, Frozen, Notice, Reranking, Routing, SearchHit, SearchRequest


class QueryRequest(SearchRequest):
    """A question: the search request, and whether to answer with server-sent events."""

    stream: bool = Field(
        default=False,
        description="Answer with server-sent events (as `Accept: text/event-stream` asks): sources, text as "
        "it is written, citations once verified, then the answer this call returns otherwise (docs/api.md).",
    )


class QueryResponse(Answer):
    """An answer with its citations, plus the id that ties it to the logs."""

    request_id: str


class SearchResponse(Frozen):
    """Ranked chunks, best first."""

    hits: list[SearchHit]
    routing: Routing | None = None
    reranking: Reranking | None = None
    notice: Notice | None = Field(
        default=None, description="Why there are no hits (NO_DOCUMENTS, NO_FILTER_MATCH, NOT_FOUND); null with hits."
    )
    request_id: str


class Health(Frozen):
    """Liveness of the API function (it does not call the backends)."""

    status: Literal["ok"] = "ok"
    version: str


class ErrorDetail(Frozen):
    """One error: `code` is stable and meant for programs, `message` for people."""

    code: str = Field(examples=["VALIDATION_ERROR"])
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    request_id: str


class ErrorResponse(Frozen):
    """The body of every error response."""

    error: ErrorDetail
