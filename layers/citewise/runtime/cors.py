"""CORS on the API functions' responses: a browser page on an allowed origin may read them.

With a Lambda proxy integration API Gateway answers only the preflight (the stack's CORS options); the
response to the request itself comes from the function, and a browser hides its body from the page
unless it names the page's origin in `Access-Control-Allow-Origin`. So every response of the query,
documents and MCP functions, errors included, carries it when the request's `Origin` is one of
`cors_allow_origins` (the stack passes `api.cors_allow_origins`; `citewise serve --cors-origin`). Any
other origin gets no CORS header, so its page cannot read the answer. `*` allows every origin (the
API uses bearer tokens, never cookies, so no credentials mode is involved).

A preflight (`OPTIONS` with `Access-Control-Request-Method`) that reaches the function, as it does on
`citewise serve`, is answered here the way API Gateway's would be; on AWS the gateway answers it first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

ALLOWED_HEADERS = ("Authorization", "Content-Type", "X-Amz-Date", "X-Amz-Security-Token", "MCP-Protocol-Version")
"""Request headers a page may send: the token, the JSON body's type, SigV4's, MCP's version header."""
ALLOWED_METHODS = ("GET", "POST", "PUT", "DELETE", "OPTIONS")
MAX_AGE_S = 3600
"""How long a browser may cache a preflight's answer (API Gateway's preflight says the same)."""

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def allowed_origin(origin: str | None, origins: Sequence[str]) -> str | None:
    """The `Access-Control-Allow-Origin` value for a request from `origin`, or None (none, or not allowed)."""
    if origin is None or not origins:
        return None
    if "*" in origins:
        return "*"
    return origin if origin in origins else None


def with_cors(handler: Handler, origins: Sequence[str]) -> Handler:
    """`handler` whose responses name an allowed origin, and which answers a preflight itself."""
    if not origins:
        return handler

    def cors_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        headers = APIGatewayProxyEvent(event).headers  # case-insensitive, as HTTP header names are
        origin = allowed_origin(headers.get("origin"), origins)
        if event.get("httpMethod") == "OPTIONS" and headers.get("access-control-request-method"):
            return {"statusCode": 204, "headers": preflight_headers(origin), "body": ""}
        response = handler(event, context)
        response["headers"] = {**(response.get("headers") or {}), **origin_headers(origin)}
        return response

    return cors_handler


def origin_headers(origin: str | None) -> dict[str, str]:
    """The CORS headers of a response for `allowed_origin`'s answer (none when it is None)."""
    if origin is None:
        return {}
    # A response that depends on Origin must say so, or a shared cache could serve it to another origin.
    return {"Access-Control-Allow-Origin": origin} | ({} if origin == "*" else {"Vary": "Origin"})


def preflight_headers(origin: str | None) -> dict[str, str]:
    """The headers of the answer to a preflight for `allowed_origin`'s answer (none when it is None)."""
    if origin is None:
        return {}
    return origin_headers(origin) | {
        "Access-Control-Allow-Methods": ",".join(ALLOWED_METHODS),
        "Access-Control-Allow-Headers": ",".join(ALLOWED_HEADERS),
        "Access-Control-Max-Age": str(MAX_AGE_S),
    }
