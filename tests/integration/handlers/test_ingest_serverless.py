"""The ingest function on a Serverless collection whose writes become searchable late: a document replaced
inside the refresh window keeps the older chunks until the delayed sweep the function queued for itself
(an SQS message held back by DelaySeconds) arrives; meanwhile readers never see the older text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

from citewise.aws.sqs_sweeps import DELAY_SECONDS
from citewise.ports.sweeps import MESSAGE_TYPE
from tests.doubles.opensearch_server import FakeOpenSearch
from tests.integration.handlers.conftest import QUEUE, aws_stack
from tests.integration.handlers.harness import Stack, claims, s3_notification

ALICE = claims("acme", "alice")
KEY = "tenants/acme/spices.md"
QUEUE_URL = f"https://sqs.us-east-1.amazonaws.com/{DEFAULT_ACCOUNT_ID}/{QUEUE}"
REFRESH_INTERVAL = 2.0  # seconds: long enough for two ingests to fit inside it


@pytest.fixture
def serverless(powertools: None, aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    fake = FakeOpenSearch(serverless=True, refresh_interval=REFRESH_INTERVAL)
    with aws_stack(monkeypatch, fake, OPENSEARCH_SERVICE="aoss", SWEEP_QUEUE_URL=QUEUE_URL) as stack:
        assert boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=QUEUE)["QueueUrl"] == QUEUE_URL
        yield stack


def held_back_messages() -> list[tuple[dict[str, Any], float]]:
    """The queue's messages (body, seconds until deliverable): SQS does not hand out delayed ones yet."""
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[QUEUE]
    return [(json.loads(m.body), m.delayed_until / 1000 - time.time()) for m in queue._messages]


def ingest(stack: Stack, text: str) -> None:
    stack.put_object(KEY, text.encode())
    assert stack.ingest(s3_notification("ObjectCreated:Put", KEY)) == {"batchItemFailures": []}


def search(stack: Stack, query: str) -> list[str]:
    status, body = stack.api("POST", "/v1/search", body={"query": query}, identity=ALICE)
    assert status == 200, body
    return [hit["chunk"]["text"] for hit in body["hits"]]


def stored_texts(stack: Stack) -> list[str]:
    assert stack.opensearch is not None
    return sorted(
        source["chunk"]["text"] for index in stack.opensearch.indices.values() for source in index.live.values()
    )


def test_a_replace_inside_the_refresh_window_is_swept_by_a_delayed_message_to_the_ingest_queue(
    serverless: Stack,
) -> None:
    # Given a document written, then replaced before its first version became searchable
    ingest(serverless, "# Spices\n\nCardamom pods from Kerala.\n")
    ingest(serverless, "# Spices\n\nSaffron threads from Iran.\n")

    # Then both versions are stored (the replace's own sweep saw nothing of the first)
    assert len(stored_texts(serverless)) == 2
    # and each ingest queued a sweep for later, held back by DelaySeconds (SQS does not deliver it yet)
    queued = held_back_messages()
    assert [body["type"] for body, _ in queued] == [MESSAGE_TYPE] * 2
    assert all(DELAY_SECONDS - 5 < wait <= DELAY_SECONDS for _, wait in queued)
    sqs = boto3.client("sqs", region_name="us-east-1")
    assert "Messages" not in sqs.receive_message(QueueUrl=QUEUE_URL, WaitTimeSeconds=0)

    # When both versions are searchable, the older text wins no result slot
    time.sleep(REFRESH_INTERVAL + 0.2)
    for query in ("cardamom Kerala", "saffron"):
        found = search(serverless, query)
        assert len(found) == 1 and "Saffron threads from Iran." in found[0] and "Cardamom" not in found[0]

    # When the delayed messages arrive (as the queue would deliver them after the window)
    answer = serverless.ingest(*(json.dumps(body) for body, _ in queued))

    # Then they succeed, and only the current version is stored
    assert answer == {"batchItemFailures": []}
    (text,) = stored_texts(serverless)
    assert "Saffron" in text


def test_a_malformed_sweep_message_fails_its_record_for_the_dlq(serverless: Stack) -> None:
    # Given a sweep message without a document
    bad = json.dumps({"type": MESSAGE_TYPE, "tenant_id": "acme", "before": "1"})

    # Then its record fails (so it ends in the dead-letter queue), never guessing a document
    answer = serverless.ingest(bad)
    assert len(answer["batchItemFailures"]) == 1
