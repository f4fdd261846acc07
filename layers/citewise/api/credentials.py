"""/v1/credentials: a tenant admin's credentials for its agents and services (docs/operations.md).

Create, list and revoke, for the caller's own tenant only, by members of its `admin` group only (a
credential itself has no group, so a program can never make another); the platform operator may list and
revoke any tenant's (`/v1/admin/tenants/{tenant_id}/credentials`). The secret is in the creation's
answer alone. Served by the documents function: its role may create and delete the user pool's app
clients (`citewise.aws.cognito_credentials`) and write the registry table, where the records live.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import Field

from citewise.api.admin import TenantIdPath
from citewise.api.app import SECURED, responses
from citewise.api.audit import note
from citewise.api.identity import operator_scope, request_scope
from citewise.domain.access import require_admin
from citewise.domain.credentials import Credential, CredentialName, CredentialScope
from citewise.domain.models import Caller, Frozen
from citewise.ports.credentials import CredentialIssuer, CredentialStore, IssuedCredential

SERVICE_USER_PREFIX = "svc:"
"""A credential's user id is this and the name its admin gave: it can never be a person's id (a Cognito
`sub` is a UUID, an IAM user an ARN), so a credential can never act as, or read the private documents of,
a person of the tenant."""
MANAGE = "manage its credentials"
"""What only a tenant admin may do (`require_admin`'s message)."""
CredentialId = Annotated[str, Path(max_length=128, pattern=r"^[A-Za-z0-9_-]+$", description="The credential's id.")]


class CredentialRequest(Frozen):
    """A new credential: what it is for, its service user, and its scope."""

    name: CredentialName = Field(description="What the credential is for (shown in listings), e.g. `support agent`.")
    user: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description=f"The service user's name; its user id is `{SERVICE_USER_PREFIX}<user>`: what it uploads is "
        "owned by that user, its private documents are that user's, and the audit trail names it.",
    )
    scope: CredentialScope = Field(
        default=CredentialScope.READ,
        description="`read`: query, search, read documents and settings, the MCP tools. `full`: also upload, "
        "replace and delete its own documents, as a tenant user may.",
    )


class CredentialList(Frozen):
    """The tenant's credentials, revoked ones included, oldest first."""

    items: list[Credential]


def create_credential(
    store: CredentialStore, issuer: CredentialIssuer, caller: Caller, request: CredentialRequest, now: datetime
) -> IssuedCredential:
    """A new credential of the caller's tenant and its secret; tenant admins only (ForbiddenError).

    The client is created first and withdrawn again if its record cannot be stored, so no client exists
    without a record (a client without one could get tokens that every function refuses anyway).
    """
    require_admin(caller, MANAGE)
    client_id, secret = issuer.issue(f"{caller.tenant_id} {request.user} {request.name}", request.scope)
    credential = Credential(
        credential_id=client_id,
        tenant_id=caller.tenant_id,
        user_id=SERVICE_USER_PREFIX + request.user,
        scope=request.scope,
        name=request.name,
        created_at=now,
        created_by=caller.user_id,
    )
    try:
        store.put_credential(credential)
    except BaseException:
        issuer.withdraw(client_id)
        raise
    return IssuedCredential(
        credential=credential, client_secret=secret, token_url=issuer.token_url, scope=request.scope.oauth_scope
    )


def revoke_credential(
    store: CredentialStore, issuer: CredentialIssuer, caller: Caller, credential_id: str, now: datetime
) -> Credential:
    """Revoke a credential of the caller's tenant (NotFoundError for any other); tenant admins only."""
    require_admin(caller, MANAGE)
    return withdraw_credential(store, issuer, caller.tenant_id, credential_id, now, caller.user_id)


