"""Tenant erasure: the erasure function's queue (with a dead-letter queue), through which the job runs and
re-queues itself until the tenant is erased (`citewise.aws.sqs_erasure` says why a queue, not a state
machine).

The documents function (the operator's `POST /v1/admin/tenants/{id}/erasure`) sends the first message;
the erasure function consumes one message at a time (batch size 1: a run takes the whole invocation) and
sends the next itself. Both may send to this queue only. A run that keeps failing is retried by SQS and,
after `MAX_RECEIVES` receives, parked in the dead-letter queue, whose depth is alarmed.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from constructs import Construct

from citewise.runtime.settings import DocumentsSettings, ErasureSettings
from citewise_infra.config import EnvironmentConfig
from citewise_infra.functions import CitewiseFunction
from citewise_infra.ingestion import work_queue

MAX_RECEIVES = 5
"""Receives of one message before it is parked: a run is idempotent, so retries are safe."""
RETENTION = Duration.days(14)
"""SQS's longest: a parked erasure waits for the operator for as long as it can."""


class Erasure(Construct):
    """The erasure queue, its dead-letter queue, the event source mapping and the senders' grants."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        function: CitewiseFunction,
        starter: CitewiseFunction,
        key: kms.IKey,
    ) -> None:
        """`key` encrypts both queues: the ingest queues' own key (`citewise_infra.ingestion`), so the
        erasure adds no key of its own to pay for and rotate."""
        super().__init__(scope, construct_id)
        self.key = key
        jobs = work_queue(
            self,
            self.key,
            config,
            function,
            ((function, ErasureSettings), (starter, DocumentsSettings)),
            "erasure_queue_url",
            timeout_s=config.erasure.timeout_s,
            retention=RETENTION,
            max_receives=MAX_RECEIVES,
        )
        self.dead_letter_queue, self.queue = jobs.dead_letter_queue, jobs.queue
        self.event_source_mapping = jobs.event_source_mapping
