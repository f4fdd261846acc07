"""The audit trail of the REST API: one record per authenticated request, and the operator's export.

Every request to an authenticated route is recorded by the API handler once the response is made
(`record_request`), so no route can forget it and a route added later is audited too: the action is the
route's name below (or `METHOD /path` for a route not named here yet), the outcome the response's error
code, the identity the request's own (a tenant user, the operator, or none when it had none). What only
the route knows it adds with `note`: the ids of the documents a read returned, the question, and, for an
operator's action on one tenant, that tenant.

`GET /v1/admin/tenants/{tenant_id}/audit` exports one tenant's trail to the operator, paginated with an
opaque cursor (a page at a time rather than a stream: API Gateway buffers a Lambda proxy response, and
a cursor resumes where a failed page left off).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from citewise.api.app import SECURED, responses
from citewise.api.identity import operator_scope
from citewise.api.routes import MACHINE_PREFIX, ROUTES
from citewise.domain.errors import CitewiseError, NotFoundError
from citewise.domain.models import TENANT_ID_PATTERN
from citewise.ports.audit import OK, AuditPage, AuditQuery
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS
from citewise.runtime.identity import caller_from_event, operator_from_event
from citewise.runtime.services import Services
from citewise.runtime.settings import ApiSettings

EXPORT_PATH = "/v1/admin/tenants/{tenant_id}/audit"

ACTIONS: dict[tuple[str, str], str] = {
    ("POST", "/v1/query"): "query",
    ("POST", "/v1/search"): "search",
    ("GET", "/v1/conversations"): "conversation.list",
    ("GET", "/v1/conversations/{id}"): "conversation.get",
    ("DELETE", "/v1/conversations/{id}"): "conversation.delete",
    ("POST", "/v1/feedback"): "feedback.give",
    ("GET", "/v1/sources/{id}/stats"): "source.stats",
    ("GET", "/v1/documents"): "document.list",
    ("GET", "/v1/documents/{id}"): "document.get",
    ("GET", "/v1/documents/{id}/content"): "document.content",
    ("GET", "/v1/documents/{id}/text"): "document.text",
    ("DELETE", "/v1/documents/{id}"): "document.delete",
    ("POST", "/v1/uploads"): "upload.create",
    ("GET", "/v1/settings"): "settings.get",
    ("PUT", "/v1/settings"): "settings.update",
    ("GET", "/v1/usage"): "usage.get",
    ("GET", "/v1/admin/tenants"): "admin.tenants.list",
    ("GET", "/v1/admin/usage"): "admin.usage.list",
    ("GET", "/v1/admin/tenants/{tenant_id}/usage"): "admin.usage.get",
    ("GET", EXPORT_PATH): "admin.audit.export",
    ("POST", "/v1/credentials"): "credential.create",
    ("GET", "/v1/credentials"): "credential.list",
    ("DELETE", "/v1/credentials/{id}"): "credential.revoke",
    ("POST", "/v1/sources"): "source.create",
    ("GET", "/v1/sources"): "source.list",
    ("GET", "/v1/sources/{id}"): "source.get",
    ("DELETE", "/v1/sources/{id}"): "source.delete",
    ("POST", "/v1/sources/{id}/refresh"): "source.refresh",
    ("GET", "/v1/admin/tenants/{tenant_id}/credentials"): "admin.credentials.list",
    ("DELETE", "/v1/admin/tenants/{tenant_id}/credentials/{id}"): "admin.credentials.revoke",
    ("POST", "/v1/admin/tenants/{tenant_id}/erasure"): "admin.erasure.start",
    ("GET", "/v1/admin/tenants/{tenant_id}/erasure"): "admin.erasure.get",
    ("GET", "/v1/admin/tenants/{tenant_id}/quotas"): "admin.quotas.get",
    ("PUT", "/v1/admin/tenants/{tenant_id}/quotas"): "admin.quotas.update",
    ("POST", "/v1/admin/tenants/{tenant_id}/requeue"): "admin.quotas.requeue",
}
"""The action each REST route is recorded as (a program's twin under `/m2m` as its route); a route missing
here is recorded as `METHOD /path`."""

_AUDITED = frozenset((route.method, route.path) for route in ROUTES if route.authenticated and route.function != "mcp")


@dataclass
class AuditNote:
    """What a route adds to its request's record (`note`)."""

    resources: list[str] = field(default_factory=list)
    question: str | None = None
    tenant_id: str | None = None
    """The tenant an operator's action concerned (a tenant's own requests are recorded under theirs)."""


def note(
    app: APIGatewayRestResolver,
    *,
    resources: Iterable[str] = (),
    question: str | None = None,
    tenant_id: str | None = None,
) -> None:
    """Add to the current request's audit record: ids read or changed, the question, an operator's tenant."""
    entry: AuditNote | None = app.context.get("audit")
    if entry is None:  # a resolver driven without the API handler (a unit test of a route)
        return
    entry.resources.extend(resources)
    entry.question = question if question is not None else entry.question
    entry.tenant_id = tenant_id if tenant_id is not None else entry.tenant_id


def record_request(
    event: dict[str, Any], response: dict[str, Any], services: Services, settings: ApiSettings, entry: AuditNote
) -> None:
    """Write the audit record of one request to an authenticated route (other requests have none)."""
    method, resource = event.get("httpMethod", ""), event.get("resource", "")
    if (method, resource) not in _AUDITED or not services.auditor.enabled:
        return
    proxy = APIGatewayProxyEvent(event)
    tenant_id, user_id, operator = _identity(proxy, settings, services)
    path_id = (event.get("pathParameters") or {}).get("id")
    services.auditor.record(
        request_id=str(proxy.request_context.request_id or ""),
        channel="rest",
        action=ACTIONS.get((method, resource.removeprefix(MACHINE_PREFIX)), f"{method} {resource}"),
        tenant_id=entry.tenant_id if operator and entry.tenant_id else tenant_id,
        user_id=user_id,
        operator=operator,
        outcome=_outcome(response),
        resources=[path_id, *entry.resources] if path_id else entry.resources,
        question=entry.question,
    )


def _identity(
    event: APIGatewayProxyEvent, settings: ApiSettings, services: Services
) -> tuple[str | None, str | None, bool]:
    """(tenant, user, is the operator) of the request's identity; (None, None, False) if it has none.

    A claim that is no valid id fails its model (a pydantic ValueError), not only the identity's rules
    (a CitewiseError): either way the request was refused already, and its record says so."""
    try:
        caller = caller_from_event(event, settings, services.credential_lookup)
        return caller.tenant_id, caller.user_id, False
    except (CitewiseError, ValueError):
        pass
    try:
        return None, operator_from_event(event, settings).user_id, True
    except (CitewiseError, ValueError):
        return None, None, False


def _outcome(response: dict[str, Any]) -> str:
    """`ok` for a success, else the error code of the response's body."""
    status = int(response.get("statusCode", 500))
    if status < 400:
        return OK
    try:
        return str(json.loads(response.get("body") or "")["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP_{status}"


def add_audit_routes(app: APIGatewayRestResolver) -> None:
    """Register the operator's export of one tenant's audit trail on `app`."""

    @app.get(
        EXPORT_PATH.replace("{tenant_id}", "<tenant_id>"),
        operation_id="exportTenantAudit",
        summary="One tenant's audit trail, oldest first, a page at a time (platform operator only)",
        description=(
            "Every recorded access to the tenant's data (reads with the ids of the documents returned, "
            "changes, their outcome), filtered by user, action and time, oldest first. Pass `next_cursor` "
            "back with the same filters for the next page; a page may hold fewer than `limit` records and "
            "still have a next one. Questions appear as keyed hashes unless the operator turned full "
            "questions on. Any tenant identity, tenant admins included, is refused with 403."
        ),
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 429, 502),
    )
    def export_audit(
        tenant_id: Annotated[str, Path(pattern=TENANT_ID_PATTERN, description="The tenant whose trail to export.")],
        limit: Annotated[int, Query(ge=1, le=1000, description="Records per page at most.")] = 100,
        cursor: Annotated[
            str | None,
            Query(
                max_length=MAX_CURSOR_CHARS,
                pattern=CURSOR_PATTERN,
                description="`next_cursor` of the last page, as given: opaque, valid only with the same filters.",
            ),
        ] = None,
        user: Annotated[str | None, Query(max_length=256, description="Only this user's records.")] = None,
        action: Annotated[str | None, Query(max_length=100, description="Only this action, e.g. `query`.")] = None,
        start: Annotated[
            datetime | None, Query(alias="from", description="From this time, ISO 8601 (UTC if no offset).")
        ] = None,
        end: Annotated[datetime | None, Query(alias="to", description="Before this time, ISO 8601.")] = None,
    ) -> AuditPage:
        services, _ = operator_scope(app)
        note(app, tenant_id=tenant_id)
        if not services.auditor.enabled:
            raise NotFoundError("no audit trail is configured on this deployment")
        query = AuditQuery(tenant_id=tenant_id, user_id=user, action=action, start=_utc(start), end=_utc(end))
        return services.audit_log.read(query, limit=limit, cursor=cursor)


def _utc(moment: datetime | None) -> datetime | None:
    """`moment` with UTC for a time given without an offset."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)
