"""The console's local sign-in (one-time codes that buy an ID token) and the files `citewise serve` serves."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from citewise.domain.errors import UnauthorizedError, ValidationError
from citewise_local.auth import verify_token
from citewise_local.webconsole import (
    CODE_TTL,
    SECURITY_HEADERS,
    SignIns,
    cache_control,
    console_config,
    console_files,
    sign_in_code,
    sign_in_url,
)

CODE_KEY = b"c" * 32
TOKEN_KEY = b"t" * 32
NOW = float(int(time.time()))  # the tokens are verified against the real clock
BUILT = Path(__file__).resolve().parents[2] / "local" / "citewise_local" / "console"


def sign_ins() -> SignIns:
    return SignIns(CODE_KEY, TOKEN_KEY)


def test_a_code_buys_the_id_token_of_its_identity_once() -> None:
    # Given a code for a tenant admin, valid for an hour's session
    code = sign_in_code(CODE_KEY, tenant_id="acme", user_id="alice", groups=["admin"], ttl=3600, now=NOW)
    doors = sign_ins()
    # When it is redeemed
    session = doors.redeem(code, now=NOW)
    # Then the token is an ID token of that identity, as `citewise token` mints them, lasting the ttl
    claims = verify_token(TOKEN_KEY, session["id_token"])
    assert (claims["custom:tenant_id"], claims["sub"], claims["cognito:groups"]) == ("acme", "alice", ["admin"])
    assert session["expires_at"] == claims["exp"] == int(NOW) + 3600 and session["token_type"] == "Bearer"
    # And the same code never buys a second one
    with pytest.raises(UnauthorizedError, match="already used"):
        doors.redeem(code, now=NOW + 11)


def test_the_operator_signs_in_without_a_tenant() -> None:
    code = sign_in_code(CODE_KEY, tenant_id=None, user_id="ops", groups=["operators"], now=NOW)
    claims = verify_token(TOKEN_KEY, sign_ins().redeem(code, now=NOW)["id_token"])
    assert "custom:tenant_id" not in claims and claims["cognito:groups"] == ["operators"]


@pytest.mark.parametrize(
    ("code", "at"),
    [
        (sign_in_code(CODE_KEY, tenant_id="acme", user_id="alice", now=NOW), NOW + CODE_TTL),  # expired
        (sign_in_code(b"x" * 32, tenant_id="acme", user_id="alice", now=NOW), NOW),  # another home's key
        (sign_in_code(CODE_KEY, tenant_id=None, user_id="ops", now=NOW), NOW),  # no tenant, not the operator
        ("not.a.jwt", NOW),
    ],
    ids=["expired", "forged", "tenantless", "garbage"],
)
def test_a_code_that_is_expired_forged_or_malformed_buys_nothing(code: str, at: float) -> None:
    with pytest.raises(UnauthorizedError, match="invalid, expired or already used"):
        sign_ins().redeem(code, now=at)


def test_an_id_token_is_no_sign_in_code() -> None:
    # A token signed with the token key (a different purpose) is refused as a code
    from citewise_local.auth import mint_token

    token = mint_token(CODE_KEY, tenant_id="acme", user_id="alice", now=NOW)
    with pytest.raises(UnauthorizedError):
        sign_ins().redeem(token, now=NOW)


def test_a_bad_identity_fails_when_the_link_is_made_not_in_the_browser() -> None:
    with pytest.raises(ValidationError):
        sign_in_code(CODE_KEY, tenant_id="bad tenant!", user_id="alice", token_key=TOKEN_KEY)
    with pytest.raises(ValidationError):
        sign_in_code(CODE_KEY, tenant_id="acme", user_id="alice", ttl=0, token_key=TOKEN_KEY)


def test_the_link_carries_the_code_in_its_fragment_only() -> None:
    assert sign_in_url("http://127.0.0.1:8080/", "abc") == "http://127.0.0.1:8080/console/#signin=abc"


def test_config_and_headers() -> None:
    assert console_config("http://127.0.0.1:8080/") == {"api_url": "http://127.0.0.1:8080", "auth": {"kind": "local"}}
    policy = SECURITY_HEADERS["Content-Security-Policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "frame-ancestors 'none'" in policy
    assert cache_control("assets/index-abc.js").endswith("immutable") and cache_control("index.html") == "no-cache"


def test_the_served_files_are_the_build_and_the_page_loads_only_files_that_exist() -> None:
    files = console_files()
    on_disk = {p.relative_to(BUILT).as_posix() for p in BUILT.rglob("*") if p.is_file()}
    assert set(files) - {""} == on_disk and files[""] == files["index.html"]
    # Every file the page names is served (a stale index.html would name assets that are gone)
    page = files["index.html"][0].decode()
    named = set(re.findall(r'(?:src|href)="\./([^"]+)"', page))
    assert named and named <= set(files), named - set(files)
