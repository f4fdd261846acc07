"""Web sources' refreshes: one EventBridge Scheduler schedule invoking the refresh function, and the
refresh queue (encrypted, with a dead-letter queue) that carries each run's batches."""

from __future__ import annotations

import json

from citewise_infra.refresh import MAX_RECEIVES, SCHEDULE_MINUTES

from citewise.runtime.refresh_handler import SCHEDULE_EVENT

from .conftest import Synth
from .templates import actions_on, role_statements


def test_one_schedule_invokes_the_refresh_function_with_the_schedule_event(synth: Synth) -> None:
    (schedule,) = synth.of_type("AWS::Scheduler::Schedule").values()
    properties = schedule["Properties"]
    function_id = synth.logical_id(synth.stack.functions.refresh.function)
    assert properties["ScheduleExpression"] == f"rate({SCHEDULE_MINUTES} minutes)"
    assert properties["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    assert json.loads(properties["Target"]["Input"]) == {"type": SCHEDULE_EVENT}
    # Its role may invoke that function and nothing else
    role_id = properties["Target"]["RoleArn"]["Fn::GetAtt"][0]
    granted = {(a, r) for s in role_statements(synth, role_id) for a in s.actions for r in s.resources}
    assert granted == {("lambda:InvokeFunction", f"<{function_id}.Arn>")}
    trust = synth.resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]


def test_the_queue_is_encrypted_redrives_to_its_dlq_and_feeds_the_function_one_message_at_a_time(
    synth: Synth,
) -> None:
    refresh = synth.stack.refresh
    queue = synth.resources[synth.logical_id(refresh.queue)]["Properties"]
    dlq_id = synth.logical_id(refresh.dead_letter_queue)
    key_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.ingestion.key), "Arn"]}
    assert queue["KmsMasterKeyId"] == key_arn == synth.resources[dlq_id]["Properties"]["KmsMasterKeyId"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_RECEIVES,
    }
    function = synth.resources[synth.logical_id(synth.stack.functions.refresh.function)]["Properties"]
    assert queue["VisibilityTimeout"] > 6 * function["Timeout"]
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [synth.logical_id(refresh.queue), "Arn"]}
    ]
    assert mapping["BatchSize"] == 1 and mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_documents_and_refresh_functions_send_to_the_refresh_queue_and_only_the_refresh_function_consumes(
    synth: Synth,
) -> None:
    queue_id = synth.logical_id(synth.stack.refresh.queue)
    for key in ("documents", "refresh"):
        fn = getattr(synth.stack.functions, key)
        variables = synth.resources[synth.logical_id(fn.function)]["Properties"]["Environment"]["Variables"]
        assert variables["CITEWISE_REFRESH_QUEUE_URL"] == {"Ref": queue_id}
        actions = actions_on(role_statements(synth, synth.logical_id(fn.role)), queue_id)
        assert "sqs:SendMessage" in actions
        assert ("sqs:ReceiveMessage" in actions) is (key == "refresh")
    for key in ("ingest", "query", "mcp", "erasure"):
        fn = getattr(synth.stack.functions, key)
        assert not actions_on(role_statements(synth, synth.logical_id(fn.role)), queue_id), key
