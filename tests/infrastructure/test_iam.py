"""Least privilege, read from the synthesized policies: each function may do what its code calls, and the
forbidden actions of the issue are absent (query: no S3 writes, no index writes or deletes, no DynamoDB
but the settings attribute, the usage counters and the credentials' records;
ingest: no generation model; Bedrock only on the configured model ARNs)."""

from __future__ import annotations

import json

import pytest
from citewise_infra.bedrock import split_profile
from citewise_infra.constants import FUNCTION_KEYS, FunctionKey

from citewise.aws.dynamodb_conversations import CONVERSATIONS_PREFIX
from citewise.aws.dynamodb_credentials import CREDENTIALS_PARTITION
from citewise.aws.dynamodb_feedback import FEEDBACK_PREFIX
from citewise.aws.dynamodb_rates import TAT_ATTRIBUTE
from citewise.ports.usage import COUNTERS

from .conftest import Synth
from .templates import Statement, actions_on, all_actions, flat, role_statements

TITAN = "foundation-model/amazon.titan-embed-text-v2:0"


def statements(synth: Synth, key: FunctionKey) -> list[Statement]:
    return role_statements(synth, synth.logical_id(getattr(synth.stack.functions, key).role))


def bedrock_resources(synth: Synth, key: FunctionKey) -> set[str]:
    """Resources the function may call InvokeModel (so Converse) on."""
    return {r for s in statements(synth, key) if "bedrock:InvokeModel" in s.actions for r in s.resources}


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_no_function_has_wildcard_actions_or_unscoped_resources(synth: Synth, key: FunctionKey) -> None:
    for statement in statements(synth, key):
        assert all("*" not in action for action in statement.actions), statement
        if "*" in statement.resources:
            # X-Ray has no resource-level permissions; nothing else may use "*"
            assert statement.actions == {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, statement


def test_query_reads_the_index_and_invokes_only_the_configured_models(synth: Synth) -> None:
    granted = all_actions(statements(synth, "query"))
    # no S3, no DynamoDB but reading the settings attribute, adding to the usage counters and checking the
    # quotas (each held to its attributes below), no index writes or deletes, no other index than _search
    assert not {a for a in granted if a.startswith("s3:")}
    assert {a for a in granted if a.startswith("dynamodb:")} == {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",  # today's usage counters, for the daily quotas
        "dynamodb:DeleteItem",  # the conversations' only (test_the_answering_functions_reach_the_conversation...)
        "dynamodb:BatchWriteItem",
    }
    assert not granted & {"es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpPatch", "aoss:WriteDocument"}
    es_resources = {
        r for s in statements(synth, "query") if any(a.startswith("es:") for a in s.actions) for r in s.resources
    }
    assert all(r.endswith("/citewise-chunks/_search") for r in es_resources)
    # Bedrock: the embedding model, and the generation model (a profile: in any region, through it only)
    resources = bedrock_resources(synth, "query")
    models = synth.stack.config.models
    assert any(r.endswith(TITAN) for r in resources)
    allowed = {TITAN}
    for model in (models.generation_model_id, models.routing_model_id):
        if model is not None:
            allowed |= {f"/{model}", f"/{split_profile(model)[1]}"}
    assert all(r.endswith(tuple(allowed)) for r in resources), resources
    assert {a for a in granted if a.startswith("bedrock:")} <= {
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",  # ConverseStream: a streamed answer
        "bedrock:ApplyGuardrail",
    }


def test_a_profile_model_is_allowed_in_every_region_only_through_the_profile(dev: Synth) -> None:
    (through_profile,) = [s for s in statements(dev, "query") if any("bedrock:*::" in r for r in s.resources)]
    assert through_profile.resources == ("arn:<AWS::Partition>:bedrock:*::foundation-model/amazon.nova-lite-v1:0",)
    profile = through_profile.condition["StringEquals"]["bedrock:InferenceProfileArn"]
    assert "inference-profile/us.amazon.nova-lite-v1:0" in json.dumps(profile)


def test_a_foundation_model_and_a_guardrail_are_allowed_in_the_stacks_region(serverless_iam: Synth) -> None:
    resources = bedrock_resources(serverless_iam, "query")
    assert (
        "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
        in resources
    )
    assert not any("bedrock:*" in r or "inference-profile" in r for r in resources)
    # the router has a model of its own: allowed beside the generation model, and named in the environment
    assert (
        "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"
        in resources
    )
    function = serverless_iam.resources[serverless_iam.logical_id(serverless_iam.stack.functions.query.function)]
    variables = function["Properties"]["Environment"]["Variables"]
    assert (variables["CITEWISE_ROUTER"], variables["CITEWISE_ROUTER_MODEL_ID"]) == (
        "bedrock",
        "anthropic.claude-3-5-haiku-20241022-v1:0",
    )
    guardrail = actions_on(statements(serverless_iam, "query"), ":guardrail/gr0abc123")
    assert guardrail == {"bedrock:ApplyGuardrail"}


def test_ingest_invokes_the_embedding_model_only(synth: Synth) -> None:
    resources = bedrock_resources(synth, "ingest")
    assert resources == {f"arn:<AWS::Partition>:bedrock:<AWS::Region>::{TITAN}"}
    assert {a for a in all_actions(statements(synth, "ingest")) if a.startswith("bedrock:")} == {"bedrock:InvokeModel"}


def test_ingest_reads_documents_writes_the_index_and_cannot_create_it(dev: Synth) -> None:
    ingest = statements(dev, "ingest")
    granted = all_actions(ingest)
    assert actions_on(ingest, "/tenants/*") == {"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"}
    assert "s3:DeleteObject" not in granted
    # It writes only copies of versions from under tenants/ (undoing a refused upload), never new content
    [put] = [s for s in ingest if "s3:PutObject" in s.actions]
    assert put.actions == {"s3:PutObject"} and set(put.condition) == {"StringLike"}
    [copy_source] = put.condition["StringLike"]["s3:x-amz-copy-source"]
    assert flat(copy_source).startswith("<StorageDocuments") and flat(copy_source).endswith(">/tenants/*")
    [versions] = [s for s in ingest if "s3:ListBucketVersions" in s.actions]
    assert versions.condition == {"StringLike": {"s3:prefix": ["tenants/*"]}}
    assert actions_on(ingest, "/citewise-chunks/_bulk") == {"es:ESHttpPost", "es:ESHttpPut"}
    # HEAD on the index itself (does it exist?), never PUT (create) or DELETE
    index_only = {a for s in ingest for r in s.resources if r.endswith("/citewise-chunks") for a in s.actions}
    assert index_only == {"es:ESHttpHead"}
    assert {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"} <= granted
    assert "dynamodb:Scan" not in granted
    assert "dynamodb:DeleteItem" not in granted  # a delete leaves a tombstone: only the table's TTL removes items


def test_documents_manages_objects_under_tenants_and_calls_no_model(dev: Synth) -> None:
    documents = statements(dev, "documents")
    # The operator's listing of tenants is a Query of the catalogue partition: no Scan of the table
    assert "dynamodb:Query" in all_actions(documents) and "dynamodb:Scan" not in all_actions(documents)
    # GetObjectVersion: the presigned download of a citation's document reads the version that was indexed
    managed = {"s3:PutObject", "s3:GetObject", "s3:GetObjectVersion", "s3:DeleteObject"}
    assert actions_on(documents, "/tenants/*") == managed
    assert not {a for a in all_actions(documents) if a.startswith("bedrock:")}
    assert "es:ESHttpDelete" not in all_actions(documents)


def test_only_the_bootstrap_may_create_the_index(dev: Synth) -> None:
    for key in FUNCTION_KEYS:
        creates = {
            a for s in statements(dev, key) for r in s.resources if r.endswith("/citewise-chunks") for a in s.actions
        }
        assert ("es:ESHttpPut" in creates) is (key == "bootstrap"), key
    bootstrap = all_actions(statements(dev, "bootstrap"))
    assert not {a for a in bootstrap if a.startswith(("s3:", "dynamodb:", "bedrock:", "sqs:"))}


def test_the_storage_key_is_usable_only_through_s3_or_dynamodb(synth: Synth) -> None:
    key_id = synth.logical_id(synth.stack.storage.key)
    region = synth.stack.config.region
    for key in FUNCTION_KEYS:
        for statement in statements(synth, key):
            if any(key_id in resource for resource in statement.resources):
                via = statement.condition["StringEquals"]["kms:ViaService"]
                assert via in (f"s3.{region}.amazonaws.com", f"dynamodb.{region}.amazonaws.com"), (key, statement)


def test_serverless_access_is_the_collection_plus_one_data_policy_per_function(serverless_iam: Synth) -> None:
    # IAM only opens the data plane of this collection...
    collection_id = next(iter(serverless_iam.of_type("AWS::OpenSearchServerless::Collection")))
    for key in FUNCTION_KEYS:
        aoss = {a for s in statements(serverless_iam, key) for a in s.actions if a.startswith("aoss:")}
        if key == "refresh":  # it reaches no index
            assert not aoss
            continue
        assert aoss == {"aoss:APIAccessAll"}
        assert actions_on(statements(serverless_iam, key), f"<{collection_id}.Arn>") == {"aoss:APIAccessAll"}
    # ...and each function's data access policy says what it may do there
    permissions = {}
    for policy in serverless_iam.of_type("AWS::OpenSearchServerless::AccessPolicy").values():
        (rule_set,) = json.loads(flat(policy["Properties"]["Policy"]))
        permissions[rule_set["Description"]] = set(rule_set["Rules"][0]["Permission"])
    assert permissions == {
        "citewise ingest function": {"aoss:ReadDocument", "aoss:WriteDocument", "aoss:DescribeIndex"},
        "citewise query function": {"aoss:ReadDocument"},
        "citewise documents function": {"aoss:ReadDocument", "aoss:WriteDocument"},
        "citewise mcp function": {"aoss:ReadDocument"},
        "citewise bootstrap function": {"aoss:CreateIndex", "aoss:DescribeIndex"},
        "citewise erasure function": {"aoss:ReadDocument", "aoss:WriteDocument"},
    }


def test_mcp_reads_only_the_index_the_registry_and_the_models(dev: Synth) -> None:
    mcp = statements(dev, "mcp")
    granted = all_actions(mcp)
    # No S3 at all, no DynamoDB write but the usage counters' and the rate bucket's (below), no index writes,
    # deletes or creation
    assert not {a for a in granted if a.startswith("s3:")}
    assert {a for a in granted if a.startswith("dynamodb:")} == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",  # the conversations' only (test_the_answering_functions_reach_the_conversation...)
        "dynamodb:BatchWriteItem",
    }
    bucket = [s for s in quota_statements(dev, "mcp") if "dynamodb:UpdateItem" in s.actions]
    conversations = conversation_statements(dev, "mcp")
    assert [s for s in mcp if "dynamodb:UpdateItem" in s.actions] == [
        usage_statement(dev, "mcp"),
        *bucket,
        *conversations,
    ]
    assert not granted & {"es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpPatch", "aoss:WriteDocument"}
    es_resources = {r for s in mcp if any(a.startswith("es:") for a in s.actions) for r in s.resources}
    assert es_resources and all(r.endswith("/citewise-chunks/_search") for r in es_resources)
    # The models are the query function's
    assert bedrock_resources(dev, "mcp") == bedrock_resources(dev, "query")


def test_query_reads_only_the_settings_attribute_of_the_registry(synth: Synth) -> None:
    # Given the query function's DynamoDB statements but the usage counters', the quotas', the credentials'
    # and the conversations' (below)
    (statement,) = [
        s
        for s in statements(synth, "query")
        if any(a.startswith("dynamodb:") for a in s.actions)
        and s not in [usage_statement(synth, "query"), *quota_statements(synth, "query")]
        and s not in credentials_statements(synth, "query")
        and s not in conversation_statements(synth, "query")
        and s not in feedback_statements(synth, "query")
    ]
    # Then it is one GetItem on the table itself (no index), returning only the keys, `settings` and the
    # status of an erasure record (every request checks its tenant is not being erased)
    assert statement.actions == {"dynamodb:GetItem"}
    assert statement.resources == (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    assert statement.condition == {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["tenant_id", "doc_id", "settings", "erasure_status"]},
        "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    }
    # And the function is told the table, for the settings document only
    function = synth.resources[synth.logical_id(synth.stack.functions.query.function)]
    assert "CITEWISE_REGISTRY_TABLE" in function["Properties"]["Environment"]["Variables"]


def _attributes(statement: Statement) -> list[str]:
    return list((statement.condition or {}).get("ForAllValues:StringEquals", {}).get("dynamodb:Attributes", []))


def credentials_statements(synth: Synth, key: FunctionKey) -> list[Statement]:
    """The function's statements reading the credentials' partition (one in Cognito mode, none in IAM mode)."""
    return [s for s in statements(synth, key) if CREDENTIALS_PARTITION in str(s.condition)]


def conversation_statements(synth: Synth, key: FunctionKey) -> list[Statement]:
    """The function's statements on the conversation partitions (`citewise.aws.dynamodb_conversations`)."""
    return [s for s in statements(synth, key) if CONVERSATIONS_PREFIX in str(s.condition)]


def feedback_statements(synth: Synth, key: FunctionKey) -> list[Statement]:
    """The function's statements on the feedback partitions (`citewise.aws.dynamodb_feedback`)."""
    return [s for s in statements(synth, key) if FEEDBACK_PREFIX in str(s.condition)]


@pytest.mark.parametrize(("key", "writes"), [("query", True), ("mcp", False)])
def test_the_answering_functions_reach_the_feedback_partitions_only_by_that_grant(
    synth: Synth, key: FunctionKey, writes: bool
) -> None:
    # Given the statement that lets a function rank with the tenants' feedback (and the query function take it)
    (statement,) = feedback_statements(synth, key)
    # Then it reads (and for the query function writes) items of the table whose partition key is a tenant's
    # feedback partition only, and deletes nothing: feedback goes with its tenant's erasure
    assert statement.actions == {"dynamodb:GetItem", "dynamodb:Query", *(["dynamodb:UpdateItem"] if writes else [])}
    assert statement.resources == (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    assert statement.condition == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{FEEDBACK_PREFIX}*"]}}


@pytest.mark.parametrize("key", ["query", "mcp"])
def test_the_answering_functions_reach_the_conversation_partitions_only_by_that_grant(
    synth: Synth, key: FunctionKey
) -> None:
    # Given the statement that lets a function record and serve its users' conversations
    (statement,) = conversation_statements(synth, key)
    # Then it reads, writes and deletes items of the table itself whose partition key is a tenant's
    # conversation partition only: no document, settings or credential item is reachable through it
    assert statement.actions == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
    }
    assert statement.resources == (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    assert statement.condition == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{CONVERSATIONS_PREFIX}*"]}}
    # And no other statement of the function may delete an item of the table
    others = [s for s in statements(synth, key) if s != statement]
    assert not all_actions(others) & {"dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}


@pytest.mark.parametrize("key", ["query", "mcp"])
def test_the_answering_functions_read_the_credentials_partition_only_by_that_grant(
    synth: Synth, key: FunctionKey
) -> None:
    # Given the statement that lets a function answering a program's request read its credential's record
    found = credentials_statements(synth, key)
    if synth.stack.config.auth.mode == "iam":  # no Cognito, no credentials: programs use IAM roles
        assert found == []
        return
    (statement,) = found
    # Then it is GetItem alone, on the table itself, of items whose partition key is `#credentials` only:
    # no tenant's partition is readable through it
    assert statement.actions == {"dynamodb:GetItem"}
    assert statement.resources == (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    assert statement.condition == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CREDENTIALS_PARTITION]}}


def test_documents_may_create_and_delete_app_clients_of_its_user_pool_only(dev: Synth) -> None:
    # Given the documents function's Cognito statements
    cognito = [s for s in statements(dev, "documents") if any(a.startswith("cognito-idp:") for a in s.actions)]
    # Then it may create and delete the pool's app clients (credentials), nothing else of Cognito: not
    # read a client's secret back, not change a user, not touch another pool
    (statement,) = cognito
    assert statement.actions == {"cognito-idp:CreateUserPoolClient", "cognito-idp:DeleteUserPoolClient"}
    assert statement.resources == (f"<{dev.logical_id(dev.stack.api.user_pool)}.Arn>",)
    for key in ("query", "mcp", "ingest", "bootstrap"):
        assert not {a for a in all_actions(statements(dev, key)) if a.startswith("cognito-idp:")}, key


def usage_statement(synth: Synth, key: FunctionKey) -> Statement:
    """The function's one statement that allows UpdateItem of the usage counters."""
    (statement,) = [
        s for s in statements(synth, key) if "dynamodb:UpdateItem" in s.actions and "rest_queries" in _attributes(s)
    ]
    return statement


def quota_statements(synth: Synth, key: FunctionKey) -> list[Statement]:
    """The function's statements naming the rate bucket's attribute: the quota checks'."""
    return [s for s in statements(synth, key) if TAT_ATTRIBUTE in _attributes(s)]


@pytest.mark.parametrize("key", ["query", "mcp"])
def test_the_answering_functions_check_quotas_through_their_own_attributes_only(synth: Synth, key: FunctionKey) -> None:
    # Given the statements of the quota checks
    read, take = sorted(quota_statements(synth, key), key=lambda s: sorted(s.actions))
    table = (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    # Then reading names the keys, the overrides, the bucket and the counters only, no document attribute
    assert read.actions == {"dynamodb:GetItem", "dynamodb:Query"} and read.resources == table
    assert read.condition == {
        "ForAllValues:StringEquals": {
            "dynamodb:Attributes": ["tenant_id", "doc_id", "quotas", TAT_ATTRIBUTE, *COUNTERS]
        },
        "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    }
    # And taking a token writes the bucket's one attribute, returning nothing
    assert take.actions == {"dynamodb:UpdateItem"} and take.resources == table
    assert take.condition == {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["tenant_id", "doc_id", TAT_ATTRIBUTE]},
        "StringEqualsIfExists": {"dynamodb:ReturnValues": "NONE"},
    }


@pytest.mark.parametrize("key", ["query", "mcp"])
def test_the_answering_functions_may_only_add_to_the_usage_counters(synth: Synth, key: FunctionKey) -> None:
    # Given the statement that lets a function answering questions count its tenant's usage
    statement = usage_statement(synth, key)
    # Then it is UpdateItem alone, on the table itself (no index), naming only the keys and the counters
    # and returning nothing: no attribute of a document or settings item can be changed or read through it
    assert statement.actions == {"dynamodb:UpdateItem"}
    assert statement.resources == (f"<{synth.logical_id(synth.stack.storage.table)}.Arn>",)
    assert statement.condition == {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["tenant_id", "doc_id", *COUNTERS]},
        "StringEqualsIfExists": {"dynamodb:ReturnValues": "NONE"},
    }
    assert not set(COUNTERS) & {"body", "path", "owner", "visibility", "status", "settings", "version"}


def test_only_the_query_function_may_stream_from_the_generation_model(synth: Synth) -> None:
    # ConverseStream (a streamed answer) needs InvokeModelWithResponseStream; the MCP function answers whole.
    def streamed(key: FunctionKey) -> set[str]:
        return {
            r
            for s in statements(synth, key)
            if "bedrock:InvokeModelWithResponseStream" in s.actions
            for r in s.resources
        }

    assert streamed("query") and streamed("query") <= bedrock_resources(synth, "query")
    assert not streamed("mcp") and not streamed("ingest")


def test_sources_are_reached_through_their_partitions_and_pages_through_their_folder(dev: Synth) -> None:
    # The documents and refresh functions reach the source partitions by a LeadingKeys condition only
    for key in ("documents", "refresh"):
        (granted,) = [s for s in statements(dev, key) if "dynamodb:BatchWriteItem" in s.actions]
        assert granted.condition == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["#sources#*", "#sources-due"]}
        }
    # The refresh function: no other DynamoDB grant, and S3 puts and deletes of the sources' folders only
    refresh = statements(dev, "refresh")
    dynamodb = [s for s in refresh if any(a.startswith("dynamodb:") for a in s.actions)]
    assert len(dynamodb) == 1
    s3 = [s for s in refresh if any(a.startswith("s3:") for a in s.actions)]
    assert [(set(s.actions), s.resources) for s in s3] == [
        (
            {"s3:PutObject", "s3:DeleteObject"},
            (f"<{dev.logical_id(dev.stack.storage.bucket)}.Arn>/tenants/*/sources/*",),
        )
    ]
