"""The follow-up rewriter on Amazon Bedrock's Converse API (`citewise.ports.rewriter`).

One short call per follow-up: the instructions as the system prompt, the history and the follow-up as one
user message, a few dozen output tokens at temperature 0. It is time-boxed (one attempt, a read timeout
of `timeout` seconds) because it sits in front of retrieval: a slow or throttled model must cost the
query seconds at most, after which the question is used as asked (`citewise.query.conversations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import GenerationError
from citewise.ports.rewriter import REWRITE_INSTRUCTIONS, Exchange, UnusableRewrite, checked_rewrite, rewrite_prompt

ACTION = "bedrock:Converse"
MAX_TOKENS = 200


class BedrockRewriter:
    """A `Rewriter` over `bedrock-runtime` Converse."""

    name = "bedrock"

    def __init__(
        self, model_id: str, *, timeout: float = 5.0, client: Any | None = None, region: str | None = None
    ) -> None:
        """Configure only: the client (one attempt, a read timeout of `timeout`) is made on the first rewrite."""
        self.model_id = model_id
        self._timeout = timeout
        self._client = client
        self._region = region

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        try:
            response = self._runtime().converse(**self.request(question, history))
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, GenerationError, ACTION) from exc
        blocks = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(block.get("text", "") for block in blocks)
        if response.get("stopReason") not in (None, "end_turn", "stop_sequence"):
            raise UnusableRewrite(f"the model stopped with {response.get('stopReason')}")
        return checked_rewrite(text)

    def request(self, question: str, history: Sequence[Exchange]) -> dict[str, Any]:
        """The Converse request of one rewrite."""
        return {
            "modelId": self.model_id,
            "system": [{"text": REWRITE_INSTRUCTIONS}],
            "messages": [{"role": "user", "content": [{"text": rewrite_prompt(question, history)}]}],
            "inferenceConfig": {"maxTokens": MAX_TOKENS, "temperature": 0.0},
        }

    def _runtime(self) -> Any:
        if self._client is None:
            read_timeout = max(1, round(self._timeout))
            self._client = aws.client("bedrock-runtime", region=self._region, max_attempts=1, read_timeout=read_timeout)
        return self._client
