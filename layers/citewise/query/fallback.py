"""A generative synthesizer that falls back to another (the extractive one) when its model fails.

For a model endpoint that may be down (a laptop's Ollama not started, a busy shared vLLM): the operator
chooses, with `CITEWISE_GENERATION_FALLBACK=extractive`, a quoted answer over a `GENERATION_ERROR` or
`THROTTLED` response. Both answers keep the same contract, so the caller sees a grounded answer either
way; the log line (the error code only) tells the operator which one was given.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence

from citewise.domain.errors import GenerationError, ThrottledError
from citewise.domain.models import Answer, SearchHit
from citewise.ports.synthesizer import AnswerEvent, Synthesizer

logger = logging.getLogger(__name__)


class FallbackSynthesizer:
    """`primary`'s answer, or `fallback`'s when `primary` raises `GenerationError` or `ThrottledError`.

    Other errors (a bug, a validation error) are not the model's unavailability and propagate.
    """

    def __init__(self, primary: Synthesizer, fallback: Synthesizer) -> None:
        self.primary = primary
        self.fallback = fallback

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """The primary's answer; on a generation failure, the fallback's (with the same instructions)."""
        try:
            return self.primary.answer(question, hits, instructions=instructions)
        except (GenerationError, ThrottledError) as exc:
            logger.warning("generation failed (%s); answering with the fallback synthesizer", exc.code)
            return self.fallback.answer(question, hits, instructions=instructions)

    def stream(
        self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None
    ) -> Generator[AnswerEvent, None, None]:
        """The primary's stream; the fallback's if the primary fails before sending anything. A failure after
        text was sent propagates: the reader has seen part of one answer and cannot be given another."""
        events = self.primary.stream(question, hits, instructions=instructions)
        try:
            try:
                first = next(events)
            except (GenerationError, ThrottledError) as exc:
                logger.warning("generation failed (%s); answering with the fallback synthesizer", exc.code)
                yield from self.fallback.stream(question, hits, instructions=instructions)
                return
            yield first
            yield from events
        finally:
            events.close()
