"""Search mode s3vectors, read from the synthesized template: a vector bucket encrypted with the stack's
key, no OpenSearch at all, and each function's S3 Vectors grants scoped to the tenants' indexes
(`citewise_infra.vectors`)."""

from __future__ import annotations

import pytest
from citewise_infra.config import load_environment
from citewise_infra.constants import CDK_JSON, CONTEXT_ENVIRONMENTS, FunctionKey, Outputs

from citewise.aws.s3vectors_requests import INDEX_PREFIX, index_name

from .conftest import Synth
from .templates import Statement, as_list, flat, references, role_statements

BUCKET_NAME = "citewise-dev-vectors"
BUCKET_ARN = f"arn:aws:s3vectors:us-east-1:<AWS::AccountId>:bucket/{BUCKET_NAME}"  # dev's region
INDEXES = f"{BUCKET_ARN}/index/{INDEX_PREFIX}*"
# What each function's code calls (docs/s3vectors-design.md, "Calls per operation"), and nothing more.
INDEX_ACTIONS: dict[str, set[str]] = {
    "ingest": {
        "s3vectors:PutVectors",
        "s3vectors:DeleteVectors",
        "s3vectors:CreateIndex",
        "s3vectors:GetIndex",
        "s3vectors:QueryVectors",
        "s3vectors:GetVectors",
    },
    "documents": {"s3vectors:DeleteVectors", "s3vectors:GetIndex", "s3vectors:QueryVectors", "s3vectors:GetVectors"},
    "erasure": {"s3vectors:ListVectors", "s3vectors:DeleteVectors", "s3vectors:DeleteIndex", "s3vectors:GetIndex"},
    # The reading functions read through the tenant-reader role (issue 28, section 3), not their own.
    "query": set(),
    "mcp": set(),
}


def vector_statements(synth: Synth, key: str) -> list[Statement]:
    role = getattr(synth.stack.functions, key).role
    return [
        s for s in role_statements(synth, synth.logical_id(role)) if any(a.startswith("s3vectors:") for a in s.actions)
    ]


def test_the_vector_bucket_is_encrypted_with_the_stacks_key_and_refuses_requests_without_tls(s3vectors: Synth) -> None:
    [bucket] = s3vectors.of_type("AWS::S3Vectors::VectorBucket").values()
    assert bucket["Properties"]["VectorBucketName"] == BUCKET_NAME
    encryption = bucket["Properties"]["EncryptionConfiguration"]
    assert encryption["SseType"] == "aws:kms"
    assert references(encryption["KmsKeyArn"]) == {s3vectors.logical_id(s3vectors.stack.storage.key)}
    [policy] = s3vectors.of_type("AWS::S3Vectors::VectorBucketPolicy").values()
    [statement] = policy["Properties"]["Policy"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*" and statement["Action"] == "s3vectors:*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {flat(r) for r in statement["Resource"]} == {BUCKET_ARN, f"{BUCKET_ARN}/*"}


def test_the_key_lets_s3_vectors_indexing_decrypt_for_this_bucket_only(s3vectors: Synth) -> None:
    key = s3vectors.resources[s3vectors.logical_id(s3vectors.stack.storage.key)]
    [statement] = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") == "indexing.s3vectors.amazonaws.com"
    ]
    assert statement["Action"] == "kms:Decrypt"
    assert flat(statement["Condition"]["ArnLike"]["aws:SourceArn"]) == f"{BUCKET_ARN}*"
    assert flat(statement["Condition"]["StringEquals"]["aws:SourceAccount"]) == "<AWS::AccountId>"


def test_there_is_no_opensearch_nor_index_bootstrap(s3vectors: Synth) -> None:
    types = {resource["Type"] for resource in s3vectors.resources.values()}
    assert not {t for t in types if t.startswith(("AWS::OpenSearchService::", "AWS::OpenSearchServerless::"))}
    assert "Custom::CitewiseIndex" not in types
    assert s3vectors.stack.functions.bootstrap is None and s3vectors.stack.index_bootstrap is None
    descriptions = [f["Properties"].get("Description", "") for f in s3vectors.of_type("AWS::Lambda::Function").values()]
    assert not [d for d in descriptions if "search index" in d or "onEvent" in d]
    for key in INDEX_ACTIONS:
        role = s3vectors.logical_id(getattr(s3vectors.stack.functions, key).role)
        granted = {a for s in role_statements(s3vectors, role) for a in s.actions}
        assert not {a for a in granted if a.startswith(("es:", "aoss:"))}, key


@pytest.mark.parametrize("key", sorted(INDEX_ACTIONS))
def test_each_function_gets_only_its_own_calls_on_the_tenants_indexes(s3vectors: Synth, key: FunctionKey) -> None:
    on_indexes = [s for s in vector_statements(s3vectors, key) if INDEXES in s.resources]
    assert {a for s in on_indexes for a in s.actions} == INDEX_ACTIONS[key]
    for statement in vector_statements(s3vectors, key):
        # every grant names the tenants' indexes, or (ingest's embedder tags) the bucket: never `*`
        assert statement.resources in ((INDEXES,), (BUCKET_ARN,)), statement
        assert all("*" not in action for action in statement.actions)


def test_the_writers_read_the_buckets_embedder_tags_and_only_ingest_tags_it(s3vectors: Synth) -> None:
    on_bucket = {
        key: {a for s in vector_statements(s3vectors, key) if s.resources == (BUCKET_ARN,) for a in s.actions}
        for key in INDEX_ACTIONS
    }
    check = {"s3vectors:GetVectorBucket", "s3vectors:ListTagsForResource"}
    assert on_bucket == {
        "ingest": check | {"s3vectors:TagResource"},
        "documents": check,  # a delete checks the vector space first, as every pipeline write does
        "erasure": set(),
        "query": set(),
        "mcp": set(),
    }


def test_a_tenants_index_matches_the_granted_pattern() -> None:
    assert index_name("Acme Corp").startswith(INDEX_PREFIX)


@pytest.mark.parametrize("key", sorted(INDEX_ACTIONS))
def test_the_functions_find_the_bucket_not_an_endpoint(s3vectors: Synth, key: str) -> None:
    function = s3vectors.resources[s3vectors.logical_id(getattr(s3vectors.stack.functions, key).function)]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["CITEWISE_VECTOR_BUCKET"] == BUCKET_NAME
    assert "CITEWISE_OPENSEARCH_ENDPOINT" not in variables and "CITEWISE_INDEX_NAME" not in variables


def test_the_outputs_name_the_vector_bucket(s3vectors: Synth) -> None:
    outputs = s3vectors.template["Outputs"]
    assert outputs[Outputs.VECTOR_BUCKET]["Value"] == BUCKET_NAME
    assert Outputs.SEARCH_ENDPOINT not in outputs


def test_a_context_override_chooses_the_search_mode() -> None:
    import json

    environments = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"][CONTEXT_ENVIRONMENTS]
    assert load_environment(environments, "dev", search_mode="s3vectors").search.mode == "s3vectors"
    assert load_environment(environments, "dev").search.mode == environments["dev"]["search"]["mode"]


def test_grants_never_name_one_tenant(s3vectors: Synth) -> None:
    # the stack knows no tenant: what fences one tenant's reads is the tenant-reader session, not the roles
    for key in INDEX_ACTIONS:
        for statement in vector_statements(s3vectors, key):
            assert all(as_list(r)[0].endswith(("/index/t-*", BUCKET_NAME)) for r in statement.resources)
