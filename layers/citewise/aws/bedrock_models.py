"""What citewise needs of a Converse model, and which models have it: one table, checked at cold start.

The synthesizer (`citewise.aws.bedrock_synthesis`) sends its rules as a Converse `system` prompt and,
when one is configured, a `guardrailConfig`. Converse models differ in both: Amazon Titan Text and the
older Cohere Command models take no system prompt, and some Anthropic models take no guardrail. A model
lacking a feature fails every question with a `ValidationException`; `require` refuses it at cold start
instead (the query function's and, through the CDK config, at synth), naming the model and the feature.

Source of the table: "Supported models and model features" of the Amazon Bedrock User Guide,
https://docs.aws.amazon.com/bedrock/latest/userguide/conversation-inference-supported-models-features.html
(columns "System prompts" and "Guardrails"). A model id matches the longest prefix below after any
cross-region inference-profile prefix (`us.`, `eu.`, `apac.`, `global.`, ...) and any ARN path are taken
off. A model not in the table (a newer model, an application inference profile, a custom model) is
accepted as configured: `require` cannot know it, and the first question then says what Bedrock refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from citewise.domain.errors import ValidationError

FEATURES_PAGE = (
    "https://docs.aws.amazon.com/bedrock/latest/userguide/conversation-inference-supported-models-features.html"
)
_GEO_PREFIX = re.compile(r"^[a-z]{2}[a-z-]{0,5}\.(?=[a-z0-9-]+\.)")


@dataclass(frozen=True)
class ConverseFeatures:
    """The Converse features of one model family that citewise may use."""

    system_prompt: bool
    guardrail: bool


# Model id prefix -> features, from the page above. Longest prefix wins.
CONVERSE_MODELS: dict[str, ConverseFeatures] = {
    "ai21.j2": ConverseFeatures(system_prompt=False, guardrail=True),
    "ai21.jamba-instruct": ConverseFeatures(system_prompt=True, guardrail=False),
    "ai21.jamba-1-5": ConverseFeatures(system_prompt=True, guardrail=True),
    "amazon.nova-": ConverseFeatures(system_prompt=True, guardrail=True),
    "amazon.titan-text": ConverseFeatures(system_prompt=False, guardrail=True),
    "anthropic.claude-v2": ConverseFeatures(system_prompt=True, guardrail=True),
    "anthropic.claude-instant": ConverseFeatures(system_prompt=True, guardrail=True),
    "anthropic.claude-3-": ConverseFeatures(system_prompt=True, guardrail=True),
    "anthropic.claude-3-5-haiku": ConverseFeatures(system_prompt=True, guardrail=False),
    "anthropic.claude-sonnet-4-2025": ConverseFeatures(system_prompt=True, guardrail=False),
    "anthropic.claude-opus-4-2025": ConverseFeatures(system_prompt=True, guardrail=False),
    "anthropic.claude-opus-4-1-": ConverseFeatures(system_prompt=True, guardrail=False),
    "cohere.command-text": ConverseFeatures(system_prompt=False, guardrail=True),
    "cohere.command-light-text": ConverseFeatures(system_prompt=False, guardrail=True),
}


def base_model_id(model_id: str) -> str:
    """The foundation model id inside a model id, inference profile id or ARN
    (`arn:...:inference-profile/us.anthropic.claude-3-haiku-...` -> `anthropic.claude-3-haiku-...`)."""
    name = model_id.rsplit("/", 1)[-1]
    return _GEO_PREFIX.sub("", name, count=1)


def features_of(model_id: str) -> ConverseFeatures | None:
    """The table's row for `model_id` (longest matching prefix), or None for a model it does not know."""
    base = base_model_id(model_id)
    matches = [prefix for prefix in CONVERSE_MODELS if base.startswith(prefix)]
    return CONVERSE_MODELS[max(matches, key=len)] if matches else None


def require(model_id: str, *, guardrail: bool) -> None:
    """Refuse `model_id` if it lacks what the synthesizer will send: always a system prompt, and a
    guardrail when one is configured. A `ValidationError` names the model, the feature and the source."""
    features = features_of(model_id)
    if features is None:
        return
    missing = [name for name, needed, has in _needs(features, guardrail=guardrail) if needed and not has]
    if missing:
        raise ValidationError(
            f"the generation model '{model_id}' does not support {' or '.join(missing)} in the Converse API, "
            f"which citewise needs (see {FEATURES_PAGE}); configure another model"
            + (" or no guardrail" if missing == ["guardrails"] else ""),
            details={"model": model_id, "missing": missing},
        )


def _needs(features: ConverseFeatures, *, guardrail: bool) -> list[tuple[str, bool, bool]]:
    """(feature, needed, supported) for each feature citewise may use."""
    return [("system prompts", True, features.system_prompt), ("guardrails", guardrail, features.guardrail)]
