"""The web console on `citewise serve`: its built files at `/console/`, its `config.json`, and local sign-in.

The console is a single-page app (its source in `console/` at the repository root, built into this
package's `console/` folder by `make console`), served from the API's own origin, so it calls the API
with no CORS. On AWS the same files sit on S3 behind CloudFront and sign in with Cognito's hosted UI;
here the page signs in with a one-time code:

- `citewise console --tenant T --user U` (or `citewise serve --console ...`) prints
  `<server>/console/#signin=<code>`. The code is a short-lived JWT signed with a key of its own purpose
  (`SIGN_IN_PURPOSE`, derived from the home's secret as every local key), naming the identity of the ID
  token it buys. It travels in the URL's fragment, which browsers never send to a server, so it is in no
  request line and no log.
- The page posts it to `POST /console/session` and gets the ID token `citewise token` would print,
  verified on every route like any other. A code is redeemed once (this server remembers the ids of the
  codes it redeemed until they expire) and expires after `CODE_TTL` seconds.

Every console response carries `SECURITY_HEADERS`: a content security policy with no inline script or
style and no eval (pdf.js runs its worker from this origin), no framing, no sniffing, no referrer.
"""

from __future__ import annotations

import functools
import importlib.resources
import threading
import time
import uuid
from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from citewise.domain.access import OPERATOR_GROUP
from citewise.domain.errors import UnauthorizedError
from citewise.runtime.console_headers import security_headers
from citewise_local.auth import ALGORITHM, DEFAULT_TTL, ISSUER, TOKEN_PURPOSE, local_key, mint_token

CONSOLE_PATH = "/console"
CONFIG_PATH = f"{CONSOLE_PATH}/config.json"
SESSION_PATH = f"{CONSOLE_PATH}/session"
SIGN_IN_PURPOSE = "console-sign-in"
CODE_TTL = 300
"""Seconds a printed sign-in link stays usable."""
MAX_SESSION_REQUEST_BYTES = 4096
_AUDIENCE = "citewise-console"
SECURITY_HEADERS = security_headers()
"""The policy of the console on AWS (`citewise.runtime.console_headers`), all on the page's own origin here."""
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
}


@functools.cache
def console_files() -> dict[str, tuple[bytes, str]]:
    """The built console, by path under `/console/` ("" is index.html): (bytes, content type).

    Read once from the installed package. Only these names are ever served: a request path is looked up
    here, never joined to a directory, so no path can reach another file.
    """
    root = importlib.resources.files("citewise_local").joinpath("console")
    files: dict[str, tuple[bytes, str]] = {}
    for name, entry in _walk(root, ""):
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if suffix in _CONTENT_TYPES:
            files[name] = (entry.read_bytes(), _CONTENT_TYPES[suffix])
    if "index.html" in files:
        files[""] = files["index.html"]
    return files


def _walk(folder: Traversable, prefix: str) -> Iterable[tuple[str, Traversable]]:
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        elif not entry.name.startswith(("__", ".")):
            yield f"{prefix}{entry.name}", entry


def cache_control(name: str) -> str:
    """Hashed assets never change under their name; the page and anything unhashed are checked each time."""
    return "public, max-age=31536000, immutable" if name.startswith("assets/") else "no-cache"


def console_config(api_url: str) -> dict[str, Any]:
    """The `config.json` the page reads at start: where the API is and how to sign in (here: locally)."""
    return {"api_url": api_url.rstrip("/"), "auth": {"kind": "local"}}


def sign_in_code(
    key: bytes,
    *,
    tenant_id: str | None,
    user_id: str,
    groups: Iterable[str] = (),
    ttl: int = DEFAULT_TTL,
    token_key: bytes | None = None,
    now: float | None = None,
) -> str:
    """A one-time code for the console, signed with `key` (the home's `SIGN_IN_PURPOSE` key), that buys an ID
    token of `ttl` seconds for this identity. `tenant_id` None is the platform operator's. When `token_key`
    is given the identity is checked now, as the token will be (a bad tenant or group fails here, not in
    the browser)."""
    import jwt

    group_list = list(groups)
    if token_key is not None:
        mint_token(token_key, tenant_id=tenant_id, user_id=user_id, groups=group_list, ttl=ttl)
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": ISSUER,
        "aud": _AUDIENCE,
        "iat": issued,
        "exp": issued + CODE_TTL,
        "jti": str(uuid.uuid4()),
        "tenant": tenant_id,
        "user": user_id,
        "groups": group_list,
        "ttl": ttl,
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def sign_in_url(server_url: str, code: str) -> str:
    """Where the page is opened with its code: in the fragment, which no browser sends to a server."""
    return f"{server_url.rstrip('/')}{CONSOLE_PATH}/#signin={code}"


class SignIns:
    """Redeems sign-in codes for ID tokens, each code once."""

    def __init__(self, code_key: bytes, token_key: bytes) -> None:
        self._code_key = code_key
        self._token_key = token_key
        self._redeemed: dict[str, int] = {}  # code id -> its expiry, forgotten once expired
        self._lock = threading.Lock()

    @classmethod
    def of_home(cls, home: Path) -> SignIns:
        """The sign-ins of a home: codes and tokens under the keys its secret derives."""
        return cls(local_key(home, SIGN_IN_PURPOSE), local_key(home, TOKEN_PURPOSE))

    def redeem(self, code: str, *, now: float | None = None) -> dict[str, Any]:
        """The session a valid, unexpired, unused code buys: `{"id_token", "expires_at", "token_type"}`;
        UnauthorizedError otherwise (one message for every reason: the link is all a person can act on)."""
        import jwt

        refused = UnauthorizedError(
            "this sign-in link is invalid, expired or already used: run `citewise console` for a new one"
        )
        moment = time.time() if now is None else now
        try:
            claims = jwt.decode(
                code,
                self._code_key,
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                audience=_AUDIENCE,
                options={"require": ["exp", "jti", "user", "ttl"], "verify_exp": False},
            )
        except jwt.InvalidTokenError as exc:
            raise refused from exc
        if not isinstance(claims["exp"], int) or claims["exp"] <= moment or claims["exp"] > moment + CODE_TTL:
            raise refused
        with self._lock:
            self._redeemed = {jti: exp for jti, exp in self._redeemed.items() if exp > moment}
            if claims["jti"] in self._redeemed:
                raise refused
            self._redeemed[claims["jti"]] = claims["exp"]
        groups = claims.get("groups") or []
        tenant = claims.get("tenant")
        if tenant is None and OPERATOR_GROUP not in groups:
            raise refused
        issued = int(moment)
        token = mint_token(
            self._token_key, tenant_id=tenant, user_id=claims["user"], groups=groups, ttl=claims["ttl"], now=issued
        )
        return {"id_token": token, "token_type": "Bearer", "expires_at": issued + int(claims["ttl"])}
