"""The IngestQueue port: hand a stored object back to ingestion, as if it had just been uploaded.

What the operator's re-queue of quota-refused documents (`citewise.ingest.requeue`) sends each document
to. On AWS the ingest queue itself (`citewise.aws.sqs_requeue`): the message is the S3 notification the
bucket would send for the object (`notification`), so the ingest function takes it as any upload, and
reads the object as it is now. Locally the pipeline is called at once (`DirectIngestQueue`).
"""

from __future__ import annotations

import json
from typing import Protocol
from urllib.parse import quote_plus

from citewise.ports.blobstore import object_key


class IngestQueue(Protocol):
    """Where a tenant's stored object is sent to be ingested again."""

    def requeue(self, tenant_id: str, path: str) -> None:
        """Have the object at `path` of `tenant_id` ingested again (now or soon)."""
        ...


def notification(bucket: str, tenant_id: str, path: str) -> str:
    """An S3 `ObjectCreated:Put` notification body for the object, as far as the ingest reads one (event
    name, bucket, URL-encoded key): `citewise.ingest.s3events.parse_notification` takes it like S3's."""
    key = quote_plus(object_key(tenant_id, path), safe="/")
    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": {"key": key}},
    }
    return json.dumps({"Records": [record]})
