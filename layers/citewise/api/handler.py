"""The entry point of an API function (query, documents), built once per cold start.

Each API `functions/<name>/handler.py` names its settings and routes and calls `api_handler`, so the
decorator order (logger with the correlation id, metrics, tracer) and the error handling exist once.
Settings are validated when the module loads: a misconfigured function fails its cold start with a
message naming the variable, instead of failing every request. Adapters are built by the first request
that needs them (`citewise.runtime.services.Services`). Each request to an authenticated route leaves an
audit record once its response is made (`citewise.api.audit`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.api.app import build_resolver
from citewise.api.audit import AuditNote, record_request
from citewise.api.streaming import StreamSlot, http_stream
from citewise.domain import deadline
from citewise.runtime.cors import with_cors
from citewise.runtime.observability import logger, metrics, tracer
from citewise.runtime.services import build_services
from citewise.runtime.settings import ApiSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
StreamHandler = Callable[[dict[str, Any], LambdaContext], Iterator[bytes]]


def api_handler(
    settings_kind: type[ApiSettings], *route_sets: Callable[[APIGatewayRestResolver], None]
) -> LambdaHandler:
    """The handler of an API function with settings `settings_kind`, serving the routes `route_sets` add."""
    return api_handlers(settings_kind, *route_sets)[0]


def api_handlers(
    settings_kind: type[ApiSettings], *route_sets: Callable[[APIGatewayRestResolver], None]
) -> tuple[LambdaHandler, StreamHandler]:
    """The buffered and the streamed handler of an API function, sharing one cold start.

    The streamed one answers in the format of a streamed Lambda proxy response (`citewise.api.streaming`):
    a route that streams (`POST /v1/query` asked for events) sends its body as it is written; any other
    response goes out whole after its status and headers. The buffered one sends a streamed body whole, at
    its end: a client asking for events through a buffered integration still gets them, all at once.
    """
    settings = load_settings(settings_kind)
    services = build_services(settings)
    app = build_resolver(*route_sets)
    entry, slot = AuditNote(), StreamSlot()  # the current invocation's: one invocation at a time

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        app.context.update(services=services, settings=settings, audit=entry, stream=slot)
        return app.resolve(event, context)

    routed = with_cors(resolve, settings.cors_allow_origins)

    def responded(event: dict[str, Any], context: LambdaContext) -> tuple[dict[str, Any], Iterator[bytes] | None]:
        """The response (status and headers, and its body unless it streams one) and its streamed body; the
        audit record is written once the body is sent."""
        nonlocal entry
        entry, slot.frames = AuditNote(), None
        with deadline.budget(context.get_remaining_time_in_millis()):
            response = routed(event, context)
            if slot.frames is None:
                # Inside the budget: a slow trail's write is cut to the time left and fails loudly, rather
                # than running the function into its timeout.
                record_request(event, response, services, settings, entry)
                return response, None
        return response, _audited(slot.frames, event, response, entry, context)

    def _audited(
        frames: Generator[bytes, None, None],
        event: dict[str, Any],
        response: dict[str, Any],
        noted: AuditNote,
        context: LambdaContext,
    ) -> Generator[bytes, None, None]:
        with deadline.budget(context.get_remaining_time_in_millis()):
            try:
                yield from frames
            finally:
                frames.close()  # the reader left: the model stops
                record_request(event, response, services, settings, noted)
                # The handler's metrics were flushed when it returned the status and headers; what the
                # answer added since (tokens, reranking) goes out now, with this invocation.
                metrics.flush_metrics()

    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        response, frames = responded(event, context)
        if frames is not None:
            response["body"] = b"".join(frames).decode()
        return response

    def stream_handler(event: dict[str, Any], context: LambdaContext) -> Generator[bytes, None, None]:
        response, frames = responded(event, context)
        return http_stream(response, frames)

    return lambda_handler, stream_handler
