"""The ErasureLog contract (local SQLite, DynamoDB under moto) and the erasure job over every real store of
each backend: the local files, and DynamoDB + versioned S3 under moto with the OpenSearch double.

Every test erases `acme` beside `acme-eu` and `acme2`, whose ids share its prefix, and proves them whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from opensearchpy import OpenSearch

from citewise.aws.cognito_credentials import CognitoIssuer
from citewise.aws.dynamodb import TABLE_SCHEMA, DynamoRegistry
from citewise.aws.dynamodb_conversations import DynamoConversations
from citewise.aws.dynamodb_credentials import DynamoCredentials
from citewise.aws.dynamodb_erasure import DynamoErasureLog
from citewise.aws.dynamodb_feedback import DynamoFeedback
from citewise.aws.dynamodb_rates import DynamoRates
from citewise.aws.dynamodb_sources import DynamoSources
from citewise.aws.dynamodb_usage import DynamoUsage
from citewise.aws.opensearch import OpenSearchIndex
from citewise.aws.s3 import S3BlobStore, s3_client
from citewise.domain.credentials import Credential, CredentialScope
from citewise.domain.errors import NotFoundError
from citewise.domain.models import DocumentStatus
from citewise.domain.sources import PageState
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.blobstore import BlobStore
from citewise.ports.conversations import ConversationStore, Owner, Turn, new_conversation_id
from citewise.ports.credentials import CredentialIssuer, CredentialStore, TenantCredentials
from citewise.ports.erasure import (
    Erasure,
    ErasureInProgressError,
    ErasureLog,
    ErasureStatus,
    TenantErasingError,
    TenantStore,
    check_not_erasing,
    erased_stores,
    run_erasure,
    start_erasure,
)
from citewise.ports.feedback import Feedback, FeedbackStore
from citewise.ports.index import VectorIndex
from citewise.ports.quotas import RateLimiter
from citewise.ports.registry import DocumentRegistry
from citewise.ports.sources import SourceRegistry
from citewise.ports.usage import UsageCounts, UsageMeter
from citewise_local.blobstore import LocalBlobStore
from citewise_local.conversations import LocalConversations
from citewise_local.credentials import LocalCredentials
from citewise_local.erasure import LocalErasureLog
from citewise_local.feedback import LocalFeedback
from citewise_local.index import LocalIndex
from citewise_local.rates import LocalRates
from citewise_local.registry import LocalRegistry
from citewise_local.sources import LocalSources
from citewise_local.usage import LocalUsage
from tests.contract.test_index_contract import DIMENSION, EMBEDDER, make_chunk, put
from tests.contract.test_registry_contract import make_document, register
from tests.contract.test_sources_contract import make_source
from tests.doubles.opensearch_server import FakeOpenSearch, running
from tests.integration.handlers.cognito import UserPool

TABLE = "citewise-documents"
BUCKET = "citewise-documents"
T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
TENANTS = ("acme", "acme-eu", "acme2")


@dataclass
class Platform:
    registry: DocumentRegistry
    index: VectorIndex
    blobs: BlobStore
    usage: UsageMeter
    log: ErasureLog
    credentials: CredentialStore
    issuer: CredentialIssuer
    clients: Callable[[], set[str]]
    """The ids of the identity provider's clients that can still get tokens."""
    rates: RateLimiter
    conversations: ConversationStore
    sources: SourceRegistry
    feedback: FeedbackStore

    def stores(self) -> dict[str, TenantStore]:
        credentials = TenantCredentials(self.credentials, lambda: self.issuer)
        return erased_stores(
            credentials=credentials,
            registry=self.registry,
            index=self.index,
            blobs=self.blobs,
            rates=self.rates,
            conversations=self.conversations,
            sources=self.sources,
            feedback=self.feedback,
        )

    def counts(self, tenant_id: str) -> dict[str, int]:
        return {name: store.count_tenant(tenant_id) for name, store in self.stores().items()} | {
            "usage": self.usage.count_tenant(tenant_id)
        }


