"""Credentials for agents and services: a long-lived, revocable, scoped identity of a program.

A tenant admin creates a credential for a service user of its tenant, with a scope: `read` (query,
search, read documents, every MCP tool) or `full` (what a tenant user may do: upload, delete its own
documents). It is an OAuth 2.0 client: the program exchanges its id and secret for a short access token
at the token endpoint (the client-credentials grant; a Cognito app client on AWS, `citewise serve`'s
`/oauth2/token` locally) and sends that token as its bearer. The token carries the client id and the
granted scopes, never a tenant: the tenant and the user of every request come from the credential's
record (`credential_caller`), which is looked up on each request (through a short cache), so a revoked
credential is refused within that cache's lifetime whatever the token's own expiry. docs/operations.md,
"Credentials for agents and services", is the guide and says why this design.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import Field, StringConstraints

from citewise.domain.errors import UnauthorizedError
from citewise.domain.models import Caller, Frozen, TenantId, UserId

RESOURCE_SERVER = "citewise"
"""The OAuth resource server whose scopes a credential's token carries: `citewise/read`, `citewise/full`."""
ACCESS_TOKEN_USE: Final = "access"  # noqa: S105 - a claim value, not a password
"""The `token_use` claim of a client-credentials access token (an ID token's is `id`)."""
CredentialName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]


class CredentialScope(StrEnum):
    """What a credential may do."""

    READ = "read"
    """Query, search, read documents and settings, every MCP tool; any write is 403."""
    FULL = "full"
    """What a tenant user (not an admin) may do: upload, delete and replace its own documents as well."""

    @property
    def oauth_scope(self) -> str:
        """The scope as the token carries it: `citewise/read`, `citewise/full`."""
        return f"{RESOURCE_SERVER}/{self.value}"


class Credential(Frozen):
    """The record of a credential: whose it is and what it may do. Never holds its secret."""

    credential_id: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="The OAuth client id: what the program authenticates with, and its tokens' `client_id`.",
    )
    tenant_id: TenantId
    user_id: UserId = Field(description="The service user: the owner of what it uploads, the user of its audit trail.")
    scope: CredentialScope
    name: CredentialName = Field(description="What the credential is for, as its creator wrote it.")
    created_at: datetime
    created_by: UserId
    revoked_at: datetime | None = None
    revoked_by: UserId | None = None

    @property
    def revoked(self) -> bool:
        """Whether the credential was revoked (it is refused from then on)."""
        return self.revoked_at is not None


def is_credential_token(claims: Mapping[str, Any]) -> bool:
    """Whether verified token claims are a client-credentials access token (a program's) rather than a
    user's ID token: an access token names a `client_id` and, unlike a user's, no `username`."""
    return (
        claims.get("token_use") == ACCESS_TOKEN_USE
        and isinstance(claims.get("client_id"), str)
        and "username" not in claims
    )


def credential_caller(credential: Credential | None, claims: Mapping[str, Any]) -> Caller:
    """The Caller of a request made with a credential's access token (`claims`, already verified).

    Tenant and user come from the record, never from the token or the request. The scope is the record's,
    narrowed by the token's (a token requested with `citewise/read` only is read-only even for a `full`
    credential). An unknown or revoked credential, or a token granting none of the record's scopes, is no
    usable identity (401), as an expired token is.
    """
    if credential is None or credential.credential_id != claims.get("client_id"):
        raise UnauthorizedError("the credential is unknown: it was never issued here, or was erased")
    if credential.revoked:
        raise UnauthorizedError("the credential was revoked", details={"credential_id": credential.credential_id})
    raw = claims.get("scope")
    granted = set(raw.split()) if isinstance(raw, str) else set(raw) if isinstance(raw, list) else set()
    full = credential.scope is CredentialScope.FULL and CredentialScope.FULL.oauth_scope in granted
    if not full and not {CredentialScope.READ.oauth_scope, CredentialScope.FULL.oauth_scope} & granted:
        raise UnauthorizedError("the token grants none of the credential's scopes", details={"scope": sorted(granted)})
    return Caller(
        tenant_id=credential.tenant_id,
        user_id=credential.user_id,
        read_only=not full,
        credential_id=credential.credential_id,
    )
