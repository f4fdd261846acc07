"""Question answering: retrieve inside the caller's access, then synthesize from what was found."""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from citewise.domain.models import Answer, Caller, SearchHit, SearchRequest
from citewise.ports.synthesizer import NO_ANSWER, AnswerDone, AnswerEvent, Synthesizer, replayed, unanswered
from citewise.query.notices import NO_DOCUMENTS, answer_notice, no_hits_notice
from citewise.query.retrieval import Retrieval, Retriever

Stage = Callable[[str], AbstractContextManager[object]]


def untimed(_: str) -> AbstractContextManager[object]:
    """A stage that times nothing."""
    return nullcontext()


def answer_question(
    retriever: Retriever,
    synthesizer: Synthesizer,
    caller: Caller,
    request: SearchRequest,
    *,
    stage: Stage = untimed,
    instructions: str | None = None,
) -> Answer:
    """An answer citing only chunks the caller may read; with nothing above `min_score`, says so.

    An answer that is not grounded carries a `notice` saying why (`citewise.query.notices`): nothing
    indexed for the caller (the answer text says so too), filters that matched nothing, nothing that
    answers, or sentences without support.

    `stage(name)` wraps the `retrieval` and `synthesis` steps, so a handler can time each one.
    `instructions` is an operator's extra system prompt for a generative synthesizer (a tool profile's);
    it never comes from the caller, and it cannot lift the citation rules (`Synthesizer.answer`).
    """
    with stage("retrieval"):
        retrieval = retriever.retrieve(caller, request)
    if not retrieval.hits:
        return _no_hits(retriever, caller, request, retrieval)
    with stage("synthesis"):
        answer = synthesizer.answer(request.query, retrieval.hits, instructions=instructions)
    return _finished(answer, retrieval)


@dataclass(frozen=True, slots=True)
class SourcesFound:
    """The first event of a streamed answer: what retrieval found, in rank order (the final answer orders
    its `sources` by citation)."""

    hits: list[SearchHit]


QueryEvent = SourcesFound | AnswerEvent
"""What `stream_question` yields."""


def stream_question(
    retriever: Retriever,
    synthesizer: Synthesizer,
    caller: Caller,
    request: SearchRequest,
    *,
    stage: Stage = untimed,
    instructions: str | None = None,
) -> Generator[QueryEvent, None, None]:
    """`answer_question` as it is written: `SourcesFound`, then the synthesizer's stream, whose `AnswerDone`
    holds exactly what `answer_question` returns. Closing it closes the synthesizer's stream."""
    with stage("retrieval"):
        retrieval = retriever.retrieve(caller, request)
    yield SourcesFound(retrieval.hits)
    if not retrieval.hits:
        yield from replayed(_no_hits(retriever, caller, request, retrieval))
        return
    with stage("synthesis"):
        for event in synthesizer.stream(request.query, retrieval.hits, instructions=instructions):
            yield AnswerDone(_finished(event.answer, retrieval)) if isinstance(event, AnswerDone) else event


def _no_hits(retriever: Retriever, caller: Caller, request: SearchRequest, retrieval: Retrieval) -> Answer:
    notice = no_hits_notice(retriever, caller, request, retrieval)
    text = NO_DOCUMENTS if notice.code == "NO_DOCUMENTS" else NO_ANSWER
    return unanswered().model_copy(
        update={"answer": text, "notice": notice, "routing": retrieval.routing, "reranking": retrieval.reranking}
    )


def _finished(answer: Answer, retrieval: Retrieval) -> Answer:
    return answer.model_copy(
        update={"notice": answer_notice(answer), "routing": retrieval.routing, "reranking": retrieval.reranking}
    )
