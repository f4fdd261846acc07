"""Local bearer tokens and the home's secret: what `citewise token` mints and `citewise serve` accepts."""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
import time
from pathlib import Path

import jwt
import pytest

from citewise.domain.errors import CitewiseError, ForbiddenError, UnauthorizedError, ValidationError
from citewise.domain.models import Operator
from citewise.domain.tenancy import caller_from_claims, operator_from_claims
from citewise_local.auth import (
    ISSUER,
    SECRET_BYTES,
    SECRET_FILE,
    TOKEN_PURPOSE,
    local_key,
    local_secret,
    mint_token,
    verify_token,
)


@pytest.fixture
def key(tmp_path: Path) -> bytes:
    return local_key(tmp_path / "home", TOKEN_PURPOSE)


def _forge(key: bytes, **claims: object) -> str:
    """A token signed with the right key but with claims `mint_token` would never write."""
    base: dict[str, object] = {
        "sub": "alice",
        "custom:tenant_id": "acme",
        "token_use": "id",
        "iss": ISSUER,
        "iat": int(time.time()),
        "exp": int(time.time()) + 60,
    }
    return jwt.encode({k: v for k, v in (base | claims).items() if v is not None}, key, algorithm="HS256")


def test_a_minted_token_verifies_to_cognito_id_token_claims(key: bytes) -> None:
    # Given a token for alice of acme in two groups
    token = mint_token(key, tenant_id="acme", user_id="alice", groups=["admins", "readers"], ttl=600)
    # When it is verified
    claims = verify_token(key, token)
    # Then it carries the claims of a Cognito ID token, and the tenancy module reads the same caller
    assert claims["sub"] == claims["cognito:username"] == "alice"
    assert claims["custom:tenant_id"] == "acme"
    assert claims["cognito:groups"] == ["admins", "readers"]
    assert claims["token_use"] == "id"
    assert claims["iss"] == ISSUER
    assert claims["exp"] - claims["iat"] == 600
    assert abs(claims["iat"] - time.time()) < 5
    caller = caller_from_claims(claims)
    assert (caller.tenant_id, caller.user_id, caller.groups) == ("acme", "alice", ("admins", "readers"))


def test_a_token_without_groups_has_no_groups_claim(key: bytes) -> None:
    claims = verify_token(key, mint_token(key, tenant_id="acme", user_id="bob"))
    assert "cognito:groups" not in claims


def test_two_tokens_of_one_identity_differ(key: bytes) -> None:
    # jti makes each token unique even when minted in the same second
    assert mint_token(key, tenant_id="acme", user_id="bob") != mint_token(key, tenant_id="acme", user_id="bob")


def test_a_tampered_payload_is_refused(key: bytes) -> None:
    # Given a valid token whose payload is rewritten to another tenant, keeping the signature
    header, payload, signature = mint_token(key, tenant_id="acme", user_id="alice").split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["custom:tenant_id"] = "globex"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    # When verified, then it is refused for its signature, and the message does not echo the token
    with pytest.raises(UnauthorizedError, match="signature is invalid") as refused:
        verify_token(key, f"{header}.{forged}.{signature}")
    assert forged not in refused.value.message and signature not in refused.value.message


def test_a_token_of_another_home_is_refused(tmp_path: Path, key: bytes) -> None:
    other = local_key(tmp_path / "other-home", TOKEN_PURPOSE)
    with pytest.raises(UnauthorizedError, match="signature is invalid"):
        verify_token(key, mint_token(other, tenant_id="acme", user_id="alice"))


def test_an_expired_token_is_refused(key: bytes) -> None:
    # Given a token minted two hours ago for one hour
    token = mint_token(key, tenant_id="acme", user_id="alice", ttl=3600, now=time.time() - 7200)
    with pytest.raises(UnauthorizedError, match="expired"):
        verify_token(key, token)


