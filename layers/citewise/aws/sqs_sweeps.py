"""Delayed stale-chunk sweeps through SQS: the ingest function sends them to its own queue.

A Serverless vector collection makes writes searchable after a refresh interval AWS documents as up
to about 60 seconds, so the sweep that ends a replace may miss the chunks of a replace a moment
before (`citewise.aws.opensearch`). The sweep is therefore sent again, as a message on the ingest
queue delayed by `DELAY_SECONDS` (SQS holds it back; at most 900 s), and the ingest function runs it
when it arrives (`citewise.runtime.ingest_handler`). Delivery is at least once, and running a sweep
twice is harmless: it only removes chunks older than its generation.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients
from citewise.domain.errors import SearchBackendError
from citewise.ports.sweeps import StaleSweep, sweep_message

DELAY_SECONDS = 180
"""Three refresh windows: the older chunks were written before the replace that schedules the sweep,
so they are searchable well before it runs."""
MAX_DELAY_SECONDS = 900  # SQS's DelaySeconds limit


class SqsSweepScheduler:
    """A `SweepScheduler` that sends each sweep to `queue_url`, delayed by `delay_seconds`."""

    def __init__(self, queue_url: str, *, client: Any, delay_seconds: int = DELAY_SECONDS) -> None:
        if not 0 <= delay_seconds <= MAX_DELAY_SECONDS:
            raise ValueError(f"delay_seconds must be 0 to {MAX_DELAY_SECONDS}")
        self._queue_url = queue_url
        self._client = client
        self._delay = delay_seconds

    def schedule(self, sweep: StaleSweep) -> None:
        """Queue `sweep`. A failure is a SearchBackendError (or THROTTLED): the replace is not finished
        until its later sweep is queued, so the ingest record is retried."""
        try:
            self._client.send_message(
                QueueUrl=self._queue_url, MessageBody=sweep_message(sweep), DelaySeconds=self._delay
            )
        except (ClientError, BotoCoreError) as exc:
            raise clients.translate(exc, SearchBackendError, "queue the delayed stale-chunk sweep") from exc
