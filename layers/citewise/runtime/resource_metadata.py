"""OAuth 2.0 protected-resource metadata (RFC 9728) for the MCP endpoint, as the MCP authorization spec asks.

A request to `/mcp` without a usable token is answered 401 with `WWW-Authenticate: Bearer
resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"` (RFC 9728 section 5.1), and that
public document names the endpoint and the authorization server that issues its tokens, so a client can
tell its user where to sign in. The path follows RFC 9728 section 3.1 (the well-known prefix, then the
resource's path); on AWS the stage comes first, as every path of the API (docs/mcp.md).

Here, not in `citewise.mcp`: the route table (`citewise.api.routes`), the local server's 401 and the
stack's gateway responses use the same path and challenge.
"""

from __future__ import annotations

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH


def challenge(base_url: str) -> str:
    """The `WWW-Authenticate` value of a 401 from the API whose base URL (no trailing `/`) is `base_url`."""
    return f'Bearer resource_metadata="{base_url}{METADATA_PATH}"'


def resource_metadata(base_url: str, authorization_server: str) -> dict[str, object]:
    """The metadata document: `resource` is the URL a client calls, exactly (RFC 9728 section 3.3)."""
    return {
        "resource": base_url + MCP_PATH,
        "authorization_servers": [authorization_server],
        "bearer_methods_supported": ["header"],
        "resource_name": "citewise",
    }
