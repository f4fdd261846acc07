"""Ingestion: S3 notifications -> SQS (with a dead-letter queue) -> the ingest function, in batches.

Every object created or removed under `tenants/` becomes a message; the ingest function reports
failures per record (`ReportBatchItemFailures`), so one bad document is retried alone, and after
`max_receive_count` receives it moves to the dead-letter queue, whose depth is alarmed.

Sizing follows the Lambda guidance for SQS sources: the queue's visibility timeout exceeds six times the
function timeout plus the batching window, so a batch still being retried by Lambda is never handed
out twice. Concurrency is capped on the event source mapping (`max_concurrency`) rather than with
reserved concurrency: the cap keeps the embedding calls under the Bedrock quota without Lambda
throttling the poller (throttled batches would burn receives towards the dead-letter queue), and it
reserves nothing from an account's concurrency pool (a new account may have as little as 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from citewise.runtime.settings import DocumentsSettings, IngestSettings, Settings
from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import DOCUMENTS_PREFIX
from citewise_infra.functions import CitewiseFunction, settings_environment
from citewise_infra.nag import acknowledge
from citewise_infra.storage import Storage

# Visibility headroom beyond 6 x timeout + batching window, for the poller's own delays.
VISIBILITY_MARGIN_S = 30


def encrypted_queue(
    scope: Construct, construct_id: str, key: kms.IKey, retention: Duration, removal: RemovalPolicy, **options: Any
) -> sqs.Queue:
    """A queue encrypted with `key`, refusing plain HTTP, keeping messages `retention`: every queue of the
    stack (the ingest and erasure queues and their dead-letter queues); `options` are the queue's own."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=retention,
        removal_policy=removal,
        **options,
    )


def visibility_timeout_s(timeout_s: int, batching_window_s: int) -> int:
    """The queue visibility timeout for a function timeout and batching window (both in seconds)."""
    return 6 * timeout_s + batching_window_s + VISIBILITY_MARGIN_S


@dataclass(frozen=True)
class WorkQueue:
    """A function's own job queue (`work_queue`): its dead-letter queue, the queue, and their mapping."""

    dead_letter_queue: sqs.Queue
    queue: sqs.Queue
    event_source_mapping: lambda_.EventSourceMapping


def work_queue(
    scope: Construct,
    key: kms.IKey,
    config: EnvironmentConfig,
    worker: CitewiseFunction,
    senders: Sequence[tuple[CitewiseFunction, type[Settings]]],
    url_setting: str,
    *,
    timeout_s: int,
    retention: Duration,
    max_receives: int,
) -> WorkQueue:
    """The queue of a job that outlives one invocation (an erasure, a refresh): one message at a time to
    `worker`, which re-queues what is left; after `max_receives` a message is parked in the dead-letter
    queue. Each sender (the worker itself, and the function that starts the job) is told the queue's URL
    in `url_setting` of its settings class and may send to it."""
    dead_letters = encrypted_queue(scope, "DeadLetterQueue", key, retention, config.removal)
    queue = encrypted_queue(
        scope,
        "Queue",
        key,
        retention,
        config.removal,
        visibility_timeout=Duration.seconds(visibility_timeout_s(timeout_s, 0)),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=max_receives),
    )
    queue.grant_consume_messages(worker.role)
    for sender, settings in senders:
        for name, value in settings_environment(settings, {url_setting: queue.queue_url}).items():
            sender.function.add_environment(name, value)
        sender.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        key.grant(sender.role, "kms:GenerateDataKey", "kms:Decrypt")
    mapping = lambda_.EventSourceMapping(
        scope,
        "EventSourceMapping",
        target=worker.function,
        event_source_arn=queue.queue_arn,
        batch_size=1,
        report_batch_item_failures=True,
    )
    return WorkQueue(dead_letters, queue, mapping)


