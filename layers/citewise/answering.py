"""Question answering: retrieve inside the caller's access, then synthesize from what was found."""

from __future__ import annotations

from citewise.models import Answer, Caller, SearchRequest
from citewise.retrieval import Retriever
from citewise.synthesis.base import Synthesizer, unanswered


def answer_question(retriever: Retriever, synthesizer: Synthesizer, caller: Caller, request: SearchRequest) -> Answer:
    """An answer citing only chunks the caller may read; with nothing above `min_score`, says so."""
    hits = retriever.search(caller, request)
    if not hits:
        return unanswered()
    return synthesizer.answer(request.query, hits)
