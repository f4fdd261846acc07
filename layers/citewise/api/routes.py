"""Every route (v1 REST and the MCP endpoint), the function that serves it, and whether it needs an identity.

One table read by three places that must agree: the CDK API (methods, authorizers, integrations), the
local server (which handler an HTTP request goes to) and the tests that check both.

Programs (`citewise.domain.credentials`) call the same functions under `MACHINE_PREFIX`: API Gateway's
Cognito authorizer takes ID tokens on a method without OAuth scopes and access tokens only on a method
with scopes, so the routes a credential may use (`Route.programs`) have a twin, `/m2m/v1/query` beside
`/v1/query`, that requires one of the two scopes (`machine_routes`). The functions strip the prefix and
serve both alike; the operator's and the credential-management routes have no twin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from citewise.domain.credentials import CredentialScope
from citewise.runtime.resource_metadata import MCP_PATH, METADATA_PATH

FunctionName = Literal["query", "documents", "mcp"]
MACHINE_PREFIX = "/m2m"
"""Where the routes a program's access token may call are repeated, with OAuth scopes."""


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
    programs: CredentialScope | None = None
    """The least scope a program's credential needs here (`read` for reads, `full` for writes), which
    gives the route a twin under MACHINE_PREFIX; None: no credential may call it."""
    streams: bool = False
    """Whether the route may answer with a stream (server-sent events, `citewise.api.streaming`): its
    integration transfers the response as it is written (`ResponseTransferMode.STREAM` on AWS)."""
    scopes: tuple[str, ...] = ()
    """The OAuth scopes API Gateway requires (any one of them): a twin's; such a method takes access
    tokens only, and a method without takes ID tokens only."""


READ, FULL = CredentialScope.READ, CredentialScope.FULL

HUMAN_ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/query", "query", programs=READ, streams=True),
    Route("POST", "/v1/search", "query", programs=READ),
    # A user's conversations (`citewise.api.conversations`): a program's service user has its own.
    Route("GET", "/v1/conversations", "query", programs=READ),
    Route("GET", "/v1/conversations/{id}", "query", programs=READ),
    Route("DELETE", "/v1/conversations/{id}", "query", programs=FULL),
    # Feedback on a user's own answers, and what it says of each source (`citewise.api.feedback`).
    Route("POST", "/v1/feedback", "query", programs=FULL),
    Route("GET", "/v1/sources/{id}/stats", "query", programs=READ),
    Route("GET", "/v1/documents", "documents", programs=READ),
    Route("GET", "/v1/documents/{id}", "documents", programs=READ),
    Route("GET", "/v1/documents/{id}/content", "documents", programs=READ),
    Route("GET", "/v1/documents/{id}/text", "documents", programs=READ),
    Route("DELETE", "/v1/documents/{id}", "documents", programs=FULL),
    Route("POST", "/v1/uploads", "documents", programs=FULL),
    Route("GET", "/v1/settings", "documents", programs=READ),
    Route("PUT", "/v1/settings", "documents"),
    Route("GET", "/v1/usage", "documents"),
    # A tenant admin's credentials for its programs (`citewise.api.credentials`): people only.
    Route("POST", "/v1/credentials", "documents"),
    Route("GET", "/v1/credentials", "documents"),
    Route("DELETE", "/v1/credentials/{id}", "documents"),
    # A tenant's web sources (`citewise.api.sources`): its admins register, refresh and remove them.
    Route("POST", "/v1/sources", "documents"),
    Route("GET", "/v1/sources", "documents", programs=READ),
    Route("GET", "/v1/sources/{id}", "documents", programs=READ),
    Route("DELETE", "/v1/sources/{id}", "documents"),
    Route("POST", "/v1/sources/{id}/refresh", "documents"),
    # The platform operator's (`citewise.api.admin`): the same authorizer, the Operator checked in the function.
    Route("GET", "/v1/admin/tenants", "documents"),
    Route("POST", "/v1/admin/tenants/{tenant_id}/erasure", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/erasure", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/quotas", "documents"),
    Route("PUT", "/v1/admin/tenants/{tenant_id}/quotas", "documents"),
    Route("POST", "/v1/admin/tenants/{tenant_id}/requeue", "documents"),
    Route("GET", "/v1/admin/usage", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/usage", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/audit", "documents"),
    Route("GET", "/v1/admin/tenants/{tenant_id}/credentials", "documents"),
    Route("DELETE", "/v1/admin/tenants/{tenant_id}/credentials/{id}", "documents"),
    Route("GET", "/v1/health", "documents", authenticated=False),
    Route("GET", "/v1/openapi.json", "documents", authenticated=False),
    # The MCP endpoint (`citewise.mcp`): JSON-RPC over POST; GET, where a client would open an event
    # stream, is declared so that the function answers it 405 rather than the gateway 404.
    Route("POST", MCP_PATH, "mcp", openapi=False, programs=READ),
    Route("GET", MCP_PATH, "mcp", openapi=False, programs=READ),
    # Its OAuth protected-resource metadata (RFC 9728), public: a client reads it before it has a token.
    Route("GET", METADATA_PATH, "mcp", authenticated=False, openapi=False),
)


def machine_routes(routes: Sequence[Route]) -> tuple[Route, ...]:
    """The twin under MACHINE_PREFIX of each route a credential may call. Every twin takes either scope:
    the gateway only tells a program's access token from a person's ID token, and the function applies
    the one access rule with the credential's scope (a `read` credential's write is its 403 FORBIDDEN)."""
    return tuple(
        Route(
            route.method,
            MACHINE_PREFIX + route.path,
            route.function,
            openapi=False,
            programs=route.programs,
            streams=route.streams,
            scopes=tuple(scope.oauth_scope for scope in CredentialScope),
        )
        for route in routes
        if route.programs is not None
    )


ROUTES: tuple[Route, ...] = HUMAN_ROUTES + machine_routes(HUMAN_ROUTES)


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
