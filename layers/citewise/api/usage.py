"""GET /v1/usage: the caller's tenant's usage and its estimated cost, for the tenant's admins.

Served by the documents function, whose role reads the registry table where the counters live
(`citewise.aws.dynamodb_usage`). The operator's view of every tenant is in `citewise.api.admin`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Query

from citewise.api.app import SECURED, responses
from citewise.api.identity import request_scope
from citewise.domain.access import require_admin
from citewise.ports.usage import UsageReport, report_range, usage_report

FromDay = Annotated[
    date | None,
    Query(alias="from", description="First UTC day (YYYY-MM-DD, included); default: the first of `to`'s month."),
]
ToDay = Annotated[date | None, Query(alias="to", description="Last UTC day (YYYY-MM-DD, included); default: today.")]
RANGE_RULES = (
    "The range is at most 366 days and must not end before it starts (400 `VALIDATION_ERROR` naming the field). "
    "`cost` is the total's estimate at the deployment's price table (model prices only; null without a table)."
)


def add_usage_routes(app: APIGatewayRestResolver) -> None:
    """Register GET /v1/usage on `app`."""

    @app.get(
        "/v1/usage",
        operation_id="getUsage",
        summary="Your tenant's usage per UTC day and its estimated cost (tenant admins only)",
        description="Documents, pages, chunks, tokens, queries and searches (REST and MCP), rerank calls: the sum "
        f"over the range and each day that counted anything. {RANGE_RULES}",
        tags=["usage"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 429, 502),
    )
    def get_usage(from_day: FromDay = None, to_day: ToDay = None) -> UsageReport:
        services, caller = request_scope(app)
        require_admin(caller, "read its usage")
        first, last = report_range(from_day, to_day, datetime.now(UTC).date())
        stored = services.registry.stored_totals(caller.tenant_id)
        return usage_report(services.usage, caller.tenant_id, first, last, services.settings.prices, stored=stored)