@pytest.fixture(params=["local", "aws"])
def platform(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Platform]:
    if request.param == "local":
        local = LocalCredentials(tmp_path / "credentials.db", token_url="http://127.0.0.1:8080/oauth2/token")
        opened = (
            LocalRegistry(tmp_path / "registry.db"),
            LocalIndex(tmp_path / "index.db"),
            LocalUsage(tmp_path / "usage.db"),
            LocalErasureLog(tmp_path / "erasures.db"),
            local,
        )
        registry, index, usage, log, _ = opened
        index.ensure(EMBEDDER.name, DIMENSION)

        def local_clients() -> set[str]:
            return {str(row[0]) for row in local._conn.execute("SELECT client_id FROM clients")}

        rates = LocalRates(tmp_path / "rates.db")
        conversations = LocalConversations(tmp_path / "conversations.db")
        sources = LocalSources(tmp_path / "sources.db")
        feedback = LocalFeedback(tmp_path / "feedback.db")
        yield Platform(
            registry,
            index,
            LocalBlobStore(tmp_path / "blobs"),
            usage,
            log,
            local,
            local,
            local_clients,
            rates,
            conversations,
            sources,
            feedback,
        )
        rates.close()
        conversations.close()
        sources.close()
        feedback.close()
        for adapter in opened:
            adapter.close()
        return
    request.getfixturevalue("aws_credentials")
    with mock_aws(), running(FakeOpenSearch()) as server:
        boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
        s3 = s3_client()
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        client = OpenSearch(hosts=[server.url], timeout=10)
        index = OpenSearchIndex(client, "chunks", serverless=False)
        index.ensure(EMBEDDER.name, DIMENSION)
        pool = UserPool.create()
        issuer = CognitoIssuer(pool.pool_id, token_url="https://example.test/oauth2/token", token_minutes=60)

        def pool_clients() -> set[str]:
            listed = pool.client.list_user_pool_clients(UserPoolId=pool.pool_id, MaxResults=60)["UserPoolClients"]
            return {str(c["ClientId"]) for c in listed} - {pool.client_id}

        yield Platform(
            DynamoRegistry(TABLE),
            index,
            S3BlobStore(BUCKET, client=s3),
            DynamoUsage(TABLE),
            DynamoErasureLog(TABLE),
            DynamoCredentials(TABLE),
            issuer,
            pool_clients,
            DynamoRates(TABLE),
            DynamoConversations(TABLE),
            DynamoSources(TABLE),
            DynamoFeedback(TABLE),
        )
        client.close()


def fill(platform: Platform, tenant_id: str, documents: int = 3) -> None:
    """Documents in every store (each written twice: two versions of its object), a tombstone, settings,
    a day of usage, a credential, two users' conversations and their feedback."""
    for n in range(documents):
        path = f"doc{n}.md"
        for text in (b"first", b"second"):
            platform.blobs.put(tenant_id, path, text, owner="alice")
        document = register(platform.registry, make_document(tenant_id, path, status=DocumentStatus.INDEXED))
        put(platform.index, *(make_chunk(tenant_id, document.doc_id, i, f"walnut {n} {i}") for i in range(2)))
    platform.registry.delete(tenant_id, "0" * 32, deleted_at=T0)
    platform.registry.put_tenant_settings(tenant_id, TenantSettings(freshness_weight=0.5))
    platform.usage.add(tenant_id, date(2026, 11, 27), UsageCounts(rest_queries=2))
    platform.rates.take(tenant_id, per_minute=60, burst=5, now_us=1_800_000_000_000_000)
    client_id, _ = platform.issuer.issue(f"{tenant_id} agent", CredentialScope.READ)
    platform.credentials.put_credential(
        Credential(
            credential_id=client_id,
            tenant_id=tenant_id,
            user_id="svc:bot",
            scope=CredentialScope.READ,
            name="agent",
            created_at=T0,
            created_by="carol",
        )
    )
    expires = datetime.now(UTC) + timedelta(days=30)
    for user_id in ("alice", "bob"):
        owner, conversation_id = Owner(tenant_id, user_id), new_conversation_id()
        platform.conversations.create(owner, conversation_id, "walnuts", T0, expires)
        turn = Turn(index=1, question="walnuts?", standalone_question="walnuts?", answer="Walnuts [1].", at=T0)
        platform.conversations.append(owner, conversation_id, turn, expires)
        given = Feedback(response_id=f"{conversation_id}-1", helpful=True, sources=["walnuts"], at=T0)
        platform.feedback.put(owner, given, previous=None)
    source = make_source("a", tenant_id)
    platform.sources.put_source(source)
    platform.sources.put_pages(tenant_id, source.source_id, [PageState(url="https://docs.example.com/a")])


