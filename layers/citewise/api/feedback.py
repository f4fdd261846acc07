"""POST /v1/feedback and GET /v1/sources/{id}/stats (`citewise.query.feedback`), served by the query function.

Feedback is given by the user who asked, on the answer by its `conversation.response_id`: anyone else's
answer is 404 NOT_FOUND as an unknown one. A source's stats are its tenant's (every user's feedback
together, counts only): any member of the tenant may read them, as the ranking they shape.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Path

from citewise.api.app import SECURED, responses
from citewise.api.audit import note
from citewise.api.identity import request_scope
from citewise.domain.tenant_settings import SourceName
from citewise.ports.feedback import FeedbackReceipt, FeedbackRequest, SourceStats

SourceId = Annotated[
    SourceName,
    Path(description="A registered source's id (`source_id` of its pages), or an upload's `source` (`jira`)."),
]


def add_feedback_routes(app: APIGatewayRestResolver) -> None:
    """Register the feedback routes on `app`."""

    @app.post(
        "/v1/feedback",
        operation_id="giveFeedback",
        summary="Say whether an answer, or one of its citations, helped",
        description="On one of your own answers (`conversation.response_id` of `POST /v1/query`): the answer as a "
        "whole, or its citation `[n]`. Giving feedback again on the same answer and citation replaces it. It counts "
        "for the cited documents' sources (`GET /v1/sources/{id}/stats`) and, when the tenant turns the feedback "
        "signal on, for their ranking.",
        tags=["feedback"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 502),
    )
    def give_feedback(request: FeedbackRequest) -> FeedbackReceipt:
        services, caller = request_scope(app)
        receipt = services.feedback.give(caller, request)
        note(app, resources=[request.response_id])
        return receipt

    @app.get(
        "/v1/sources/<id>/stats",
        operation_id="getSourceStats",
        summary="How helpful a source's citations were",
        description="The feedback your tenant's users gave on answers and citations of this source: helpful, not "
        "helpful, the share helpful, and the smoothed effectiveness the feedback ranking signal uses. 404 when no "
        "feedback and no document you may read carries the source.",
        tags=["feedback"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 502),
    )
    def source_stats(id: SourceId) -> SourceStats:  # noqa: A002 - the path parameter's name
        services, caller = request_scope(app)
        return services.feedback.stats(caller, id)