def test_a_token_of_another_issuer_is_refused(key: bytes) -> None:
    with pytest.raises(UnauthorizedError, match=f"not issued by {ISSUER}"):
        verify_token(key, _forge(key, iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_x"))


@pytest.mark.parametrize("claim", ["custom:tenant_id", "sub", "exp", "token_use"])
def test_a_token_missing_a_required_claim_is_refused(key: bytes, claim: str) -> None:
    with pytest.raises(UnauthorizedError, match=f"no '{claim}' claim"):
        verify_token(key, _forge(key, **{claim: None}))


def test_an_access_token_is_not_an_id_token(key: bytes) -> None:
    with pytest.raises(UnauthorizedError, match="not an ID token"):
        verify_token(key, _forge(key, token_use="access"))


@pytest.mark.parametrize(
    ("claims", "problem"),
    [({"custom:tenant_id": ""}, "custom:tenant_id"), ({"sub": 7}, "'sub'"), ({"cognito:groups": "admins"}, "groups")],
)
def test_malformed_identity_claims_are_refused(key: bytes, claims: dict[str, object], problem: str) -> None:
    with pytest.raises(UnauthorizedError, match=problem):
        verify_token(key, _forge(key, **claims))


def test_an_unsigned_token_is_refused(key: bytes) -> None:
    unsigned = jwt.encode({"sub": "alice"}, None, algorithm="none")
    with pytest.raises(UnauthorizedError, match="HS256"):
        verify_token(key, unsigned)


@pytest.mark.parametrize("garbage", ["", "not-a-jwt", "a.b.c"])
def test_garbage_is_refused_as_malformed(key: bytes, garbage: str) -> None:
    with pytest.raises(UnauthorizedError, match="not a well-formed JWT"):
        verify_token(key, garbage)


@pytest.mark.parametrize(
    ("tenant", "user", "groups", "ttl"),
    [
        ("a/b", "alice", [], 60),
        ("acme", "", [], 60),
        ("acme", "u" * 257, [], 60),
        ("acme", "alice\nbob", [], 60),
        ("acme", "alice", [], 0),
    ],
)
def test_minting_refuses_bad_input(key: bytes, tenant: str, user: str, groups: list[str], ttl: int) -> None:
    with pytest.raises(ValidationError):
        mint_token(key, tenant_id=tenant, user_id=user, groups=groups, ttl=ttl)


@pytest.mark.parametrize("group", ["a,b", "ops admin", "[admin]", "admin]", "", " admin", "adm\tin", "admin\x00"])
def test_minting_refuses_group_names_a_parser_could_misread(key: bytes, group: str) -> None:
    with pytest.raises(ValidationError, match="group names"):
        mint_token(key, tenant_id="acme", user_id="alice", groups=["readers", group])


def test_minting_keeps_plain_group_names(key: bytes) -> None:
    groups = ["admin", "ops-team", "data.readers", "équipe_1"]
    token = mint_token(key, tenant_id="acme", user_id="alice", groups=groups)
    assert verify_token(key, token)["cognito:groups"] == groups


# Seconds from now, not instants: a parameter read off the clock at collection differs between the two
# pytest-xdist workers when their collections straddle a second, and xdist then refuses to run at all.
@pytest.mark.parametrize("ahead", [10**20, 31 * 24 * 3600], ids=["absurd", "a-month"])
def test_a_token_expiring_later_than_any_this_server_mints_is_refused(key: bytes, ahead: int) -> None:
    with pytest.raises(UnauthorizedError, match="expires more than"):
        verify_token(key, _forge(key, exp=int(time.time()) + ahead))


def test_the_secret_is_created_once_with_mode_0600_and_reused(tmp_path: Path) -> None:
    # Given a home that does not exist yet
    home = tmp_path / "new" / "home"
    # When the secret is asked for twice
    first = local_secret(home)
    second = local_secret(home)
    # Then one file of 32 random bytes, readable by its owner only, backs both answers
    path = home / SECRET_FILE
    assert first == second == path.read_bytes()
    assert len(first) == SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in home.iterdir()] == [SECRET_FILE]  # no temporary file left behind


def test_concurrent_first_uses_agree_on_one_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(local_secret(home))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and len(set(results)) == 1
    assert sorted(p.name for p in home.iterdir()) == [SECRET_FILE]


def test_keys_differ_by_purpose_and_by_home_and_survive_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tokens, uploads = local_key(home, "tokens"), local_key(home, "uploads")
    assert tokens != uploads and len(tokens) == 32
    assert local_key(home, "tokens") == tokens  # derived again from the same file: same key
    assert local_key(tmp_path / "elsewhere", "tokens") != tokens


def test_a_damaged_secret_file_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / SECRET_FILE).write_bytes(b"short")
    with pytest.raises(CitewiseError, match="delete it"):
        local_key(home, "tokens")


def test_a_removed_secret_revokes_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    token = mint_token(local_key(home, TOKEN_PURPOSE), tenant_id="acme", user_id="alice")
    os.remove(home / SECRET_FILE)
    with pytest.raises(UnauthorizedError, match="signature"):
        verify_token(local_key(home, TOKEN_PURPOSE), token)


def test_an_operator_token_has_no_tenant_and_verifies_to_the_operator(key: bytes) -> None:
    # Given the platform operator's token
    claims = verify_token(key, mint_token(key, tenant_id=None, user_id="ops", groups=["operators"]))
    # Then it carries no tenant, and the identity it gives is the operator's, refused on tenant routes
    assert "custom:tenant_id" not in claims and claims["cognito:groups"] == ["operators"]
    assert operator_from_claims(claims) == Operator(user_id="ops")
    with pytest.raises(ForbiddenError, match="no member of any tenant"):
        caller_from_claims(claims)


def test_a_token_without_a_tenant_must_be_the_operators(key: bytes) -> None:
    # Minting one without the group is refused; a forged one without the group is refused by the server
    with pytest.raises(ValidationError, match="operators"):
        mint_token(key, tenant_id=None, user_id="ops", groups=["admin"])
    with pytest.raises(UnauthorizedError, match="no 'custom:tenant_id' claim"):
        verify_token(key, _forge(key, **{"custom:tenant_id": None, "cognito:groups": ["admin"]}))
