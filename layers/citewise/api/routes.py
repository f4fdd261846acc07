"""Every route (v1 REST and the MCP endpoint), the function that serves it, and whether it needs an identity.

One table read by three places that must agree: the CDK API (methods, authorizers, integrations), the
local server (which handler an HTTP request goes to) and the tests that check both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from citewise.runtime.resource_metadata import MCP_PATH, METADATA_PATH

FunctionName = Literal["query", "documents", "mcp"]


@dataclass(frozen=True)
class Route:
    """One method on one API Gateway resource path (`{name}` marks a path parameter)."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    function: FunctionName
    authenticated: bool = True
    openapi: bool = True
    """Whether the route is an operation of the REST API's OpenAPI document; the MCP endpoint speaks
    JSON-RPC and is described in docs/mcp.md instead."""


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/query", "query"),
    Route("POST", "/v1/search", "query"),
    Route("GET", "/v1/documents", "documents"),
    Route("GET", "/v1/documents/{id}", "documents"),
    Route("DELETE", "/v1/documents/{id}", "documents"),
    Route("POST", "/v1/uploads", "documents"),
    Route("GET", "/v1/settings", "documents"),
    Route("PUT", "/v1/settings", "documents"),
    # The platform operator's (`citewise.api.admin`): the same authorizer, the Operator checked in the function.
    Route("GET", "/v1/admin/tenants", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/quotas", "documents"),
    Route("PUT", "/v1/admin/tenants/{tenant_id}/quotas", "documents"),
    Route("POST", "/v1/admin/tenants/{tenant_id}/requeue", "documents"),
    Route("GET", "/v1/health", "documents", authenticated=False),
    Route("GET", "/v1/openapi.json", "documents", authenticated=False),
    # The MCP endpoint (`citewise.mcp`): JSON-RPC over POST; GET, where a client would open an event
    # stream, is declared so that the function answers it 405 rather than the gateway 404.
    Route("POST", MCP_PATH, "mcp", openapi=False),
    Route("GET", MCP_PATH, "mcp", openapi=False),
    # Its OAuth protected-resource metadata (RFC 9728), public: a client reads it before it has a token.
    Route("GET", METADATA_PATH, "mcp", authenticated=False, openapi=False),
)


def path_parameters(template: str, raw_path: str) -> dict[str, str] | None:
    """The decoded parameters of a (percent-encoded) request path if it has the shape of `template`."""
    expected_segments, segments = template.split("/"), raw_path.split("/")
    if len(expected_segments) != len(segments):
        return None
    parameters: dict[str, str] = {}
    for expected, actual in zip(expected_segments, segments, strict=True):
        if expected.startswith("{") and expected.endswith("}"):
            if not actual:
                return None
            parameters[expected[1:-1]] = unquote(actual)
        elif expected != actual:
            return None
    return parameters


def match_route(method: str, raw_path: str, routes: Sequence[Route] = ROUTES) -> tuple[Route, dict[str, str]] | None:
    """The route for `method` on a (percent-encoded) request path and its decoded path parameters."""
    for route in routes:
        parameters = path_parameters(route.path, raw_path) if route.method == method else None
        if parameters is not None:
            return route, parameters
    return None


def allowed_methods(raw_path: str, routes: Sequence[Route] = ROUTES) -> tuple[str, ...]:
    """The methods declared on the resource a request path names (none for an unknown path): what a 405
    answer's `Allow` header lists."""
    return tuple(sorted({route.method for route in routes if path_parameters(route.path, raw_path) is not None}))
