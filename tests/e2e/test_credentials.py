"""A program's credential end to end through `citewise serve`: created by a tenant admin, exchanged for an
access token at the server's token endpoint (the client-credentials grant, as at Cognito's), used on the
`/m2m/` routes (REST and MCP) with its scope, counted in its tenant's usage, and revoked with
`citewise credential revoke`: refused everywhere once the functions' credential cache time has passed
(a server of its own, with that time at 2 s rather than 60)."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.e2e.helpers import Api, citewise_script, new_tenant, serve, server_environment, upload, wait_for_status

NOTE = b"# Vault\n\nThe vault opens at nine.\n"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
CACHE_SECONDS = 2


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    """`citewise serve` whose functions keep a credential's record CACHE_SECONDS."""
    home = tmp_path / "home"
    env = server_environment(home) | {"CITEWISE_CREDENTIAL_CACHE_TTL": str(CACHE_SECONDS)}
    server = serve(home, tmp_path / "server.log", env)
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)


def token_request(api: Api, url: str, client_id: str, secret: str, **fields: str) -> tuple[int, dict[str, Any]]:
    basic = base64.b64encode(f"{quote(client_id)}:{quote(secret)}".encode()).decode()
    body = urlencode({"grant_type": "client_credentials", **fields}).encode()
    reply = api.request("POST", url, data=body, headers={**FORM, "Authorization": f"Basic {basic}"})
    return reply.status, reply.json()


def citewise(api: Api, *arguments: str) -> str:
    done = subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), *arguments], env=api.env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def test_a_program_gets_tokens_reads_with_its_scope_and_is_cut_off_when_revoked(api: Api) -> None:
    # Given a tenant with a document, and a read-only credential its admin created
    tenant = new_tenant()
    alice = api.token(tenant, "alice")
    assert wait_for_status(api, alice, upload(api, alice, "vault.md", NOTE, "text/markdown"))["status"] == "INDEXED"
    admin = api.token(tenant, "carol", "admin")
    created = api.request("POST", "/v1/credentials", token=admin, json_body={"name": "agent", "user": "agent"})
    assert created.status == 201, created.body
    issued = created.json()
    client_id, secret = issued["credential"]["credential_id"], issued["client_secret"]
    assert issued["token_url"] == f"{api.url}/oauth2/token"

    # When the program asks the token endpoint: a wrong secret, grant or scope is OAuth's error
    assert token_request(api, issued["token_url"], client_id, "wrong") == (401, {"error": "invalid_client"})
    assert token_request(api, issued["token_url"], client_id, secret, grant_type="password")[1] == {
        "error": "unsupported_grant_type"
    }
    assert token_request(api, issued["token_url"], client_id, secret, scope="citewise/full")[1] == {
        "error": "invalid_scope"
    }
    # and the right ones buy an access token of the credential's scope
    status, granted = token_request(api, issued["token_url"], client_id, secret)
    assert status == 200 and granted["token_type"] == "Bearer" and granted["expires_in"] == 3600
    token = granted["access_token"]

    # Then it reads its tenant under /m2m/, REST and MCP alike, and writes nothing
    found = api.request("POST", "/m2m/v1/search", token=token, json_body={"query": "vault"})
    assert found.status == 200 and {h["chunk"]["document"]["tenant_id"] for h in found.json()["hits"]} == {tenant}
    listed = api.request(
        "POST",
        "/m2m/mcp",
        token=token,
        json_body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json"},
    )
    assert listed.status == 200 and json.loads(listed.body)["result"]["tools"]
    refused = api.request(
        "POST",
        "/m2m/v1/uploads",
        token=token,
        json_body={"filename": "x.md", "content_type": "text/markdown", "size": 3},
    )
    assert (refused.status, refused.json()["error"]["code"]) == (403, "FORBIDDEN")
    # An access token is no person's token, and a person's token is no program's, as at API Gateway
    assert api.request("GET", "/v1/documents", token=token).status == 401
    assert api.request("POST", "/m2m/v1/search", token=alice, json_body={"query": "vault"}).status == 401

    # And its use is its tenant's usage
    usage = json.loads(citewise(api, "usage", "--tenant", tenant, "--json"))
    assert usage["total"]["rest_searches"] >= 1

    # When the operator of the home revokes it from the command line
    listing = citewise(api, "credential", "list", "--tenant", tenant)
    assert client_id in listing and "svc:agent" in listing and "active" in listing
    citewise(api, "credential", "revoke", client_id, "--tenant", tenant)
    # Then it gets no new token at once, and once the cache time has passed every function refuses the
    # token it holds (valid for most of an hour yet)
    assert token_request(api, issued["token_url"], client_id, secret) == (401, {"error": "invalid_client"})
    time.sleep(CACHE_SECONDS)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    for path, body in (("/m2m/v1/search", {"query": "vault"}), ("/m2m/v1/documents", None), ("/m2m/mcp", ping)):
        method = "GET" if body is None else "POST"
        refused = api.request(method, path, token=token, json_body=body, headers={"Accept": "application/json"})
        assert refused.status == 401, (path, refused.body)
