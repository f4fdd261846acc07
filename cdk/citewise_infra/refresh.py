"""Web sources' refreshes (issue 31): the refresh function's queue (with a dead-letter queue) and the
schedule that starts what is due.

One schedule for every source, not one per source: EventBridge Scheduler invokes the refresh function
every `SCHEDULE_MINUTES`, and the function starts a run for each source whose `next_refresh_at` has come
(one Query of the registry table's `#sources-due` partition). A schedule per source would need the
documents function to create, update and delete schedules (and their role) on every registration and
removal, a second place where a source's interval lives that can drift from the registry, and a
quota (1 million schedules per account and region) shared with everything else; the price of one
schedule is that a refresh starts up to `SCHEDULE_MINUTES` late, which a refresh interval counted in
hours does not notice.

A run is a chain of messages on the queue (`citewise.aws.sqs_refresh`): the documents function sends the
first of a refresh asked for now, the function sends the first of a due one and each continuation; it
consumes one message at a time (batch size 1: a run takes the whole invocation). A run that keeps failing
is parked in the dead-letter queue after `MAX_RECEIVES` receives, its depth alarmed; its lease then
lapses and the next tick starts a new run.
"""

from __future__ import annotations

import json

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from citewise.runtime.refresh_handler import SCHEDULE_EVENT
from citewise.runtime.settings import DocumentsSettings, RefreshSettings
from citewise_infra.config import EnvironmentConfig
from citewise_infra.functions import CitewiseFunction
from citewise_infra.ingestion import work_queue

SCHEDULE_MINUTES = 15
"""How often the schedule looks for due sources."""
MAX_RECEIVES = 3
"""Receives of one message before it is parked: a run continues from its saved state, so a retry is safe."""
RETENTION = Duration.days(4)


class SourceRefresh(Construct):
    """The refresh queue, its dead-letter queue, the event source mapping, the schedule and the senders'
    grants."""

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
        """`key` encrypts both queues: the ingest queues' own key, as the erasure queues'."""
        super().__init__(scope, construct_id)
        jobs = work_queue(
            self,
            key,
            config,
            function,
            ((function, RefreshSettings), (starter, DocumentsSettings)),
            "refresh_queue_url",
            timeout_s=config.refresh.timeout_s,
            retention=RETENTION,
            max_receives=MAX_RECEIVES,
        )
        self.dead_letter_queue, self.queue = jobs.dead_letter_queue, jobs.queue
        self.event_source_mapping = jobs.event_source_mapping
        self.schedule = self._build_schedule(function)

    def _build_schedule(self, function: CitewiseFunction) -> scheduler.CfnSchedule:
        """EventBridge Scheduler invoking the function every SCHEDULE_MINUTES, with a role that may invoke
        that function only."""
        role = iam.Role(
            self,
            "ScheduleRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="citewise: the refresh schedule invokes the refresh function, nothing else",
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[function.function.function_arn])
        )
        return scheduler.CfnSchedule(
            self,
            "Schedule",
            schedule_expression=f"rate({SCHEDULE_MINUTES} minutes)",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=function.function.function_arn,
                role_arn=role.role_arn,
                input=json.dumps({"type": SCHEDULE_EVENT}),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_event_age_in_seconds=SCHEDULE_MINUTES * 60, maximum_retry_attempts=2
                ),
            ),
            description="citewise: start the refreshes of the web sources that are due",
        )
