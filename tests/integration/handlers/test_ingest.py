"""The ingest function, driven by SQS batches of S3 notifications, on both stacks.

What a queue-fed Lambda must get right: partial batch failures (only a transiently failing record goes
back to the queue; a key that can never be valid is dropped, never indexed), idempotent redelivery,
removals reconciled against what the bucket holds now, a DLQ after bounded receives, and EMF metrics and
JSON logs on stdout that never carry document text.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote_plus, unquote_plus

import boto3
import pytest

from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.errors import EmbeddingServiceError
from citewise.domain.tenancy import document_id
from tests.doubles.opensearch_server import FakeOpenSearch
from tests.integration.handlers.conftest import TABLE
from tests.integration.handlers.harness import (
    BUCKET,
    LambdaContext,
    Output,
    Stack,
    claims,
    event_file,
    lambda_sqs_event,
    recorded_notification,
    s3_notification,
    sqs_event,
)

ALICE = claims("acme", "alice")
GINA = claims("globex", "gina")
GUIDE = b"# Heron guide\n\nThe grey heron nests in zanzibar reedbeds every spring.\n"
GUIDE_KEY = "tenants/acme/birds/heron guide.md"
NO_FAILURES: dict[str, list[Any]] = {"batchItemFailures": []}


@pytest.fixture
def opensearch(stack: Stack) -> FakeOpenSearch:
    """The AWS stack's OpenSearch double, for fault injection and for reading what was indexed."""
    assert stack.opensearch is not None
    return stack.opensearch


def doc_id_of(key: str) -> str:
    tenant_id, _, path = key.removeprefix("tenants/").partition("/")
    return document_id(tenant_id, path)


def get_document(stack: Stack, key: str, identity: dict[str, str] = ALICE) -> dict[str, Any] | None:
    """The document at `key` as its tenant sees it through the API, or None (404)."""
    status, body = stack.api("GET", f"/v1/documents/{doc_id_of(key)}", identity=identity)
    assert status in (200, 404), body
    return body if status == 200 else None


def status_of(stack: Stack, key: str) -> str | None:
    document = get_document(stack, key)
    return None if document is None else str(document["status"])


def listed(stack: Stack, identity: dict[str, str]) -> list[str]:
    status, body = stack.api("GET", "/v1/documents", identity=identity)
    assert status == 200, body
    return [document["path"] for document in body["items"]]


def found(stack: Stack, query: str, identity: dict[str, str]) -> list[str]:
    status, body = stack.api("POST", "/v1/search", body={"query": query}, identity=identity)
    assert status == 200, body
    return [hit["chunk"]["document"]["path"] for hit in body["hits"]]


def created(key: str) -> dict[str, Any]:
    return s3_notification("ObjectCreated:Put", key)


def invoke(stack: Stack, event: dict[str, Any]) -> dict[str, Any]:
    return stack.handler("ingest")(event, LambdaContext())


