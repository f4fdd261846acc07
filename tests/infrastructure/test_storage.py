"""Storage: the documents bucket, the registry table and the keys, as CloudFormation will create them."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from citewise.aws.dynamodb import TABLE_SCHEMA, TTL_ATTRIBUTE

from .conftest import Synth


def test_keys_rotate(synth: Synth) -> None:
    keys = synth.of_type("AWS::KMS::Key")
    assert len(keys) == 2  # storage, and the queues' own (see ingestion)
    assert all(key["Properties"]["EnableKeyRotation"] is True for key in keys.values())


def test_documents_bucket_is_encrypted_with_the_key_versioned_private_and_logged(synth: Synth) -> None:
    key_id = synth.logical_id(synth.stack.storage.key)
    logs_id = synth.logical_id(synth.stack.storage.access_logs)
    synth.assertions.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {
                        "BucketKeyEnabled": True,
                        "ServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "aws:kms",
                            "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
                        },
                    }
                ]
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LoggingConfiguration": {"DestinationBucketName": {"Ref": logs_id}, "LogFilePrefix": "documents/"},
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "NoncurrentVersionExpiration": {
                                    "NoncurrentDays": synth.stack.config.data.noncurrent_version_days
                                },
                                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                                "Status": "Enabled",
                            }
                        )
                    ]
                )
            },
        },
    )


def bucket_policy(synth: Synth, bucket: Any) -> list[dict[str, Any]]:
    bucket_id = synth.logical_id(bucket)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    return policy  # type: ignore[no-any-return]


def test_both_buckets_refuse_plain_http_and_old_tls(synth: Synth) -> None:
    for bucket in (synth.stack.storage.bucket, synth.stack.storage.access_logs):
        denies = [s for s in bucket_policy(synth, bucket) if s["Effect"] == "Deny"]
        conditions = [s["Condition"] for s in denies]
        assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
        assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in conditions
        assert all(s["Principal"] == {"AWS": "*"} and s["Action"] == "s3:*" for s in denies)


def test_the_access_log_bucket_is_private_and_expires_logs(synth: Synth) -> None:
    bucket = synth.resources[synth.logical_id(synth.stack.storage.access_logs)]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == synth.stack.config.data.access_log_days


def test_browser_uploads_and_downloads_are_allowed_only_from_configured_origins(
    dev: Synth, serverless_iam: Synth
) -> None:
    rules = dev.resources[dev.logical_id(dev.stack.storage.bucket)]["Properties"]["CorsConfiguration"]["CorsRules"]
    # The configured origins' rule first (the console's follows it: test_console.py)
    assert rules[0] == {
        "AllowedHeaders": ["*"],
        "AllowedMethods": ["PUT", "GET"],
        "AllowedOrigins": list(dev.stack.config.api.cors_allow_origins),
        "ExposedHeaders": ["Accept-Ranges", "Content-Length", "Content-Range", "ETag"],
        "MaxAge": 3000,
    }
    bucket = serverless_iam.resources[serverless_iam.logical_id(serverless_iam.stack.storage.bucket)]
    assert "CorsConfiguration" not in bucket["Properties"]  # no origin, no console


def test_registry_table_is_the_adapters_schema(synth: Synth) -> None:
    table = synth.resources[synth.logical_id(synth.stack.storage.table)]["Properties"]
    assert table["KeySchema"] == TABLE_SCHEMA["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(TABLE_SCHEMA["AttributeDefinitions"], key=str)
    assert table["BillingMode"] == TABLE_SCHEMA["BillingMode"]
    assert [
        {k: index[k] for k in ("IndexName", "KeySchema", "Projection")} for index in table["GlobalSecondaryIndexes"]
    ] == TABLE_SCHEMA["GlobalSecondaryIndexes"]


def test_registry_tombstones_expire_through_the_tables_ttl(synth: Synth) -> None:
    table = synth.resources[synth.logical_id(synth.stack.storage.table)]["Properties"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    # The retention the functions are given outlives every message of the ingest queue and its DLQ
    data = synth.stack.config.data
    assert data.tombstone_retention_days > data.queue_retention_days


def test_registry_table_is_encrypted_with_the_key_and_recoverable(synth: Synth) -> None:
    table = synth.resources[synth.logical_id(synth.stack.storage.table)]["Properties"]
    assert table["SSESpecification"] == {
        "SSEEnabled": True,
        "SSEType": "KMS",
        "KMSMasterKeyId": {"Fn::GetAtt": [synth.logical_id(synth.stack.storage.key), "Arn"]},
    }
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_prod_keeps_every_stateful_resource_except_when_its_own_creation_fails(prod: Synth) -> None:
    # A failed first create must not leave the fixed-name domain or user pool behind for the retry to hit:
    # RetainExceptOnCreate, and Retain on replacement, for everything prod keeps
    kept = {key: r for key, r in prod.resources.items() if r.get("DeletionPolicy", "Delete") != "Delete"}
    plain_retain = {key for key, r in kept.items() if r["DeletionPolicy"] == "Retain"}
    # Only what is not data: the index resource (its Delete must never reach the handler) and API
    # Gateway's account-wide logging role and setting (other APIs of the account may use them)
    assert {prod.resources[key]["Type"] for key in plain_retain} == {
        "Custom::CitewiseIndex",
        "AWS::IAM::Role",
        "AWS::ApiGateway::Account",
    }
    stateful = {
        "AWS::S3::Bucket",
        "AWS::DynamoDB::Table",
        "AWS::KMS::Key",
        "AWS::OpenSearchService::Domain",
        "AWS::Cognito::UserPool",
        "AWS::SQS::Queue",
        "AWS::Logs::LogGroup",
    }
    for key, resource in kept.items():
        if key not in plain_retain:
            assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")
    assert stateful <= {r["Type"] for key, r in kept.items() if key not in plain_retain}
    # Every data store is kept (log groups: the functions' and the API's; the index provider's deploy-time
    # log is not data and goes with the stack)
    for key, resource in prod.resources.items():
        if resource["Type"] in stateful - {"AWS::Logs::LogGroup"}:
            assert key in kept, key


def test_prod_keeps_its_data_and_dev_does_not(dev: Synth, prod: Synth) -> None:
    for synth, policy in ((prod, "RetainExceptOnCreate"), (dev, "Delete")):
        storage = synth.stack.storage
        for construct in (storage.bucket, storage.table, storage.key):
            assert synth.resources[synth.logical_id(construct)]["DeletionPolicy"] == policy, (synth, construct)
    assert prod.resources[prod.logical_id(prod.stack.storage.table)]["Properties"]["DeletionProtectionEnabled"]
    assert not dev.resources[dev.logical_id(dev.stack.storage.table)]["Properties"]["DeletionProtectionEnabled"]
    # dev empties its buckets on delete (else CloudFormation could not delete them); prod never does
    assert dev.of_type("Custom::S3AutoDeleteObjects") and not prod.of_type("Custom::S3AutoDeleteObjects")
