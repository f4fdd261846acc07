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
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from citewise.runtime.settings import DocumentsSettings, ErasureSettings
from citewise_infra.config import EnvironmentConfig
from citewise_infra.functions import CitewiseFunction, settings_environment
from citewise_infra.ingestion import encrypted_queue, visibility_timeout_s

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
        removal = config.removal
        self.key = key
        self.dead_letter_queue = encrypted_queue(self, "DeadLetterQueue", self.key, RETENTION, removal)
        self.queue = encrypted_queue(
            self,
            "Queue",
            self.key,
            RETENTION,
            removal,
            visibility_timeout=Duration.seconds(visibility_timeout_s(config.erasure.timeout_s, 0)),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES),
        )
        self.queue.grant_consume_messages(function.role)
        for sender, settings in ((function, ErasureSettings), (starter, DocumentsSettings)):
            for name, value in settings_environment(settings, {"erasure_queue_url": self.queue.queue_url}).items():
                sender.function.add_environment(name, value)
            sender.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
            )
            self.key.grant(sender.role, "kms:GenerateDataKey", "kms:Decrypt")
        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "EventSourceMapping",
            target=function.function,
            event_source_arn=self.queue.queue_arn,
            batch_size=1,
            report_batch_item_failures=True,
        )
