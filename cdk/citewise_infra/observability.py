"""Observability: one dashboard and the alarms an operator must hear about, sent to one SNS topic.

Alarms, and why each one:
- documents in the dead-letter queue (any): those documents are not searchable until someone acts;
- the oldest ingest message older than `ingest_queue_age_s`: ingestion is stuck or too slow;
- Lambda errors of each function (any): a crash or timeout, not a handled bad request;
- Lambda throttles of each function (any): a concurrency limit is hit;
- API 5XX responses (5 in 5 minutes): what callers see of query and documents failures, including
  those the handlers turn into an error body;
- p99 latency of the API and of the query pipeline (`QueryLatency`) above their thresholds for 15 min;
- any audit record the API functions could not write (`AuditWriteFailures`, summed over the three);
- on a managed domain: cluster status red (and yellow when it has more than one data node: a one-node
  domain places no replica anywhere), writes blocked, free storage under a quarter of the volume, JVM
  memory pressure at 95% for 3 minutes, and the KMS key erroring or inaccessible (the domain then
  cannot read its data), as in the OpenSearch Service's recommended alarms.
Missing data is never an alarm: an idle environment stays green.

Logs: every log group has the environment's retention. The stack's functions and the API's access log
have theirs; so do the functions CDK adds for itself (the bucket-notifications handler, dev's
auto-delete-objects provider), which would otherwise log to a group Lambda creates without one: each
gets a log group of its own through its `LoggingConfig`.

The topic: `enforce_ssl` gives it a topic policy, which replaces SNS's default one, so the policy itself
must allow CloudWatch alarms of this account to publish; the key policy lets CloudWatch encrypt for the
topic. An environment with `alarms.require_subscriber` (prod) refuses to synthesize without an address.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnResource, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from citewise_infra.api import Api
from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import AUDIT_FAILURES, INGEST_METRICS, METRICS_NAMESPACE, QUERY_METRICS, SERVICE_NAMES
from citewise_infra.erasure import Erasure
from citewise_infra.functions import CitewiseFunction, Functions
from citewise_infra.ingestion import Ingestion
from citewise_infra.refresh import SourceRefresh
from citewise_infra.search import ManagedSearch, SearchBackend
from citewise_infra.vectors import VectorStore

PERIOD = Duration.minutes(5)


def custom_metric(name: str, service: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """A metric the handlers emit through Powertools (namespace Citewise, dimension `service`)."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=PERIOD,
    )


