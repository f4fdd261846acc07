"""GET and PUT /v1/settings: the tenant's settings document (ranking signals, routing vocabulary).

Served by the documents function, which holds the registry with write access; the query function only
reads the document (through `citewise.query.tenant_config.TenantSettingsCache`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from citewise.api.app import SECURED, responses
from citewise.api.identity import request_scope
from citewise.domain.tenant_settings import TenantSettings
from citewise.query.tenant_config import save_tenant_settings, tenant_settings_of


def add_settings_routes(app: APIGatewayRestResolver) -> None:
    """Register GET and PUT /v1/settings on `app`."""

    @app.get(
        "/v1/settings",
        operation_id="getTenantSettings",
        summary="Your tenant's settings: ranking signals and routing vocabulary",
        description="Absent fields take the deployment's defaults. Any member of the tenant may read them.",
        tags=["settings"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 429, 502),
    )
    def get_settings() -> TenantSettings:
        services, caller = request_scope(app)
        return tenant_settings_of(services.registry, caller)

    @app.put(
        "/v1/settings",
        operation_id="replaceTenantSettings",
        summary="Replace your tenant's settings (tenant admins only)",
        description=(
            "The whole document: a field left out returns to the deployment's default. Weights are 0-1, the "
            "half-life is in days (> 0), the time zone an IANA name. `updated_at` and `updated_by` are set by "
            "the service. Queries use the new settings within a minute (each query function caches them)."
        ),
        tags=["settings"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 415, 429, 502),
    )
    def put_settings(settings: TenantSettings) -> TenantSettings:
        services, caller = request_scope(app)
        return save_tenant_settings(services.registry, caller, settings, datetime.now(UTC))
