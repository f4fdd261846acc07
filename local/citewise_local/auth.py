"""Local identities: bearer JWTs that carry the claims a Cognito ID token carries, signed with a local key.

On AWS, API Gateway's Cognito authorizer verifies the caller's ID token and hands its claims to the
handlers. Locally, `citewise token` mints a token with the same claims (`sub`, `custom:tenant_id`,
`cognito:groups`, `cognito:username`, `token_use`) and `citewise serve` verifies it, so the handlers see
the same identity either way and a test can act as any tenant and user without an identity provider.
The platform operator's token (`citewise token --operator`) is a Cognito operator's: no tenant claim, in
the `operators` group (`citewise.domain.access.OPERATOR_GROUP`); a token without a tenant is refused
unless it is one. A program's credential (`citewise credential create`) obtains an access token from
`citewise serve`'s token endpoint (`mint_access_token`), with the claims of a Cognito client-credentials
access token (`sub` and `client_id` the client, `scope`, `token_use` `access`, no tenant); the server
takes it on the `/m2m/` routes only, as API Gateway takes it only on methods with scopes.

Every local key derives from one secret, `{home}/secret.key`: 32 random bytes created once (mode 0600)
and reused, so tokens and upload URLs stay valid across restarts of the server until they expire.
Deleting the file revokes all of them. Keys are derived per purpose (HMAC), so an upload signature can
never pass as a token signature or the other way round.

pyjwt is imported inside the token functions: it is in the `local` extra only, and
`citewise_local.backend` imports this module for `local_key` alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal

import pydantic

from citewise.domain.access import OPERATOR_GROUP
from citewise.domain.credentials import ACCESS_TOKEN_USE
from citewise.domain.errors import CitewiseError, UnauthorizedError, ValidationError
from citewise.domain.models import UserId
from citewise.domain.tenancy import validate_tenant_id

SECRET_FILE = "secret.key"  # noqa: S105 - a file name, not a secret
SECRET_BYTES = 32
ISSUER = "citewise-local"
ALGORITHM = "HS256"
TOKEN_PURPOSE = "tokens"  # noqa: S105 - a key derivation label
DEFAULT_TTL = 3600
MAX_TTL = 30 * 24 * 3600
TENANT_CLAIM = "custom:tenant_id"
GROUPS_CLAIM = "cognito:groups"
REQUIRED_CLAIMS = ("sub", "token_use", "iss", "iat", "exp")
"""Every token's; a tenant's carries TENANT_CLAIM too, the platform operator's has none (`verify_token`)."""
ACCESS_CLAIMS = ("client_id", "scope")
"""What an access token carries besides REQUIRED_CLAIMS."""
ID_TOKEN: Final = "id"  # noqa: S105 - a claim value, not a password
TokenKind = Literal["id", "access"]
"""The `token_use` a route takes (`verify_token`)."""
GROUP_NAME = re.compile(r"[^\s,\[\]\x00-\x1f\x7f]+")
"""A group name `citewise token` issues: API Gateway hands groups on comma-joined, so a comma, a space or a
bracket inside a name could read as a second name (or as a list's brackets) to a less careful parser."""
_USER_ID = pydantic.TypeAdapter(UserId)


def local_secret(home: Path) -> bytes:
    """The secret of this home, created on first use.

    The file is written complete under a temporary name (created with O_EXCL, mode 0600) and then
    hard-linked into place, which fails if the name exists: two processes starting at once agree on
    one secret, and no reader ever sees a half-written file.
    """
    path = home / SECRET_FILE
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=home, prefix=f".{SECRET_FILE}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(secrets.token_bytes(SECRET_BYTES))
                stream.flush()
                os.fsync(stream.fileno())
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
        finally:
            Path(temporary).unlink(missing_ok=True)
    secret = path.read_bytes()
    if len(secret) != SECRET_BYTES:
        raise CitewiseError(
            f"{path} is not a {SECRET_BYTES}-byte secret; delete it to create a new one "
            "(tokens and upload URLs issued with the old one stop working)"
        )
    return secret


def local_key(home: Path, purpose: str) -> bytes:
    """A 32-byte key for one purpose (`tokens`, `uploads`, ...), derived from the home's secret."""
    return hmac.new(local_secret(home), f"citewise-local/{purpose}".encode(), hashlib.sha256).digest()


