"""Credentials for agents and services through the API functions, on the local stack and on the AWS
adapters (moto's Cognito and DynamoDB, the OpenSearch double; every AWS call held to its function's role).

A program's requests carry the claims API Gateway's Cognito authorizer passes for a client-credentials
access token (`access_claims`: the client id and the scopes, no tenant, no user): moto has no token
endpoint, so the token's claims are made here as Cognito documents them. The tenant, the user and the
scope must come from the credential's record.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.handlers.cognito import UserPool
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims, s3_notification
from tests.integration.handlers.test_audit import trail
from tests.integration.handlers.test_usage import usage_today

pytestmark = pytest.mark.parametrize("stack", ["local", "aws-double"], indirect=True)

ADMIN = claims("acme", "carol", groups="admin")
MEMBER = claims("acme", "alice")
OTHER_ADMIN = claims("globex", "gina", groups="admin")
PREFIX_ADMIN = claims("acme-eu", "erin", groups="admin")
NOTE = b"# Vault\n\nThe vault opens at nine.\n"


@pytest.fixture(autouse=True)
def credentials_configured(stack: Stack, pool: UserPool, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The documents function told the user pool and the token URL, as the stack tells it; the functions
    keep no credential record between requests, so a revocation shows at once (the bound is tested in
    tests/unit/test_credentials.py)."""
    if stack.kind == "aws":
        monkeypatch.setenv("CITEWISE_USER_POOL_ID", pool.pool_id)
        monkeypatch.setenv(
            "CITEWISE_CREDENTIAL_TOKEN_URL", "https://citewise-dev.auth.us-east-1.amazoncognito.com/oauth2/token"
        )
    monkeypatch.setenv("CITEWISE_CREDENTIAL_CACHE_TTL", "0")
    yield


def access_claims(client_id: str, scope: str) -> dict[str, str]:
    """The claims of a Cognito client-credentials access token as the REST authorizer passes them."""
    return {
        "sub": client_id,
        "token_use": "access",
        "scope": scope,
        "auth_time": "1764244800",
        "iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
        "exp": "Thu Nov 27 13:00:00 UTC 2026",
        "iat": "Thu Nov 27 12:00:00 UTC 2026",
        "version": "2",
        "jti": str(uuid.uuid4()),
        "client_id": client_id,
    }


def create(stack: Stack, identity: dict[str, str], **fields: Any) -> tuple[int, Any]:
    body = {"name": "support agent", "user": "bot", "scope": "read", **fields}
    return stack.api("POST", "/v1/credentials", body=body, identity=identity)


def program(stack: Stack, scope: str = "read") -> tuple[str, dict[str, str]]:
    """A credential of acme's admin: (its id, the claims of an access token granting its scope)."""
    status, issued = create(stack, ADMIN, scope=scope)
    assert status == 201, issued
    return issued["credential"]["credential_id"], access_claims(issued["credential"]["credential_id"], issued["scope"])


def test_a_tenant_admin_creates_lists_and_revokes_its_credentials(stack: Stack) -> None:
    # When acme's admin creates a credential
    status, issued = create(stack, ADMIN)
    # Then it gets the id, the secret (once), the token endpoint and the scope to ask for
    assert status == 201, issued
    credential = issued["credential"]
    assert (credential["tenant_id"], credential["user_id"], credential["scope"]) == ("acme", "svc:bot", "read")
    assert credential["created_by"] == "carol" and credential["revoked_at"] is None
    assert issued["client_secret"] and issued["token_url"].endswith("/oauth2/token")
    assert issued["scope"] == "citewise/read"
    # And the listing shows it, never its secret
    status, listed = stack.api("GET", "/v1/credentials", identity=ADMIN)
    assert status == 200 and [c["credential_id"] for c in listed["items"]] == [credential["credential_id"]]
    assert issued["client_secret"] not in json.dumps(listed)
    # When it revokes it, the record says so and stays listed
    status, revoked = stack.api("DELETE", f"/v1/credentials/{credential['credential_id']}", identity=ADMIN)
    assert status == 200 and revoked["revoked_by"] == "carol" and revoked["revoked_at"]
    status, listed = stack.api("GET", "/v1/credentials", identity=ADMIN)
    assert [c["revoked_at"] is not None for c in listed["items"]] == [True]


@pytest.mark.parametrize("identity", [OTHER_ADMIN, PREFIX_ADMIN])
def test_no_tenant_sees_or_revokes_another_tenants_credential(stack: Stack, identity: dict[str, str]) -> None:
    credential_id, token = program(stack)
    status, listed = stack.api("GET", "/v1/credentials", identity=identity)
    assert (status, listed["items"]) == (200, [])
    status, body = stack.api("DELETE", f"/v1/credentials/{credential_id}", identity=identity)
    assert (status, body["error"]["code"]) == (404, "NOT_FOUND")
    # and the credential still works for its own tenant
    assert stack.api("GET", "/m2m/v1/documents", identity=token)[0] == 200