def withdraw_credential(
    store: CredentialStore, issuer: CredentialIssuer, tenant_id: str, credential_id: str, now: datetime, by: str
) -> Credential:
    """Revoke `tenant_id`'s credential on behalf of `by` (its admin, the operator, the command line): the
    record first, which every function reads, then the client, which can then get no new token."""
    credential = store.revoke_credential(tenant_id, credential_id, now, by)
    issuer.withdraw(credential_id)
    return credential


def add_credential_routes(app: APIGatewayRestResolver) -> None:
    """Register POST and GET /v1/credentials and DELETE /v1/credentials/{id} (a tenant's admins'), and the
    operator's GET /v1/admin/tenants/{tenant_id}/credentials and DELETE .../credentials/{id} on `app`."""

    @app.post(
        "/v1/credentials",
        operation_id="createCredential",
        summary="A long-lived credential for a program of your tenant (tenant admins only)",
        description=(
            "Creates an OAuth client for the client-credentials grant: the program exchanges `credential_id` "
            "and `client_secret` at `token_url` for an access token with `scope`, and calls the API under "
            "`/m2m/` (`/m2m/v1/query`, `/m2m/mcp`) with it. The secret is shown in this answer only. "
            "Requests made with it act as the service user in your tenant, with the credential's scope."
        ),
        tags=["credentials"],
        security=SECURED,
        status_code=201,
        responses=responses(400, 401, 403, 409, 415, 429, 502, success=201, described="Created."),
    )
    def create(request: CredentialRequest) -> Response[IssuedCredential]:
        services, caller = request_scope(app)
        issued = create_credential(services.credentials, services.credential_issuer, caller, request, datetime.now(UTC))
        note(app, resources=[issued.credential.credential_id])  # the trail names the credential it created
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=issued)

    @app.get(
        "/v1/credentials",
        operation_id="listCredentials",
        summary="Your tenant's credentials, revoked ones included (tenant admins only)",
        description="Never their secrets.",
        tags=["credentials"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 429, 502),
    )
    def list_credentials() -> CredentialList:
        services, caller = request_scope(app)
        require_admin(caller, MANAGE)
        return CredentialList(items=services.credentials.tenant_credentials(caller.tenant_id))

    @app.delete(
        "/v1/credentials/<id>",
        operation_id="revokeCredential",
        summary="Revoke a credential of your tenant (tenant admins only)",
        description=(
            "It can get no new token at once, and every request made with a token it already holds is refused "
            "within the functions' credential cache time (60 s by default). The record stays, revoked."
        ),
        tags=["credentials"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 429, 502),
    )
    def revoke(id: CredentialId) -> Credential:  # noqa: A002
        services, caller = request_scope(app)
        return revoke_credential(services.credentials, services.credential_issuer, caller, id, datetime.now(UTC))

    @app.get(
        "/v1/admin/tenants/<tenant_id>/credentials",
        operation_id="listTenantCredentials",
        summary="One tenant's credentials, revoked ones included (platform operator only)",
        description="What the tenant's admins read at `GET /v1/credentials`; never a secret.",
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def list_tenant_credentials(tenant_id: TenantIdPath) -> CredentialList:
        services, _ = operator_scope(app)
        note(app, tenant_id=tenant_id)
        return CredentialList(items=services.credentials.tenant_credentials(tenant_id))

    @app.delete(
        "/v1/admin/tenants/<tenant_id>/credentials/<id>",
        operation_id="revokeTenantCredential",
        summary="Revoke one tenant's credential (platform operator only): a leaked secret, a program gone rogue",
        description="As its admins' `DELETE /v1/credentials/{id}`; `revoked_by` is the operator.",
        tags=["admin"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 429, 502),
    )
    def revoke_tenant_credential(tenant_id: TenantIdPath, id: CredentialId) -> Credential:  # noqa: A002
        services, operator = operator_scope(app)
        note(app, tenant_id=tenant_id)
        return withdraw_credential(
            services.credentials, services.credential_issuer, tenant_id, id, datetime.now(UTC), operator.user_id
        )
