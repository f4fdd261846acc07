"""The REST resolver every API function uses: validation, one error body, and the OpenAPI document.

Errors: every failure leaves as `{"error": {"code", "message", "details", "request_id"}}` with the status
of its `CitewiseError` class. Body and parameter validation failures are VALIDATION_ERROR (400) with the
failing locations (never the rejected input, which could be a secret or a whole document); so is a body
whose JSON is nested too deep or holds a number too long to be one the API takes. A request body that is
not JSON (by its media type, in any letter case) is UNSUPPORTED_MEDIA_TYPE (415); an unknown route is
NOT_FOUND, a known path asked with a method it does not declare METHOD_NOT_ALLOWED (405, with `Allow`);
anything unexpected is logged with its stack trace and leaves as INTERNAL_ERROR without one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from citewise import __version__
from citewise.api.routes import MACHINE_PREFIX, allowed_methods
from citewise.api.schemas import ErrorResponse
from citewise.domain.errors import (
    CitewiseError,
    MethodNotAllowedError,
    NotFoundError,
    UnsupportedMediaTypeError,
    ValidationError,
    error_body,
)
from citewise.domain.jsonbody import JSON_MEDIA_TYPE, is_json, parse_json
from citewise.runtime.observability import logger

TITLE = "citewise API"
SECURED: list[dict[str, list[str]]] = [{"bearer": []}]
"""The `security` of every authenticated route (see `citewise.api.routes.ROUTES`)."""

_ERROR_TEXT = {
    400: "VALIDATION_ERROR: the body, a parameter or a filter is invalid",
    401: "UNAUTHORIZED: no valid identity",
    403: "FORBIDDEN: the identity has no tenant (the platform operator has none), or may not do this",
    404: "NOT_FOUND: no such document or conversation (or not yours to see)",
    405: "METHOD_NOT_ALLOWED: the path does not take this method (`Allow` lists those it takes)",
    409: "CONFLICT: the path belongs to another document; TENANT_ERASING: the tenant is being erased; "
    "ERASURE_IN_PROGRESS: an erasure of the tenant is running already; REFRESH_RUNNING: a refresh of the "
    "source is running",
    413: "PAYLOAD_TOO_LARGE: over the configured document size",
    415: "UNSUPPORTED_MEDIA_TYPE: a format citewise cannot parse, or a body that is not JSON",
    429: "QUOTA_EXCEEDED: over one of the tenant's quotas (`details` names it; wait `Retry-After` seconds), or "
    "THROTTLED: a backend asked to slow down; retry with backoff",
    502: "EMBEDDING_SERVICE_ERROR, SEARCH_BACKEND_ERROR or GENERATION_ERROR: a backend failed",
}


class _JsonBodies(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, reading every body as JSON or refusing it with 415.

    Powertools picks a parser by a case-sensitive prefix of the Content-Type: `Application/JSON` would be
    refused, and a form or multipart body would be parsed and could pass validation as if it were JSON.
    This API speaks JSON only; a request without a Content-Type is read as JSON, as before.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated

    def _get_body(self, app: ApiGatewayResolver) -> dict[str, Any]:
        event = app.current_event
        if event.body and not is_json(event.headers.get("content-type") or JSON_MEDIA_TYPE):
            raise UnsupportedMediaTypeError(
                f"the request body must be JSON (Content-Type: {JSON_MEDIA_TYPE})",
                details={"content_type": event.headers.get("content-type")},
            )
        return self._parse_json_data(app)


def responses(*errors: int, success: int = 200, described: str = "OK") -> dict[int, OpenAPIResponse]:
    """OpenAPI `responses` of a route: the success (its schema from the return type) and its errors."""
    ok: OpenAPIResponse = {"description": described}
    if success == 204:
        ok["content"] = {}
    return {
        success: ok,
        **{
            status: {"description": _ERROR_TEXT[status], "content": {"application/json": {"model": ErrorResponse}}}
            for status in errors
        },
    }


def request_id(app: APIGatewayRestResolver) -> str:
    """API Gateway's id of the current request: in every response body and every log line."""
    return str(app.current_event.request_context.request_id or "")


def build_resolver(*route_sets: Callable[[APIGatewayRestResolver], None]) -> APIGatewayRestResolver:
    """A resolver with validation, the error handlers, and the routes each `route_sets` item adds."""
    # A program's requests arrive under `/m2m/` (`citewise.api.routes.MACHINE_PREFIX`) and are served alike.
    app = APIGatewayRestResolver(
        enable_validation=True, json_body_deserializer=parse_json, strip_prefixes=[MACHINE_PREFIX]
    )
    app._request_validation_middleware = _JsonBodies()

    def reply(error: Exception) -> Response[str]:
        status, body = error_body(error, request_id(app))
        headers = error.headers() if isinstance(error, CitewiseError) else {}
        return Response(
            status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body), headers=headers
        )

    def _known(error: CitewiseError) -> Response[str]:
        if error.http_status >= 500:
            logger.warning("backend failure", extra={"code": error.code, "error_message": error.message})
        return reply(error)

    def _invalid(error: RequestValidationError) -> Response[str]:
        problems = [
            {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
            for err in error.errors()
        ]
        return reply(ValidationError("the request is invalid", details={"errors": problems}))

    def _not_json(_: RequestUnsupportedContentType | None) -> Response[str]:
        return reply(UnsupportedMediaTypeError("the request body must be JSON (Content-Type: application/json)"))

    @app.not_found
    def _no_route(_: Exception) -> Response[str]:
        method, allowed = app.current_event.http_method, allowed_methods(app.current_event.path)
        if allowed:
            return reply(MethodNotAllowedError(method, allowed))
        return reply(NotFoundError("no such route", details={"method": method}))

    def _unreadable(error: ValueError) -> Response[str]:
        # Powertools decodes a base64 body before validation runs, with a plain UnicodeDecodeError for bytes
        # that are not UTF-8. Bad input, never a 500.
        if isinstance(error, UnicodeDecodeError):
            return reply(ValidationError("the request body is not UTF-8 JSON"))
        return _unexpected(error)

    def _unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        return reply(error)

    for exception, handle in (
        (CitewiseError, _known),
        (RequestValidationError, _invalid),
        (RequestUnsupportedContentType, _not_json),
        (ValueError, _unreadable),
        (Exception, _unexpected),
    ):
        app.exception_handler(exception)(handle)
    for add_routes in route_sets:
        add_routes(app)
    return app


def openapi_document(*route_sets: Callable[[APIGatewayRestResolver], None]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes, as served at /v1/openapi.json and kept in docs/."""
    # Imported here: Powertools' OpenAPI models are a thousand-line pydantic module (about a fifth of the
    # query function's imports) that only the document needs, never a request's validation.
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    schema = build_resolver(*route_sets).get_openapi_json_schema(
        title=TITLE,
        version=__version__,
        description=(
            "Question answering with exact citations over your tenant's documents. Authenticate with a "
            "Cognito ID token (`Authorization: Bearer <token>`; locally, `citewise token`) or, on stacks "
            "deployed with IAM auth, a SigV4-signed request. The tenant always comes from that identity."
        ),
        security_schemes={"bearer": HTTPBearer(bearerFormat="JWT", description="A Cognito ID token.")},
    )
    document: dict[str, Any] = json.loads(schema)
    # Powertools documents its own 422 validation body; this API answers 400 VALIDATION_ERROR instead.
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        document["components"]["schemas"].pop(unused, None)
    return document
