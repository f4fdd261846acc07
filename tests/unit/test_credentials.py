"""A program's credential as an identity: the Caller comes from the record (never the token), narrowed by
the token's scopes; the read-only scope in the one access rule; and the bound on revocation, the cache."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from citewise.domain.access import may_configure, may_modify, may_read, require_write
from citewise.domain.credentials import Credential, CredentialScope, credential_caller, is_credential_token
from citewise.domain.errors import ForbiddenError, UnauthorizedError
from citewise.domain.models import Caller, Visibility
from citewise.runtime.identity import CredentialCache
from citewise_local.auth import mint_access_token, mint_token, verify_token
from tests.contract.test_registry_contract import make_document

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
RECORD = Credential(
    credential_id="client1",
    tenant_id="acme",
    user_id="svc:bot",
    scope=CredentialScope.FULL,
    name="ingest bot",
    created_at=NOW,
    created_by="carol",
)


def token(scope: str = "citewise/full", client_id: str = "client1", **extra: str) -> dict[str, str]:
    return {"sub": client_id, "client_id": client_id, "token_use": "access", "scope": scope, **extra}


def test_the_caller_is_the_records_tenant_and_user_whatever_the_token_says() -> None:
    # A token cannot name a tenant or user: claims that look like one are ignored
    forged = token(**{"custom:tenant_id": "globex", "cognito:groups": "admin"})
    caller = credential_caller(RECORD, forged)
    assert caller == Caller(tenant_id="acme", user_id="svc:bot", groups=(), read_only=False, credential_id="client1")


@pytest.mark.parametrize(
    ("scope", "granted", "read_only"),
    [
        (CredentialScope.FULL, "citewise/full", False),
        (CredentialScope.FULL, "citewise/read citewise/full", False),
        (CredentialScope.FULL, "citewise/read", True),
        (CredentialScope.READ, "citewise/read", True),
        # A read credential stays read-only even if a token claimed more
        (CredentialScope.READ, "citewise/full", True),
    ],
)
def test_the_scope_is_the_records_narrowed_by_the_tokens(scope: CredentialScope, granted: str, read_only: bool) -> None:
    record = RECORD.model_copy(update={"scope": scope})
    assert credential_caller(record, token(granted)).read_only is read_only


@pytest.mark.parametrize(
    ("record", "claims"),
    [
        (None, token()),  # never issued, or erased
        (RECORD.model_copy(update={"revoked_at": NOW, "revoked_by": "carol"}), token()),
        (RECORD, token(scope="openid aws.cognito.signin.user.admin")),
        (RECORD, token(scope="")),
        (RECORD, token(client_id="client2")),  # a record read under another id
    ],
)
def test_no_usable_credential_is_401(record: Credential | None, claims: dict[str, str]) -> None:
    with pytest.raises(UnauthorizedError):
        credential_caller(record, claims)


def test_only_a_client_credentials_access_token_is_a_programs() -> None:
    assert is_credential_token(token())
    # A person's ID token, and a person's access token (it names a username), are not
    assert not is_credential_token({"sub": "u", "token_use": "id", "custom:tenant_id": "acme"})
    assert not is_credential_token({**token(), "username": "alice"})
    assert not is_credential_token({"sub": "u", "token_use": "access"})


def test_a_read_only_caller_reads_and_may_modify_or_configure_nothing() -> None:
    reader = Caller(tenant_id="acme", user_id="svc:bot", groups=("admin",), read_only=True)
    own = make_document("acme", "mine.md", owner="svc:bot", visibility=Visibility.PRIVATE)
    assert may_read(reader, own)
    assert not may_modify(reader, own) and not may_configure(reader)
    with pytest.raises(ForbiddenError):
        require_write(reader)
    writer = reader.model_copy(update={"read_only": False})
    assert may_modify(writer, own) and may_configure(writer)
    require_write(writer)


def test_the_cache_bounds_how_long_a_revocation_takes() -> None:
    # Given a cache of 60 s over a store, and a clock
    records = {"client1": RECORD}
    reads: list[str] = []
    now = [0.0]

    def read(credential_id: str) -> Credential | None:
        reads.append(credential_id)
        return records.get(credential_id)

    cache = CredentialCache(read, ttl=60, clock=lambda: now[0])
    assert cache("client1") == RECORD
    # When the credential is revoked in the store
    records["client1"] = RECORD.model_copy(update={"revoked_at": NOW, "revoked_by": "carol"})
    # Then the cached record serves until 60 s have passed, and the revoked one from then on
    now[0] = 59.9
    assert cache("client1") == RECORD
    now[0] = 60.0
    assert cache("client1").revoked  # type: ignore[union-attr]
    assert reads == ["client1", "client1"]


def test_the_cache_fails_closed_and_stays_bounded() -> None:
    def failing(_: str) -> Credential | None:
        raise UnauthorizedError("the store is unreachable")

    with pytest.raises(UnauthorizedError):
        CredentialCache(failing, ttl=60)("client1")
    # At most `max_entries` ids are kept: past that the cache starts afresh (and reads again)
    reads: list[str] = []
    cache = CredentialCache(lambda name: reads.append(name), ttl=60, max_entries=2)  # type: ignore[func-returns-value]
    for name in ("a", "b", "a", "c", "a"):
        cache(name)
    assert reads == ["a", "b", "c", "a"]


def test_the_local_server_takes_each_kind_of_token_only_where_api_gateway_would() -> None:
    # Given a person's ID token and a program's access token signed with the same key
    key = b"k" * 32
    person = mint_token(key, tenant_id="acme", user_id="alice")
    program = mint_access_token(key, client_id="client1", scope="citewise/read")
    # Then each verifies as its own kind only
    assert verify_token(key, person)["custom:tenant_id"] == "acme"
    claims = verify_token(key, program, kind="access")
    assert (claims["client_id"], claims["scope"], claims["token_use"]) == ("client1", "citewise/read", "access")
    assert "custom:tenant_id" not in claims
    with pytest.raises(UnauthorizedError, match="not an ID token"):
        verify_token(key, program)
    with pytest.raises(UnauthorizedError):  # it has no client_id, and is no access token
        verify_token(key, person, kind="access")
