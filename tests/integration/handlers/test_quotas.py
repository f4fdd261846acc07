"""Quotas through the functions, on the local stack and on the AWS adapters (moto DynamoDB and SQS, the
OpenSearch double, every AWS call held to its function's role): the operator's routes, refusals at
presign, at ingest (FAILED, the object kept) and on queries (REST and MCP), and the re-queue that brings a
refused document in once the quota is raised."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID

from citewise_local.emulator import http_response
from tests.integration.handlers.conftest import QUEUE
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims, s3_notification
from tests.integration.handlers.test_audit import trail

pytestmark = pytest.mark.parametrize("stack", ["local", "aws-double"], indirect=True)

ALICE = claims("acme", "alice")
ACME_ADMIN = claims("acme", "ada", groups="admin")
GLOBEX = claims("globex", "gina")
OPERATOR = claims(None, "ops-1", groups="operators")
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every 90 days with `cdk deploy`.\n"
QUOTAS = "/v1/admin/tenants/acme/quotas"


@pytest.fixture(autouse=True)
def _quotas_apply_at_once(monkeypatch: pytest.MonkeyPatch, stack: Stack) -> None:
    """Functions read a tenant's overrides on every request here (by default they keep them a minute), and
    the AWS documents function knows the ingest queue, as the stack tells it."""
    monkeypatch.setenv("CITEWISE_QUOTA_TTL", "0")
    if stack.kind == "aws":
        url = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=QUEUE)["QueueUrl"]
        monkeypatch.setenv("CITEWISE_INGEST_QUEUE_URL", url)


def call(stack: Stack, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, str], Any]:
    """Status, headers and body of one API call (the function that serves `path`)."""
    function = "query" if path in ("/v1/query", "/v1/search") else "documents"
    response = http_response(stack.handler(function)(api_event(method, path, **kwargs), LambdaContext()))
    return response.status, {name.lower(): value for name, value in response.headers}, response.json()


def set_quotas(stack: Stack, **limits: int) -> dict[str, Any]:
    status, _, body = call(stack, "PUT", QUOTAS, body=limits, identity=OPERATOR)
    assert status == 200, body
    return dict(body)


def upload_request(filename: str, size: int) -> dict[str, Any]:
    return {"filename": filename, "content_type": "text/markdown", "size": size}


def document(stack: Stack, doc_id: str) -> dict[str, Any]:
    status, _, body = call(stack, "GET", f"/v1/documents/{doc_id}", identity=ALICE)
    assert status == 200, body
    return dict(body)


def test_the_operator_sets_quotas_and_sees_their_sources_and_the_use(stack: Stack) -> None:
    # Given a document of acme
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    # When the operator overrides two limits
    body = set_quotas(stack, max_documents=10, queries_per_minute=120)
    # Then each limit says where it comes from, and the use is the tenant's
    assert body["quotas"]["max_documents"] == {"limit": 10, "source": "override"}
    assert body["quotas"]["pages_per_day"] == {"limit": None, "source": "default"}
    assert body["overrides"]["updated_by"] == "ops-1"
    assert body["stored"] == {"documents": 1, "chunks": 1, "bytes": len(RUNBOOK)}
    assert body["today"]["pages"] == 1
    # And a GET answers the same
    status, _, again = call(stack, "GET", QUOTAS, identity=OPERATOR)
    assert status == 200 and again["quotas"] == body["quotas"] and again["stored"] == body["stored"]
    # And both are on acme's audit trail, as the operator's
    records = trail(tenant_id="acme", user_id="ops-1")
    assert [(r.action, r.operator) for r in records] == [("admin.quotas.update", True), ("admin.quotas.get", True)]


@pytest.mark.parametrize(
    "limits", [{"max_documents": -1}, {"max_documents": "ten"}, {"max_documents": 2.5}, {"max_documents": 10**20}]
)
def test_a_bad_quota_is_a_400_naming_the_field(stack: Stack, limits: dict[str, Any]) -> None:
    status, _, body = call(stack, "PUT", QUOTAS, body=limits, identity=OPERATOR)
    assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR"
    assert [error["loc"][-1] for error in body["error"]["details"]["errors"]] == ["max_documents"]


def test_tenant_identities_may_not_touch_quotas(stack: Stack) -> None:
    for identity in (ALICE, ACME_ADMIN):
        for method, path, body in (("GET", QUOTAS, None), ("PUT", QUOTAS, {"max_documents": 10**6})):
            status, _, answer = call(stack, method, path, body=body, identity=identity)
            assert status == 403 and answer["error"]["code"] == "FORBIDDEN", answer
        status, _, _ = call(stack, "POST", "/v1/admin/tenants/acme/requeue", identity=identity)
        assert status == 403


def test_an_upload_over_a_storage_quota_is_refused_at_presign_with_retry_after(stack: Stack) -> None:
    # Given acme holds one document and may hold one, of 1000 bytes at most
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    set_quotas(stack, max_documents=1, max_stored_bytes=1000)
    # When it asks to upload a second document
    status, headers, body = call(stack, "POST", "/v1/uploads", body=upload_request("b.md", 10), identity=ALICE)
    # Then it is a 429 naming the quota, its limit and the use, with Retry-After
    assert status == 429 and headers["retry-after"] == "3600"
    assert body["error"]["code"] == "QUOTA_EXCEEDED"
    assert body["error"]["details"] | {} == {
        "quota": "max_documents",
        "limit": 1,
        "used": 1,
        "retry_after_seconds": 3600,
    }
    # And replacing the stored document is fine within the bytes, refused beyond them
    assert call(stack, "POST", "/v1/uploads", body=upload_request("runbooks/keys.md", 900), identity=ALICE)[0] == 200
    status, _, body = call(stack, "POST", "/v1/uploads", body=upload_request("runbooks/keys.md", 1001), identity=ALICE)
    assert status == 429 and body["error"]["details"]["quota"] == "max_stored_bytes"
    # And another tenant is not limited by acme's quota
    assert call(stack, "POST", "/v1/uploads", body=upload_request("b.md", 10), identity=GLOBEX)[0] == 200


def test_a_document_over_quota_at_ingest_fails_keeps_its_object_and_is_requeued_once_raised(stack: Stack) -> None:
    # Given acme holds a document and its quota is then lowered to it (work in flight is not refused at presign)
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    status, _, upload = call(stack, "POST", "/v1/uploads", body=upload_request("runbooks/b.md", 20), identity=ALICE)
    assert status == 200
    set_quotas(stack, max_documents=1)
    # When the upload lands and is ingested
    stack.put_upload(upload, b"# B\n\nSecond runbook.")
    assert stack.ingest(s3_notification("ObjectCreated:Put", "tenants/acme/runbooks/b.md", size=20)) == {
        "batchItemFailures": []
    }
    # Then the document is FAILED with QUOTA_EXCEEDED, and its object is kept
    refused = document(stack, upload["document_id"])
    assert refused["status"] == "FAILED" and refused["error"].startswith("QUOTA_EXCEEDED: ")
    assert stack.read_object("tenants/acme/runbooks/b.md") == b"# B\n\nSecond runbook."
    # When the operator raises the quota and re-queues the tenant's refused documents
    set_quotas(stack, max_documents=5)
    status, _, report = call(stack, "POST", "/v1/admin/tenants/acme/requeue", identity=OPERATOR)
    assert status == 200 and report == {"tenant_id": "acme", "requeued": 1, "paths": ["runbooks/b.md"]}
    if stack.kind == "aws":  # on AWS the notification waits on the ingest queue: deliver it as Lambda would
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = f"https://sqs.us-east-1.amazonaws.com/{DEFAULT_ACCOUNT_ID}/{QUEUE}"
        (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert stack.ingest(message["Body"]) == {"batchItemFailures": []}
    # Then it is indexed: nothing was lost
    indexed = document(stack, upload["document_id"])
    assert indexed["status"] == "INDEXED" and indexed["error"] is None
    # And a second re-queue finds nothing to do
    assert call(stack, "POST", "/v1/admin/tenants/acme/requeue", identity=OPERATOR)[2]["requeued"] == 0


def test_queries_over_the_rate_are_429_on_rest_and_a_tool_error_on_mcp(stack: Stack) -> None:
    # Given acme may send 2 queries at once, then one a minute
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    set_quotas(stack, queries_per_minute=1, query_burst=2)
    # When it sends a query, a search, and one more query
    assert call(stack, "POST", "/v1/query", body={"query": "How often are keys rotated?"}, identity=ALICE)[0] == 200
    assert call(stack, "POST", "/v1/search", body={"query": "key rotation"}, identity=ALICE)[0] == 200
    status, headers, body = call(stack, "POST", "/v1/query", body={"query": "key rotation?"}, identity=ALICE)
    # Then the third is refused with the time to wait
    assert status == 429 and body["error"]["details"]["quota"] == "queries_per_minute"
    assert 1 <= int(headers["retry-after"]) <= 60
    # And the MCP tools draw from the same bucket: a clear tool error
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "keys"}},
    }
    response = stack.handler("mcp")(api_event("POST", "/mcp", body=message, identity=ALICE), LambdaContext())
    result = json.loads(response["body"])["result"]
    assert result["isError"] and result["content"][0]["text"].startswith("QUOTA_EXCEEDED: ")
    # And another tenant is served
    assert call(stack, "POST", "/v1/search", body={"query": "key rotation"}, identity=GLOBEX)[0] == 200


def test_generated_answers_stop_when_the_days_tokens_are_spent(stack: Stack) -> None:
    # Given a limit of 0 generation tokens a day (spent before the first answer)
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    set_quotas(stack, generation_tokens_per_day=0)
    # Then questions are refused until the next UTC day, and searches go on
    status, headers, body = call(stack, "POST", "/v1/query", body={"query": "How often?"}, identity=ALICE)
    assert status == 429 and body["error"]["details"]["quota"] == "generation_tokens_per_day"
    assert 1 <= int(headers["retry-after"]) <= 86400
    assert call(stack, "POST", "/v1/search", body={"query": "key rotation"}, identity=ALICE)[0] == 200


def test_the_days_pages_refuse_an_ingest_then_every_upload(stack: Stack) -> None:
    # Given acme ingested one page today and may ingest two; an upload is granted
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    status, _, first = call(stack, "POST", "/v1/uploads", body=upload_request("b.md", 10), identity=ALICE)
    status, _, second = call(stack, "POST", "/v1/uploads", body=upload_request("c.md", 10), identity=ALICE)
    assert status == 200
    set_quotas(stack, pages_per_day=2)
    # When both land: the first fits the day, the second does not
    for upload, name in ((first, "b.md"), (second, "c.md")):
        stack.put_upload(upload, b"# Note\n\nok")  # the 10 bytes the upload declared
        notification = s3_notification("ObjectCreated:Put", f"tenants/acme/{name}", size=10)
        assert stack.ingest(notification) == {"batchItemFailures": []}
    assert document(stack, first["document_id"])["status"] == "INDEXED"
    refused = document(stack, second["document_id"])
    assert refused["status"] == "FAILED" and refused["error"].startswith("QUOTA_EXCEEDED: ")
    # Then, the day's pages spent, the next upload is refused at presign until the next UTC day
    status, headers, body = call(stack, "POST", "/v1/uploads", body=upload_request("d.md", 10), identity=ALICE)
    assert status == 429 and body["error"]["details"]["quota"] == "pages_per_day"
    assert body["error"]["details"]["used"] == 2 and 1 <= int(headers["retry-after"]) <= 86400
