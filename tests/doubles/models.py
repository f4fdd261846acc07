"""Stand-ins for a generative model: a scripted model, and a Bedrock Converse client that lets it answer.

The same `ScriptedModel` writes the answers of the Bedrock fake below and of the chat-completions server
(`tests.doubles.chat_server`), so one test drives every generative synthesizer with the same model text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import botocore.session
from botocore.validate import validate_parameters

Writer = Callable[[str, str], str]
"""(system prompt, user message) -> the model's answer text."""


@dataclass
class ScriptedModel:
    """Answers `reply` (a text, or a function of the prompt) and keeps every prompt it was given."""

    reply: str | Writer = "The documents do not answer this question."
    prompts: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, system: str, user: str) -> str:
        self.prompts.append((system, user))
        return self.reply(system, user) if callable(self.reply) else self.reply


def converse_response(
    text: str | None, *, stop_reason: str = "end_turn", usage: tuple[int, int] = (1200, 80)
) -> dict[str, Any]:
    """A Converse response as botocore parses it."""
    content = [] if text is None else [{"text": text}]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
        "metrics": {"latencyMs": 850},
    }


_CONVERSE = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")


class FakeConverse:
    """`converse` of a bedrock-runtime client: checks the request against the API model, lets `model` answer."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def converse(self, **request: Any) -> dict[str, Any]:
        validate_parameters(request, _CONVERSE.input_shape)  # raises ParamValidationError, as botocore would
        system = "".join(block["text"] for block in request.get("system", []))
        (message,) = request["messages"]
        user = "".join(block["text"] for block in message["content"])
        return converse_response(self.model(system, user))
