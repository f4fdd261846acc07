"""The Synthesizer on Amazon Bedrock's Converse API: numbered sources in, a cited answer out.

Only what every Converse text model supports is used (a `system` prompt, one user message, `maxTokens`
and `temperature`, an optional guardrail), so the same code runs Anthropic Claude, Amazon Nova and Meta
Llama by changing the model id.

The model is trusted with wording, never with citations: its text goes through
`citewise.ports.grounding.ground` (the rules every generative synthesizer shares: unknown markers dropped,
the rest renumbered, quotes chosen verbatim from the cited chunk, `NO_ANSWER` without a valid citation),
and the prompt is that module's too.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import GenerationError
from citewise.domain.models import Answer, SearchHit
from citewise.ports.grounding import Grounder, blocked, ground, system_prompt, user_message
from citewise.ports.synthesizer import AnswerDone, AnswerEvent, collected, replayed, unanswered

logger = logging.getLogger(__name__)

ACTION = "bedrock:Converse"
STREAM_ACTION = "bedrock:ConverseStream"
# Converse stop reasons meaning no usable answer was produced on purpose: a Bedrock guardrail, or the
# model provider's own content filter.
BLOCKED_STOP_REASONS = frozenset({"guardrail_intervened", "content_filtered"})
# Stop reasons of an answer cut short: what was written is kept (and grounded) if there is any.
CUT_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})


class BedrockSynthesizer:
    """The `Synthesizer` over `bedrock-runtime` Converse, with citations checked against the hits.

    Token usage (`input_tokens`, `output_tokens`, `total_tokens`) comes back on `Answer.usage` for cost
    metrics, also when a guardrail blocked the answer.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        guardrail_identifier: str | None = None,
        guardrail_version: str | None = None,
    ) -> None:
        """Configure only: the client (default `citewise.aws.clients.client`) is created on the first answer.

        `model_id` is a model id, inference profile id or ARN. Temperature defaults to 0: grounded
        answers should vary as little as possible. A guardrail needs both its identifier and version.
        """
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if not 0.0 <= temperature <= 1.0:
            raise ValueError("temperature must be between 0 and 1")
        if (guardrail_identifier is None) != (guardrail_version is None):
            raise ValueError("a guardrail needs both guardrail_identifier and guardrail_version")
        self.model_id = model_id
        self._client = client
        self._region = region
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._guardrail = (
            {"guardrailIdentifier": guardrail_identifier, "guardrailVersion": guardrail_version}
            if guardrail_identifier is not None and guardrail_version is not None
            else None
        )

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """An answer citing only `hits`; with no hits the model is not called.

        `instructions` (an operator's) follow the fixed rules in the system prompt.
        """
        if not hits:
            return unanswered()
        try:
            response = self._runtime().converse(**self._request(question, hits, instructions))
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, GenerationError, ACTION) from exc
        if not isinstance(response, dict):
            raise self._malformed("the response is not an object", None)
        usage = _usage(response.get("usage"))
        stop_reason = response.get("stopReason")
        if stop_reason in BLOCKED_STOP_REASONS:
            logger.info("the answer was blocked (stopReason %s)", stop_reason)
            return collected(blocked(usage, started=False))
        if stop_reason == "malformed_model_output":
            raise self._malformed("the model's output was malformed", stop_reason)
        text = self._text(response, stop_reason)
        if stop_reason in CUT_STOP_REASONS:
            logger.warning("the answer was cut (stopReason %s, maxTokens %d)", stop_reason, self._max_tokens)
        return ground(text, hits).model_copy(update={"usage": usage})

    def stream(
        self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None
    ) -> Generator[AnswerEvent, None, None]:
        """`answer` as the model writes it, over `ConverseStream` (the same request, the same stop reasons);
        closing the stream closes the response's connection, which ends the generation on Bedrock's side."""
        if not hits:
            yield from replayed(unanswered())
            return
        grounder = Grounder(hits)
        stop_reason: Any = None
        usage: dict[str, int] | None = None
        written = False
        try:
            response = self._runtime().converse_stream(**self._request(question, hits, instructions))
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, GenerationError, STREAM_ACTION) from exc
        events = response.get("stream") if isinstance(response, dict) else None
        if events is None:
            raise self._malformed("the response has no event stream", None)
        try:
            for event in events:
                delta = event.get("contentBlockDelta", {}).get("delta", {})
                if isinstance(delta.get("text"), str):
                    written = written or bool(delta["text"].strip())
                    yield from grounder.feed(delta["text"])
                elif "messageStop" in event:
                    stop_reason = event["messageStop"].get("stopReason")
                elif "metadata" in event:
                    usage = _usage(event["metadata"].get("usage"))
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, GenerationError, STREAM_ACTION) from exc
        finally:
            events.close()
        if stop_reason in BLOCKED_STOP_REASONS:
            logger.info("the answer was blocked (stopReason %s)", stop_reason)
            yield from blocked(usage, started=grounder.started)
            return
        if stop_reason == "malformed_model_output":
            raise self._malformed("the model's output was malformed", stop_reason)
        if not written:
            raise self._no_text(stop_reason)
        if stop_reason in CUT_STOP_REASONS:
            logger.warning("the answer was cut (stopReason %s, maxTokens %d)", stop_reason, self._max_tokens)
        rest, answer = grounder.finish()
        yield from rest
        yield AnswerDone(answer.model_copy(update={"usage": usage}))

    def _runtime(self) -> Any:
        """The injected client, or one made on first use (nothing is created at cold start)."""
        if self._client is None:
            self._client = aws.client("bedrock-runtime", region=self._region)
        return self._client

    def _request(self, question: str, hits: Sequence[SearchHit], instructions: str | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "modelId": self.model_id,
            "system": [{"text": system_prompt(instructions)}],
            "messages": [{"role": "user", "content": [{"text": user_message(question, hits)}]}],
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": self._temperature},
        }
        if self._guardrail is not None:
            request["guardrailConfig"] = dict(self._guardrail)
        return request

    def _text(self, response: dict[str, Any], stop_reason: Any) -> str:
        """The text blocks of the output message (reasoning or other blocks are not the answer)."""
        output = response.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            raise self._malformed("the response has no output message", stop_reason)
        text = "".join(
            block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
        if not text.strip():
            raise self._no_text(stop_reason)
        return text

    def _no_text(self, stop_reason: Any) -> GenerationError:
        if stop_reason == "model_context_window_exceeded":
            return self._malformed(
                "the question and its sources filled the model's context window before any answer; "
                "use a model with a larger window, or fewer or smaller chunks",
                stop_reason,
            )
        return self._malformed("the output message has no text", stop_reason)

    def _malformed(self, problem: str, stop_reason: Any) -> GenerationError:
        return GenerationError(
            f"{ACTION} returned an unusable answer: {problem}",
            details={"action": ACTION, "model": self.model_id, "stop_reason": str(stop_reason)},
        )


def _usage(value: Any) -> dict[str, int] | None:
    """Converse's `usage` as snake_case counts; None if absent or malformed (usage is for metrics)."""
    if not isinstance(value, dict):
        return None
    names = {"inputTokens": "input_tokens", "outputTokens": "output_tokens", "totalTokens": "total_tokens"}
    usage = {ours: value[theirs] for theirs, ours in names.items() if isinstance(value.get(theirs), int)}
    return usage or None
