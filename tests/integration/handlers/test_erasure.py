"""A tenant's erasure through the functions: the operator's route, the tenant's requests refused while it
runs, the erasure function running the job over several invocations (re-queuing itself through SQS under
moto), the receipt; on the local stack and on AWS (moto, the OpenSearch double), every AWS call held to
its function's role; on the real OpenSearch node too (`aws`, marked `opensearch`); and in search mode
s3vectors, where the erasure drops the tenant's own index (`s3vectors`).

Tenants `acme-eu` and `acme2`, whose ids share `acme`'s prefix, are proven untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from citewise.aws.s3vectors_requests import index_name
from citewise.domain import deadline
from citewise.runtime import erasure_handler
from citewise.runtime import services as services_module
from tests.integration.handlers.cognito import UserPool
from tests.integration.handlers.conftest import ERASURE_QUEUE, VECTOR_BUCKET
from tests.integration.handlers.harness import (
    BUCKET,
    LambdaContext,
    Stack,
    api_event,
    claims,
    lambda_sqs_event,
    s3_notification,
)

pytestmark = pytest.mark.parametrize("stack", ["local", "aws", "aws-double", "s3vectors"], indirect=True)

OPERATOR = claims(None, "ops-1", groups="operators")
NOTE = b"# Vault\n\nThe vault opens at nine.\n"
TENANTS = ("acme", "acme-eu", "acme2")
ERASURE = "/v1/admin/tenants/{}/erasure"


@pytest.fixture
def tenants(stack: Stack) -> dict[str, list[str]]:
    """Two documents in each tenant (one replaced, so its object has two versions on AWS)."""
    documents = {}
    for tenant in TENANTS:
        alice = claims(tenant, "alice")
        documents[tenant] = [stack.upload_and_ingest(alice, f"note{n}.md", NOTE) for n in range(2)]
        stack.api("PUT", "/v1/settings", body={"freshness_weight": 0.5}, identity=claims(tenant, "carol", "admin"))
    return documents


def erasure_messages() -> Iterator[list[dict[str, Any]]]:
    """The erasure queue's messages, one receive at a time (as the event source mapping, batch size 1)."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.get_queue_url(QueueName=ERASURE_QUEUE)["QueueUrl"]
    while True:
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"])
        messages = received.get("Messages", [])
        if not messages:
            return
        sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
        yield messages


def visible(stack: Stack, tenant: str) -> tuple[int, int]:
    """(documents listed, search hits) for a member of `tenant`."""
    alice = claims(tenant, "alice")
    status, page = stack.api("GET", "/v1/documents", identity=alice)
    assert status == 200, page
    status, found = stack.api("POST", "/v1/search", body={"query": "vault"}, identity=alice)
    assert status == 200, found
    return len(page["items"]), len(found["hits"])


@pytest.fixture
def credential_pool(stack: Stack, pool: UserPool, monkeypatch: pytest.MonkeyPatch) -> UserPool:
    """The user pool the functions make programs' credentials in, told them before they start (on AWS)."""
    if stack.kind == "aws":
        monkeypatch.setenv("CITEWISE_USER_POOL_ID", pool.pool_id)
        monkeypatch.setenv("CITEWISE_CREDENTIAL_TOKEN_URL", "https://citewise.auth.us-east-1.amazoncognito.com/t")
    return pool


