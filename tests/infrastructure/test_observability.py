"""Alarms (DLQ depth, errors, p99 latency, throttles) to an encrypted topic, and the dashboard."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from citewise_infra.constants import FUNCTION_KEYS, INGEST_METRICS, METRICS_NAMESPACE, QUERY_METRICS, SERVICE_NAMES

from .conftest import PROD_ALARM_EMAIL, ROOT, Synth
from .templates import flat


def alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.of_type("AWS::CloudWatch::Alarm").values()]


def find(synth: Synth, metric: str, dimension: str, value_id: str | None = None) -> list[dict[str, Any]]:
    """Alarms on `metric` whose dimension `dimension` refers to `value_id` (or any value)."""
    found = []
    for alarm in alarms(synth):
        if alarm.get("MetricName") != metric:
            continue
        dimensions = {d["Name"]: flat(d["Value"]) for d in alarm.get("Dimensions", [])}
        if dimension in dimensions and (value_id is None or value_id in dimensions[dimension]):
            found.append(alarm)
    return found


def test_every_alarm_notifies_the_topic_and_stays_quiet_without_data(synth: Synth) -> None:
    topic_id = synth.logical_id(synth.stack.observability.topic)
    assert alarms(synth)
    for alarm in alarms(synth):
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["TreatMissingData"] == "notBreaching"


def test_the_dead_letter_queue_alarms_on_its_first_message(synth: Synth) -> None:
    dlq = synth.logical_id(synth.stack.ingestion.dead_letter_queue)
    (alarm,) = find(synth, "ApproximateNumberOfMessagesVisible", "QueueName", dlq)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_each_function_alarms_on_errors_and_throttles(synth: Synth, key: str) -> None:
    function_id = synth.logical_id(getattr(synth.stack.functions, key).function)
    for metric in ("Errors", "Throttles"):
        (alarm,) = find(synth, metric, "FunctionName", function_id)
        assert alarm["Namespace"] == "AWS/Lambda" and alarm["Threshold"] == 1


def test_p99_latency_alarms_cover_the_api_and_the_query_pipeline(synth: Synth) -> None:
    (api,) = find(synth, "Latency", "ApiName")
    assert api["ExtendedStatistic"] == "p99" and api["Threshold"] == synth.stack.config.alarms.api_p99_latency_ms
    (query,) = find(synth, "QueryLatency", "service", SERVICE_NAMES["query"])
    assert query["Namespace"] == METRICS_NAMESPACE and query["ExtendedStatistic"] == "p99"
    assert query["Threshold"] == synth.stack.config.alarms.query_p99_latency_ms
    assert query["EvaluationPeriods"] == 3 and query["DatapointsToAlarm"] == 3
    (server_errors,) = find(synth, "5XXError", "ApiName")
    assert server_errors["Statistic"] == "Sum"


def test_a_managed_domain_alarms_on_red_blocked_writes_and_low_storage(dev: Synth, serverless_iam: Synth) -> None:
    names = {a.get("MetricName") for a in alarms(dev)}
    assert {"ClusterStatus.red", "ClusterIndexWritesBlocked", "FreeStorageSpace"} <= names
    (storage,) = find(dev, "FreeStorageSpace", "DomainName")
    assert storage["Threshold"] == dev.stack.config.search.volume_gib * 1024 / 4
    assert not {"ClusterStatus.red", "FreeStorageSpace"} & {a.get("MetricName") for a in alarms(serverless_iam)}


def test_the_topic_is_encrypted_tls_only_and_cloudwatch_may_use_its_key(dev: Synth, prod: Synth) -> None:
    key_id = dev.logical_id(dev.stack.storage.key)
    (topic,) = dev.of_type("AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    (topic_policy,) = dev.of_type("AWS::SNS::TopicPolicy").values()
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in topic_policy["Properties"]["PolicyDocument"]["Statement"]
    )
    key_policy = dev.resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    assert any(s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} for s in key_policy)
    # no address for dev: no subscription to confirm; prod has the one it was given
    assert not dev.of_type("AWS::SNS::Subscription")
    (subscription,) = prod.of_type("AWS::SNS::Subscription").values()
    assert (subscription["Properties"]["Protocol"], subscription["Properties"]["Endpoint"]) == (
        "email",
        PROD_ALARM_EMAIL,
    )


def test_cloudwatch_alarms_of_this_account_may_publish_to_the_topic(synth: Synth) -> None:
    # The topic policy (made by enforce_ssl) replaces SNS's default one: it must let the alarms publish
    topic_id = synth.logical_id(synth.stack.observability.topic)
    (topic_policy,) = synth.of_type("AWS::SNS::TopicPolicy").values()
    assert topic_policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    (publish,) = [
        s
        for s in topic_policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert publish["Action"] == "sns:Publish" and publish["Resource"] == {"Ref": topic_id}
    assert flat(publish["Condition"]["ArnLike"]["aws:SourceArn"]) == (
        "arn:aws:cloudwatch:us-east-1:<AWS::AccountId>:alarm:*"
    )
    assert publish["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_the_dashboard_shows_every_custom_metric(dev: Synth) -> None:
    (dashboard,) = dev.of_type("AWS::CloudWatch::Dashboard").values()
    body = flat(dashboard["Properties"]["DashboardBody"])
    for metric in (*INGEST_METRICS, *QUERY_METRICS):
        assert json.dumps(metric) in body, metric
    assert json.dumps(METRICS_NAMESPACE) in body
    assert dashboard["Properties"]["DashboardName"] == "citewise-dev"


def test_a_managed_domain_alarms_on_its_key_and_memory_and_on_yellow_where_replicas_have_a_node(
    dev: Synth, prod: Synth
) -> None:
    # The OpenSearch Service's recommended alarms: a key the domain can no longer use, JVM memory pressure
    for synth in (dev, prod):
        for metric in ("KMSKeyError", "KMSKeyInaccessible"):
            (alarm,) = find(synth, metric, "DomainName")
            assert (alarm["Threshold"], alarm["Period"], alarm["Statistic"]) == (1, 60, "Maximum"), metric
        (memory,) = find(synth, "JVMMemoryPressure", "DomainName")
        assert (memory["Threshold"], memory["EvaluationPeriods"], memory["Statistic"]) == (95, 3, "Maximum")
    # Yellow (replicas unassigned) only where there is another node to hold them
    (yellow,) = find(prod, "ClusterStatus.yellow", "DomainName")
    assert (yellow["Threshold"], yellow["EvaluationPeriods"]) == (1, 5)
    assert not find(dev, "ClusterStatus.yellow", "DomainName")


def test_docs_deploy_counts_the_alarms_of_the_dev_templates(dev: Synth, s3vectors: Synth) -> None:
    # docs/deploy.md prices every stack's fixed items by "up to N alarms": the most a dev template has, on
    # an OpenSearch domain (`dev`) or on S3 Vectors (cdk.json's dev, `s3vectors`)
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    (stated,) = re.findall(r"up to (\d+)\s+alarms", text)
    assert int(stated) == max(len(synth.of_type("AWS::CloudWatch::Alarm")) for synth in (dev, s3vectors))


def test_every_log_group_has_the_retention_and_every_function_one_of_them(synth: Synth) -> None:
    days = synth.stack.config.data.log_retention_days
    groups = synth.of_type("AWS::Logs::LogGroup")
    trail = synth.logical_id(synth.stack.audit.log_group)  # its own retention: tests/infrastructure/test_audit.py
    assert all(group["Properties"].get("RetentionInDays") == days for key, group in groups.items() if key != trail)
    # Every function logs to a group of the stack, CDK's own helpers included (the bucket notifications
    # handler; dev's auto-delete-objects provider): none to a group Lambda would create without retention
    for key, function in synth.of_type("AWS::Lambda::Function").items():
        target = function["Properties"].get("LoggingConfig", {}).get("LogGroup")
        assert isinstance(target, dict) and target.get("Ref") in groups, key
    # API Gateway's execution logs go to the group named after the API and stage, made before the stage
    (api_id,) = synth.of_type("AWS::ApiGateway::RestApi")
    stage = synth.stack.config.api.stage_name
    (execution,) = [
        (key, g) for key, g in groups.items() if flat(g["Properties"].get("LogGroupName", "")).startswith("API-Gateway")
    ]
    assert flat(execution[1]["Properties"]["LogGroupName"]) == f"API-Gateway-Execution-Logs_<{api_id}>/{stage}"
    (stage_id,) = synth.of_type("AWS::ApiGateway::Stage")
    assert execution[0] in synth.resources[stage_id]["DependsOn"]
