"""The platform operator through the API functions: /v1/admin/ is its alone, and the tenant routes are
closed to it, on both stacks.

The operator's routes read only the registry, so the AWS stack runs them on the OpenSearch double (its
index is only written by the ingestion that registers the tenants); the RoleCheck still holds every AWS
call of the documents function to its role in the synthesized template.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from citewise.api.routes import MACHINE_PREFIX, ROUTES
from tests.integration.handlers.cognito import UserPool
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims

pytestmark = pytest.mark.parametrize("stack", ["local", "aws-double"], indirect=True)

OPERATOR = claims(None, "ops-1", groups="operators")
ADMIN = claims("acme", "carol", groups="admin")
MEMBER_IN_OPERATORS = claims("acme", "mallory", groups="operators,admin")
NOTE = b"# Note\n\nThe vault opens at nine.\n"
OPS_ROLE = "arn:aws:iam::123456789012:role/citewise-operator"


def _tenants(stack: Stack, identity: dict[str, str], **query: str) -> tuple[int, Any]:
    return stack.api("GET", "/v1/admin/tenants", identity=identity, query=query)


def test_the_operator_lists_every_tenant_page_by_page(stack: Stack) -> None:
    # Given three tenants (two sharing a prefix) with documents
    for tenant in ("acme", "acme-eu", "globex"):
        stack.upload_and_ingest(claims(tenant, "alice"), "note.md", NOTE)
    # When the operator lists the tenants two at a time
    status, first = _tenants(stack, OPERATOR, limit="2")
    assert status == 200, first
    status, second = _tenants(stack, OPERATOR, limit="2", cursor=str(first["next_cursor"]))
    # Then it gets every tenant once, in id order, and the last page says so
    assert status == 200
    assert [t["tenant_id"] for t in [*first["items"], *second["items"]]] == ["acme", "acme-eu", "globex"]
    assert second["next_cursor"] is None


@pytest.mark.parametrize("identity", [ADMIN, MEMBER_IN_OPERATORS, claims("acme", "alice")])
def test_no_tenant_identity_reaches_an_operator_route(stack: Stack, identity: dict[str, str]) -> None:
    # Given a tenant with a document
    stack.upload_and_ingest(claims("acme", "alice"), "note.md", NOTE)
    # When a tenant identity (its admin, or a member someone put in the operators group) lists the tenants
    status, body = _tenants(stack, identity)
    # Then it is refused with the structured error, and learns no tenant id
    assert status == 403, body
    assert body["error"]["code"] == "FORBIDDEN" and body["error"]["request_id"]
    assert "acme" not in json.dumps(body)


def test_a_bad_cursor_or_limit_is_a_validation_error(stack: Stack) -> None:
    for query in ({"limit": "0"}, {"limit": "101"}, {"cursor": "e30"}, {"cursor": "not a cursor"}):
        status, body = _tenants(stack, OPERATOR, **query)
        assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR"), query


CONVERSATION = "c" + "0" * 28  # CONVERSATION_ID_PATTERN


def test_the_operator_reaches_no_tenant_route(stack: Stack) -> None:
    # Given a tenant's document
    doc_id = stack.upload_and_ingest(claims("acme", "alice"), "note.md", NOTE)
    bodies = {
        "/v1/query": {"query": "vault"},
        "/v1/search": {"query": "vault"},
        "/v1/uploads": {"filename": "x.md", "content_type": "text/markdown", "size": 5},
        "/v1/settings": {},
        "/v1/credentials": {"name": "agent", "user": "agent"},
        "/v1/sources": {"kind": "sitemap", "url": "https://docs.example.com/sitemap.xml"},
        "/v1/feedback": {"response_id": f"{CONVERSATION}-1", "helpful": True},
    }
    # When the operator calls every authenticated route that is not an operator's
    tenant_routes = [r for r in ROUTES if r.authenticated and not r.path.startswith("/v1/admin/")]
    assert {r.function for r in tenant_routes} == {"query", "documents", "mcp"}
    for route in tenant_routes:
        if (route.function, route.method) == ("mcp", "GET"):
            continue  # 405 to everyone, before any identity is read: the endpoint keeps no stream
        # (an id of the route's own kind, so that no path validation answers before the identity check)
        path = route.path.replace("{id}", CONVERSATION if "/conversations/" in route.path else doc_id)
        body = bodies.get(route.path.removeprefix(MACHINE_PREFIX), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        event = api_event(route.method, path, body=body, identity=OPERATOR)
        response = stack.handler(route.function)(event, LambdaContext())
        # Then each refuses it as no tenant's member: it cannot read tenant data by accident
        assert response["statusCode"] == 403, (route, response)
        error = json.loads(response["body"])["error"]
        if route.function != "mcp":  # the MCP endpoint answers in JSON-RPC's error shape
            assert error["code"] == "FORBIDDEN", route
        assert "no member of any tenant" in error["message"], route


def test_iam_operator_principals_list_tenants_and_tenant_roles_are_refused(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given IAM mode with an operator role beside a tenant's role
    stack.upload_and_ingest(claims("acme", "alice"), "note.md", NOTE)
    monkeypatch.setenv("CITEWISE_AUTH_MODE", "iam")
    monkeypatch.setenv("CITEWISE_TENANT_MAP", json.dumps({"arn:aws:iam::123456789012:role/AcmeApp": "acme"}))
    monkeypatch.setenv("CITEWISE_OPERATOR_PRINCIPALS", json.dumps([OPS_ROLE]))
    stack.handlers.clear()  # a cold start with the new settings
    operator = "arn:aws:sts::123456789012:assumed-role/citewise-operator/alice"
    tenant_app = "arn:aws:sts::123456789012:assumed-role/AcmeApp/job"
    # Then the operator's sessions list the tenants and the tenant's role is refused
    status, body = stack.api("GET", "/v1/admin/tenants", iam_arn=operator)
    assert status == 200 and [t["tenant_id"] for t in body["items"]] == ["acme"]
    assert stack.api("GET", "/v1/admin/tenants", iam_arn=tenant_app)[0] == 403
    # And the operator's role reads no tenant's documents
    status, body = stack.api("GET", "/v1/documents", iam_arn=operator)
    assert status == 403 and body["error"]["code"] == "FORBIDDEN"


def test_a_real_cognito_operator_lists_tenants_and_a_tenant_admin_cannot(stack: Stack, pool: UserPool) -> None:
    # Given a pool as the stack sets it up: an operator created without a tenant, in `operators`
    pool.add_user("carol", "acme", groups=("admin",))
    pool.add_user("ops", None, groups=("operators",))
    stack.upload_and_ingest(pool.identity("carol"), "note.md", NOTE)
    operator = pool.identity("ops")
    assert "custom:tenant_id" not in operator
    # Then the operator lists the tenant, and the tenant's admin is refused
    status, body = _tenants(stack, operator)
    assert status == 200 and [t["tenant_id"] for t in body["items"]] == ["acme"]
    assert _tenants(stack, pool.identity("carol"))[0] == 403
