"""Search mode s3vectors with a KMS key per tenant, through the functions (moto's KMS, the S3 Vectors double):
the ingest function creates each tenant's key with its index, the erasure function destroys it after
dropping the index and names it in the receipt. Every KMS call is held to the calling function's role in
the synthesized template with `search.key_per_tenant` (`iam.py` maps them, with the keys' tags)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.exceptions import ClientError

from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_keys import STACK_TAG, TENANT_TAG, alias_name
from tests.integration.handlers.conftest import ERASURE_QUEUE, VECTOR_BUCKET, s3vectors_stack
from tests.integration.handlers.harness import LambdaContext, Stack, claims, lambda_sqs_event
from tests.integration.handlers.iam import ACCOUNT, REGION
from tests.integration.handlers.test_erasure import erasure_messages

SCOPE = "citewise-dev"  # the stack's scope for dev (`VectorStore.key_scope`), which the roles' grants name
NOTE = b"# Vault\n\nThe vault opens at nine.\n"
OPERATOR = claims(None, "ops-1", groups="operators")


@pytest.fixture
def stack(powertools: None, aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    settings = {
        "TENANT_KEY_SCOPE": SCOPE,
        "VECTOR_BUCKET_ARN": f"arn:aws:s3vectors:{REGION}:{ACCOUNT}:bucket/{VECTOR_BUCKET}",
    }
    with s3vectors_stack(monkeypatch, **settings) as aws:
        yield aws


def key_of(tenant: str) -> dict[str, object]:
    kms = boto3.client("kms", region_name=REGION)
    metadata: dict[str, object] = kms.describe_key(KeyId=alias_name(SCOPE, tenant))["KeyMetadata"]
    return metadata


def test_the_ingest_function_encrypts_each_tenants_index_with_a_key_of_its_own(stack: Stack) -> None:
    assert stack.vectors is not None
    for tenant in ("acme", "globex"):
        stack.upload_and_ingest(claims(tenant, "alice"), "vault.md", NOTE)
        stack.upload_and_ingest(claims(tenant, "alice"), "vault2.md", NOTE)
    kms = boto3.client("kms", region_name=REGION)
    for tenant in ("acme", "globex"):
        key = key_of(tenant)
        index = stack.vectors.buckets[VECTOR_BUCKET].indexes[index_name(tenant)]
        assert index.encryption == {"sseType": "aws:kms", "kmsKeyArn": key["Arn"]}
        tags = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=str(key["KeyId"]))["Tags"]}
        assert tags == {STACK_TAG: SCOPE, TENANT_TAG: index_name(tenant)}
    assert len(kms.list_keys()["Keys"]) == 2  # one key a tenant, whatever the number of documents
    # and a member's questions are answered from the encrypted index
    status, found = stack.api("POST", "/v1/search", body={"query": "vault"}, identity=claims("acme", "alice"))
    assert status == 200 and found["hits"]


def test_the_erasure_drops_the_index_then_destroys_the_tenants_key(stack: Stack) -> None:
    assert stack.vectors is not None
    for tenant in ("acme", "globex"):
        stack.upload_and_ingest(claims(tenant, "alice"), "vault.md", NOTE)
    acme_key = key_of("acme")
    # When the operator erases acme and the erasure function runs the job
    status, started = stack.api("POST", "/v1/admin/tenants/acme/erasure", identity=OPERATOR)
    assert status == 202, started
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{ERASURE_QUEUE}"
    for messages in erasure_messages():
        answer = stack.handler("erasure")(lambda_sqs_event(messages, queue_arn), LambdaContext())
        assert answer == {"batchItemFailures": []}
    # Then the receipt names acme's key and the day KMS deletes it
    status, receipt = stack.api("GET", "/v1/admin/tenants/acme/erasure", identity=OPERATOR)
    assert status == 200 and receipt["status"] == "ERASED", receipt
    [index] = [part for part in receipt["stores"] if part["store"] == "index"]
    assert index["remaining"] == 0
    key = index["key"]
    assert (key["key_arn"], key["alias"]) == (acme_key["Arn"], alias_name(SCOPE, "acme"))
    deletion = datetime.fromisoformat(key["deletion_date"])
    assert timedelta(days=6, hours=23) < deletion - datetime.now(UTC) <= timedelta(days=7)
    # And the index is gone, the key pending deletion and nameless; globex keeps its index and its key
    kms = boto3.client("kms", region_name=REGION)
    assert kms.describe_key(KeyId=str(acme_key["KeyId"]))["KeyMetadata"]["KeyState"] == "PendingDeletion"
    with pytest.raises(ClientError, match="NotFoundException"):
        key_of("acme")
    assert index_name("acme") not in stack.vectors.buckets[VECTOR_BUCKET].indexes
    assert key_of("globex")["KeyState"] == "Enabled"
    names = [name for name, _ in stack.vectors.requests]
    assert names.count("DeleteIndex") == 1
    # And acme, coming back, gets a new key
    stack.upload_and_ingest(claims("acme", "alice"), "again.md", NOTE)
    assert key_of("acme")["Arn"] != acme_key["Arn"]