def test_only_a_tenant_admin_manages_credentials(stack: Stack) -> None:
    credential_id, token = program(stack, "full")
    # Neither a member, nor a program (even with the full scope), may create, list or revoke credentials
    for identity in (MEMBER, token):
        assert create(stack, identity)[0] == 403
        assert stack.api("GET", "/v1/credentials", identity=identity)[0] == 403
        assert stack.api("DELETE", f"/v1/credentials/{credential_id}", identity=identity)[0] == 403


def test_bad_input_is_a_validation_error(stack: Stack) -> None:
    for fields in ({"scope": "admin"}, {"user": "../alice"}, {"user": ""}, {"name": ""}, {"user": "x" * 65}):
        status, body = create(stack, ADMIN, **fields)
        assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR"), fields


def test_a_read_credential_reads_its_tenant_and_changes_nothing(stack: Stack) -> None:
    # Given a document of acme and of globex, and a read-only credential of acme
    doc_id = stack.upload_and_ingest(MEMBER, "vault.md", NOTE)
    stack.upload_and_ingest(claims("globex", "gus"), "vault.md", NOTE)
    _, token = program(stack)
    # When the program searches, lists and reads: it sees acme's document only
    status, found = stack.api("POST", "/m2m/v1/search", body={"query": "vault"}, identity=token)
    assert status == 200 and {hit["chunk"]["document"]["tenant_id"] for hit in found["hits"]} == {"acme"}
    status, listed = stack.api("GET", "/m2m/v1/documents", identity=token)
    assert status == 200 and [d["doc_id"] for d in listed["items"]] == [doc_id]
    assert stack.api("GET", f"/m2m/v1/documents/{doc_id}", identity=token)[0] == 200
    assert stack.api("POST", "/m2m/v1/query", body={"query": "when does the vault open"}, identity=token)[0] == 200
    # And every write is refused with 403, by the one access rule
    upload = {"filename": "new.md", "content_type": "text/markdown", "size": 5}
    for method, path, body in (
        ("POST", "/m2m/v1/uploads", upload),
        ("DELETE", f"/m2m/v1/documents/{doc_id}", None),
    ):
        status, refused = stack.api(method, path, body=body, identity=token)
        assert (status, refused["error"]["code"], refused["error"]["details"]) == (403, "FORBIDDEN", {"scope": "read"})
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=MEMBER)[0] == 200


def test_a_read_credential_uses_every_mcp_tool(stack: Stack) -> None:
    stack.upload_and_ingest(MEMBER, "vault.md", NOTE)
    _, token = program(stack)
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "vault"}},
    }
    event = api_event("POST", "/m2m/mcp", body=message, identity=token)
    event["headers"]["Accept"] = "application/json"
    response = stack.handler("mcp")(event, LambdaContext())
    assert response["statusCode"] == 200, response
    result = json.loads(response["body"])["result"]
    assert not result.get("isError") and result["structuredContent"]["hits"]


def test_a_full_credential_uploads_as_its_service_user(stack: Stack) -> None:
    # Given a full credential
    _, token = program(stack, "full")
    # When its program uploads a document
    request = {"filename": "bot.md", "content_type": "text/markdown", "size": len(NOTE), "visibility": "private"}
    status, upload = stack.api("POST", "/m2m/v1/uploads", body=request, identity=token)
    assert status == 200, upload
    stack.put_upload(upload, NOTE)
    assert stack.ingest(s3_notification("ObjectCreated:Put", "tenants/acme/bot.md", size=len(NOTE))) == {
        "batchItemFailures": []
    }
    # Then it is the service user's, in the credential's tenant: private to it, deletable by it
    status, document = stack.api("GET", f"/m2m/v1/documents/{upload['document_id']}", identity=token)
    assert status == 200 and (document["tenant_id"], document["owner"]) == ("acme", "svc:bot")
    assert stack.api("GET", f"/v1/documents/{upload['document_id']}", identity=MEMBER)[0] == 404
    assert stack.api("DELETE", f"/m2m/v1/documents/{upload['document_id']}", identity=token)[0] == 204