def mint_token(
    key: bytes,
    *,
    tenant_id: str | None,
    user_id: str,
    groups: Iterable[str] = (),
    ttl: int = DEFAULT_TTL,
    now: float | None = None,
) -> str:
    """A signed ID token for `user_id` in `tenant_id`, valid for `ttl` seconds from `now`.

    The claims are those of a Cognito ID token; `cognito:groups` is left out when there are none, as
    Cognito does. `tenant_id` None is the platform operator's token, which must name `OPERATOR_GROUP`.
    """
    group_list = list(groups)
    if tenant_id is not None:
        validate_tenant_id(tenant_id)
    elif OPERATOR_GROUP not in group_list:
        raise ValidationError(
            f"a token without a tenant is the platform operator's: it needs the {OPERATOR_GROUP!r} group",
            details={"field": "tenant"},
        )
    if not user_id.strip():
        raise ValidationError("user must not be empty", details={"field": "user"})
    try:
        _USER_ID.validate_python(user_id)
    except pydantic.ValidationError as exc:
        raise ValidationError(
            "user must be at most 256 characters, without control characters", details={"field": "user"}
        ) from exc
    if not 1 <= ttl <= MAX_TTL:
        raise ValidationError(f"ttl must be 1 to {MAX_TTL} seconds", details={"field": "ttl"})
    if not all(GROUP_NAME.fullmatch(group) for group in group_list):
        raise ValidationError(
            "group names must be non-empty, without spaces, commas, brackets or control characters",
            details={"field": "group"},
        )
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "sub": user_id,
        "cognito:username": user_id,
        "token_use": ID_TOKEN,
        "iss": ISSUER,
        "iat": issued,
        "exp": issued + ttl,
        "jti": str(uuid.uuid4()),
    }
    if tenant_id is not None:
        claims[TENANT_CLAIM] = tenant_id
    if group_list:
        claims[GROUPS_CLAIM] = group_list
    import jwt

    return jwt.encode(claims, key, algorithm=ALGORITHM)


def mint_access_token(
    key: bytes, *, client_id: str, scope: str, ttl: int = DEFAULT_TTL, now: float | None = None
) -> str:
    """A signed client-credentials access token of `client_id` granting `scope` (space-separated), valid
    for `ttl` seconds: the claims of a Cognito machine-to-machine access token, no tenant, no user."""
    import jwt

    issued = int(time.time() if now is None else now)
    claims = {
        "sub": client_id,
        "client_id": client_id,
        "scope": scope,
        "token_use": ACCESS_TOKEN_USE,
        "iss": ISSUER,
        "iat": issued,
        "exp": issued + ttl,
        "jti": str(uuid.uuid4()),
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def verify_token(key: bytes, token: str, *, kind: TokenKind = ID_TOKEN) -> dict[str, Any]:
    """The claims of a token this server minted, or UnauthorizedError saying why it is refused.

    Checks the signature (HS256 only), expiry, issuer, `token_use` (`kind`: an ID token by default, or a
    credential's access token), that every claim an identity needs is present, and that it expires no
    later than a token this server mints could (a far `exp`, such as 10**20, is no date at all). The
    message names the problem, never the token.
    """
    import jwt

    required = REQUIRED_CLAIMS + (ACCESS_CLAIMS if kind == ACCESS_TOKEN_USE else ())
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            issuer=ISSUER,
            options={"require": list(required)},
        )
    except jwt.ExpiredSignatureError as exc:
        raise UnauthorizedError("the token has expired") from exc
    except jwt.InvalidSignatureError as exc:
        raise UnauthorizedError("the token's signature is invalid") from exc
    except jwt.InvalidIssuerError as exc:
        raise UnauthorizedError(f"the token was not issued by {ISSUER}") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise UnauthorizedError(f"the token has no '{exc.claim}' claim") from exc
    except jwt.exceptions.InvalidSubjectError as exc:
        raise UnauthorizedError("the token's 'sub' claim must be a non-empty string") from exc
    except jwt.ImmatureSignatureError as exc:
        raise UnauthorizedError("the token is not valid yet") from exc
    except jwt.InvalidAlgorithmError as exc:
        raise UnauthorizedError(f"the token must be signed with {ALGORITHM}") from exc
    except jwt.DecodeError as exc:
        raise UnauthorizedError("the token is not a well-formed JWT") from exc
    except jwt.InvalidTokenError as exc:
        raise UnauthorizedError(f"the token is invalid ({type(exc).__name__})") from exc
    if claims["exp"] > time.time() + MAX_TTL:
        raise UnauthorizedError(f"the token expires more than {MAX_TTL} seconds from now")
    if claims["token_use"] != kind:
        # As API Gateway: a method without scopes takes ID tokens only, a method with scopes access tokens only.
        raise UnauthorizedError(f"the token is not an {'ID' if kind == ID_TOKEN else 'access'} token")
    if kind == ACCESS_TOKEN_USE:
        if not isinstance(claims["client_id"], str) or not isinstance(claims["scope"], str):
            raise UnauthorizedError("the token's 'client_id' and 'scope' claims must be strings")
        return claims
    groups = claims.get(GROUPS_CLAIM, [])
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise UnauthorizedError(f"the token's '{GROUPS_CLAIM}' claim must be a list of names")
    if TENANT_CLAIM not in claims and OPERATOR_GROUP not in groups:
        raise UnauthorizedError(f"the token has no '{TENANT_CLAIM}' claim")
    for name in ("sub", TENANT_CLAIM):
        if name in claims and (not isinstance(claims[name], str) or not claims[name]):
            raise UnauthorizedError(f"the token's '{name}' claim must be a non-empty string")
    return claims
