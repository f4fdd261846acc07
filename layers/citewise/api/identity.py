"""The Caller (or, on the operator routes, the Operator) of a REST request (`citewise.runtime.identity`),
with the services the handler wired."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from citewise.domain.models import Caller, Operator
from citewise.runtime.identity import caller_from_event, operator_from_event
from citewise.runtime.observability import logger
from citewise.runtime.services import Services


def request_scope(app: APIGatewayRestResolver) -> tuple[Services, Caller]:
    """The services the handler put in the resolver's context, and the current request's Caller.

    The tenant joins every later log line of the request (the handler clears it between requests). A
    program's credential is looked up in the credential store (`Services.credential_lookup`).
    """
    services: Services = app.context["services"]
    caller = caller_from_event(app.current_event, app.context["settings"], services.credential_lookup)
    logger.append_keys(tenant_id=caller.tenant_id)
    if caller.credential_id is not None:
        logger.append_keys(credential_id=caller.credential_id)
    return services, caller


def operator_scope(app: APIGatewayRestResolver) -> tuple[Services, Operator]:
    """The services and the current request's Operator: ForbiddenError (403) for any tenant identity,
    tenant admins included. The operator joins every later log line of the request."""
    services: Services = app.context["services"]
    operator = operator_from_event(app.current_event, app.context["settings"])
    logger.append_keys(operator_id=operator.user_id)
    return services, operator
