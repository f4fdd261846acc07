"""The Caller of a request that came through API Gateway, from what its authorizer verified; never from
the body. Every function behind the API (the REST routes and the MCP endpoint) asks this one function.

Cognito mode: the user pool authorizer has checked the JWT and passes its claims in
`requestContext.authorizer.claims`. IAM mode: API Gateway has checked the SigV4 signature and passes the
principal in `requestContext.identity.userArn`, which the configured map turns into a tenant.

A program's credential (`citewise.domain.credentials`): the authorizer has checked a client-credentials
access token (on the `/m2m/` methods, which require its scopes) and passes its claims, which name the
client and no tenant; `credentials` looks the record up (`CredentialCache`) and the record gives the
tenant, the service user and the scope.

The operator routes ask `operator_from_event` instead: the platform operator is no tenant's member.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from citewise.domain.credentials import Credential, credential_caller, is_credential_token
from citewise.domain.models import Caller, Operator
from citewise.domain.tenancy import caller_from_claims, caller_from_iam, operator_from_claims, operator_from_iam
from citewise.runtime.settings import ApiSettings

CredentialLookup = Callable[[str], Credential | None]
"""A credential's record by id (`CredentialCache`)."""


def caller_from_event(event: APIGatewayProxyEvent, settings: ApiSettings, credentials: CredentialLookup) -> Caller:
    """The authenticated Caller; UnauthorizedError without an identity (or with an unknown or revoked
    credential), ForbiddenError without a tenant."""
    context = event.request_context
    if settings.auth_mode == "iam":
        return caller_from_iam(context.identity.user_arn, settings.tenant_map)
    claims = context.authorizer.claims or {}
    if is_credential_token(claims):
        return credential_caller(credentials(str(claims["client_id"])), claims)
    return caller_from_claims(claims, tenant_claim=settings.tenant_claim)


class CredentialCache:
    """`cache(credential_id)`: the record, read through `read` at most once per `ttl` seconds per id.

    The bound on revocation: a warm function refuses a revoked credential at most `ttl` seconds after the
    revocation is stored. Unlike the tenant settings' cache it fails closed: a failed read is an error of
    the request, never the last known record (which could predate a revocation). At most `max_entries`
    ids are kept; past that the cache starts afresh (a function serves a few programs, not thousands).
    """

    def __init__(
        self,
        read: CredentialLookup,
        *,
        ttl: float,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, tuple[float, Credential | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, credential_id: str) -> Credential | None:
        now = self._clock()
        with self._lock:
            cached = self._entries.get(credential_id)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        value = self._read(credential_id)
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[credential_id] = (now, value)
        return value


def operator_from_event(event: APIGatewayProxyEvent, settings: ApiSettings) -> Operator:
    """The platform operator of an `/v1/admin/` request; ForbiddenError for any tenant identity."""
    context = event.request_context
    if settings.auth_mode == "iam":
        return operator_from_iam(context.identity.user_arn, settings.operator_principals, settings.tenant_map)
    return operator_from_claims(context.authorizer.claims or {}, tenant_claim=settings.tenant_claim)
