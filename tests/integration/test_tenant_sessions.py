"""Per-tenant read sessions on moto's STS (which answers AssumeRole with credentials and keeps what it was
asked) and botocore's Stubber (for STS's errors): one AssumeRole per tenant per credential lifetime,
renewed before expiry, a bounded cache, one call for concurrent first reads, failures as the search
backend's errors. And the S3 Vectors adapter's reads on those clients, its writes on its own."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sts.models import sts_backends
from pydantic import ValidationError as PydanticValidationError

from citewise.aws import clients
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.tenant_sessions import REFRESH_MARGIN, SESSION_SECONDS, TenantSessions, session_policy
from citewise.domain.errors import SearchBackendError, ThrottledError
from citewise.domain.models import Caller
from citewise.runtime.services import s3vectors_reader
from citewise.runtime.settings import Settings
from tests.contract.test_index_contract import DIMENSION, EMBEDDER, make_chunk, put
from tests.doubles.s3vectors import FakeS3Vectors

REGION = "us-east-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/citewise-dev-tenant-reader"
BUCKET = "citewise-vectors"


@dataclass
class Clock:
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.at


@dataclass
class Opened:
    sessions: TenantSessions
    clock: Clock
    made: list[dict[str, Any]]  # the credentials of each client made

    @staticmethod
    def assumed() -> list[Any]:
        return list(sts_backends[DEFAULT_ACCOUNT_ID]["global"].assumed_roles)


@pytest.fixture
def opened(aws_credentials: None) -> Iterator[Opened]:
    with mock_aws():
        clock, made = Clock(), []

        def make_client(credentials: Any) -> Any:
            made.append(dict(credentials))
            return clients.session_client("s3vectors", credentials, region=REGION)

        sessions = TenantSessions(
            boto3.client("sts", region_name=REGION),
            ROLE,
            BUCKET,
            region=REGION,
            make_client=make_client,
            capacity=2,
            now=clock,
        )
        yield Opened(sessions, clock, made)


def test_a_tenants_first_read_assumes_the_reader_role_with_its_index_alone(opened: Opened) -> None:
    # When a tenant's client is asked for
    client = opened.sessions.client("acme")
    # Then STS was asked once, for the reader role, naming the tenant, with the session policy of its index
    [assumed] = opened.assumed()
    assert assumed.role_arn == ROLE
    assert assumed.session_name == opened.sessions.index_arn("acme").rpartition("/")[2]
    assert json.loads(assumed.policy) == json.loads(session_policy(opened.sessions.index_arn("acme"), REGION))
    assert opened.sessions.index_arn("acme").startswith(
        f"arn:aws:s3vectors:{REGION}:{DEFAULT_ACCOUNT_ID}:bucket/{BUCKET}/index/t-acme-"
    )
    # and the client signs with the session's credentials, not the function's
    assert client.meta.region_name == REGION
    assert client._request_signer._credentials.access_key == assumed.access_key_id  # noqa: SLF001
    assert client._request_signer._credentials.token == assumed.session_token  # noqa: SLF001


def test_a_session_is_reused_until_shortly_before_it_expires(opened: Opened) -> None:
    first = opened.sessions.client("acme")
    opened.clock.at += timedelta(seconds=SESSION_SECONDS) - REFRESH_MARGIN - timedelta(seconds=5)
    assert opened.sessions.client("acme") is first
    assert len(opened.assumed()) == 1
    opened.clock.at += timedelta(seconds=10)  # now within the margin: renewed before it can expire mid-query
    assert opened.sessions.client("acme") is not first
    assert len(opened.assumed()) == 2


def test_each_tenant_has_its_own_session_and_the_least_recent_leaves_a_full_cache(opened: Opened) -> None:
    acme, globex = opened.sessions.client("acme"), opened.sessions.client("globex")
    assert acme is not globex and len(opened.assumed()) == 2
    opened.sessions.client("acme")  # acme is now the most recent; the capacity is 2
    opened.sessions.client("initech")  # globex leaves
    assert opened.sessions.client("acme") is acme
    assert len(opened.assumed()) == 3
    opened.sessions.client("globex")
    assert len(opened.assumed()) == 4


def test_concurrent_first_reads_of_a_tenant_make_one_call(opened: Opened) -> None:
    # The retriever runs its keyword and vector searches at once: both need the tenant's client.
    start = threading.Barrier(8)
    got: list[Any] = []

    def read() -> None:
        start.wait()
        got.append(opened.sessions.client("acme"))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(client) for client in got}) == 1
    assert len(opened.assumed()) == 1


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [("Throttling", 400, ThrottledError), ("AccessDenied", 403, SearchBackendError)],
)
def test_a_failed_assume_role_is_the_search_backends_error(
    aws_credentials: None, code: str, status: int, error: type[Exception]
) -> None:
    sts = boto3.client("sts", region_name=REGION)
    sessions = TenantSessions(sts, ROLE, BUCKET, region=REGION, make_client=lambda _: None)
    with Stubber(sts) as stub:
        stub.add_client_error("assume_role", service_error_code=code, http_status_code=status)
        with pytest.raises(error) as raised:
            sessions.client("acme")
    assert raised.value.details["aws_error"] == code  # type: ignore[attr-defined]
    assert "AssumeRole" in str(raised.value)


# --- the adapter's reads on the tenant's client, its writes on its own -----------------------------------


def test_the_adapter_reads_with_the_callers_tenant_client_and_writes_with_its_own() -> None:
    fake = FakeS3Vectors()
    fake.create_bucket(BUCKET)
    own = fake.client()
    asked: list[str] = []
    readers: dict[str, list[str]] = {}

    def reader(tenant_id: str) -> Any:
        asked.append(tenant_id)
        client = fake.client()
        calls = readers.setdefault(tenant_id, [])
        client.meta.events.register_first("before-call.s3vectors.*", lambda model, **_: calls.append(model.name))
        return client

    index = S3VectorsIndex(own, BUCKET, reader=reader)
    index.ensure(EMBEDDER.name, DIMENSION)
    put(index, make_chunk("acme", "doc", 0, "walnut"))
    assert asked == []  # writes: the function's own client

    alice = Caller(tenant_id="acme", user_id="alice")
    index.keyword_search(alice, "walnut", None, 10)
    index.vector_search(alice, [1.0] * DIMENSION, None, 10)
    index.sources(alice)
    assert asked == ["acme", "acme", "acme"]
    assert set(readers["acme"]) == {"GetIndex", "QueryVectors", "ListVectors"}


def test_the_factory_gives_session_clients_only_to_a_function_the_stack_gave_the_reader_role(
    aws_credentials: None,
) -> None:
    assert s3vectors_reader(Settings(), BUCKET) is None  # writers and local runs read with their own client
    with mock_aws():
        reader = s3vectors_reader(Settings(tenant_reader_role_arn=ROLE, aws_region=REGION), BUCKET)
        assert reader is not None
        client = reader("acme")
        [assumed] = Opened.assumed()
        assert (assumed.role_arn, client.meta.region_name) == (ROLE, REGION)
        assert client._request_signer._credentials.access_key == assumed.access_key_id  # noqa: SLF001
        assert reader("acme") is client


def test_the_reader_role_setting_takes_an_iam_role_arn_only() -> None:
    with pytest.raises(PydanticValidationError):
        Settings(tenant_reader_role_arn="arn:aws:iam::123456789012:user/someone")