class Crashing:
    """A store that dies (as a function would) after `after` deletes: each deletes, then the next raises."""

    def __init__(self, store: TenantStore, after: int) -> None:
        self._store = store
        self._left = after

    def erase_tenant(self, tenant_id: str, *, limit: int = 500) -> int:
        deleted = self._store.erase_tenant(tenant_id, limit=limit)
        self._left -= 1
        if self._left < 0:
            raise RuntimeError("the function died")
        return deleted

    def count_tenant(self, tenant_id: str) -> int:
        return self._store.count_tenant(tenant_id)


# --- the ErasureLog --------------------------------------------------------------------------------


def test_the_log_starts_one_erasure_at_a_time_and_keeps_the_receipt(platform: Platform) -> None:
    log = platform.log
    # Given nothing recorded
    assert log.get("acme") is None and not log.erasing("acme")
    # When an erasure starts
    erasure = Erasure(tenant_id="acme", status=ErasureStatus.ERASING, requested_by="ops", started_at=T0, stores=[])
    log.start(erasure)
    # Then it reads back, the tenant is erasing (and no other tenant sharing its prefix)
    assert log.get("acme") == erasure
    assert log.erasing("acme") and not log.erasing("acme-eu") and not log.erasing("acme2")
    # And a second start is refused while it runs
    with pytest.raises(ErasureInProgressError):
        log.start(erasure.model_copy(update={"requested_by": "someone else"}))
    # When it finishes, it is no longer erasing and a new erasure may start later
    done = erasure.model_copy(update={"status": ErasureStatus.ERASED, "finished_at": T0 + timedelta(minutes=1)})
    log.save(done)
    assert log.get("acme") == done and not log.erasing("acme")
    log.start(erasure)
    assert log.erasing("acme")


# --- the job ------------------------------------------------------------------------------------------