class Observability(Construct):
    """The alarm topic, the alarms and the dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        key: kms.Key,
        functions: Functions,
        ingestion: Ingestion,
        erasure: Erasure,
        refresh: SourceRefresh,
        api: Api,
        search: SearchBackend | VectorStore,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._functions = functions
        self.topic = self._build_topic(key)
        self.alarms: list[cloudwatch.Alarm] = []
        self._build_ingestion_alarms(ingestion)
        self._alarm(
            "ErasureDeadLetterQueueDepth",
            erasure.dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            threshold=1,
            description="a tenant's erasure failed repeatedly: it stays ERASING until it is sent again",
        )
        self._alarm(
            "RefreshDeadLetterQueueDepth",
            refresh.dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            threshold=1,
            description="a web source's refresh failed repeatedly: the next tick starts it again once its lease ends",
        )
        self._build_function_alarms()
        self._build_api_alarms(api)
        if isinstance(search, ManagedSearch):
            self._build_domain_alarms(search)
        self.dashboard = self._build_dashboard(ingestion, api, search)
        self._retain_helper_logs()

    def _build_topic(self, key: kms.Key) -> sns.Topic:
        topic = sns.Topic(
            self, "AlarmTopic", display_name=f"citewise {self._config.name} alarms", master_key=key, enforce_ssl=True
        )
        # CloudWatch publishes alarm notifications to the encrypted topic with a data key of this key
        # (the key policy statement the CloudWatch documentation prescribes for encrypted topics).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        # CloudWatch alarms of this account only (the confused-deputy conditions SNS documents).
        stack = Stack.of(self)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
                    },
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        if self._config.alarms.email is not None:
            topic.add_subscription(subscriptions.EmailSubscription(self._config.alarms.email))
        return topic

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            comparison_operator=comparison,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"citewise {self._config.name}: {description}",
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        return alarm

    def _build_ingestion_alarms(self, ingestion: Ingestion) -> None:
        self._alarm(
            "DeadLetterQueueDepth",
            ingestion.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Maximum"
            ),
            threshold=1,
            description="documents failed ingestion repeatedly and wait in the dead-letter queue",
        )
        self._alarm(
            "IngestQueueAge",
            ingestion.queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
            threshold=self._config.alarms.ingest_queue_age_s,
            description="the oldest ingest message is older than the threshold: ingestion is stuck or slow",
        )

    def _build_function_alarms(self) -> None:
        for fn in self._all_functions():
            name = fn.key.capitalize()
            self._alarm(
                f"{name}Errors",
                fn.function.metric_errors(period=PERIOD, statistic="Sum"),
                threshold=1,
                description=f"the {fn.key} function failed (crash or timeout)",
            )
            self._alarm(
                f"{name}Throttles",
                fn.function.metric_throttles(period=PERIOD, statistic="Sum"),
                threshold=1,
                description=f"the {fn.key} function was throttled",
            )

    def _build_api_alarms(self, api: Api) -> None:
        stage = api.rest_api.deployment_stage
        alarms = self._config.alarms
        self._alarm(
            "Api5xx",
            stage.metric_server_error(period=PERIOD, statistic="Sum"),
            threshold=5,
            description="the API answered 5 or more server errors in 5 minutes",
        )
        self._alarm(
            "ApiLatencyP99",
            stage.metric_latency(period=PERIOD, statistic="p99"),
            threshold=alarms.api_p99_latency_ms,
            periods=3,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"API p99 latency above {alarms.api_p99_latency_ms} ms for 15 minutes",
        )
        self._alarm(
            "QueryLatencyP99",
            custom_metric("QueryLatency", SERVICE_NAMES["query"], statistic="p99"),
            threshold=alarms.query_p99_latency_ms,
            periods=3,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"query pipeline p99 latency above {alarms.query_p99_latency_ms} ms for 15 minutes",
        )
        # One alarm over the three functions that write the audit trail: a lost record is never silent.
        writers = {key: custom_metric(AUDIT_FAILURES, SERVICE_NAMES[key]) for key in ("query", "documents", "mcp")}
        self._alarm(
            "AuditWriteFailures",
            cloudwatch.MathExpression(
                expression=" + ".join(f"FILL({key}, 0)" for key in writers),
                using_metrics=dict(writers),
                period=PERIOD,
                label=AUDIT_FAILURES,
            ),
            threshold=1,
            description="audit records could not be written (the functions log AUDIT RECORD NOT WRITTEN)",
        )

    def _build_domain_alarms(self, search: ManagedSearch) -> None:
        domain = search.domain
        minute = Duration.minutes(1)
        self._alarm(
            "SearchClusterRed",
            domain.metric_cluster_status_red(period=minute, statistic="Maximum"),
            threshold=1,
            description="the OpenSearch cluster is red: some primary shards are unassigned",
        )
        self._alarm(
            "SearchWritesBlocked",
            domain.metric_cluster_index_writes_blocked(period=PERIOD, statistic="Maximum"),
            threshold=1,
            description="the OpenSearch cluster blocks writes (disk or memory pressure)",
        )
        quarter_mib = self._config.search.volume_gib * 1024 / 4
        self._alarm(
            "SearchFreeStorage",
            domain.metric_free_storage_space(period=PERIOD, statistic="Minimum"),
            threshold=quarter_mib,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description="a data node has less than a quarter of its volume free",
        )
        if self._config.search.data_nodes > 1:
            self._alarm(
                "SearchClusterYellow",
                domain.metric_cluster_status_yellow(period=minute, statistic="Maximum"),
                threshold=1,
                periods=5,
                description="the OpenSearch cluster is yellow for 5 minutes: some replica shards are unassigned",
            )
        self._alarm(
            "SearchJvmMemoryPressure",
            domain.metric_jvm_memory_pressure(period=minute, statistic="Maximum"),
            threshold=95,
            periods=3,
            description="JVM memory pressure at 95% for 3 minutes: the cluster may refuse requests or crash",
        )
        self._alarm(
            "SearchKmsKeyError",
            domain.metric_kms_key_error(period=minute, statistic="Maximum"),
            threshold=1,
            description="the KMS key that encrypts the domain is disabled: the domain cannot encrypt new data",
        )
        self._alarm(
            "SearchKmsKeyInaccessible",
            domain.metric_kms_key_inaccessible(period=minute, statistic="Maximum"),
            threshold=1,
            description="the KMS key that encrypts the domain is deleted or its grants revoked: data unreadable",
        )

    def _retain_helper_logs(self) -> None:
        """A log group with the retention for every function of the stack that has none of its own."""
        stack = Stack.of(self)
        for construct in stack.node.find_all():
            if not isinstance(construct, CfnResource) or construct.cfn_resource_type != "AWS::Lambda::Function":
                continue
            if isinstance(construct, lambda_.CfnFunction) and construct.logging_config is not None:
                continue
            group = logs.LogGroup(
                self,
                f"Logs{stack.get_logical_id(construct)}",
                retention=self._config.data.log_retention,
                removal_policy=self._config.removal,
            )
            construct.add_property_override("LoggingConfig.LogGroup", group.log_group_name)

    def _all_functions(self) -> Sequence[CitewiseFunction]:
        return self._functions.all()

    def _build_dashboard(
        self, ingestion: Ingestion, api: Api, search: SearchBackend | VectorStore
    ) -> cloudwatch.Dashboard:
        stage = api.rest_api.deployment_stage
        query_service, ingest_service = SERVICE_NAMES["query"], SERVICE_NAMES["ingest"]
        fns = self._all_functions()

        def graph(title: str, metrics: Sequence[cloudwatch.IMetric], width: int = 8) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=width, height=6)

        rows: list[list[cloudwatch.IWidget]] = [
            [cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24, height=4)],
            [
                graph(
                    "API requests and errors",
                    [stage.metric_count(), stage.metric_client_error(), stage.metric_server_error()],
                ),
                graph(
                    "API latency (ms)", [stage.metric_latency(statistic="p50"), stage.metric_latency(statistic="p99")]
                ),
                graph(
                    "Query pipeline latency (ms, p99)",
                    [custom_metric(name, query_service, "p99") for name in QUERY_METRICS if name.endswith("Latency")],
                ),
            ],
            [
                graph(
                    "Bedrock tokens",
                    [custom_metric(name, query_service) for name in QUERY_METRICS if name.endswith("Tokens")],
                ),
                graph("Ingestion", [custom_metric(name, ingest_service) for name in INGEST_METRICS]),
                graph(
                    "Queues",
                    [
                        ingestion.queue.metric_approximate_number_of_messages_visible(),
                        ingestion.queue.metric_approximate_age_of_oldest_message(),
                        ingestion.dead_letter_queue.metric_approximate_number_of_messages_visible(),
                    ],
                ),
            ],
            [
                graph("Function errors", [fn.function.metric_errors() for fn in fns]),
                graph("Function throttles", [fn.function.metric_throttles() for fn in fns]),
                graph("Function duration (ms, p99)", [fn.function.metric_duration(statistic="p99") for fn in fns]),
            ],
        ]
        if isinstance(search, ManagedSearch):
            domain = search.domain
            rows.append(
                [
                    graph("Search latency (ms)", [domain.metric_search_latency(), domain.metric_indexing_latency()]),
                    graph(
                        "Search cluster",
                        [
                            domain.metric_cluster_status_red(),
                            domain.metric_cluster_status_yellow(),
                            domain.metric_jvm_memory_pressure(),
                        ],
                    ),
                    graph("Search free storage (MiB)", [domain.metric_free_storage_space()]),
                ]
            )
        return cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"citewise-{self._config.name}", widgets=rows)
