"""The Caller of a request that came through API Gateway, from what its authorizer verified; never from
the body. Every function behind the API (the REST routes and the MCP endpoint) asks this one function.

Cognito mode: the user pool authorizer has checked the JWT and passes its claims in
`requestContext.authorizer.claims`. IAM mode: API Gateway has checked the SigV4 signature and passes the
principal in `requestContext.identity.userArn`, which the configured map turns into a tenant.

The operator routes ask `operator_from_event` instead: the platform operator is no tenant's member.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from citewise.domain.models import Caller, Operator
from citewise.domain.tenancy import caller_from_claims, caller_from_iam, operator_from_claims, operator_from_iam
from citewise.runtime.settings import ApiSettings


def caller_from_event(event: APIGatewayProxyEvent, settings: ApiSettings) -> Caller:
    """The authenticated Caller; UnauthorizedError without an identity, ForbiddenError without a tenant."""
    context = event.request_context
    if settings.auth_mode == "iam":
        return caller_from_iam(context.identity.user_arn, settings.tenant_map)
    return caller_from_claims(context.authorizer.claims or {}, tenant_claim=settings.tenant_claim)


def operator_from_event(event: APIGatewayProxyEvent, settings: ApiSettings) -> Operator:
    """The platform operator of an `/v1/admin/` request; ForbiddenError for any tenant identity."""
    context = event.request_context
    if settings.auth_mode == "iam":
        return operator_from_iam(context.identity.user_arn, settings.operator_principals, settings.tenant_map)
    return operator_from_claims(context.authorizer.claims or {}, tenant_claim=settings.tenant_claim)
