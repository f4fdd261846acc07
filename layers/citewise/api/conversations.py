"""/v1/conversations: a user's own conversations (`citewise.query.conversations`), served by the query function.

Each route reads the owner from the authenticated Caller only; another user's (or tenant's) conversation
is 404 NOT_FOUND exactly as an unknown one, so its existence is never disclosed. The operator, who is
no tenant's user, has no route here: a conversation is its user's alone (tenant erasure removes them).
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from citewise.api.app import SECURED, responses
from citewise.api.identity import request_scope
from citewise.domain.access import require_write
from citewise.domain.models import CONVERSATION_ID_PATTERN
from citewise.ports.conversations import PAGE_LIMIT, Conversation, ConversationPage
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS

ConversationId = Annotated[
    str, Path(pattern=CONVERSATION_ID_PATTERN, description="The conversation's id (`conversation_id` of an answer).")
]


def add_conversation_routes(app: APIGatewayRestResolver) -> None:
    """Register the conversation routes on `app`."""

    @app.get(
        "/v1/conversations",
        operation_id="listConversations",
        summary="List your conversations",
        description="Your conversations, newest first (a title, when each was started and last added to, and "
        "how many turns it holds); `next_cursor` fetches the next page.",
        tags=["conversations"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 502),
    )
    def list_conversations(
        limit: Annotated[int, Query(ge=1, le=PAGE_LIMIT, description="Page size.")] = 20,
        cursor: Annotated[
            str | None,
            Query(max_length=MAX_CURSOR_CHARS, pattern=CURSOR_PATTERN, description="`next_cursor` of the last page."),
        ] = None,
    ) -> ConversationPage:
        services, caller = request_scope(app)
        return services.conversations.page(caller, limit=limit, cursor=cursor)

    @app.get(
        "/v1/conversations/<id>",
        operation_id="getConversation",
        summary="A conversation with its turns",
        description="Every turn, oldest first: the question, the standalone question retrieval used, the answer "
        "and its citations, when, and whether it completed (`interrupted`: the client left before the answer "
        "was whole; such a turn keeps no answer).",
        tags=["conversations"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 502),
    )
    def get_conversation(id: ConversationId) -> Conversation:  # noqa: A002 - the path parameter's name
        services, caller = request_scope(app)
        return services.conversations.get(caller, id)

    @app.delete(
        "/v1/conversations/<id>",
        operation_id="deleteConversation",
        summary="Delete a conversation",
        description="Deletes the conversation and all its turns.",
        tags=["conversations"],
        security=SECURED,
        status_code=204,
        responses=responses(400, 401, 403, 404, 409, 502, success=204, described="Deleted."),
    )
    def delete_conversation(id: ConversationId) -> Response[str]:  # noqa: A002
        services, caller = request_scope(app)
        require_write(caller)
        services.conversations.delete(caller, id)
        return Response(status_code=204, body="")