def test_the_operator_erases_a_tenant_and_fetches_its_receipt(
    stack: Stack, credential_pool: UserPool, tenants: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three tenants whose ids share a prefix, each with documents, chunks and settings
    assert visible(stack, "acme-eu") == (2, 2)
    # And a program's credential of acme and of acme-eu (app clients of the stack's pool on AWS)
    credential = {"name": "agent", "user": "bot", "scope": "read"}
    issued = {
        tenant: stack.api("POST", "/v1/credentials", body=credential, identity=claims(tenant, "carol", "admin"))[1]
        for tenant in ("acme", "acme-eu")
    }
    assert all("client_secret" in answer for answer in issued.values()), issued
    # And a conversation of a user of acme and of acme-eu (in search mode s3vectors, acme-eu's only: a query of
    # acme there warms the function's view of acme's index, and the search after its erasure then fails with
    # the index gone, a 502: a finding of issue 28's mode, reported, not this test's subject)
    asking = ("acme-eu",) if stack.kind == "s3vectors" else ("acme", "acme-eu")
    turns = {
        tenant: stack.api("POST", "/v1/query", body={"query": "vault"}, identity=claims(tenant, "alice"))[1][
            "conversation"
        ]
        for tenant in asking
    }
    conversations = {tenant: turn["conversation_id"] for tenant, turn in turns.items()}
    for tenant, turn in turns.items():  # and feedback on each answer
        feedback = {"response_id": turn["response_id"], "helpful": True}
        assert stack.api("POST", "/v1/feedback", body=feedback, identity=claims(tenant, "alice"))[0] == 200
    # When the operator asks for acme's erasure
    status, started = stack.api("POST", ERASURE.format("acme"), identity=OPERATOR)
    # Then it is accepted, recorded with the operator who asked
    assert status == 202, started
    assert (started["tenant_id"], started["requested_by"]) == ("acme", "ops-1")
    if stack.kind == "aws":
        # On AWS the erasure function does the work: until then acme's requests are refused, clearly
        assert started["status"] == "ERASING"
        alice = claims("acme", "alice")
        for method, path, body in (
            ("GET", "/v1/documents", None),
            ("POST", "/v1/search", {"query": "vault"}),
            ("POST", "/v1/uploads", {"filename": "new.md", "content_type": "text/markdown", "size": 5}),
        ):
            status, refused = stack.api(method, path, body=body, identity=alice)
            assert (status, refused["error"]["code"]) == (409, "TENANT_ERASING"), path
            assert refused["error"]["request_id"]
        mcp = stack.handler("mcp")(
            api_event("POST", "/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, identity=alice),
            LambdaContext(),
        )
        assert mcp["statusCode"] == 409 and "TENANT_ERASING" in mcp["body"]
        # and an object written straight to the bucket meanwhile is not ingested (the erasure deletes it)
        stack.put_object("tenants/acme/late.md", NOTE, owner="alice")
        late = s3_notification("ObjectCreated:Put", "tenants/acme/late.md", size=len(NOTE))
        assert stack.ingest(late) == {"batchItemFailures": []}
        # and a second erasure is refused while this one runs
        status, again = stack.api("POST", ERASURE.format("acme"), identity=OPERATOR)
        assert (status, again["error"]["code"]) == (409, "ERASURE_IN_PROGRESS")
        # When the erasure function runs, each run allowed only a few looks (2 items each)
        # (the job's clock, not the AWS clients': theirs is the invocation's real budget)
        monkeypatch.setenv("CITEWISE_ERASURE_BATCH", "2")
        budget = iter(())
        job_clock = SimpleNamespace(remaining=lambda: next(budget, 0.0))
        monkeypatch.setattr(services_module, "deadline", job_clock)
        monkeypatch.setattr(
            erasure_handler, "deadline", SimpleNamespace(remaining=job_clock.remaining, budget=deadline.budget)
        )
        runs = 0
        for messages in erasure_messages():
            runs += 1
            budget = iter([60.0] * 8)  # a look at each of the 7 stores (an empty one costs one too), and a step
            queue_arn = f"arn:aws:sqs:us-east-1:123456789012:{ERASURE_QUEUE}"
            answer = stack.handler("erasure")(lambda_sqs_event(messages, queue_arn), LambdaContext())
            assert answer == {"batchItemFailures": []}
            assert runs < 100
        # Then it took several invocations, each re-queuing the rest
        assert runs >= 3
    # And the receipt says what went from each store, that nothing remains, who asked and when
    status, receipt = stack.api("GET", ERASURE.format("acme"), identity=OPERATOR)
    assert status == 200, receipt
    assert receipt["status"] == "ERASED" and receipt["requested_by"] == "ops-1"
    assert receipt["started_at"] <= receipt["finished_at"]
    parts = {part["store"]: part for part in receipt["stores"]}
    assert set(parts) == {
        "credentials",
        "sources",
        "blobs",
        "index",
        "conversations",
        "feedback",
        "rates",
        "registry",
        "usage",
    }
    erased_turns = 2 if "acme" in conversations else 0  # the conversation and its turn
    assert parts["conversations"]["deleted"] == erased_turns and parts["conversations"]["remaining"] == 0
    assert parts["feedback"]["deleted"] == (1 if "acme" in conversations else 0) and parts["feedback"]["remaining"] == 0
    assert parts["credentials"]["deleted"] == 1 and parts["credentials"]["remaining"] == 0
    if stack.kind == "aws":  # acme's app client is withdrawn by the erasure function, acme-eu's kept
        listed = credential_pool.client.list_user_pool_clients(UserPoolId=credential_pool.pool_id, MaxResults=60)
        clients = {c["ClientId"] for c in listed["UserPoolClients"]}
        assert issued["acme"]["credential"]["credential_id"] not in clients
        assert issued["acme-eu"]["credential"]["credential_id"] in clients
    for name in ("blobs", "index", "registry"):
        assert parts[name]["deleted"] > 0 and parts[name]["remaining"] == 0, parts[name]
    assert parts["index"]["deleted"] == 2  # one chunk a note
    assert parts["usage"]["kept"] is True
    if stack.kind == "aws":  # and nothing of acme is left in the bucket, the late object included
        assert stack.s3.list_object_versions(Bucket=BUCKET, Prefix="tenants/acme/").get("Versions", []) == []
        assert parts["blobs"]["deleted"] == 3
    if stack.vectors is not None:  # S3 Vectors: acme's index itself is gone; the others keep theirs
        indexes = stack.vectors.buckets[VECTOR_BUCKET].indexes
        assert index_name("acme") not in indexes
        assert {index_name(tenant) for tenant in TENANTS[1:]} <= set(indexes)
        assert [call for call in stack.vectors.requests if call[0] == "DeleteIndex"] == [
            ("DeleteIndex", {"vectorBucketName": VECTOR_BUCKET, "indexName": index_name("acme")})
        ]
    # And acme's members find nothing and are served again; acme is no longer listed
    assert visible(stack, "acme") == (0, 0)
    status, listed = stack.api("GET", "/v1/admin/tenants", identity=OPERATOR)
    assert [t["tenant_id"] for t in listed["items"]] == ["acme-eu", "acme2"]
    # And acme's conversation is gone, acme-eu's is whole
    path = "/v1/conversations/{}"
    if "acme" in conversations:
        assert stack.api("GET", path.format(conversations["acme"]), identity=claims("acme", "alice"))[0] == 404
    status, kept = stack.api("GET", path.format(conversations["acme-eu"]), identity=claims("acme-eu", "alice"))
    assert status == 200 and kept["turns"] == 1
    # And the tenants sharing its prefix are whole
    for tenant in TENANTS[1:]:
        assert visible(stack, tenant) == (2, 2)
        status, settings = stack.api("GET", "/v1/settings", identity=claims(tenant, "carol", "admin"))
        assert status == 200 and settings["freshness_weight"] == 0.5


def test_bad_erasure_requests(stack: Stack, tenants: dict[str, list[str]]) -> None:
    # An unknown tenant is 404, as is the receipt of a tenant never erased
    status, body = stack.api("POST", ERASURE.format("nobody"), identity=OPERATOR)
    assert (status, body["error"]["code"]) == (404, "NOT_FOUND")
    assert stack.api("GET", ERASURE.format("acme"), identity=OPERATOR)[0] == 404
    # A malformed tenant id is 400
    assert stack.api("POST", ERASURE.format("-bad"), identity=OPERATOR)[0] == 400
    # A tenant's admin (its own tenant included) and member are 403, and nothing starts
    for identity in (claims("acme", "carol", "admin"), claims("acme", "alice")):
        status, body = stack.api("POST", ERASURE.format("acme"), identity=identity)
        assert (status, body["error"]["code"]) == (403, "FORBIDDEN")
        assert stack.api("GET", ERASURE.format("acme"), identity=identity)[0] == 403
    assert visible(stack, "acme") == (2, 2)
    assert json.dumps(stack.api("GET", ERASURE.format("acme"), identity=OPERATOR)[1]).count("NOT_FOUND") == 1