class Ingestion(Construct):
    """The ingest queue, its dead-letter queue, the bucket notifications and the event source mapping."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        storage: Storage,
        function: CitewiseFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        removal = config.removal
        retention = Duration.days(config.data.queue_retention_days)
        # The queues' own key: S3 must be allowed to encrypt notifications with it, for this bucket only
        # (a condition naming the bucket). On the bucket's key that grant would make the key depend on
        # the bucket that depends on the key, a cycle CloudFormation refuses.
        self.key = kms.Key(
            self,
            "QueueKey",
            description=f"citewise {config.name}: ingest queue and dead-letter queue",
            enable_key_rotation=True,
            removal_policy=removal,
            pending_window=Duration.days(7 if config.destroy_on_delete else 30),
        )
        self.dead_letter_queue = encrypted_queue(self, "DeadLetterQueue", self.key, retention, removal)
        ingest = config.ingest
        self.queue = encrypted_queue(
            self,
            "Queue",
            self.key,
            retention,
            removal,
            visibility_timeout=Duration.seconds(visibility_timeout_s(ingest.timeout_s, ingest.max_batching_window_s)),
            receive_message_wait_time=Duration.seconds(20),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=ingest.max_receive_count
            ),
        )
        destination = s3n.SqsDestination(self.queue)
        prefix = s3.NotificationKeyFilter(prefix=DOCUMENTS_PREFIX)
        storage.bucket.add_event_notification(s3.EventType.OBJECT_CREATED, destination, prefix)
        storage.bucket.add_event_notification(s3.EventType.OBJECT_REMOVED, destination, prefix)
        # An expiration rule (an operator's, or the versions rule) removes objects without an ObjectRemoved event.
        storage.bucket.add_event_notification(s3.EventType.LIFECYCLE_EXPIRATION, destination, prefix)
        self._acknowledge_notifications_handler()
        self.queue.grant_consume_messages(function.role)
        if config.search.mode == "serverless":
            self._deliver_delayed_sweeps(function)
        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "EventSourceMapping",
            target=function.function,
            event_source_arn=self.queue.queue_arn,
            batch_size=ingest.batch_size,
            max_batching_window=Duration.seconds(ingest.max_batching_window_s),
            report_batch_item_failures=True,
            max_concurrency=ingest.max_concurrency,
        )

    def _deliver_delayed_sweeps(self, function: CitewiseFunction) -> None:
        """A Serverless collection's delayed stale-chunk sweeps (`citewise.aws.sqs_sweeps`): the ingest
        function sends them to its own queue. SendMessage on that queue only, and the queue key's
        GenerateDataKey/Decrypt that sending to an encrypted queue needs (the key is the queues' own)."""
        for name, value in settings_environment(IngestSettings, {"sweep_queue_url": self.queue.queue_url}).items():
            function.function.add_environment(name, value)
        function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        self.key.grant(function.role, "kms:GenerateDataKey", "kms:Decrypt")

    def accept_requeues(self, function: CitewiseFunction) -> None:
        """The operator's re-queue of quota-refused documents (`citewise.ingest.requeue`): `function` (the
        documents function) sends their notifications to the ingest queue. SendMessage on that queue only,
        and the queue key's GenerateDataKey/Decrypt that sending to an encrypted queue needs."""
        for name, value in settings_environment(DocumentsSettings, {"ingest_queue_url": self.queue.queue_url}).items():
            function.function.add_environment(name, value)
        function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        self.key.grant(function.role, "kms:GenerateDataKey", "kms:Decrypt")

    def _acknowledge_notifications_handler(self) -> None:
        # CDK manages bucket notifications with one singleton function per stack.
        handler = next(
            child for child in Stack.of(self).node.children if child.node.id.startswith("BucketNotificationsHandler")
        )
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's bucket-notifications handler (it sets the bucket's notification configuration at deploy "
            "time) uses the AWS managed basic execution policy for its logs; it is aws-cdk-lib's code.",
        )
