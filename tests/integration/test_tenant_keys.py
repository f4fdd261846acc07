"""A KMS key per tenant in search mode s3vectors (`citewise.aws.tenant_keys`): KMS is moto's, S3 Vectors the
double. The first write creates the tenant's key and its index under it; racing writers and retried runs
end with one key; an erasure drops the index, then schedules the key's deletion and names it in the
receipt, and converges when it is interrupted anywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws
from moto.sts.models import sts_backends

from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_keys import INDEXING_PRINCIPAL, STACK_TAG, TENANT_TAG, TenantKeys, alias_name, key_policy
from citewise.domain.errors import SearchBackendError, ThrottledError, ValidationError
from citewise.ports.erasure import ErasureStatus, run_erasure, start_erasure
from citewise.runtime.services import s3vectors_reader, s3vectors_tenant_keys
from citewise.runtime.settings import QuerySettings, Settings, load_settings
from tests.contract.test_index_contract import DIMENSION, EMBEDDER, make_chunk, put
from tests.doubles.s3vectors import ACCOUNT, REGION, FakeS3Vectors
from tests.unit.test_erasure import MemoryLog

BUCKET = "citewise-test-vectors"
BUCKET_ARN = f"arn:aws:s3vectors:{REGION}:{ACCOUNT}:bucket/{BUCKET}"
SCOPE = "citewise-test"


class FlakyKms:
    """A KMS client whose next call of an operation fails (`fail_next`) or first runs `before(...)`."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._faults: dict[str, str] = {}
        self._before: dict[str, Any] = {}
        self.calls: list[str] = []

    def fail_next(self, operation: str, code: str) -> None:
        self._faults[operation] = code

    def before_next(self, operation: str, action: Any) -> None:
        self._before[operation] = action

    def __getattr__(self, operation: str) -> Any:
        method = getattr(self._client, operation)

        def call(**params: Any) -> Any:
            self.calls.append(operation)
            if (action := self._before.pop(operation, None)) is not None:
                action()
            if (code := self._faults.pop(operation, None)) is not None:
                raise ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)
            return method(**params)

        return call


@dataclass
class World:
    kms: Any  # moto's
    flaky: FlakyKms
    fake: FakeS3Vectors
    index: S3VectorsIndex

    def keys(self, tenant_id: str | None = None) -> list[dict[str, Any]]:
        """Every key of the account (of the tenant, by its tag), with its tags."""
        found = []
        for entry in self.kms.list_keys()["Keys"]:
            metadata = self.kms.describe_key(KeyId=entry["KeyId"])["KeyMetadata"]
            tags = {t["TagKey"]: t["TagValue"] for t in self.kms.list_resource_tags(KeyId=entry["KeyId"])["Tags"]}
            if tenant_id is None or tags.get(TENANT_TAG) == index_name(tenant_id):
                found.append({**metadata, "Tags": tags})
        return found

    def index_key(self, tenant_id: str) -> str:
        encryption = self.fake.buckets[BUCKET].indexes[index_name(tenant_id)].encryption
        assert encryption is not None and encryption["sseType"] == "aws:kms"
        return str(encryption["kmsKeyArn"])

    def calls(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.fake.requests if name == operation]


def tenant_keys(kms: Any, *, deletion_days: int = 7) -> TenantKeys:
    return TenantKeys(lambda: kms, scope=SCOPE, bucket_arn=BUCKET_ARN, deletion_days=deletion_days)


@pytest.fixture
def world(aws_credentials: None) -> Iterator[World]:
    with mock_aws():
        kms = boto3.client("kms", region_name=REGION)
        flaky = FlakyKms(kms)
        fake = FakeS3Vectors()
        fake.create_bucket(BUCKET)
        index = S3VectorsIndex(fake.client(), BUCKET, keys=tenant_keys(flaky))
        index.ensure(EMBEDDER.name, DIMENSION)
        yield World(kms, flaky, fake, index)


def write(world: World, tenant_id: str, doc: str = "doc") -> None:
    put(world.index, make_chunk(tenant_id, doc, 0, "walnut"))


# --- creation ------------------------------------------------------------------------------------------


