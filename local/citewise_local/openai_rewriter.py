"""The follow-up rewriter on an OpenAI-compatible chat endpoint (`citewise.ports.rewriter`; `CITEWISE_REWRITER=
openai`, or `auto` with `CITEWISE_SYNTHESIZER=openai`).

The same client as the synthesizer (`citewise_local.openai_synthesis`: one total deadline, streamed or
plain completions, errors as GenerationError/ThrottledError), with the rewrite prompt and a short
deadline (`CITEWISE_REWRITE_TIMEOUT`): the model that answers also rewrites, so nothing else runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from citewise.ports.rewriter import REWRITE_INSTRUCTIONS, Exchange, UnusableRewrite, checked_rewrite, rewrite_prompt
from citewise_local.openai_synthesis import OpenAIChatSynthesizer

MAX_TOKENS = 200


class OpenAIRewriter(OpenAIChatSynthesizer):
    """A `Rewriter` over `POST {base_url}/chat/completions` (the synthesizer's client, another prompt)."""

    name = "openai"

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": REWRITE_INSTRUCTIONS},
                {"role": "user", "content": rewrite_prompt(question, history)},
            ],
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
            "stream": False,
        }
        pieces: list[str] = []
        reading = self._complete(json.dumps(body).encode())  # the text as read, then how it ended
        while True:
            try:
                pieces.append(next(reading))
            except StopIteration as ended:
                reply = ended.value
                break
        if reply.finish_reason not in (None, "stop"):
            raise UnusableRewrite(f"the model stopped with {reply.finish_reason}")
        return checked_rewrite("".join(pieces))
