"""The extractive fallback: a model's unavailability gives the quoted answer; any other failure shows."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from citewise.builtin.extractive import ExtractiveSynthesizer
from citewise.domain.errors import CitewiseError, GenerationError, SearchBackendError, ThrottledError
from citewise.domain.models import Answer, SearchHit
from citewise.query.fallback import FallbackSynthesizer
from tests.factories import hit

HITS = [hit(1, "Rotate the signing key every ninety days.")]
QUESTION = "How often should the signing key be rotated?"


class Failing:
    """A synthesizer whose model fails with `error`; keeps the instructions it was given."""

    def __init__(self, error: CitewiseError) -> None:
        self.error = error
        self.instructions: list[str | None] = []

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        self.instructions.append(instructions)
        raise self.error


@pytest.mark.parametrize("error", [GenerationError("the endpoint is down"), ThrottledError("slow down")])
def test_a_model_failure_gives_the_fallback_answer_and_logs_only_the_code(
    error: CitewiseError, caplog: pytest.LogCaptureFixture
) -> None:
    primary = Failing(error)
    with caplog.at_level(logging.WARNING):
        answer = FallbackSynthesizer(primary, ExtractiveSynthesizer()).answer(QUESTION, HITS, instructions="Cite.")
    assert answer == ExtractiveSynthesizer().answer(QUESTION, HITS)
    assert primary.instructions == ["Cite."]
    assert error.code in caplog.text and error.message not in caplog.text and "ninety" not in caplog.text


def test_any_other_failure_is_not_hidden() -> None:
    with pytest.raises(SearchBackendError):
        FallbackSynthesizer(Failing(SearchBackendError("bug")), ExtractiveSynthesizer()).answer(QUESTION, HITS)
