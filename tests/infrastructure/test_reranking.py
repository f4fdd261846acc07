"""Reranking in the stack: off by default (no grant, no setting), and when an environment turns it on, the
query and MCP functions get exactly `bedrock:Rerank` and InvokeModel on the reranker model, and the settings
that choose it; no other function gets anything. A model in a region that does not offer it fails the synth.

Required actions: https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-prereq.html ("Use reranking
independently": bedrock:Rerank, and bedrock:InvokeModel optionally scoped to the reranking models).
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from citewise_infra.bedrock import rerank_statements
from citewise_infra.config import ConfigError, load_environment
from citewise_infra.constants import FUNCTION_KEYS, FunctionKey

from citewise.runtime.settings import QuerySettings

from .conftest import MANAGED, Synth, synthesize
from .templates import all_actions, flat, role_statements

RERANK_ON = {"rerank": {"enabled": True, "model_id": "amazon.rerank-v1:0", "region": "us-west-2", "candidates": 40}}
RERANKER_ARN = "arn:<AWS::Partition>:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}


@pytest.fixture(scope="module")
def reranking(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-rerank"), "dev", {**MANAGED, **RERANK_ON})


def _statements(synth: Synth, key: FunctionKey) -> list[Any]:
    return role_statements(synth, synth.logical_id(getattr(synth.stack.functions, key).role))


def _variables(synth: Synth, key: FunctionKey) -> dict[str, Any]:
    function = synth.resources[synth.logical_id(getattr(synth.stack.functions, key).function)]
    return function["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("key", FUNCTION_KEYS)
def test_off_by_default_no_function_may_rerank_or_is_told_to(synth: Synth, key: FunctionKey) -> None:
    statements = _statements(synth, key)
    assert "bedrock:Rerank" not in all_actions(statements)
    assert not any("rerank" in resource for s in statements for resource in s.resources)
    assert not any(name.startswith("CITEWISE_RERANK") for name in _variables(synth, key))


@pytest.mark.parametrize("key", ["query", "mcp"])
def test_when_on_the_answering_functions_rerank_with_that_model_only(reranking: Synth, key: FunctionKey) -> None:
    statements = _statements(reranking, key)
    # On "*": bedrock:Rerank (it has no resource-level permissions) and X-Ray's, nothing else (CDK merges
    # statements of the same resources into one)
    unscoped = [s for s in statements if "*" in s.resources]
    assert all_actions(unscoped) == XRAY | {"bedrock:Rerank"}
    assert all(s.resources == ("*",) and not s.condition for s in unscoped)
    # InvokeModel on the reranker model's ARN in the reranker's region, and no other reranker
    invoke = {r for s in statements if "bedrock:InvokeModel" in s.actions for r in s.resources}
    assert RERANKER_ARN in invoke
    assert [r for r in invoke if "rerank" in r] == [RERANKER_ARN]
    # And the function is told to rerank with that model there
    variables = _variables(reranking, key)
    assert {name: value for name, value in variables.items() if name.startswith("CITEWISE_RERANK")} == {
        "CITEWISE_RERANKER": "bedrock",
        "CITEWISE_RERANK_MODEL_ID": "amazon.rerank-v1:0",
        "CITEWISE_RERANK_REGION": "us-west-2",
        "CITEWISE_RERANK_CANDIDATES": "40",
        "CITEWISE_RERANK_TIMEOUT": "5",
    }
    # which the function's own settings accept as they are
    settings = QuerySettings.model_validate(
        {name.removeprefix("CITEWISE_").lower(): value for name, value in variables.items() if "RERANK" in name}
    )
    assert settings.reranker == "bedrock" and settings.rerank_candidates == 40


@pytest.mark.parametrize("key", ["ingest", "documents", "bootstrap"])
def test_when_on_no_other_function_may_rerank(reranking: Synth, key: FunctionKey) -> None:
    statements = _statements(reranking, key)
    assert "bedrock:Rerank" not in all_actions(statements)
    assert not any("rerank" in resource for s in statements for resource in s.resources)
    assert not any(name.startswith("CITEWISE_RERANK") for name in _variables(reranking, key))


def test_the_unscoped_grant_is_acknowledged_with_its_reason(reranking: Synth) -> None:
    # The synth passed cdk-nag; the acknowledgement of Resource::* on the query role names Rerank's reason
    role_path = "/" + reranking.stack.functions.query.role.node.path
    entries = [
        entry
        for path, items in reranking.metadata().items()
        if path.startswith(role_path)
        for entry in items
        if "bedrock:Rerank" in str(entry.get("data", ""))
    ]
    assert entries, "no acknowledgement mentions bedrock:Rerank on the query role"


def test_in_the_stacks_region_the_model_arn_follows_the_stack() -> None:
    stack = Stack(App(), "S")
    rerank, invoke = (stack.resolve(s.to_statement_json()) for s in rerank_statements("cohere.rerank-v3-5:0"))
    assert rerank == {"Action": "bedrock:Rerank", "Effect": "Allow", "Resource": "*"}
    assert invoke["Action"] == "bedrock:InvokeModel"
    assert (
        flat(invoke["Resource"]) == "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/cohere.rerank-v3-5:0"
    )


def test_a_model_the_region_does_not_offer_fails_the_synth_naming_the_regions() -> None:
    # Amazon Rerank 1.0 is not offered in us-east-1 (Cohere Rerank 3.5 is)
    environments = {"dev": {"region": "us-east-1", "rerank": {"enabled": True, "model_id": "amazon.rerank-v1:0"}}}
    with pytest.raises(ConfigError, match=r"not offered in us-east-1: set rerank.region to one of ap-northeast-1"):
        load_environment(environments, "dev")
    environments["dev"]["rerank"]["model_id"] = "cohere.rerank-v3-5:0"  # type: ignore[index]
    assert load_environment(environments, "dev").rerank.enabled
    # Off, the region is not checked
    environments["dev"]["rerank"] = {"enabled": False}
    assert not load_environment(environments, "dev").rerank.enabled


def test_unknown_reranking_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="rerank.model_id"):
        load_environment({"dev": {"region": "us-west-2", "rerank": {"model_id": "cohere.rerank-v3"}}}, "dev")
    with pytest.raises(ConfigError, match="rerank.top_n"):
        load_environment({"dev": {"region": "us-west-2", "rerank": {"top_n": 5}}}, "dev")
