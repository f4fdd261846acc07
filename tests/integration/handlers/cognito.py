"""A Cognito user pool in moto, set up as the CDK app sets up the real one, whose ID tokens reach the API
functions as API Gateway's Cognito authorizer renders their claims (`pool`, in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
import jwt
import requests

from citewise_local.emulator import authorizer_claims

REGION = "us-east-1"
PASSWORD = "Corr3ct-Horse-Battery!"


@dataclass
class UserPool:
    """A moto user pool set up as the CDK app sets up the real one: tenant attribute, admin and operators
    groups, the `citewise` resource server of programs' credentials."""

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
        for group in ("admin", "analysts", "operators"):
            client.create_group(UserPoolId=pool_id, GroupName=group)
        client.create_resource_server(
            UserPoolId=pool_id,
            Identifier="citewise",
            Name="citewise API",
            Scopes=[
                {"ScopeName": "read", "ScopeDescription": "read"},
                {"ScopeName": "full", "ScopeDescription": "full"},
            ],
        )
        return cls(client, pool_id, client_id)

    @property
    def issuer(self) -> str:
        return f"https://cognito-idp.{REGION}.amazonaws.com/{self.pool_id}"

    def add_user(self, username: str, tenant_id: str | None, groups: tuple[str, ...] = ()) -> None:
        """A user of `tenant_id`; None: the platform operator's kind, created without a tenant."""
        self.client.admin_create_user(
            UserPoolId=self.pool_id,
            Username=username,
            UserAttributes=[{"Name": "custom:tenant_id", "Value": tenant_id}] if tenant_id is not None else [],
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
