"""Real Cognito ID tokens (moto's cognito-idp signs them) through the API functions, on both stacks.

The chain under test: a user pool with a `tenant_id` custom attribute and an `admin` group issues an ID
token; API Gateway's Cognito authorizer verifies it and hands its claims to the function as strings;
the function turns them into the Caller whose tenant and groups decide what the user may see and do.
Here the test plays the authorizer: it verifies the token against the pool's JWKS (as API Gateway does
on AWS) and renders the claims the way the authorizer passes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import jwt
import pytest
import requests
from moto import mock_aws

from citewise_local.emulator import authorizer_claims
from tests.integration.handlers.harness import Stack

REGION = "us-east-1"
PASSWORD = "Corr3ct-Horse-Battery!"
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n"


@dataclass
class UserPool:
    """A moto user pool set up as the CDK app sets up the real one: tenant attribute, admin group."""

    client: Any
    pool_id: str
    client_id: str

    @classmethod
    def create(cls) -> UserPool:
        client = boto3.client("cognito-idp", region_name=REGION)
        pool_id = client.create_user_pool(
            PoolName="citewise-users",
            Schema=[{"Name": "tenant_id", "AttributeDataType": "String", "Mutable": False}],
        )["UserPool"]["Id"]
        client_id = client.create_user_pool_client(
            UserPoolId=pool_id,
            ClientName="citewise-api",
            ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        )["UserPoolClient"]["ClientId"]
        for group in ("admin", "analysts"):
            client.create_group(UserPoolId=pool_id, GroupName=group)
        return cls(client, pool_id, client_id)

    @property
    def issuer(self) -> str:
        return f"https://cognito-idp.{REGION}.amazonaws.com/{self.pool_id}"

    def add_user(self, username: str, tenant_id: str, groups: tuple[str, ...] = ()) -> None:
        self.client.admin_create_user(
            UserPoolId=self.pool_id,
            Username=username,
            UserAttributes=[{"Name": "custom:tenant_id", "Value": tenant_id}],
            MessageAction="SUPPRESS",
        )
        self.client.admin_set_user_password(
            UserPoolId=self.pool_id, Username=username, Password=PASSWORD, Permanent=True
        )
        for group in groups:
            self.client.admin_add_user_to_group(UserPoolId=self.pool_id, Username=username, GroupName=group)

    def sign_in(self, username: str) -> str:
        """The user's ID token from a password sign-in."""
        result = self.client.admin_initiate_auth(
            UserPoolId=self.pool_id,
            ClientId=self.client_id,
            AuthFlow="ADMIN_USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": username, "PASSWORD": PASSWORD},
        )
        return str(result["AuthenticationResult"]["IdToken"])

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, after checking what API Gateway's authorizer checks: the signature against
        the pool's JWKS, the issuer, the audience (the app client) and the expiry."""
        jwks = requests.get(f"{self.issuer}/.well-known/jwks.json", timeout=5).json()
        key = jwt.PyJWKSet.from_dict(jwks)[jwt.get_unverified_header(token)["kid"]]
        claims: dict[str, Any] = jwt.decode(
            token, key=key.key, algorithms=["RS256"], audience=self.client_id, issuer=self.issuer
        )
        return claims

    def identity(self, username: str) -> dict[str, str]:
        """What the function receives for a request carrying this user's ID token."""
        claims = self.verify(self.sign_in(username))
        assert claims["token_use"] == "id"
        return authorizer_claims(claims)


@pytest.fixture
def pool(stack: Stack, request: pytest.FixtureRequest) -> Iterator[UserPool]:
    """A user pool in moto: the AWS stack's mock already covers cognito-idp; the local stack needs one."""
    if stack.kind == "aws":
        yield UserPool.create()
        return
    request.getfixturevalue("aws_credentials")
    with mock_aws():
        yield UserPool.create()


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