def test_the_first_write_creates_the_tenants_key_then_its_index_under_it(world: World) -> None:
    write(world, "acme")
    [key] = world.keys("acme")
    # the index is encrypted with the tenant's own key, named and tagged for the stack and the tenant
    assert world.index_key("acme") == key["Arn"] and key["KeyState"] == "Enabled"
    assert key["Tags"] == {STACK_TAG: SCOPE, TENANT_TAG: index_name("acme")}
    alias = world.kms.describe_key(KeyId=alias_name(SCOPE, "acme"))["KeyMetadata"]
    assert alias["Arn"] == key["Arn"] and alias_name(SCOPE, "acme") == f"alias/{SCOPE}/{index_name('acme')}"
    # a second document and a second tenant: no new key for acme, one of its own for globex
    write(world, "acme", "doc2")
    write(world, "globex")
    assert len(world.keys("acme")) == 1 and len(world.keys("globex")) == 1
    assert world.index_key("globex") != world.index_key("acme")
    assert len(world.calls("CreateIndex")) == 2


def test_kms_calls_per_tenant_one_lookup_and_two_writes_at_its_first_index_none_after(world: World) -> None:
    write(world, "acme")
    assert world.flaky.calls == ["describe_key", "create_key", "create_alias"]
    write(world, "acme", "doc2")  # the index is known: no KMS call at all
    assert len(world.flaky.calls) == 3
    world.index.erase_tenant("acme")
    world.index.erase_tenant("acme")
    world.flaky.calls.clear()
    world.index.schedule_key_deletion("acme")
    world.index.release_key("acme")
    assert world.flaky.calls == ["describe_key", "schedule_key_deletion", "delete_alias"]


def test_the_key_policy_lets_the_account_administer_it_and_s3_vectors_index_this_bucket_only(world: World) -> None:
    write(world, "acme")
    policy = json.loads(world.kms.get_key_policy(KeyId=world.index_key("acme"), PolicyName="default")["Policy"])
    root, indexing = policy["Statement"]
    assert root["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"} and root["Action"] == "kms:*"
    assert indexing["Principal"] == {"Service": INDEXING_PRINCIPAL} and indexing["Action"] == "kms:Decrypt"
    assert indexing["Condition"] == {
        "StringEquals": {"aws:SourceAccount": ACCOUNT},
        "ArnLike": {"aws:SourceArn": f"{BUCKET_ARN}*"},
    }


