"""One CredentialStore contract, run against the local SQLite store and DynamoDB (under moto).

What isolation needs of it: a tenant lists and revokes its own credentials only (another tenant's is
NOT_FOUND, whatever its id), a revocation is kept and never undone, an id is never reused, and tenant
erasure removes a tenant's records and no one else's (tenants whose ids share a prefix included).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA, DynamoRegistry
from citewise.aws.dynamodb_credentials import DynamoCredentials
from citewise.domain.credentials import Credential, CredentialScope
from citewise.domain.errors import ConflictError, NotFoundError, UnauthorizedError
from citewise.ports.credentials import CredentialStore, erase_credentials
from citewise_local.credentials import LocalCredentials
from tests.contract.stores import TABLE, local_or_dynamo
from tests.contract.test_registry_contract import make_document

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["local", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CredentialStore]:
    yield from local_or_dynamo(
        request,
        lambda: LocalCredentials(tmp_path / "credentials.db", token_url="http://127.0.0.1:8080/oauth2/token"),
        lambda client: DynamoCredentials(TABLE, client=client),
    )


def credential(credential_id: str, tenant_id: str = "acme", *, minutes: int = 0) -> Credential:
    return Credential(
        credential_id=credential_id,
        tenant_id=tenant_id,
        user_id="svc:bot",
        scope=CredentialScope.READ,
        name="support agent",
        created_at=NOW + timedelta(minutes=minutes),
        created_by="carol",
    )


def test_a_stored_credential_reads_back_by_id_and_in_its_tenants_list(store: CredentialStore) -> None:
    # Given two credentials of one tenant and one of a tenant whose id shares its prefix
    store.put_credential(credential("second", minutes=1))
    store.put_credential(credential("first"))
    store.put_credential(credential("other", "acme-eu"))
    # Then each reads back by id, and each tenant lists its own only, oldest first
    assert store.credential("first") == credential("first")
    assert store.credential("missing") is None
    assert [c.credential_id for c in store.tenant_credentials("acme")] == ["first", "second"]
    assert [c.credential_id for c in store.tenant_credentials("acme-eu")] == ["other"]
    assert store.tenant_credentials("globex") == []


def test_an_id_is_never_reused(store: CredentialStore) -> None:
    store.put_credential(credential("same"))
    with pytest.raises(ConflictError):
        store.put_credential(credential("same", "globex"))
    assert store.credential("same") == credential("same")


def test_a_revocation_is_kept_and_never_undone(store: CredentialStore) -> None:
    # Given a credential
    store.put_credential(credential("bot"))
    # When its tenant's admin revokes it, and someone revokes it again later
    revoked = store.revoke_credential("acme", "bot", NOW, "carol")
    again = store.revoke_credential("acme", "bot", NOW + timedelta(hours=1), "dave")
    # Then the first revocation stands, and every read says it is revoked
    assert revoked.revoked and (revoked.revoked_at, revoked.revoked_by) == (NOW, "carol")
    assert again == revoked == store.credential("bot")
    assert store.tenant_credentials("acme") == [revoked]


@pytest.mark.parametrize("tenant", ["globex", "acme-eu", "acm"])
def test_no_tenant_revokes_or_learns_of_another_tenants_credential(store: CredentialStore, tenant: str) -> None:
    store.put_credential(credential("bot"))
    with pytest.raises(NotFoundError):
        store.revoke_credential(tenant, "bot", NOW, "mallory")
    with pytest.raises(NotFoundError):
        store.revoke_credential("acme", "no-such-id", NOW, "carol")
    assert store.credential("bot") == credential("bot")


def test_erasing_a_tenant_removes_its_credentials_only(store: CredentialStore) -> None:
    # Given credentials of two tenants whose ids share a prefix, one of them revoked
    store.put_credential(credential("a1"))
    store.put_credential(credential("a2", minutes=1))
    store.revoke_credential("acme", "a2", NOW, "carol")
    store.put_credential(credential("e1", "acme-eu"))
    assert (store.count_tenant("acme"), store.count_tenant("acme-eu")) == (2, 1)
    # When one is erased, twice (erasure resumes and repeats)
    assert store.erase_tenant("acme") == 2
    assert store.erase_tenant("acme") == 0
    # Then nothing of it remains, and the other is untouched
    assert store.count_tenant("acme") == 0 and store.credential("a1") is None
    assert store.tenant_credentials("acme-eu") == [credential("e1", "acme-eu")]


def test_credential_items_never_show_as_documents_or_tenants(request: pytest.FixtureRequest) -> None:
    # Given the registry table holding a document of a tenant and a credential of it
    request.getfixturevalue("aws_credentials")
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName=TABLE, **TABLE_SCHEMA)
        registry = DynamoRegistry(TABLE, client=client)
        registry.put(make_document("acme", "note.md"))
        DynamoCredentials(TABLE, client=client).put_credential(credential("bot"))
        # Then the registry's listings know the document and the tenant only
        assert [d.path for d in registry.list("acme").items] == ["note.md"]
        assert [t.tenant_id for t in registry.list_tenants().items] == ["acme"]


def test_erasing_a_tenants_credentials_withdraws_their_clients_first(tmp_path: Path) -> None:
    # Given a tenant's credential issued by the local issuer, and another tenant's
    local = LocalCredentials(tmp_path / "credentials.db", token_url="http://127.0.0.1:8080/oauth2/token")
    ids = {}
    for tenant in ("acme", "acme-eu"):
        client_id, secret = local.issue("bot", CredentialScope.READ)
        local.put_credential(credential(client_id, tenant))
        ids[tenant] = (client_id, secret)
    # When acme's credentials are erased (twice: erasure resumes)
    assert erase_credentials(local, local, "acme") == 1
    assert erase_credentials(local, local, "acme") == 0
    # Then its client can get no token, and the other tenant's still can
    with pytest.raises(UnauthorizedError):
        local.authenticate(*ids["acme"])
    assert local.authenticate(*ids["acme-eu"]) is CredentialScope.READ
    local.close()
