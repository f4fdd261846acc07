"""The refresh queue: each message one batch of a source's refresh, run by the refresh function.

A run's whole state is in the source registry (the pages visited, the counts, the lease), so a message
carries only "continue run R of source S of tenant T": the function works until its time budget is
nearly spent and sends the message again (the erasure job's pattern, `citewise.aws.sqs_erasure`). A
source's pages are visited one after another, not in parallel batches: politeness allows one or two
connections per host anyway, and one worker per run needs no coordination beyond the lease. A stale or
repeated message finds the run gone and does nothing.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError as ModelError

from citewise.aws import clients
from citewise.domain.errors import CitewiseError, ValidationError
from citewise.ports.sources import RefreshMessage

MAX_DELAY_SECONDS = 900  # SQS's DelaySeconds limit


class SqsRefreshQueue:
    """A `RefreshQueue` on the refresh function's SQS queue."""

    def __init__(self, queue_url: str, *, client: Any) -> None:
        self._queue_url = queue_url
        self._client = client

    def send(self, message: RefreshMessage, *, delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=message.model_dump_json(),
                DelaySeconds=min(max(delay_seconds, 0), MAX_DELAY_SECONDS),
            )
        except (ClientError, BotoCoreError) as exc:
            raise clients.translate(exc, CitewiseError, "queue the source's refresh") from exc


def parse_refresh(body: str) -> RefreshMessage:
    """The run a message continues; ValidationError for any other body (it can never succeed)."""
    try:
        return RefreshMessage.model_validate_json(body)
    except ModelError as exc:
        raise ValidationError("not a refresh message") from exc
