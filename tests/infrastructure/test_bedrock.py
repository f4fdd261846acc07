"""Bedrock permissions from a model id: a foundation model in the stack's region, or an inference profile
plus its model in any region, only through that profile."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from citewise_infra.bedrock import guardrail_statement, invoke_statements, split_profile
from citewise_infra.config import ModelsConfig
from pydantic import ValidationError

from .templates import flat


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("amazon.nova-lite-v1:0", (None, "amazon.nova-lite-v1:0")),
        ("us.amazon.nova-lite-v1:0", ("us", "amazon.nova-lite-v1:0")),
        ("eu.anthropic.claude-3-haiku-20240307-v1:0", ("eu", "anthropic.claude-3-haiku-20240307-v1:0")),
        ("global.anthropic.claude-sonnet-4-20250514-v1:0", ("global", "anthropic.claude-sonnet-4-20250514-v1:0")),
        ("amazon.titan-embed-text-v2:0", (None, "amazon.titan-embed-text-v2:0")),
        ("cohere.embed-english-v3", (None, "cohere.embed-english-v3")),
    ],
)
def test_profiles_are_told_from_foundation_models(model_id: str, expected: tuple[str | None, str]) -> None:
    assert split_profile(model_id) == expected


def resolved(statements: list[Any]) -> list[dict[str, Any]]:
    """Statements as CloudFormation gets them, ARNs flattened (`<AWS::Region>` for the pseudo parameter)."""
    stack = Stack(App(), "S")
    rendered = []
    for statement in statements:
        raw = stack.resolve(statement.to_statement_json())
        raw["Resource"] = flat(raw["Resource"])
        if "Condition" in raw:
            raw["Condition"] = {op: {k: flat(v) for k, v in c.items()} for op, c in raw["Condition"].items()}
        rendered.append(raw)
    return rendered


def test_a_foundation_model_is_invocable_in_the_stacks_region_only() -> None:
    (statement,) = resolved(invoke_statements("amazon.nova-lite-v1:0"))
    assert statement == {
        "Action": "bedrock:InvokeModel",
        "Effect": "Allow",
        "Resource": "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/amazon.nova-lite-v1:0",
    }


def test_a_profile_is_invocable_and_its_model_only_through_it() -> None:
    profile_statement, model_statement = resolved(invoke_statements("eu.amazon.nova-lite-v1:0"))
    profile = "arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/eu.amazon.nova-lite-v1:0"
    assert profile_statement["Resource"] == profile
    assert model_statement["Resource"] == "arn:<AWS::Partition>:bedrock:*::foundation-model/amazon.nova-lite-v1:0"
    assert model_statement["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile}}


def test_a_guardrail_is_applied_by_arn() -> None:
    (statement,) = resolved([guardrail_statement("gr1")])
    assert statement["Action"] == "bedrock:ApplyGuardrail"
    assert statement["Resource"] == "arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:guardrail/gr1"


def test_the_cdk_config_refuses_such_a_model_at_synth() -> None:
    with pytest.raises(ValidationError, match="does not support guardrails"):
        ModelsConfig(
            generation_model_id="us.anthropic.claude-3-5-haiku-20241022-v1:0",
            guardrail_id="gr0abc123",
            guardrail_version="1",
        )
    assert ModelsConfig(generation_model_id="us.anthropic.claude-3-haiku-20240307-v1:0").guardrail_id is None
