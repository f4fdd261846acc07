"""The Synthesizer port: a question and numbered sources in, an answer with verified citations out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citewise.domain.models import Answer, Citation, SearchHit

NO_ANSWER = "I could not find an answer to that in your documents."


class Synthesizer(Protocol):
    """Writes an answer only from the given sources.

    The contract every adapter keeps (tests/contract/test_synthesizer_contract.py): every `[n]` marker in
    the answer cites `answer.sources[n-1]`, numbered in order of first citation; a marker naming no given
    source is dropped; every citation's quote is verbatim text of its chunk; no hits or no valid
    citation gives `unanswered()`; logs never carry document text.
    """

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """An answer with citations, or `NO_ANSWER` (grounded=False, no citations) if none applies.

        `instructions` is an operator's extra system prompt (a tool profile's, e.g. "say when the
        documents do not answer"): a generative synthesizer adds it to its fixed citation rules, which it
        cannot remove; a synthesizer without a model ignores it.
        """
        ...


def unanswered() -> Answer:
    """The honest answer when nothing relevant was found: says so and cites nothing."""
    return Answer(answer=NO_ANSWER, citations=[], sources=[], grounded=False)


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
