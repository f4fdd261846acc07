"""The platform operator's routes, under /v1/admin/: never a tenant identity's, never tenant data's.

Every route here starts with `operator_scope`, which refuses any tenant identity (its admins included)
with 403; the tenant routes refuse the operator in turn (`citewise.domain.tenancy.caller_from_claims`).
Served by the documents function, whose role reads the registry already; docs/operations.md is the guide.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from citewise.api.app import SECURED, responses
from citewise.api.identity import operator_scope
from citewise.api.usage import RANGE_RULES, FromDay, ToDay
from citewise.domain.models import TENANT_ID_PATTERN
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS
from citewise.ports.registry import TenantPage
from citewise.ports.usage import TenantUsagePage, UsageReport, report_range, tenants_usage, usage_report

Cursor = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR_CHARS,
        pattern=CURSOR_PATTERN,
        description="`next_cursor` of the last page, as given: opaque.",
    ),
]
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN, description="The tenant's id.")]


def add_admin_routes(app: APIGatewayRestResolver) -> None:
    """Register the operator's routes on `app`."""

    @app.get(
        "/v1/admin/tenants",
        operation_id="listTenants",
        summary="The tenants the registry knows, by id (platform operator only)",
        description=(
            "Every tenant that has registered a document, in id order, including tenants whose documents "
            "were all deleted. Only the platform operator may call it: any tenant identity, tenant admins "
            "included, is refused with 403."
        ),
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def list_tenants(
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 50, cursor: Cursor = None
    ) -> TenantPage:
        services, _ = operator_scope(app)
        return services.registry.list_tenants(limit=limit, cursor=cursor)

    @app.get(
        "/v1/admin/usage",
        operation_id="listTenantsUsage",
        summary="Every tenant's usage over a range and its estimated cost, by id (platform operator only)",
        description="The tenants of `GET /v1/admin/tenants`, a page at a time, each with its counters summed over "
        f"the range. {RANGE_RULES} One usage read per tenant of the page: keep pages small.",
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def list_tenants_usage(
        from_day: FromDay = None,
        to_day: ToDay = None,
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 25,
        cursor: Cursor = None,
    ) -> TenantUsagePage:
        services, _ = operator_scope(app)
        first, last = report_range(from_day, to_day, datetime.now(UTC).date())
        prices = services.settings.prices
        return tenants_usage(services.registry, services.usage, first, last, prices, limit=limit, cursor=cursor)

    @app.get(
        "/v1/admin/tenants/<tenant_id>/usage",
        operation_id="getTenantUsage",
        summary="One tenant's usage per UTC day and its estimated cost (platform operator only)",
        description=f"What the tenant's admins read at `GET /v1/usage`. {RANGE_RULES}",
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def get_tenant_usage(tenant_id: TenantIdPath, from_day: FromDay = None, to_day: ToDay = None) -> UsageReport:
        services, _ = operator_scope(app)
        first, last = report_range(from_day, to_day, datetime.now(UTC).date())
        return usage_report(services.usage, tenant_id, first, last, services.settings.prices)
