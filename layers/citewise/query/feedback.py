"""Feedback on answers and what it says of each source (`citewise.ports.feedback`).

    give(caller, request)   # POST /v1/feedback: only on the caller's own answers (404 for anyone else's)
    stats(caller, source)   # GET /v1/sources/{id}/stats: the tenant's tally of a source

An answer is found through its conversation, with the caller as owner (`citewise.query.conversations`),
so feedback needs no access rule of its own: a turn another user holds is not found. What the feedback
counts for is what the turn recorded as cited, never what the request says.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from citewise.domain.access import require_write
from citewise.domain.errors import ConflictError, NotFoundError
from citewise.domain.models import Caller, Filter
from citewise.ports.conversations import ConversationStore, Turn, TurnStatus
from citewise.ports.feedback import (
    MAX_SOURCES,
    SOURCE_ID_KEY,
    Feedback,
    FeedbackReceipt,
    FeedbackRequest,
    FeedbackStore,
    SourceStats,
    SourceTally,
    parse_response_id,
)
from citewise.query.conversations import owner_of
from citewise.query.ranking import FeedbackPrior
from citewise.query.retrieval import Retriever

_PUT_ATTEMPTS = 3


class FeedbackService:
    """Feedback given on the callers' answers, and each source's stats (module docstring)."""

    def __init__(
        self,
        store: FeedbackStore,
        conversations: ConversationStore,
        retriever: Callable[[], Retriever],
        prior: FeedbackPrior,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`retriever` (built on use) tells whether a source has documents; `prior` smooths the stats."""
        self.store = store
        self._conversations = conversations
        self._retriever = retriever
        self._prior = prior
        self._clock = clock

    def give(self, caller: Caller, request: FeedbackRequest) -> FeedbackReceipt:
        """Keep the caller's feedback on its answer (replacing an earlier one on the same citation).
        NotFoundError if the caller has no such answer, or the answer no such citation."""
        require_write(caller)
        owner = owner_of(caller)
        turn = self._turn(caller, request.response_id)
        sources = _counted_sources(turn, request.citation)
        attempts = 0
        while True:
            previous = self.store.get(owner, request.response_id, request.citation)
            feedback = Feedback(**request.model_dump(), sources=sources, at=self._clock())
            try:
                self.store.put(owner, feedback, previous=previous)
                return FeedbackReceipt(feedback=feedback, replaced=previous is not None)
            except ConflictError:
                # The same user rated the same citation meanwhile, or another rating of a source was in
                # flight: read it again and write on top of it.
                attempts += 1
                if attempts == _PUT_ATTEMPTS:
                    raise

    def stats(self, caller: Caller, source: str) -> SourceStats:
        """The tenant's tally of `source`; NotFoundError when neither feedback nor a document the caller may
        read carries it."""
        tally = self.store.tally(caller.tenant_id, source)
        if tally is None:
            if not self._has_documents(caller, source):
                raise NotFoundError(
                    "no feedback and no document you may read carries this source (a web source has stats once "
                    "its first pages are indexed)",
                    details={"source_id": source},
                )
            tally = SourceTally()
        return source_stats(source, tally, self._prior)

    def _turn(self, caller: Caller, response_id: str) -> Turn:
        owner = owner_of(caller)
        conversation_id, index = parse_response_id(response_id)
        summary = self._conversations.summary(owner, conversation_id)
        if summary is not None and index <= summary.turns:
            newest = self._conversations.turns(owner, conversation_id, last=summary.turns - index + 1)
            if newest and newest[0].index == index and newest[0].status is TurnStatus.COMPLETE:
                return newest[0]
        raise NotFoundError("no such response", details={"response_id": response_id})

    def _has_documents(self, caller: Caller, source: str) -> bool:
        retriever = self._retriever()
        if source in retriever.index.sources(caller):
            return True
        carries = Filter.model_validate({"equals": {"key": SOURCE_ID_KEY, "value": source}})
        return bool(retriever.index.vector_search(caller, retriever.embedder.embed_query(source), carries, 1))


def _counted_sources(turn: Turn, citation: int | None) -> list[str]:
    """What a feedback on `citation` (None: the whole answer) of `turn` counts for."""
    if citation is None:
        return sorted({source for source in turn.cited_sources.values() if source})[:MAX_SOURCES]
    if citation not in {cited.source for cited in turn.citations}:
        raise NotFoundError(f"the answer has no citation [{citation}]", details={"citation": citation})
    source = turn.cited_sources.get(citation, "")
    return [source] if source else []


def source_stats(source: str, tally: SourceTally, prior: FeedbackPrior) -> SourceStats:
    """A source's stats from its tally."""
    return SourceStats(
        source_id=source,
        helpful=tally.helpful,
        not_helpful=tally.not_helpful,
        rated=tally.rated,
        helpful_share=round(tally.helpful / tally.rated, 6) if tally.rated else None,
        effectiveness=round(prior.smoothed(tally), 6),
        ranks=tally.rated >= prior.min_votes,
    )
