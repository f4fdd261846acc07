"""The entry point of an API function (query, documents), built once per cold start.

Each API `functions/<name>/handler.py` names its settings and routes and calls `api_handler`, so the
decorator order (logger with the correlation id, metrics, tracer) and the error handling exist once.
Settings are validated when the module loads: a misconfigured function fails its cold start with a
message naming the variable, instead of failing every request. Adapters are built by the first request
that needs them (`citewise.runtime.services.Services`). Each request to an authenticated route leaves an
audit record once its response is made (`citewise.api.audit`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.api.app import build_resolver
from citewise.api.audit import AuditNote, record_request
from citewise.domain import deadline
from citewise.runtime.cors import with_cors
from citewise.runtime.observability import logger, metrics, tracer
from citewise.runtime.services import build_services
from citewise.runtime.settings import ApiSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def api_handler(
    settings_kind: type[ApiSettings], *route_sets: Callable[[APIGatewayRestResolver], None]
) -> LambdaHandler:
    """The handler of an API function with settings `settings_kind`, serving the routes `route_sets` add."""
    settings = load_settings(settings_kind)
    services = build_services(settings)
    app = build_resolver(*route_sets)

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        entry = AuditNote()
        app.context.update(services=services, settings=settings, audit=entry)
        with deadline.budget(context.get_remaining_time_in_millis()):
            response = app.resolve(event, context)
            # Inside the budget: a slow trail's write is cut to the time left and fails loudly, rather
            # than running the function into its timeout.
            record_request(event, response, services, settings, entry)
        return response

    return cast(LambdaHandler, with_cors(lambda_handler, settings.cors_allow_origins))
