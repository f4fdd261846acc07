"""The Converse feature table: a model lacking what the configuration needs is refused at cold start,
naming the model and the feature (the CDK config refuses it at synth: tests/infrastructure/test_bedrock.py)."""

from __future__ import annotations

import pytest

from citewise.aws import bedrock_models
from citewise.domain.errors import ValidationError
from citewise.runtime.services import Services
from citewise.runtime.settings import QuerySettings


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("amazon.nova-lite-v1:0", "amazon.nova-lite-v1:0"),
        ("us.amazon.nova-lite-v1:0", "amazon.nova-lite-v1:0"),
        ("global.anthropic.claude-sonnet-4-20250514-v1:0", "anthropic.claude-sonnet-4-20250514-v1:0"),
        ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-3-haiku-20240307-v1:0"),
        (
            "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-haiku-20241022-v1:0",
            "anthropic.claude-3-5-haiku-20241022-v1:0",
        ),
        ("arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1", "amazon.titan-text-express-v1"),
        ("meta.llama3-1-8b-instruct-v1:0", "meta.llama3-1-8b-instruct-v1:0"),
    ],
)
def test_the_base_model_is_found_inside_profiles_and_arns(model_id: str, expected: str) -> None:
    assert bedrock_models.base_model_id(model_id) == expected


@pytest.mark.parametrize(
    ("model_id", "guardrail"),
    [
        ("us.amazon.nova-lite-v1:0", True),
        ("anthropic.claude-3-haiku-20240307-v1:0", True),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", True),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", False),
        ("anthropic.claude-sonnet-4-20250514-v1:0", False),
        # not in the table: taken as configured
        ("meta.llama3-1-70b-instruct-v1:0", True),
        ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", True),
    ],
)
def test_models_with_what_the_configuration_needs_are_accepted(model_id: str, guardrail: bool) -> None:
    bedrock_models.require(model_id, guardrail=guardrail)


@pytest.mark.parametrize(
    ("model_id", "guardrail", "missing"),
    [
        ("amazon.titan-text-express-v1", False, ["system prompts"]),
        ("amazon.titan-text-premier-v1:0", True, ["system prompts"]),
        ("cohere.command-text-v14", False, ["system prompts"]),
        ("ai21.j2-ultra-v1", False, ["system prompts"]),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", True, ["guardrails"]),
        ("anthropic.claude-opus-4-1-20250805-v1:0", True, ["guardrails"]),
        ("ai21.jamba-instruct-v1:0", True, ["guardrails"]),
    ],
)
def test_a_model_lacking_a_needed_feature_is_refused(model_id: str, guardrail: bool, missing: list[str]) -> None:
    with pytest.raises(ValidationError) as raised:
        bedrock_models.require(model_id, guardrail=guardrail)
    assert raised.value.details == {"model": model_id, "missing": missing}
    assert model_id in raised.value.message and missing[0] in raised.value.message
    assert bedrock_models.FEATURES_PAGE in raised.value.message


def test_the_query_function_refuses_such_a_model_at_cold_start() -> None:
    # Given query settings naming a Titan text model for Bedrock synthesis
    settings = QuerySettings(
        backend="aws",
        opensearch_endpoint="https://search.example.com",
        embedder="hashing",
        synthesizer="bedrock",
        generation_model_id="amazon.titan-text-lite-v1",
    )
    # When the services are built (at cold start) / Then they are refused, before any request
    with pytest.raises(ValidationError, match="does not support system prompts"):
        Services(settings)
    # And with the extractive synthesizer the model setting is not used, so not checked
    Services(settings.model_copy(update={"synthesizer": "extractive"}))