def test_a_token_asking_for_less_gets_less(stack: Stack) -> None:
    # Given a full credential whose program asked its token for the read scope only
    credential_id, _ = program(stack, "full")
    token = access_claims(credential_id, "citewise/read")
    # Then the token reads and writes nothing
    upload = {"filename": "new.md", "content_type": "text/markdown", "size": 5}
    assert stack.api("GET", "/m2m/v1/documents", identity=token)[0] == 200
    assert stack.api("POST", "/m2m/v1/uploads", body=upload, identity=token)[0] == 403


def test_a_revoked_credential_is_refused(stack: Stack) -> None:
    # Given a program using its credential
    credential_id, token = program(stack)
    assert stack.api("GET", "/m2m/v1/documents", identity=token)[0] == 200
    # When its tenant's admin revokes it
    assert stack.api("DELETE", f"/v1/credentials/{credential_id}", identity=ADMIN)[0] == 200
    # Then a token it still holds is refused on every function, with no tenant data
    for method, path, body in (("GET", "/m2m/v1/documents", None), ("POST", "/m2m/v1/search", {"query": "vault"})):
        status, refused = stack.api(method, path, body=body, identity=token)
        assert (status, refused["error"]["code"]) == (401, "UNAUTHORIZED"), path
    response = stack.handler("mcp")(
        api_event("POST", "/m2m/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "ping"}, identity=token),
        LambdaContext(),
    )
    assert response["statusCode"] == 401


def test_an_unknown_client_is_refused(stack: Stack) -> None:
    # A client of the pool that is no credential (the people's app client, say) reaches no tenant
    status, refused = stack.api("GET", "/m2m/v1/documents", identity=access_claims("notacredential", "citewise/read"))
    assert (status, refused["error"]["code"]) == (401, "UNAUTHORIZED")


OPERATOR = claims(None, "ops-1", groups="operators")


def test_the_operator_lists_and_revokes_any_tenants_credentials(stack: Stack) -> None:
    # Given a credential of acme in use
    credential_id, token = program(stack)
    assert stack.api("GET", "/m2m/v1/documents", identity=token)[0] == 200
    path = "/v1/admin/tenants/acme/credentials"
    # Then no tenant identity reaches the operator's routes, acme's admin included
    for identity in (ADMIN, OTHER_ADMIN, token):
        assert stack.api("GET", path, identity=identity)[0] == 403
        assert stack.api("DELETE", f"{path}/{credential_id}", identity=identity)[0] == 403
    # And the operator lists acme's (another tenant's listing is empty, an id of another tenant 404)
    status, listed = stack.api("GET", path, identity=OPERATOR)
    assert status == 200 and [c["credential_id"] for c in listed["items"]] == [credential_id]
    assert stack.api("GET", "/v1/admin/tenants/acme-eu/credentials", identity=OPERATOR)[1]["items"] == []
    assert stack.api("DELETE", f"/v1/admin/tenants/acme-eu/credentials/{credential_id}", identity=OPERATOR)[0] == 404
    # When it revokes it, the program is cut off, and the record names the operator
    status, revoked = stack.api("DELETE", f"{path}/{credential_id}", identity=OPERATOR)
    assert status == 200 and revoked["revoked_by"] == "ops-1"
    assert stack.api("GET", "/m2m/v1/documents", identity=token)[0] == 401
    # The operator manages no tenant's credentials through the tenants' routes
    assert stack.api("GET", "/v1/credentials", identity=OPERATOR)[0] == 403


def test_a_programs_use_is_in_its_tenants_trail_and_usage_as_its_service_user(stack: Stack) -> None:
    # Given a document of acme and a read-only credential of acme
    stack.upload_and_ingest(MEMBER, "vault.md", NOTE)
    credential_id, token = program(stack)
    # When the program asks a question through its twin route
    status, _ = stack.api("POST", "/m2m/v1/query", body={"query": "when does the vault open"}, identity=token)
    assert status == 200
    # Then the trail has it under acme, as the service user, named as the route it twins
    (record,) = trail(tenant_id="acme", action="query")
    assert (record.user_id, record.outcome, record.operator) == ("svc:bot", "ok", False)
    assert record.question_hash and record.question is None
    # And it counts in acme's usage like a person's query
    assert usage_today("acme").rest_queries == 1
    # And its creation is on acme's trail, naming the credential, as the admin who created it
    (created,) = trail(tenant_id="acme", action="credential.create")
    assert (created.user_id, created.resources) == ("carol", [credential_id])
    # And the operator's revocation is on acme's trail too, naming the credential
    assert stack.api("DELETE", f"/v1/admin/tenants/acme/credentials/{credential_id}", identity=OPERATOR)[0] == 200
    (revoked,) = trail(tenant_id="acme", action="admin.credentials.revoke")
    assert revoked.operator and credential_id in revoked.resources
