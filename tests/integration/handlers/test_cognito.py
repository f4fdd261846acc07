"""Real Cognito ID tokens (moto's cognito-idp signs them) through the API functions, on both stacks.

The chain under test: a user pool with a `tenant_id` custom attribute and an `admin` group issues an ID
token; API Gateway's Cognito authorizer verifies it and hands its claims to the function as strings;
the function turns them into the Caller whose tenant and groups decide what the user may see and do.
Here the test plays the authorizer: it verifies the token against the pool's JWKS (as API Gateway does
on AWS) and renders the claims the way the authorizer passes them.
"""

from __future__ import annotations

from tests.integration.handlers.cognito import UserPool
from tests.integration.handlers.harness import Stack

RUNBOOK = b"# Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n"


def test_cognito_identities_decide_tenant_and_group_rights(stack: Stack, pool: UserPool) -> None:
    # Given users of two tenants; carol is a tenant admin, bob only an analyst
    pool.add_user("alice", "acme")
    pool.add_user("bob", "acme", groups=("analysts",))
    pool.add_user("carol", "acme", groups=("admin", "analysts"))
    pool.add_user("gina", "globex")
    alice, bob, carol, gina = (pool.identity(name) for name in ("alice", "bob", "carol", "gina"))
    # The authorizer's rendering: the tenant from the custom attribute, strings only, groups as one string
    assert alice["custom:tenant_id"] == "acme" and gina["custom:tenant_id"] == "globex"
    assert "cognito:groups" not in alice and sorted(carol["cognito:groups"].split(",")) == ["admin", "analysts"]
    assert all(isinstance(value, str) for value in carol.values())

    # When alice uploads a document and it is ingested
    doc_id = stack.upload_and_ingest(alice, "runbooks/keys.md", RUNBOOK)
    # Then it belongs to her Cognito user (the token's `sub`), in her tenant
    status, document = stack.api("GET", f"/v1/documents/{doc_id}", identity=alice)
    assert status == 200 and document["status"] == "INDEXED" and document["owner"] == alice["sub"]

    # And she finds it with a citation
    status, answer = stack.api(
        "POST", "/v1/query", body={"query": "How often are signing keys rotated?"}, identity=alice
    )
    assert status == 200 and answer["grounded"] is True
    assert [citation["doc_id"] for citation in answer["citations"]] == [doc_id]

    # While the other tenant's user finds nothing and cannot name it
    status, body = stack.api("POST", "/v1/search", body={"query": "signing keys rotation"}, identity=gina)
    assert status == 200 and body["hits"] == []
    status, answer = stack.api(
        "POST", "/v1/query", body={"query": "How often are signing keys rotated?"}, identity=gina
    )
    assert status == 200 and answer["citations"] == []
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=gina)[0] == 404

    # A colleague outside the admin group may read the shared document but not delete it
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=bob)[0] == 200
    status, error = stack.api("DELETE", f"/v1/documents/{doc_id}", identity=bob)
    assert status == 403 and error["error"]["code"] == "FORBIDDEN"
    # A member of the admin group may
    status, _ = stack.api("DELETE", f"/v1/documents/{doc_id}", identity=carol)
    assert status == 204
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=alice)[0] == 404
