"""The audit trail's resources: its own log group with the environment's retention, a generated hashing
key, and grants that let the API functions append (and only the documents function read) and nothing
more."""

from __future__ import annotations

from typing import Any

from citewise_infra.audit import READ_ACTIONS, WRITE_ACTIONS

from .conftest import Synth


def _statements(synth: Synth, function: str) -> list[dict[str, Any]]:
    role_id = synth.logical_id(getattr(synth.stack.functions, function).role)
    return [
        statement
        for policy in synth.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _logs_actions_on_the_trail(synth: Synth, function: str) -> set[str]:
    trail_id = synth.logical_id(synth.stack.audit.log_group)
    granted: set[str] = set()
    for statement in _statements(synth, function):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if any(str(action).startswith("logs:") for action in actions) and trail_id in str(statement["Resource"]):
            granted |= set(actions)
    return granted


def test_the_trail_is_a_log_group_of_its_own_with_the_environments_retention(synth: Synth) -> None:
    trail_id = synth.logical_id(synth.stack.audit.log_group)
    trail = synth.resources[trail_id]
    assert trail["Type"] == "AWS::Logs::LogGroup"
    assert trail["Properties"]["RetentionInDays"] == synth.stack.config.audit.retention_days
    function_groups = {synth.logical_id(getattr(synth.stack.functions, key).log_group) for key in ("query", "mcp")}
    assert trail_id not in function_groups


def test_dev_and_prod_keep_the_trail_as_cdk_json_says(dev: Synth, prod: Synth) -> None:
    assert dev.resources[dev.logical_id(dev.stack.audit.log_group)]["Properties"]["RetentionInDays"] == 30
    assert prod.resources[prod.logical_id(prod.stack.audit.log_group)]["Properties"]["RetentionInDays"] == 400


def test_the_api_functions_append_and_only_the_documents_function_reads(synth: Synth) -> None:
    for function in ("query", "mcp"):
        assert _logs_actions_on_the_trail(synth, function) == set(WRITE_ACTIONS), function
    assert _logs_actions_on_the_trail(synth, "documents") == {*WRITE_ACTIONS, *READ_ACTIONS}
    for function in ("ingest", "bootstrap"):
        assert _logs_actions_on_the_trail(synth, function) == set(), function


def test_no_role_may_delete_the_trail_or_shorten_it(synth: Synth) -> None:
    forbidden = {"logs:DeleteLogStream", "logs:DeleteLogGroup", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy"}
    for policy in synth.of_type("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not forbidden & set(actions) and "logs:*" not in actions, statement


def test_the_functions_that_write_the_trail_know_it_and_the_hashing_key(synth: Synth) -> None:
    trail_id = synth.logical_id(synth.stack.audit.log_group)
    secret_id = synth.logical_id(synth.stack.audit.hash_key)
    secret = synth.resources[secret_id]
    assert secret["Type"] == "AWS::SecretsManager::Secret"
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] == 64
    for function in ("query", "mcp", "documents"):
        fn = synth.resources[synth.logical_id(getattr(synth.stack.functions, function).function)]
        variables = fn["Properties"]["Environment"]["Variables"]
        assert variables["CITEWISE_AUDIT_LOG_GROUP"] == {"Ref": trail_id}, function
        # A dynamic reference, resolved by CloudFormation at deploy time: the key is never in the template
        reference = str(variables["CITEWISE_AUDIT_HASH_KEY"])
        assert "{{resolve:secretsmanager:" in reference and secret_id in reference, function
    ingest = synth.resources[synth.logical_id(synth.stack.functions.ingest.function)]
    assert "CITEWISE_AUDIT_LOG_GROUP" not in ingest["Properties"]["Environment"]["Variables"]


def test_one_alarm_hears_a_lost_record_of_any_api_function(synth: Synth) -> None:
    topic_id = synth.logical_id(synth.stack.observability.topic)
    [alarm] = [
        a["Properties"]
        for a in synth.of_type("AWS::CloudWatch::Alarm").values()
        if "audit records" in str(a["Properties"].get("AlarmDescription"))
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    metrics = {m["Id"]: m for m in alarm["Metrics"]}
    assert {m["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for m in metrics.values() if "MetricStat" in m} == {
        "citewise-query",
        "citewise-documents",
        "citewise-mcp",
    }
    assert all(
        m["MetricStat"]["Metric"]["MetricName"] == "AuditWriteFailures" for m in metrics.values() if "MetricStat" in m
    )
