"""The platform operator's routes, under /v1/admin/: never a tenant identity's, never tenant data's.

Every route here starts with `operator_scope`, which refuses any tenant identity (its admins included)
with 403; the tenant routes refuse the operator in turn (`citewise.domain.tenancy.caller_from_claims`).
Served by the documents function, whose role reads the registry already; docs/operations.md is the guide.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Query

from citewise.api.app import SECURED, responses
from citewise.api.audit import add_audit_routes
from citewise.api.identity import operator_scope
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS
from citewise.ports.registry import TenantPage


def add_admin_routes(app: APIGatewayRestResolver) -> None:
    """Register the operator's routes on `app`."""
    add_audit_routes(app)

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
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 50,
        cursor: Annotated[
            str | None,
            Query(
                max_length=MAX_CURSOR_CHARS,
                pattern=CURSOR_PATTERN,
                description="`next_cursor` of the last page, as given: opaque.",
            ),
        ] = None,
    ) -> TenantPage:
        services, _ = operator_scope(app)
        return services.registry.list_tenants(limit=limit, cursor=cursor)
