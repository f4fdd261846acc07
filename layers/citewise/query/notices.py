"""Why a question got no grounded answer, told so the caller can act on it (`Answer.notice`).

"I could not find an answer" means three different things that call for three different fixes: nothing is
indexed that the caller may read (a mistyped tenant, an upload still PENDING), the filters excluded every
document (often a value of the wrong type: `2025` where the documents hold `"2025"`), or the documents
do not answer the question. The first two cost one more index query, made only when retrieval found
nothing: the caller's nearest chunks without any filter, inside the same access filter as every search.
A filter routed from the question is never the reason: one that matches nothing is dropped and the question
searched without it (`citewise.query.retrieval`, issue 26).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from citewise.domain.matching import metadata_view
from citewise.domain.models import Answer, Caller, Chunk, Comparison, Filter, Notice, SearchRequest
from citewise.ports.synthesizer import NO_ANSWER
from citewise.query.retrieval import Retrieval, Retriever

NO_DOCUMENTS = "No documents are indexed for you yet: upload or ingest some first, then ask again."
NOT_FOUND = "No passage of the retrieved documents answers the question."
NOT_GROUNDED = "Some sentences of the answer are not supported by the sources they cite (or cite none)."
SAMPLE = 20
"""Chunks read to tell an empty index from a filter that excluded everything, and to find the key types."""


def no_hits_notice(retriever: Retriever, caller: Caller, request: SearchRequest, retrieval: Retrieval) -> Notice:
    """Why retrieval found nothing for `request`: no documents, the filters, or `min_score`."""
    nearest = [
        scored.chunk
        for scored in retriever.index.vector_search(caller, retriever.embedder.embed_query(request.query), None, SAMPLE)
    ]
    if not nearest:
        return Notice(code="NO_DOCUMENTS", message=NO_DOCUMENTS)
    # A routed filter is kept only when it matched something (else it is dropped: `Routing.filter_fallback`),
    # so nothing found under one means nothing reached min_score.
    if request.filters is not None and not retrieval.routing.applied_filters:
        hint = filter_type_hint(request.filters, nearest)
        return Notice(
            code="NO_FILTER_MATCH", message="No document matched your filters." + (f" {hint}" if hint else "")
        )
    return Notice(code="NOT_FOUND", message=f"No passage scored at least min_score ({request.min_score:g}).")


def answer_notice(answer: Answer) -> Notice | None:
    """The notice of a synthesizer's answer: none when grounded; the synthesizer's own when it gives one (the
    extractive answerer's refusal says how far the best passage was from answering); NOT_GROUNDED when it
    cites but not for every sentence; NOT_FOUND when it cites nothing (its own text says why if it is not
    `NO_ANSWER`: a content filter's refusal, say)."""
    if answer.grounded:
        return None
    if answer.notice is not None:
        return answer.notice
    if answer.citations:
        return Notice(code="NOT_GROUNDED", message=NOT_GROUNDED)
    return Notice(code="NOT_FOUND", message=NOT_FOUND if answer.answer == NO_ANSWER else answer.answer)


def filter_type_hint(flt: Filter, chunks: Sequence[Chunk]) -> str | None:
    """A hint when a comparison's value has another type than the same key holds in the caller's documents
    (`year` compared with the string "2025" where documents hold the number 2025); None if none does."""
    views = [metadata_view(chunk) for chunk in chunks]
    for comparison in _comparisons(flt):
        wanted = _kind(comparison.value)
        held = {_kind(view[comparison.key]) for view in views if view.get(comparison.key) is not None}
        if held and wanted not in held:
            example = next(view[comparison.key] for view in views if view.get(comparison.key) is not None)
            return (
                f"The filter compares '{comparison.key}' with a {wanted} ({comparison.value!r}), but your documents "
                f"hold {' or '.join(sorted(held))} values there (e.g. {example!r})."
            )
    return None


def _comparisons(flt: Filter) -> Iterator[Comparison]:
    operand = flt.operand
    if isinstance(operand, Comparison):
        yield operand
        return
    for child in operand:
        yield from _comparisons(child)


def _kind(value: Any) -> str:
    """The JSON type a filter compares by; a list compares by its items (a tag list holds strings)."""
    if isinstance(value, list):
        return _kind(value[0]) if value else "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"
