"""The platform operator's routes, under /v1/admin/: never a tenant identity's, never tenant data's.

Every route here starts with `operator_scope`, which refuses any tenant identity (its admins included)
with 403; the tenant routes refuse the operator in turn (`citewise.domain.tenancy.caller_from_claims`).
Served by the documents function, whose role reads the registry already; docs/operations.md is the guide.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from citewise.api.app import SECURED, responses
from citewise.api.audit import add_audit_routes, note
from citewise.api.identity import operator_scope
from citewise.api.usage import RANGE_RULES, FromDay, ToDay
from citewise.domain.errors import NotFoundError
from citewise.domain.models import TENANT_ID_PATTERN
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenancy import document_id
from citewise.ingest.requeue import RequeueReport, requeue_refused
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS
from citewise.ports.erasure import Erasure, start_erasure
from citewise.ports.quotas import QuotaStatus, quota_status, save_quotas
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
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 50, cursor: Cursor = None
    ) -> TenantPage:
        services, _ = operator_scope(app)
        return services.registry.list_tenants(limit=limit, cursor=cursor)

    @app.post(
        "/v1/admin/tenants/<tenant_id>/erasure",
        operation_id="eraseTenant",
        summary="Erase a tenant: every object version, chunk, record and setting (platform operator only)",
        description=(
            "Starts the erasure and answers 202 with its record; GET the same path for its progress and, once "
            "`status` is ERASED, its receipt. While it runs the tenant's requests are refused with 409 "
            "`TENANT_ERASING`. An unknown tenant is 404; a second erasure while one runs, 409 `ERASURE_IN_PROGRESS`."
        ),
        tags=["admin"],
        security=SECURED,
        status_code=202,
        responses={
            **responses(400, 401, 403, 404, 409, 429, 502, success=202),
            202: {"description": "Started.", "content": {"application/json": {"model": Erasure}}},
        },
    )
    def erase_tenant(tenant_id: TenantIdPath) -> Response[str]:
        services, operator = operator_scope(app)
        note(app, tenant_id=tenant_id)  # on that tenant's audit trail, as the operator's
        started = start_erasure(
            services.erasures, tenant_id, operator=operator.user_id, known=services.registry.has_tenant(tenant_id)
        )
        services.erasure_queue.send(tenant_id)  # locally the job runs here, to the end
        current = services.erasures.get(tenant_id) or started
        return Response(status_code=202, content_type="application/json", body=current.model_dump_json())

    @app.get(
        "/v1/admin/tenants/<tenant_id>/erasure",
        operation_id="getTenantErasure",
        summary="A tenant's erasure: its progress, or its receipt once ERASED (platform operator only)",
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 429, 502),
    )
    def get_erasure(tenant_id: TenantIdPath) -> Erasure:
        services, _ = operator_scope(app)
        note(app, tenant_id=tenant_id)
        erasure = services.erasures.get(tenant_id)
        if erasure is None:
            raise NotFoundError("this tenant was never erased", details={"tenant_id": tenant_id})
        return erasure

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
        note(app, tenant_id=tenant_id)  # on that tenant's audit trail, as the operator's
        first, last = report_range(from_day, to_day, datetime.now(UTC).date())
        stored = services.registry.stored_totals(tenant_id)
        return usage_report(services.usage, tenant_id, first, last, services.settings.prices, stored=stored)

    @app.get(
        "/v1/admin/tenants/<tenant_id>/quotas",
        operation_id="getTenantQuotas",
        summary="A tenant's quotas, where each comes from, and its current use (platform operator only)",
        description=(
            "Each limit with its source (`default`: the deployment's settings; `override`: set for this tenant), "
            "the overrides stored, what the tenant stores now and what it used today (UTC). A null limit is no "
            "limit. A tenant without documents yet answers its defaults: quotas may be set before onboarding."
        ),
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def get_quotas(tenant_id: TenantIdPath) -> QuotaStatus:
        services, _ = operator_scope(app)
        note(app, tenant_id=tenant_id)  # on that tenant's audit trail, as the operator's
        return quota_status(
            services.settings.default_quotas(), services.registry, services.usage, tenant_id, datetime.now(UTC).date()
        )

    @app.put(
        "/v1/admin/tenants/<tenant_id>/quotas",
        operation_id="replaceTenantQuotas",
        summary="Replace a tenant's quota overrides (platform operator only)",
        description=(
            "The whole set: a limit left out (or null) returns to the deployment's default. Every limit is a "
            "JSON integer from 0 to its ceiling; a negative, fractional, non-numeric or absurd value is a 400 "
            "naming the field. A limit below the current use is accepted: new work is refused until the use "
            "falls under it. Functions apply the change within `CITEWISE_QUOTA_TTL` seconds (60)."
        ),
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 415, 429, 502),
    )
    def put_quotas(tenant_id: TenantIdPath, overrides: QuotaOverrides) -> QuotaStatus:
        services, operator = operator_scope(app)
        note(app, tenant_id=tenant_id)
        now = datetime.now(UTC)
        save_quotas(services.registry, tenant_id, overrides, operator, now)
        return quota_status(
            services.settings.default_quotas(), services.registry, services.usage, tenant_id, now.date()
        )

    @app.post(
        "/v1/admin/tenants/<tenant_id>/requeue",
        operation_id="requeueQuotaRefused",
        summary="Ingest again a tenant's documents a quota refused (platform operator only)",
        description=(
            "Every document recorded FAILED with QUOTA_EXCEEDED (its object was kept) goes back to ingestion: on "
            "AWS as a notification on the ingest queue, locally at once. Raise the quota first: the ingest checks "
            "it again, and a document that still does not fit is refused again, its object still kept."
        ),
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def requeue(tenant_id: TenantIdPath) -> RequeueReport:
        services, _ = operator_scope(app)
        report = requeue_refused(services.registry, services.ingest_queue, tenant_id)
        note(app, tenant_id=tenant_id, resources=[document_id(tenant_id, path) for path in report.paths])
        return report
