"""Delayed stale-chunk sweeps: the message format, and the SQS scheduler against botocore's own model."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from citewise.aws.sqs_sweeps import DELAY_SECONDS, SqsSweepScheduler
from citewise.domain.errors import SearchBackendError, ThrottledError, ValidationError
from citewise.ports.sweeps import MESSAGE_TYPE, StaleSweep, parse_sweep, sweep_message

QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/citewise-ingest"
SWEEP = StaleSweep(tenant_id="acme", doc_id="d1", before="01795563539842000000-0a1b2c3d4e5f6071")


def test_a_sweep_survives_its_message_and_other_bodies_are_not_sweeps() -> None:
    assert parse_sweep(sweep_message(SWEEP)) == SWEEP
    assert parse_sweep(json.dumps({"Records": []})) is None  # an S3 notification
    assert parse_sweep("not json") is None  # left to the notification parser to report


@pytest.mark.parametrize(
    "fields",
    [
        {"tenant_id": "acme", "doc_id": "d1"},
        {**SWEEP.model_dump(), "before": "../x"},
        {**SWEEP.model_dump(), "extra": 1},
    ],
)
def test_a_malformed_sweep_message_is_a_validation_error(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="malformed stale-sweep message"):
        parse_sweep(json.dumps({"type": MESSAGE_TYPE, **fields}))


def stubbed() -> tuple[SqsSweepScheduler, Stubber]:
    client = boto3.client("sqs", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    return SqsSweepScheduler(QUEUE_URL, client=client), Stubber(client)


def test_the_scheduler_sends_the_sweep_delayed_to_the_queue() -> None:
    scheduler, stub = stubbed()
    expected = {"QueueUrl": QUEUE_URL, "MessageBody": sweep_message(SWEEP), "DelaySeconds": DELAY_SECONDS}
    stub.add_response("send_message", {"MessageId": "m1", "MD5OfMessageBody": "x"}, expected)
    with stub:
        scheduler.schedule(SWEEP)
    stub.assert_no_pending_responses()
    assert 60 < DELAY_SECONDS <= 900  # past the ~60 s refresh window, within SQS's limit


@pytest.mark.parametrize(
    ("code", "error"), [("RequestThrottled", ThrottledError), ("KmsAccessDenied", SearchBackendError)]
)
def test_a_failed_send_is_a_citewise_error_so_the_record_is_retried(code: str, error: type[Exception]) -> None:
    scheduler, stub = stubbed()
    stub.add_client_error("send_message", service_error_code=code, http_status_code=400)
    with stub, pytest.raises(error):
        scheduler.schedule(SWEEP)


def test_the_delay_is_bounded_by_what_sqs_allows() -> None:
    with pytest.raises(ValueError, match="0 to 900"):
        SqsSweepScheduler(QUEUE_URL, client=object(), delay_seconds=901)