def test_the_kms_requests_hold_to_the_service_model() -> None:
    # botocore's Stubber validates each request against the real KMS model before it answers
    client = boto3.client("kms", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")  # noqa: S106
    keys, alias = tenant_keys(client), alias_name(SCOPE, "acme")
    arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    with Stubber(client) as stub:
        stub.add_client_error("describe_key", "NotFoundException", expected_params={"KeyId": alias})
        stub.add_response(
            "create_key",
            {"KeyMetadata": {"KeyId": arn.rpartition("/")[2], "Arn": arn, "KeyState": "Enabled"}},
            expected_params={
                "Policy": key_policy(BUCKET_ARN),
                "Description": f"citewise {SCOPE}: the S3 Vectors index {index_name('acme')} of one tenant",
                "KeyUsage": "ENCRYPT_DECRYPT",
                "KeySpec": "SYMMETRIC_DEFAULT",
                "Tags": [
                    {"TagKey": STACK_TAG, "TagValue": SCOPE},
                    {"TagKey": TENANT_TAG, "TagValue": index_name("acme")},
                ],
                "BypassPolicyLockoutSafetyCheck": True,
            },
        )
        stub.add_response("create_alias", {}, expected_params={"AliasName": alias, "TargetKeyId": arn})
        assert keys.key_for("acme") == arn
        stub.assert_no_pending_responses()
    assert len(alias) <= 256 and not alias.startswith("alias/aws/")


def test_two_writers_racing_for_a_tenants_first_index_end_with_one_key(world: World) -> None:
    # Given another ingest run that names acme's key between this run's CreateKey and its CreateAlias
    other = tenant_keys(world.kms)
    winner: list[str] = []
    world.flaky.before_next("create_alias", lambda: winner.append(other.key_for("acme")))
    # When this run writes acme's first document
    write(world, "acme")
    # Then its index uses the winner's key, and the key it created is scheduled for deletion, unused
    assert world.index_key("acme") == winner[0]
    states = {key["Arn"]: key["KeyState"] for key in world.keys("acme")}
    assert states == {winner[0]: "Enabled", **{arn: "PendingDeletion" for arn in states if arn != winner[0]}}
    assert len(states) == 2


def test_a_failed_create_index_leaves_the_key_that_the_retry_reuses(world: World) -> None:
    world.fake.fail_next("CreateIndex", "InternalServerException")
    with pytest.raises(SearchBackendError):
        write(world, "acme")
    [key] = world.keys("acme")  # created and named before the index was refused
    write(world, "acme")  # the queue's retry
    assert world.keys("acme") == [key] and world.index_key("acme") == key["Arn"]


def test_kms_failures_are_structured_errors_and_leave_no_index(world: World) -> None:
    world.flaky.fail_next("create_key", "ThrottlingException")
    with pytest.raises(ThrottledError):
        write(world, "acme")
    world.flaky.fail_next("create_alias", "AccessDeniedException")
    with pytest.raises(SearchBackendError, match="CreateAlias"):
        write(world, "acme")
    assert world.calls("CreateIndex") == []
    # the key whose alias was refused is not left to cost $1 a month
    assert [key["KeyState"] for key in world.keys("acme")] == ["PendingDeletion"]
    write(world, "acme")
    assert world.keys("acme")[-1]["Arn"] == world.index_key("acme")


def test_a_tenant_whose_key_is_being_destroyed_gets_no_index_until_the_alias_is_released(world: World) -> None:
    write(world, "acme")
    world.index.erase_tenant("acme")  # the last page: the index is dropped
    assert world.index.erase_tenant("acme") == 0
    world.index.schedule_key_deletion("acme")
    with pytest.raises(SearchBackendError, match="PendingDeletion"):
        write(world, "acme")  # an erasure is running: the tenant's new objects wait for it
    world.index.release_key("acme")
    write(world, "acme")  # the tenant came back: a new key
    enabled = [key["Arn"] for key in world.keys("acme") if key["KeyState"] == "Enabled"]
    assert enabled == [world.index_key("acme")] and len(world.keys("acme")) == 2


# --- erasure -------------------------------------------------------------------------------------------


def erase(world: World, log: MemoryLog) -> Any:
    return run_erasure(log, "acme", {"index": world.index}, {})


def test_an_erasure_drops_the_index_then_destroys_the_key_and_the_receipt_names_it(world: World) -> None:
    write(world, "acme")
    write(world, "globex")
    key_arn = world.index_key("acme")
    log = MemoryLog()
    start_erasure(log, "acme", operator="ops", known=True)
    before = datetime.now(UTC)
    record = erase(world, log)
    assert record.status is ErasureStatus.ERASED
    receipt = record.store("index").key
    assert receipt is not None and receipt.key_arn == key_arn and receipt.alias == alias_name(SCOPE, "acme")
    assert before + timedelta(days=7) - timedelta(minutes=1) <= receipt.deletion_date
    assert receipt.deletion_date <= datetime.now(UTC) + timedelta(days=7)
    # the index went first, then the key; its alias is released; globex is untouched
    names = [name for name, _ in world.fake.requests]
    assert "DeleteIndex" in names and index_name("acme") not in world.fake.buckets[BUCKET].indexes
    assert [key["KeyState"] for key in world.keys("acme")] == ["PendingDeletion"]
    with pytest.raises(ClientError, match="NotFoundException"):
        world.kms.describe_key(KeyId=alias_name(SCOPE, "acme"))
    assert [key["KeyState"] for key in world.keys("globex")] == ["Enabled"]


@pytest.mark.parametrize("operation", ["schedule_key_deletion", "delete_alias"])
def test_an_erasure_interrupted_at_the_key_converges_with_the_same_receipt(world: World, operation: str) -> None:
    write(world, "acme")
    key_arn = world.index_key("acme")
    log = MemoryLog()
    start_erasure(log, "acme", operator="ops", known=True)
    world.flaky.fail_next(operation, "InternalFailure")
    with pytest.raises(SearchBackendError):
        erase(world, log)
    assert log.records["acme"].status is ErasureStatus.ERASING
    first = log.records["acme"].store("index").key
    # the run again: the key is scheduled once, its date kept, the alias released, the receipt complete
    record = erase(world, log)
    assert record.status is ErasureStatus.ERASED
    receipt = record.store("index").key
    assert receipt is not None and receipt.key_arn == key_arn
    if first is not None:  # the deletion was recorded before the alias failed: the same date
        assert receipt == first
    assert [key["KeyState"] for key in world.keys("acme")] == ["PendingDeletion"]
    # and once more: nothing left to do, the receipt as it was
    assert erase(world, log) == record


def test_a_run_that_scheduled_the_deletion_but_recorded_nothing_reads_the_date_back(world: World) -> None:
    write(world, "acme")
    keys = tenant_keys(world.flaky, deletion_days=9)
    # Given another run that schedules the key's deletion between this run's DescribeKey and its own
    # ScheduleKeyDeletion, which KMS then refuses (the key is no longer Enabled)
    world.flaky.before_next(
        "schedule_key_deletion",
        lambda: world.kms.schedule_key_deletion(KeyId=world.keys("acme")[0]["KeyId"], PendingWindowInDays=9),
    )
    world.flaky.fail_next("schedule_key_deletion", "KMSInvalidStateException")
    first = keys.schedule_deletion("acme")
    # Then the date is read back, and asking again (a key pending deletion) answers the same
    again = keys.schedule_deletion("acme")
    assert first is not None and first == again and first.key_arn == world.index_key("acme")
    assert first.deletion_date - datetime.now(UTC) > timedelta(days=8)
    keys.release("acme")
    keys.release("acme")  # released already: nothing to do
    assert keys.schedule_deletion("acme") is None


def test_the_waiting_period_is_what_kms_allows() -> None:
    for days in (6, 31):
        with pytest.raises(ValueError, match="7 to 30 days"):
            tenant_keys(object(), deletion_days=days)


# --- the wiring ----------------------------------------------------------------------------------------


def test_a_key_scope_needs_the_vector_bucket_and_its_arn() -> None:
    with pytest.raises(ValidationError, match="CITEWISE_TENANT_KEY_SCOPE .* needs CITEWISE_VECTOR_BUCKET"):
        load_settings(Settings, tenant_key_scope=SCOPE, vector_bucket=BUCKET)
    with pytest.raises(ValidationError, match="CITEWISE_TENANT_KEY_DELETION_DAYS"):
        load_settings(Settings, tenant_key_deletion_days=6)
    assert s3vectors_tenant_keys(load_settings(Settings, vector_bucket=BUCKET)) is None


def test_the_factory_wires_the_keys_and_narrows_each_session_to_its_tenants_key(aws_credentials: None) -> None:
    with mock_aws():
        settings = load_settings(
            QuerySettings,
            backend="aws",
            aws_region=REGION,
            vector_bucket=BUCKET,
            vector_bucket_arn=BUCKET_ARN,
            tenant_key_scope=SCOPE,
            tenant_reader_role_arn=f"arn:aws:iam::{ACCOUNT}:role/citewise-test-tenant-reader",
        )
        keys = s3vectors_tenant_keys(settings)
        assert keys is not None and keys.alias("acme") == alias_name(SCOPE, "acme")
        reader = s3vectors_reader(settings, BUCKET)
        assert reader is not None
        access_key = reader("acme")._request_signer._credentials.get_frozen_credentials().access_key
        session = sts_backends[ACCOUNT]["global"].get_assumed_role_from_access_key(access_key)
        _, decrypt = json.loads(session.policy)["Statement"]
        assert decrypt["Condition"]["StringEquals"][f"aws:ResourceTag/{TENANT_TAG}"] == index_name("acme")


def test_the_double_keeps_an_indexs_own_encryption_as_the_api_reference_shapes_it() -> None:
    fake = FakeS3Vectors()
    fake.create_bucket(BUCKET)
    client = fake.client()
    arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    request = {"vectorBucketName": BUCKET, "dataType": "float32", "dimension": 4, "distanceMetric": "cosine"}
    # kmsKeyArn is allowed if and only if sseType is aws:kms
    with pytest.raises(ClientError, match="ValidationException"):
        client.create_index(indexName="t-a", encryptionConfiguration={"sseType": "AES256", "kmsKeyArn": arn}, **request)
    with pytest.raises(ClientError, match="ValidationException"):
        client.create_index(indexName="t-a", encryptionConfiguration={"sseType": "aws:kms"}, **request)
    client.create_index(indexName="t-a", encryptionConfiguration={"sseType": "aws:kms", "kmsKeyArn": arn}, **request)
    shown = client.get_index(vectorBucketName=BUCKET, indexName="t-a")["index"]
    assert shown["encryptionConfiguration"] == {"sseType": "aws:kms", "kmsKeyArn": arn}
    client.create_index(indexName="t-b", **request)  # none of its own: the bucket's
    assert "encryptionConfiguration" not in client.get_index(vectorBucketName=BUCKET, indexName="t-b")["index"]
