"""Response bodies of the v1 API that are not library models already (the OpenAPI document shows them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from citewise.domain.models import Answer, Frozen, Notice, Reranking, Routing, SearchHit
from citewise.ports.conversations import TurnContext


class QueryResponse(Answer):
    """An answer with its citations, its place in a conversation, and the id that ties it to the logs."""

    conversation: TurnContext | None = Field(
        default=None, description="The conversation this answer is a turn of, and the question retrieval used."
    )
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
