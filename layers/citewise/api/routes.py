"""Every v1 route, the function that serves it, and whether it needs an identity.

One table read by three places that must agree: the CDK API (methods, authorizers, integrations), the
local server (which handler an HTTP request goes to) and the tests that check both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FunctionName = Literal["query", "documents"]


@dataclass(frozen=True)
class Route:
    """One method on one API Gateway resource path (`{name}` marks a path parameter)."""

    method: Literal["GET", "POST", "DELETE"]
    path: str
    function: FunctionName
    authenticated: bool = True


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/query", "query"),
    Route("POST", "/v1/search", "query"),
    Route("GET", "/v1/documents", "documents"),
    Route("GET", "/v1/documents/{id}", "documents"),
    Route("DELETE", "/v1/documents/{id}", "documents"),
    Route("POST", "/v1/uploads", "documents"),
    Route("GET", "/v1/health", "documents", authenticated=False),
    Route("GET", "/v1/openapi.json", "documents", authenticated=False),
)
