"""The recorded S3 notifications in tests/events hold the shape S3 sends, as Powertools' parser models
(`SqsModel`, `S3Model`) define it, and the ingest function reads each as the change it is.

Shapes: "Event message structure" in the Amazon S3 User Guide
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html) and the
event types of "Supported event types for SQS, SNS, and Lambda"
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-event-types-and-destinations.html).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_lambda_powertools.utilities.parser.models import S3Model, S3RecordModel, SqsModel

from citewise.ingest.s3events import parse_notification

EVENTS = Path(__file__).resolve().parents[1] / "events"
NOTIFICATIONS = {
    "sqs_s3_put.json": ("ObjectCreated:Put", "created"),
    "sqs_s3_complete_multipart.json": ("ObjectCreated:CompleteMultipartUpload", "created"),
    "sqs_s3_copy.json": ("ObjectCreated:Copy", "created"),
    "sqs_s3_delete.json": ("ObjectRemoved:Delete", "removed"),
    "sqs_s3_delete_marker.json": ("ObjectRemoved:DeleteMarkerCreated", "removed"),
    "sqs_s3_lifecycle_delete.json": ("LifecycleExpiration:Delete", "removed"),
}


@pytest.mark.parametrize(("name", "expected"), NOTIFICATIONS.items(), ids=list(NOTIFICATIONS))
def test_each_recorded_notification_is_valid_and_read_as_its_change(name: str, expected: tuple[str, str]) -> None:
    event_name, kind = expected
    # Given the recorded SQS event / When Powertools' models parse it / Then it is valid, of its event type
    sqs = SqsModel.model_validate(json.loads((EVENTS / name).read_text(encoding="utf-8")))
    [record] = sqs.Records
    notification = S3Model.model_validate_json(record.body)
    [s3_record] = notification.Records
    assert s3_record.eventName == event_name
    assert s3_record.s3.object.key.startswith("tenants/acme/")
    if kind == "created":
        assert s3_record.s3.object.size is not None and s3_record.s3.object.eTag
    # And citewise reads it as that change of that key
    [event] = parse_notification(record.body)
    assert (event.kind, event.bucket, event.key) == (kind, "citewise-docs", s3_record.s3.object.key)


def test_the_multipart_etag_is_a_part_count_hash_and_a_lifecycle_delete_comes_from_s3() -> None:
    multipart = _record("sqs_s3_complete_multipart.json")
    assert multipart.s3.object.eTag is not None and multipart.s3.object.eTag.endswith("-14")
    lifecycle = _record("sqs_s3_lifecycle_delete.json")
    assert lifecycle.userIdentity.principalId == "s3.amazonaws.com"
    assert lifecycle.s3.object.size is None and lifecycle.s3.object.versionId


def _record(name: str) -> S3RecordModel:
    sqs = SqsModel.model_validate(json.loads((EVENTS / name).read_text(encoding="utf-8")))
    return S3Model.model_validate_json(sqs.Records[0].body).Records[0]