def failing_embedder(monkeypatch: pytest.MonkeyPatch, *, times: int | None, marker: str | None = None) -> list[int]:
    """Make the embedder raise EmbeddingServiceError (Bedrock throttling, say) on its next `times` calls
    (every call when None), only for texts containing `marker` if given. Returns the calls it failed."""
    real = HashingEmbedder.embed_documents
    failed: list[int] = []

    def embed_documents(self: HashingEmbedder, texts: list[str]) -> Any:
        poisoned = marker is None or any(marker in text for text in texts)
        if poisoned and (times is None or len(failed) < times):
            failed.append(len(texts))
            raise EmbeddingServiceError("the embedding model is throttling requests; retry later")
        return real(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed_documents", embed_documents)
    return failed


# --- keys, test events, malformed messages --------------------------------------------------------------


def test_keys_outside_the_tenant_layout_are_dropped_with_a_warning_and_never_indexed(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a valid object, and objects whose keys are outside tenants/{tenant}/ or climb out of it
    outside, climbing = "uploads/acme/zanzibar.md", "tenants/acme/../globex/zanzibar.md"
    stack.put_object(GUIDE_KEY, GUIDE)
    if stack.kind == "aws":  # S3 takes any key; locally such a path cannot be stored at all
        for key in (outside, climbing):
            stack.put_object(key, b"# Planted\n\nzanzibar planted text.\n")
    capsys.readouterr()
    # When their events arrive in one batch
    response = stack.ingest(created(GUIDE_KEY), created(outside), created(climbing))
    output = Output.parse(capsys.readouterr().out)
    # Then no record goes back to the queue: retrying cannot make those keys valid
    assert response == NO_FAILURES
    # The valid one is indexed, the others are in no registry and no search, of either tenant
    assert status_of(stack, GUIDE_KEY) == "INDEXED"
    assert listed(stack, ALICE) == ["birds/heron guide.md"] and listed(stack, GINA) == []
    assert found(stack, "zanzibar", ALICE) == ["birds/heron guide.md"] and found(stack, "zanzibar", GINA) == []
    # And each refusal is a warning naming the key as S3 sent it
    warnings = output.messages("object key rejected")
    assert {(w["level"], w["key"]) for w in warnings} == {
        ("WARNING", quote_plus(outside, safe="/")),
        ("WARNING", quote_plus(climbing, safe="/")),
    }
    assert sum(output.metric("IngestRejected")) == 2
    if stack.kind == "aws":  # and underneath the API: one registry item, one document's chunks
        assert stack.indexed_doc_ids() == {doc_id_of(GUIDE_KEY)}
        items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=TABLE)["Items"]
        # (beside the tenants' catalogue and the usage counters, which hold no document: the key that climbs
        # into globex counted nothing there, globex's one count is gina's search above)
        records = [item["doc_id"]["S"] for item in items if "path" in item]
        assert records == [doc_id_of(GUIDE_KEY)]
        counters = {item["tenant_id"]["S"]: item for item in items if item["doc_id"]["S"].startswith("#usage#")}
        assert set(counters["globex"]) == {"tenant_id", "doc_id", "rest_searches"}


def test_an_s3_test_event_is_acknowledged_and_indexes_nothing(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the s3:TestEvent S3 sends when the notification is configured
    body = event_file("sqs_s3_test_event.json")["Records"][0]["body"]
    assert json.loads(body)["Event"] == "s3:TestEvent"
    # When it arrives
    response = stack.ingest(body)
    output = Output.parse(capsys.readouterr().out)
    # Then it is consumed without failure and nothing is ingested
    assert response == NO_FAILURES
    assert output.messages("document ingested") == [] and output.metric("DocumentsIndexed") == []
    assert listed(stack, ALICE) == []


def test_a_malformed_message_is_reported_so_it_ends_in_the_dlq(stack: Stack) -> None:
    # Given a batch with a good record and bodies that are not S3 notifications
    stack.put_object(GUIDE_KEY, GUIDE)
    event = sqs_event(created(GUIDE_KEY), "not json {", json.dumps({"Message": "no Records here"}), "[]")
    # When it is processed
    response = invoke(stack, event)
    # Then exactly the malformed ones are reported as failed (kept for the DLQ), and the good one is indexed
    malformed = [record["messageId"] for record in event["Records"][1:]]
    assert response == {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in malformed]}
    assert status_of(stack, GUIDE_KEY) == "INDEXED"


# --- idempotency and removals ----------------------------------------------------------------------------


def test_the_same_record_delivered_twice_is_unchanged_the_second_time(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a document ingested from its event
    stack.put_object(GUIDE_KEY, GUIDE)
    assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    first = get_document(stack, GUIDE_KEY)
    assert first is not None and first["status"] == "INDEXED"
    capsys.readouterr()
    # When SQS delivers the same event again
    assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    output = Output.parse(capsys.readouterr().out)
    # Then the document is untouched: same version, same timestamp, nothing embedded or indexed again
    second = get_document(stack, GUIDE_KEY)
    assert second == first
    [ingested] = output.messages("document ingested")
    assert ingested["outcome"] == "unchanged" and ingested["embedded"] == 0
    assert output.metric("ChunksEmbedded") == [] and output.metric("DocumentsIndexed") == []


@pytest.mark.parametrize(
    "recorded", ["sqs_s3_delete.json", "sqs_s3_delete_marker.json", "sqs_s3_lifecycle_delete.json"]
)
def test_a_removal_after_the_object_is_gone_removes_chunks_and_record(
    stack: Stack, recorded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an indexed document and another one that stays
    version = stack.put_object(GUIDE_KEY, GUIDE)
    other = "tenants/acme/otters.md"
    stack.put_object(other, b"# Otters\n\nOtters float on their backs in zanzibar kelp.\n")
    assert stack.ingest(created(GUIDE_KEY), created(other)) == NO_FAILURES
    assert sorted(found(stack, "zanzibar", ALICE)) == ["birds/heron guide.md", "otters.md"]
    # When the object is deleted (the only version permanently, or behind a delete marker) and the event arrives
    permanent = recorded in ("sqs_s3_delete.json", "sqs_s3_lifecycle_delete.json")
    stack.delete_object(GUIDE_KEY, version_id=version if permanent and stack.kind == "aws" else None)
    capsys.readouterr()
    assert stack.ingest(recorded_notification(recorded, GUIDE_KEY, version_id=version)) == NO_FAILURES
    # Then its chunks and its record are gone, and nothing else is
    assert get_document(stack, GUIDE_KEY) is None
    assert listed(stack, ALICE) == ["otters.md"]
    assert found(stack, "zanzibar heron", ALICE) == ["otters.md"]
    [removed] = Output.parse(capsys.readouterr().out).messages("document ingested")
    assert removed["outcome"] == "deleted" and removed["doc_id"] == doc_id_of(GUIDE_KEY)


@pytest.mark.parametrize("recorded", ["sqs_s3_complete_multipart.json", "sqs_s3_copy.json"])
def test_an_object_created_by_multipart_upload_or_copy_is_indexed(stack: Stack, recorded: str) -> None:
    # Given an object written by a multipart upload or a copy (its recorded notification)
    version = stack.put_object(GUIDE_KEY, GUIDE)
    # When the notification arrives / Then the document is indexed like any upload
    assert stack.ingest(recorded_notification(recorded, GUIDE_KEY, version_id=version)) == NO_FAILURES
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "INDEXED"
    assert found(stack, "heron", ALICE) == ["birds/heron guide.md"]


def test_a_removal_while_the_object_still_exists_leaves_the_document_indexed(stack: Stack) -> None:
    # Given an indexed document
    first = stack.put_object(GUIDE_KEY, GUIDE)
    assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    removed_version = None
    if stack.kind == "aws":
        # ...whose object was overwritten (re-indexed as the new version), then its old version deleted
        current = stack.put_object(GUIDE_KEY, GUIDE + b"\nHerons also fish in estuaries.\n")
        assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
        stack.delete_object(GUIDE_KEY, version_id=first)
        removed_version = first
    else:
        # ...and a removal event that arrives late, after the object was written again (no versions here)
        current = first
    before = get_document(stack, GUIDE_KEY)
    assert before is not None and before["version"] == current
    # When the removal event arrives
    assert stack.ingest(recorded_notification("sqs_s3_delete.json", GUIDE_KEY, version_id=removed_version)) == (
        NO_FAILURES
    )
    # Then the document of the object the bucket still holds is untouched
    assert get_document(stack, GUIDE_KEY) == before
    assert found(stack, "heron", ALICE) == ["birds/heron guide.md"]


def test_replaying_the_old_created_event_after_an_api_delete_keeps_the_document_deleted(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a document uploaded and ingested, then deleted through the API
    doc_id = stack.upload_and_ingest(ALICE, "birds/heron guide.md", GUIDE)
    assert found(stack, "zanzibar", ALICE) == ["birds/heron guide.md"]
    status, _ = stack.api("DELETE", f"/v1/documents/{doc_id}", identity=ALICE)
    assert status == 204
    capsys.readouterr()
    # When SQS redelivers the upload's old ObjectCreated event, twice
    for _ in range(2):
        assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    # Then the document stays deleted: no record, no listing, no chunk, and nothing failed
    assert get_document(stack, GUIDE_KEY) is None
    assert listed(stack, ALICE) == []
    assert found(stack, "zanzibar heron", ALICE) == []
    output = Output.parse(capsys.readouterr().out)
    assert output.metric("IngestFailures") == [] and output.metric("DocumentsIndexed") == []
    # And uploading it again afterwards brings it back as a new document
    assert stack.upload_and_ingest(ALICE, "birds/heron guide.md", GUIDE) == doc_id
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "INDEXED"
    assert found(stack, "zanzibar", ALICE) == ["birds/heron guide.md"]


# --- transient failures, retries and the DLQ --------------------------------------------------------------


def test_a_transient_embedding_failure_fails_only_its_record_and_a_redelivery_indexes_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two new documents, and an embedding service that throttles the first call
    other = "tenants/acme/otters.md"
    stack.put_object(GUIDE_KEY, GUIDE)
    stack.put_object(other, b"# Otters\n\nOtters float on their backs.\n")
    failed_calls = failing_embedder(monkeypatch, times=1)
    event = sqs_event(created(GUIDE_KEY), created(other))
    # When their batch is processed
    response = invoke(stack, event)
    # Then only the first record goes back to the queue; the document says why it is not searchable
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    assert len(failed_calls) == 1
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "FAILED" and document["chunk_count"] == 0
    assert document["error"].startswith("EMBEDDING_SERVICE_ERROR: ")
    assert status_of(stack, other) == "INDEXED"
    assert "birds/heron guide.md" not in found(stack, "heron", ALICE)
    # When SQS redelivers the failed record
    assert invoke(stack, {"Records": [event["Records"][0]]}) == NO_FAILURES
    # Then it is indexed and the failure is cleared
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "INDEXED" and document["error"] is None
    assert found(stack, "heron", ALICE)[0] == "birds/heron guide.md"


def searched_texts(stack: Stack, query: str) -> list[str]:
    status, body = stack.api("POST", "/v1/search", body={"query": query}, identity=ALICE)
    assert status == 200, body
    return [hit["chunk"]["text"] for hit in body["hits"]]


def test_an_invocation_short_of_time_defers_the_document_and_its_redelivery_indexes_it(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given version 1 of a document indexed, and version 2 written
    stack.put_object(GUIDE_KEY, GUIDE)
    assert invoke(stack, sqs_event(created(GUIDE_KEY))) == NO_FAILURES
    stack.put_object(GUIDE_KEY, GUIDE.replace(b"zanzibar", b"okavango"))
    event = sqs_event(created(GUIDE_KEY))
    capsys.readouterr()

    # When an invocation with less time left than the index write needs gets it
    response = stack.handler("ingest")(event, LambdaContext(timeout_s=5.5))

    # Then its record goes back to the queue, counted as deferred, not failed; version 1 stays searchable
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    output = Output.parse(capsys.readouterr().out)
    assert output.metric("IngestDeferrals") == [1.0] and output.metric("IngestFailures") == []
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "PENDING" and document["error"] is None
    [text] = searched_texts(stack, "heron reedbeds")
    assert "zanzibar" in text

    # When SQS redelivers it to an invocation with time enough / Then version 2 is indexed
    assert invoke(stack, event) == NO_FAILURES
    assert status_of(stack, GUIDE_KEY) == "INDEXED"
    [text] = searched_texts(stack, "heron reedbeds")
    assert "okavango" in text and "zanzibar" not in text


@pytest.mark.parametrize("stack", ["aws-double"], indirect=True)
@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (429, "rejected_execution_exception", "THROTTLED"),
        (503, "unavailable_shards_exception", "SEARCH_BACKEND_ERROR"),
    ],
)
def test_opensearch_failing_the_bulk_write_fails_only_that_record_until_a_redelivery(
    stack: Stack, opensearch: FakeOpenSearch, status: int, kind: str, code: str
) -> None:
    # Given two new documents, and OpenSearch answering the next bulk write with `status` (opensearch-py
    # retries a 503 itself, max_retries=3 by default: the fault outlasts those retries)
    other = "tenants/acme/otters.md"
    stack.put_object(GUIDE_KEY, GUIDE)
    stack.put_object(other, b"# Otters\n\nOtters float on their backs.\n")
    attempts = 1 if status == 429 else 4
    for _ in range(attempts):
        opensearch.fail_next_request(status, kind, path="_bulk")
    event = sqs_event(created(GUIDE_KEY), created(other))
    # When their batch is processed
    response = invoke(stack, event)
    # Then the record whose write failed goes back to the queue, the other does not
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    bulk_writes = [path for _, path, _, _ in opensearch.requests if path.endswith("/_bulk")]
    assert len(bulk_writes) == attempts + 1  # every injected answer was used, then the other document's write
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "FAILED" and document["error"].startswith(f"{code}: ")
    assert status_of(stack, other) == "INDEXED"
    assert doc_id_of(GUIDE_KEY) not in stack.indexed_doc_ids()
    # When SQS redelivers it, with OpenSearch healthy again
    assert invoke(stack, {"Records": [event["Records"][0]]}) == NO_FAILURES
    # Then it is indexed
    assert status_of(stack, GUIDE_KEY) == "INDEXED"
    assert found(stack, "heron", ALICE)[0] == "birds/heron guide.md"


@pytest.mark.parametrize("stack", ["aws"], indirect=True)
def test_a_message_that_keeps_failing_moves_to_the_dlq_after_three_receives(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the ingest queue with a redrive policy to a DLQ, and the bucket notifying it (moto sends the
    # notifications itself, including the s3:TestEvent that configuring them triggers)
    sqs = boto3.client("sqs", region_name="us-east-1")
    dlq_url = sqs.create_queue(QueueName="citewise-ingest-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})
    queue_url = sqs.create_queue(QueueName="citewise-ingest", Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack.s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": queue_arn,
                    "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "tenants/"}]}},
                }
            ]
        },
    )
    # ...a document whose embedding always fails, and a healthy one
    failing_embedder(monkeypatch, times=None, marker="poison")
    poisoned = "tenants/acme/poison.md"
    stack.put_object(poisoned, b"# Poison\n\nThis poison document can never be embedded.\n")
    stack.put_object(GUIDE_KEY, GUIDE)
    # When the queue is polled as the Lambda event source mapping does: receive a batch, invoke the
    # function, delete what it did not report as failed
    receive_counts: list[str] = []
    for _ in range(10):
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            break
        event = lambda_sqs_event(messages, queue_arn)
        failed = {item["itemIdentifier"] for item in invoke(stack, event)["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] in failed:
                receive_counts.append(message["Attributes"]["ApproximateReceiveCount"])
            else:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    # Then the failing message was received three times, then SQS moved it to the DLQ
    assert receive_counts == ["1", "2", "3"]
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert len(dead) == 1
    [record] = json.loads(dead[0]["Body"])["Records"]
    # (moto URL-encodes the `/` of a key too, which S3 does not; decoding covers both)
    assert record["eventName"] == "ObjectCreated:Put" and unquote_plus(record["s3"]["object"]["key"]) == poisoned
    # The document shows FAILED with the reason; the test event and the healthy document were consumed
    document = get_document(stack, poisoned)
    assert document is not None and document["status"] == "FAILED"
    assert document["error"].startswith("EMBEDDING_SERVICE_ERROR: ")
    assert status_of(stack, GUIDE_KEY) == "INDEXED"


# --- metrics and logs -------------------------------------------------------------------------------------


def test_metrics_go_out_as_emf_in_the_citewise_namespace_and_logs_carry_no_document_text(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = b"# Merger memo\n\nThe quokka merger closes on the fourteenth under codename bluefin.\n"
    # Given a document, ingested
    stack.put_object("tenants/acme/memo.md", secret)
    capsys.readouterr()
    assert stack.ingest(created("tenants/acme/memo.md")) == NO_FAILURES
    indexed = Output.parse(capsys.readouterr().out)
    # Then its invocation emitted the indexing metrics in namespace Citewise, and a structured log line
    document = get_document(stack, "tenants/acme/memo.md")
    assert document is not None and document["status"] == "INDEXED"
    chunk_count = document["chunk_count"]
    assert indexed.metric("DocumentsIndexed") == [1.0] and indexed.metric("ChunksIndexed") == [float(chunk_count)]
    assert indexed.namespaces("DocumentsIndexed") == indexed.namespaces("ChunksIndexed") == {"Citewise"}
    assert indexed.metric("IngestFailures") == []
    [line] = indexed.messages("document ingested")
    assert line["tenant_id"] == "acme" and line["outcome"] == "new" and line["function_request_id"]
    # Given a document whose ingestion fails transiently
    stack.put_object("tenants/acme/memo2.md", secret.replace(b"Merger", b"Second"))
    failing_embedder(monkeypatch, times=1)
    capsys.readouterr()
    event = sqs_event(created("tenants/acme/memo2.md"))
    # (a batch whose every record failed is still an answer that lists them, not a function error)
    assert invoke(stack, event) == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    failed = Output.parse(capsys.readouterr().out)
    # Then that invocation counted the failure, also in Citewise
    assert failed.metric("IngestFailures") == [1.0] and failed.namespaces("IngestFailures") == {"Citewise"}
    assert failed.metric("DocumentsIndexed") == []
    # And logged which object failed and why
    [warning] = failed.messages("ingest failed, to be retried")
    assert warning["key"] == "tenants/acme/memo2.md" and "EmbeddingServiceError" in warning["error"]
    # And neither invocation wrote any of the document's text to stdout
    for output in (indexed, failed):
        assert output.logs and output.metrics
        for phrase in ("quokka", "bluefin", "fourteenth", "Merger memo"):
            assert phrase not in output.text


def test_an_object_that_cannot_be_read_as_a_document_is_recorded_failed_not_dropped(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an indexed document whose sidecar is then replaced by malformed JSON
    stack.put_object(GUIDE_KEY, GUIDE)
    assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    stack.put_object(GUIDE_KEY + ".metadata.json", b"{not json", content_type="application/json")
    # When the sidecar's notification is processed
    assert stack.ingest(created(GUIDE_KEY + ".metadata.json")) == NO_FAILURES
    # Then the document is FAILED with the reason (no retry can fix it) and its old chunks are gone
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "FAILED" and "VALIDATION_ERROR" in document["error"]
    status, body = stack.api("POST", "/v1/search", body={"query": "zanzibar reedbeds"}, identity=ALICE)
    assert status == 200 and body["hits"] == []


def test_an_object_over_the_size_limit_is_recorded_failed_without_retries(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given functions limited to 100-byte documents and a larger object written straight to the store
    stack.put_object("tenants/acme/big.md", b"# Big\n\n" + b"words " * 100)
    monkeypatch.setenv("CITEWISE_MAX_DOCUMENT_BYTES", "100")
    stack.handlers.clear()
    # When its notification is processed, the record is done (no redelivery) and the document says why
    assert stack.ingest(created("tenants/acme/big.md")) == NO_FAILURES
    document = get_document(stack, "tenants/acme/big.md")
    assert document is not None and document["status"] == "FAILED"
    assert document["error"].startswith("PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize(
    ("attributes", "reason"),
    [
        ({f"k{n}": n for n in range(51)}, "at most 50 metadata attributes; this one has 51"),
        ({"regions": [f"r{n}" for n in range(101)]}, "'regions' is a list of 101 values; at most 100"),
        ({"summary": "x" * 2049}, "'summary' has a value longer than 2048 characters"),
        ({"version": "latest"}, "metadata 'version' is not a version: 'latest'"),
        ({"deprecated_in": 3.10}, "metadata 'deprecated_in' must be a version string (write it as a string"),
    ],
    ids=["too many keys", "too long a list", "too long a value", "a version that is none", "a version as a number"],
)
def test_a_document_over_the_attribute_caps_is_failed_with_the_reason(
    stack: Stack, attributes: dict[str, object], reason: str
) -> None:
    # Given a document whose sidecar exceeds one of the caps
    sidecar = json.dumps({"metadataAttributes": attributes}).encode()
    stack.put_object(GUIDE_KEY + ".metadata.json", sidecar, content_type="application/json")
    stack.put_object(GUIDE_KEY, GUIDE)
    # When it is ingested / Then it is FAILED naming the cap, and nothing of it is searchable
    assert stack.ingest(created(GUIDE_KEY)) == NO_FAILURES
    document = get_document(stack, GUIDE_KEY)
    assert document is not None and document["status"] == "FAILED" and reason in document["error"]
    status, body = stack.api("POST", "/v1/search", body={"query": "zanzibar reedbeds"}, identity=ALICE)
    assert status == 200 and body["hits"] == []
