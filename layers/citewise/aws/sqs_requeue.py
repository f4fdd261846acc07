"""The IngestQueue on SQS: a re-queued document is an S3 notification sent to the ingest queue."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients
from citewise.domain.errors import CitewiseError
from citewise.ports.requeue import notification


class SqsIngestQueue:
    """An `IngestQueue` sending to the ingest queue `queue_url` the notification of an object of `bucket`."""

    def __init__(self, queue_url: str, bucket: str, *, client: Any) -> None:
        self._queue_url = queue_url
        self._bucket = bucket
        self._client = client

    def requeue(self, tenant_id: str, path: str) -> None:
        try:
            self._client.send_message(QueueUrl=self._queue_url, MessageBody=notification(self._bucket, tenant_id, path))
        except (ClientError, BotoCoreError) as exc:
            raise clients.translate(exc, CitewiseError, "SQS SendMessage to the ingest queue") from exc
