"""The credential ports: where credential records live, and who issues the secrets and tokens.

Two ports, because two systems hold a credential on AWS: the record (tenant, service user, scope,
revocation) is citewise's, in the registry table; the secret and the tokens are the identity provider's,
a Cognito app client with the client-credentials grant. Locally one SQLite file holds both
(`citewise_local.credentials`), and `citewise serve` is the token endpoint. Every `CredentialStore`
passes `tests/contract/test_credentials_contract.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import Field

from citewise.domain.credentials import Credential, CredentialScope
from citewise.domain.models import Frozen


class IssuedCredential(Frozen):
    """A new credential and its secret: the only time the secret is shown (it is stored nowhere by citewise)."""

    credential: Credential
    client_secret: str = Field(description="Shown once. The program authenticates with the id and this secret.")
    token_url: str = Field(
        description="Where the program exchanges id and secret for an access token (OAuth 2.0 client-credentials "
        "grant, `grant_type=client_credentials`, HTTP Basic authentication)."
    )
    scope: str = Field(description="The OAuth scope to request (`citewise/read` or `citewise/full`).")


class CredentialStore(Protocol):
    """The credential records: by id (each request's lookup) and by tenant (its admins' listing)."""

    def put_credential(self, credential: Credential) -> None:
        """Store a new record; ConflictError if one with its id exists (an id is never reused)."""
        ...

    def credential(self, credential_id: str) -> Credential | None:
        """The record of `credential_id`, revoked or not; None if there is none."""
        ...

    def tenant_credentials(self, tenant_id: str) -> list[Credential]:
        """Every record of the tenant, revoked ones included, oldest first."""
        ...

    def revoke_credential(self, tenant_id: str, credential_id: str, at: datetime, by: str) -> Credential:
        """Mark the tenant's credential revoked (kept, for the audit trail) and return it; revoking it again
        keeps the first revocation. NotFoundError if the tenant has no such credential, so a tenant can
        never revoke, or learn of, another tenant's."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """How many records the tenant has (tenant erasure's receipt)."""
        ...

    def erase_tenant(self, tenant_id: str) -> int:
        """Delete every record of the tenant; returns how many. Idempotent."""
        ...


class CredentialIssuer(Protocol):
    """The identity provider's side: a client with a secret that may obtain tokens of given scopes."""

    token_url: str
    """The OAuth 2.0 token endpoint its clients use."""

    def issue(self, name: str, scope: CredentialScope) -> tuple[str, str]:
        """Create a client allowed `scope` only; returns (client id, client secret)."""
        ...

    def withdraw(self, credential_id: str) -> None:
        """Delete the client: it can obtain no new token. Idempotent (a client already gone is fine)."""
        ...


def erase_credentials(store: CredentialStore, issuer: CredentialIssuer, tenant_id: str) -> int:
    """Withdraw every client of the tenant's credentials, then delete their records; returns how many
    records were deleted. What a tenant's erasure calls: clients first, so that no client is left able to
    get tokens once its record (the only thing naming it) is gone. Idempotent, and resumable after a crash
    in the middle (a withdrawn client is withdrawn again without error)."""
    for credential in store.tenant_credentials(tenant_id):
        issuer.withdraw(credential.credential_id)
    return store.erase_tenant(tenant_id)
