"""The Synthesizer port: a question and numbered sources in, an answer with verified citations out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citewise.domain.models import Answer, Citation, SearchHit

NO_ANSWER = "I could not find an answer to that in your documents."


class Synthesizer(Protocol):
    """Writes an answer only from the given sources; every [n] marker cites source n of `hits`."""

    def answer(self, question: str, hits: Sequence[SearchHit]) -> Answer:
        """An answer with citations, or `NO_ANSWER` (grounded=False, no citations) if none applies."""
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
