"""The CredentialIssuer on Cognito: one user pool app client per credential, client-credentials grant only.

`issue` is CreateUserPoolClient with a generated secret, `AllowedOAuthFlows` `client_credentials` only,
`AllowedOAuthScopes` the credential's one scope of the `citewise` resource server (which the stack
defines), an access token lifetime of `token_minutes`, refresh-token auth as the only explicit flow
(client-credentials tokens have no refresh token, and the pool's user sign-in flows stay unusable with
it), and token revocation on. `withdraw` is DeleteUserPoolClient: the client can get no new token at
once; tokens it holds stay valid at the gateway until they expire, which is why every function also
checks the record (`citewise.runtime.identity.CredentialCache`).

The secret is returned once and kept nowhere by citewise; Cognito holds it (DescribeUserPoolClient
shows it to an IAM principal allowed that action, which the functions are not).
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.credentials import CredentialScope
from citewise.domain.errors import CitewiseError

_CLIENT_NAME_REFUSED = re.compile(r"[^\w\s+=,.@-]")
"""What a Cognito app client name may not hold (its pattern is `[\\w\\s+=,.@-]+`, at most 128)."""


class CognitoIssuer:
    """Credentials as app clients of one user pool (see the module docstring)."""

    def __init__(self, user_pool_id: str, *, token_url: str, token_minutes: int, client: Any | None = None) -> None:
        self.user_pool_id = user_pool_id
        self.token_url = token_url
        self._token_minutes = token_minutes
        self._client = client if client is not None else aws.client("cognito-idp")

    def issue(self, name: str, scope: CredentialScope) -> tuple[str, str]:
        response = aws.call(
            "Cognito CreateUserPoolClient", lambda: self._client.create_user_pool_client(**self.request(name, scope))
        )
        created = response["UserPoolClient"]
        return str(created["ClientId"]), str(created["ClientSecret"])

    def request(self, name: str, scope: CredentialScope) -> dict[str, Any]:
        """The CreateUserPoolClient request of a credential named `name` with `scope`."""
        return {
            "UserPoolId": self.user_pool_id,
            "ClientName": _CLIENT_NAME_REFUSED.sub("-", name)[:128],
            "GenerateSecret": True,
            "AllowedOAuthFlows": ["client_credentials"],
            "AllowedOAuthFlowsUserPoolClient": True,
            "AllowedOAuthScopes": [scope.oauth_scope],
            "ExplicitAuthFlows": ["ALLOW_REFRESH_TOKEN_AUTH"],
            "AccessTokenValidity": self._token_minutes,
            "TokenValidityUnits": {"AccessToken": "minutes"},
            "EnableTokenRevocation": True,
            "PreventUserExistenceErrors": "ENABLED",
        }

    def withdraw(self, credential_id: str) -> None:
        try:
            self._client.delete_user_pool_client(UserPoolId=self.user_pool_id, ClientId=credential_id)
        except ClientError as exc:
            if aws.error_code(exc) != "ResourceNotFoundException":  # withdrawn already
                raise aws.translate(exc, CitewiseError, "Cognito DeleteUserPoolClient") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "Cognito DeleteUserPoolClient") from exc