def test_the_job_erases_the_tenant_from_every_store_and_ends_with_a_receipt(platform: Platform) -> None:
    # Given three tenants whose ids share a prefix, with data in every store
    for tenant_id in TENANTS:
        fill(platform, tenant_id)
    before = {tenant_id: platform.counts(tenant_id) for tenant_id in TENANTS}
    clients = {
        tenant_id: {c.credential_id for c in platform.credentials.tenant_credentials(tenant_id)}
        for tenant_id in TENANTS
    }
    # When the operator erases acme
    start_erasure(platform.log, "acme", operator="ops", known=platform.registry.has_tenant("acme"), clock=lambda: T0)
    check = pytest.raises(TenantErasingError)
    with check:
        check_not_erasing(platform.log, "acme")
    receipt = run_erasure(
        platform.log, "acme", platform.stores(), {"usage": platform.usage}, limit=2, clock=lambda: T0 + timedelta(1)
    )
    # Then the receipt shows each store's deletes, nothing remaining, the kept usage, who asked and when
    assert receipt.status is ErasureStatus.ERASED
    assert (receipt.requested_by, receipt.started_at, receipt.finished_at) == ("ops", T0, T0 + timedelta(1))
    for name in ("credentials", "sources", "blobs", "index", "conversations", "feedback", "rates", "registry"):
        assert receipt.store(name).deleted == before["acme"][name] > 0
        assert receipt.store(name).remaining == 0
    assert receipt.store("usage").kept and receipt.store("usage").remaining == 1
    assert platform.log.get("acme") == receipt
    # And nothing of acme remains; the usage counters are kept; its requests are served again (nothing there)
    assert platform.counts("acme") == {
        "credentials": 0,
        "sources": 0,
        "blobs": 0,
        "index": 0,
        "conversations": 0,
        "feedback": 0,
        "rates": 0,
        "registry": 0,
        "usage": 1,
    }
    # And acme's programs can get no token any more: their clients are withdrawn, the others' are not
    assert platform.clients() == clients["acme-eu"] | clients["acme2"]
    check_not_erasing(platform.log, "acme")
    # And the tenants sharing its prefix are untouched
    for tenant_id in TENANTS[1:]:
        assert platform.counts(tenant_id) == before[tenant_id]
        assert platform.blobs.get(tenant_id, "doc0.md").load() == b"second"
    # And running the job again changes nothing
    assert run_erasure(platform.log, "acme", platform.stores(), {"usage": platform.usage}) == receipt


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_a_crash_in_the_middle_continues_on_the_next_run(platform: Platform, crash_after: int) -> None:
    # Given acme and its prefix neighbours, and an erasure whose index dies after `crash_after` steps
    for tenant_id in TENANTS:
        fill(platform, tenant_id)
    before = {tenant_id: platform.counts(tenant_id) for tenant_id in TENANTS}
    start_erasure(platform.log, "acme", operator="ops", known=True)
    crashing = platform.stores() | {"index": Crashing(platform.index, crash_after)}
    with pytest.raises(RuntimeError):
        run_erasure(platform.log, "acme", crashing, {"usage": platform.usage}, limit=2)
    # Then the tenant is still being erased, with the progress recorded so far
    interrupted = platform.log.get("acme")
    assert interrupted is not None and interrupted.status is ErasureStatus.ERASING
    with pytest.raises(TenantErasingError):
        check_not_erasing(platform.log, "acme")
    # When the job runs again
    receipt = run_erasure(platform.log, "acme", platform.stores(), {"usage": platform.usage}, limit=2)
    # Then it finishes: nothing remains; the deletes counted miss at most the batch the crash cut off
    assert receipt.status is ErasureStatus.ERASED
    assert all(receipt.store(name).remaining == 0 for name in ("blobs", "index", "registry"))
    assert before["acme"]["index"] - 2 <= receipt.store("index").deleted <= before["acme"]["index"]
    assert receipt.store("blobs").deleted == before["acme"]["blobs"]
    assert platform.counts("acme")["index"] == 0
    for tenant_id in TENANTS[1:]:
        assert platform.counts(tenant_id) == before[tenant_id]


def test_a_run_out_of_time_stops_between_steps_and_the_next_continues(platform: Platform) -> None:
    # Given an erasure and a budget that allows one look more than there are stores a run (a store found
    # empty costs a look too, so a run sees every store and still deletes in one)
    fill(platform, "acme")
    fill(platform, "acme-eu")
    start_erasure(platform.log, "acme", operator="ops", known=True)
    looks = len(platform.stores()) + 1
    runs, steps = 0, 0
    while True:
        runs += 1
        budget = iter([60.0] * looks)
        record = run_erasure(
            platform.log, "acme", platform.stores(), {}, limit=2, time_left=lambda b=budget: next(b, 0.0)
        )
        if record.status is ErasureStatus.ERASED:
            break
        assert steps < record.steps <= steps + looks  # each run progressed, within its budget, and saved it
        steps = record.steps
        assert runs < 50
    # Then several runs finished it, and acme-eu is whole
    assert runs > 2
    assert all(part.remaining == 0 for part in record.stores)
    assert platform.counts("acme-eu")["index"] == 6


def test_starting_refuses_an_unknown_tenant_and_a_second_erasure(platform: Platform) -> None:
    with pytest.raises(NotFoundError):
        start_erasure(platform.log, "nobody", operator="ops", known=False)
    start_erasure(platform.log, "acme", operator="ops", known=True)
    with pytest.raises(ErasureInProgressError):
        start_erasure(platform.log, "acme", operator="ops", known=True)
