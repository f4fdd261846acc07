"""The Synthesizer port: a question and numbered sources in, an answer with verified citations out."""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from citewise.domain.models import Answer, Citation, SearchHit
from citewise.domain.textutil import neutralise_display_controls

NO_ANSWER = "I could not find an answer to that in your documents."

MARKER_PATTERN = r"\[\s*(?:source\s*)?\d+(?:\s*[,;]\s*(?:source\s*)?\d+)*\s*\]"
"""What reads as a citation marker (case-insensitive): `[2]`, `[2, 3]`, `[Source 2]`. The one definition,
both of what a model's answer is parsed for (`citewise.ports.grounding`) and of what `quotable` escapes."""
MARKER_RE = re.compile(MARKER_PATTERN, re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next piece of the answer's text.

    `reset` is true only when the text and citations sent so far are withdrawn and `text` starts the answer
    again: a model's content filter or guardrail stopped it after it had written cited sentences, and the
    answer is then `BLOCKED_ANSWER` (`citewise.ports.grounding`), as the non-streamed call returns it.
    """

    text: str
    reset: bool = False


@dataclass(frozen=True, slots=True)
class CitationDelta:
    """A citation, sent once its marker is in the text and its quote is verified.

    `span` is the (start, end) offsets, in the final answer's text, of the sentence the citation supports
    (on word boundaries, inside the text already sent); None when its marker follows no sentence.
    """

    citation: Citation
    span: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class AnswerDone:
    """The last event: exactly the `Answer` that `Synthesizer.answer` returns for the same model text."""

    answer: Answer


AnswerEvent = TextDelta | CitationDelta | AnswerDone
"""What `Synthesizer.stream` yields: text and citations as they are ready, then `AnswerDone`."""


class Synthesizer(Protocol):
    """Writes an answer only from the given sources.

    The contract every adapter keeps (tests/contract/test_synthesizer_contract.py): every `[n]` marker in
    the answer cites `answer.sources[n-1]`, numbered in order of first citation, and was put there by
    the synthesizer, never copied from a document (`quotable`); a marker naming no given source is
    dropped; every citation's quote is verbatim text of its chunk as `quotable` shows it; no hits or no
    valid citation gives `unanswered()`; logs never carry document text.
    """

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """An answer with citations, or `NO_ANSWER` (grounded=False, no citations) if none applies.

        `instructions` is an operator's extra system prompt (a tool profile's, e.g. "say when the
        documents do not answer"): a generative synthesizer adds it to its fixed citation rules, which it
        cannot remove; a synthesizer without a model ignores it.
        """
        ...

    def stream(
        self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None
    ) -> Generator[AnswerEvent, None, None]:
        """The same answer as `answer`, as it is written: `TextDelta`s, `CitationDelta`s, then `AnswerDone`.

        The texts of the deltas (from the last `reset` on) join to `AnswerDone.answer.answer`; every
        citation is sent after the marker it backs and before `AnswerDone`, in the order of
        `answer.citations`. Closing the iterator early stops the generation: the model call is closed.
        """
        ...


def unanswered() -> Answer:
    """The honest answer when nothing relevant was found: says so and cites nothing."""
    return Answer(answer=NO_ANSWER, citations=[], sources=[], grounded=False)


def replayed(answer: Answer) -> Generator[AnswerEvent, None, None]:
    """A finished `answer` as the events of a stream: its text in one delta, its citations, `AnswerDone`.

    For an answer made whole at once (`unanswered()`, a blocked one), so a stream has one shape
    whatever produced it.
    """
    yield TextDelta(answer.answer)
    for citation in answer.citations:
        yield CitationDelta(citation, None)
    yield AnswerDone(answer)


def collected(events: Iterator[AnswerEvent]) -> Answer:
    """The `Answer` a stream ends with (`Synthesizer.answer` of a synthesizer that streams)."""
    for event in events:
        if isinstance(event, AnswerDone):
            return event.answer
    raise RuntimeError("the answer stream ended without its answer")


def cite(hit: SearchHit, source: int, quote: str) -> Citation:
    """The citation of `quote` (verbatim text of `hit`'s chunk) as source number `source`."""
    chunk = hit.chunk
    return Citation(
        source=source,
        doc_id=chunk.document.doc_id,
        chunk_id=chunk.chunk_id,
        path=chunk.document.path,
        title=chunk.document.title,
        page=chunk.page,
        section=chunk.section,
        quote=quote,
        score=hit.score,
    )


def quotable(text: str) -> str:
    """Document text as an answer may show it, or a model may read it: with inert markers and no controls.

    A document's own `[2]` ("... for every employee [2].") quoted into an answer would read as the
    answer's citation of its second source, which says nothing of the kind; shown to a model, it invites
    the model to copy it as one. So every marker in document text becomes its parenthesised form, `(2)`,
    `(Source 2)`: still readable, no longer a citation to a reader or to any parser of `[n]`, and stable
    (quoting quoted text changes nothing). Bidirectional and terminal controls are neutralised
    (`neutralise_display_controls`). Quotes are verbatim text of this form of their chunk.
    """
    return MARKER_RE.sub(_parenthesised, neutralise_display_controls(text))


def _parenthesised(marker: re.Match[str]) -> str:
    return f"({marker.group()[1:-1]})"
