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
_CONVERSE_STREAM = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("ConverseStream")


def converse_stream_events(
    text: str, *, stop_reason: str = "end_turn", usage: tuple[int, int] = (1200, 80), words: int = 3
) -> list[dict[str, Any]]:
    """The events of a ConverseStream response as botocore parses them, `text` a few words per delta, each
    event checked against the API model's event stream shape."""
    parts = text.split(" ")
    pieces = [("" if i == 0 else " ") + " ".join(parts[i : i + words]) for i in range(0, len(parts), words)]
    events: list[dict[str, Any]] = [
        {"messageStart": {"role": "assistant"}},
        *({"contentBlockDelta": {"delta": {"text": piece}, "contentBlockIndex": 0}} for piece in pieces),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": stop_reason}},
        {
            "metadata": {
                "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
                "metrics": {"latencyMs": 850},
            }
        },
    ]
    for event in events:
        validate_parameters(event, _CONVERSE_STREAM.output_shape.members["stream"])
    return events


class FakeEventStream:
    """botocore's `EventStream` over given events: iterable once, `close()` records that it was closed."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = iter(events)
        self.closed = False
        self.read = 0

    def __iter__(self) -> Any:
        for event in self._events:
            if self.closed:
                return
            self.read += 1
            yield event

    def close(self) -> None:
        self.closed = True


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

    def converse_stream(self, **request: Any) -> dict[str, Any]:
        validate_parameters(request, _CONVERSE_STREAM.input_shape)
        system = "".join(block["text"] for block in request.get("system", []))
        (message,) = request["messages"]
        user = "".join(block["text"] for block in message["content"])
        self.stream = FakeEventStream(converse_stream_events(self.model(system, user)))
        return {"stream": self.stream}
