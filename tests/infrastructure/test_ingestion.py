"""Ingestion: S3 notifications under tenants/ -> encrypted queue with a DLQ -> the ingest function in batches."""

from __future__ import annotations

from .conftest import Synth
from .templates import actions_on, flat, references, role_statements


def test_the_queue_is_encrypted_redrives_to_the_dlq_and_outlasts_six_function_timeouts(synth: Synth) -> None:
    ingestion, config = synth.stack.ingestion, synth.stack.config
    queue = synth.resources[synth.logical_id(ingestion.queue)]["Properties"]
    dlq_id = synth.logical_id(ingestion.dead_letter_queue)
    key_arn = {"Fn::GetAtt": [synth.logical_id(ingestion.key), "Arn"]}
    assert queue["KmsMasterKeyId"] == key_arn
    assert synth.resources[dlq_id]["Properties"]["KmsMasterKeyId"] == key_arn
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": config.ingest.max_receive_count,
    }
    function = synth.resources[synth.logical_id(synth.stack.functions.ingest.function)]["Properties"]
    mapping = next(iter(synth.of_type("AWS::Lambda::EventSourceMapping").values()))["Properties"]
    assert queue["VisibilityTimeout"] > 6 * function["Timeout"] + mapping["MaximumBatchingWindowInSeconds"]
    assert synth.resources[dlq_id]["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_both_queues_refuse_plain_http(synth: Synth) -> None:
    ingestion = synth.stack.ingestion
    for queue in (ingestion.queue, ingestion.dead_letter_queue):
        queue_id = synth.logical_id(queue)
        (policy,) = [
            p["Properties"]["PolicyDocument"]["Statement"]
            for p in synth.of_type("AWS::SQS::QueuePolicy").values()
            if {"Ref": queue_id} in p["Properties"]["Queues"]
        ]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy
        )


def test_object_created_removed_and_expired_under_tenants_are_sent_to_the_queue(synth: Synth) -> None:
    (notifications,) = synth.of_type("Custom::S3BucketNotifications").values()
    properties = notifications["Properties"]
    assert properties["BucketName"] == {"Ref": synth.logical_id(synth.stack.storage.bucket)}
    queue_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.ingestion.queue), "Arn"]}
    configurations = properties["NotificationConfiguration"]["QueueConfigurations"]
    assert sorted(c["Events"][0] for c in configurations) == [
        "s3:LifecycleExpiration:*",
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
    ]
    for configuration in configurations:
        assert configuration["QueueArn"] == queue_arn
        assert configuration["Filter"] == {"Key": {"FilterRules": [{"Name": "prefix", "Value": "tenants/"}]}}


def test_s3_may_send_to_the_queue_from_the_documents_bucket_only(synth: Synth) -> None:
    queue_id = synth.logical_id(synth.stack.ingestion.queue)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Properties"]["Queues"]
    ]
    (allow,) = [s for s in policy if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"}
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"] == {
        "Fn::GetAtt": [synth.logical_id(synth.stack.storage.bucket), "Arn"]
    }


def test_the_event_source_mapping_reports_partial_failures_and_caps_concurrency(synth: Synth) -> None:
    config = synth.stack.config.ingest
    synth.assertions.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [synth.logical_id(synth.stack.ingestion.queue), "Arn"]},
            "FunctionName": {"Ref": synth.logical_id(synth.stack.functions.ingest.function)},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": config.batch_size,
            "MaximumBatchingWindowInSeconds": config.max_batching_window_s,
            "ScalingConfig": {"MaximumConcurrency": config.max_concurrency},
        },
    )


def test_ingestion_starts_only_after_the_index_exists(synth: Synth) -> None:
    (mapping,) = [
        m
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if references(m["Properties"]["FunctionName"]) == {synth.logical_id(synth.stack.functions.ingest.function)}
    ]
    index_id = synth.logical_id(synth.stack.index_bootstrap.resource)
    assert index_id in mapping["DependsOn"]
    # and no reserved concurrency: a new account's small pool is not carved up
    function = synth.resources[synth.logical_id(synth.stack.functions.ingest.function)]["Properties"]
    assert "ReservedConcurrentExecutions" not in function
    assert references(mapping["Properties"]["FunctionName"]) == {
        synth.logical_id(synth.stack.functions.ingest.function)
    }


def test_on_serverless_the_ingest_function_may_send_delayed_sweeps_to_its_own_queue_only(synth: Synth) -> None:
    ingest = synth.stack.functions.ingest
    queue_id = synth.logical_id(synth.stack.ingestion.queue)
    environment = synth.resources[synth.logical_id(ingest.function)]["Properties"]["Environment"]["Variables"]
    statements = role_statements(synth, synth.logical_id(ingest.role))
    senders = [s for s in statements if "sqs:SendMessage" in s.actions]
    if synth.stack.config.search.mode != "serverless":
        # A domain refreshes before its sweep: no sweeps, so no permission and no variable
        assert senders == [] and "CITEWISE_SWEEP_QUEUE_URL" not in environment
        return
    assert environment["CITEWISE_SWEEP_QUEUE_URL"] == {"Ref": queue_id}
    # SendMessage beside what consuming needs, on the ingest queue alone (CDK merges the statements)
    consume = {
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueUrl",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
    }
    assert actions_on(statements, queue_id) == consume | {"sqs:SendMessage"}
    assert all(sender.resources == (flat({"Fn::GetAtt": [queue_id, "Arn"]}),) for sender in senders)
    # and no other role may send to the queue but the documents function's re-queue (next test)
    for function in (synth.stack.functions.query, synth.stack.functions.bootstrap):
        assert "sqs:SendMessage" not in actions_on(role_statements(synth, synth.logical_id(function.role)), queue_id)


def test_the_documents_function_may_requeue_to_the_ingest_queue_only(synth: Synth) -> None:
    # Given the documents function (the operator's re-queue of quota-refused documents)
    documents = synth.stack.functions.documents
    queue_id = synth.logical_id(synth.stack.ingestion.queue)
    environment = synth.resources[synth.logical_id(documents.function)]["Properties"]["Environment"]["Variables"]
    statements = role_statements(synth, synth.logical_id(documents.role))
    # Then it knows the ingest queue and may send to it (and to the erasure queue: an operator's erasure;
    # and to the refresh queue: an admin's refresh), to nothing else, nor consume from it
    assert environment["CITEWISE_INGEST_QUEUE_URL"] == {"Ref": queue_id}
    erasure_id = synth.logical_id(synth.stack.erasure.queue)
    refresh_id = synth.logical_id(synth.stack.refresh.queue)
    allowed = {flat({"Fn::GetAtt": [queue, "Arn"]}) for queue in (queue_id, erasure_id, refresh_id)}
    senders = [s for s in statements if "sqs:SendMessage" in s.actions]
    assert {flat({"Fn::GetAtt": [queue_id, "Arn"]})} <= {r for s in senders for r in s.resources} <= allowed
    assert actions_on(statements, queue_id) == {"sqs:SendMessage"}
    # And the MCP function may not
    mcp = synth.stack.functions.mcp
    assert "sqs:SendMessage" not in actions_on(role_statements(synth, synth.logical_id(mcp.role)), queue_id)
