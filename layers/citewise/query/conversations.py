"""A question asked in a conversation: its history read, the follow-up made standalone, the turn recorded.

The one seam every way of answering goes through, so a turn is kept the same way whether the answer
was returned whole or streamed:

    draft = conversations.begin(caller, conversation_id, question)   # 404 for another owner's id
    ... retrieve and answer `draft.standalone_question` ...
    conversations.record(draft, answer)                               # the whole answer arrived
    conversations.interrupt(draft)                                    # the client went away first

`begin` reads the newest turns within the history budget (the oldest dropped, `citewise.ports.rewriter`),
and asks the rewriter for a standalone question; a rewriter that fails leaves the question as asked and
the turn's context says so (`rewrite_notice`). Nothing is written before `record` or `interrupt`, so a
request that fails (a backend error) leaves no turn, and a new conversation is created with its first
turn only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from citewise.domain.errors import ConflictError
from citewise.domain.models import Answer, Caller, QueryRequest, SearchRequest
from citewise.ports.conversations import (
    AS_ASKED,
    Conversation,
    ConversationPage,
    ConversationStore,
    Owner,
    Turn,
    TurnContext,
    TurnStatus,
    check_conversation_id,
    check_page_limit,
    new_conversation_id,
    not_found,
    title_of,
)
from citewise.ports.feedback import source_key
from citewise.ports.rewriter import Exchange, HistoryBudget, Rewriter
from citewise.ports.synthesizer import Synthesizer
from citewise.query.answering import Stage, answer_question, untimed
from citewise.query.retrieval import Retriever

logger = logging.getLogger(__name__)

_APPEND_ATTEMPTS = 3


@dataclass(frozen=True)
class TurnDraft:
    """A turn begun by `Conversations.begin`, to be recorded (or recorded as interrupted) once."""

    owner: Owner
    question: str
    context: TurnContext
    new: bool
    """The conversation does not exist yet: it is created with this turn."""

    @property
    def standalone_question(self) -> str:
        return self.context.standalone_question


class Conversations:
    """The conversations of the callers (module docstring): the store, the rewriter and their budget."""

    def __init__(
        self,
        store: ConversationStore,
        rewriter: Rewriter,
        *,
        ttl: timedelta,
        budget: HistoryBudget,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self._rewriter = rewriter
        self._ttl = ttl
        self._budget = budget
        self._clock = clock

    def begin(self, caller: Caller, conversation_id: str | None, question: str) -> TurnDraft:
        """Start a turn of the caller's conversation `conversation_id` (a new conversation when None).
        NotFoundError when the caller has no such conversation, whoever has one of that id."""
        owner = owner_of(caller)
        if conversation_id is None:
            context = TurnContext(
                conversation_id=new_conversation_id(), turn=1, standalone_question=question, rewriter=AS_ASKED
            )
            return TurnDraft(owner, question, context, new=True)
        summary = self.store.summary(owner, check_conversation_id(conversation_id))
        if summary is None:
            raise not_found(conversation_id)
        turns = self.store.turns(owner, conversation_id, last=self._budget.turns) if summary.turns else []
        history, dropped = self._budget.fit(
            [Exchange(question=t.question, standalone_question=t.standalone_question, answer=t.answer) for t in turns]
        )
        standalone, rewriter, notice = self._rewrite(question, history)
        context = TurnContext(
            conversation_id=conversation_id,
            turn=summary.turns + 1,
            standalone_question=standalone,
            rewriter=rewriter,
            rewrite_notice=notice,
            dropped_turns=dropped + max(0, summary.turns - len(turns)),
        )
        return TurnDraft(owner, question, context, new=False)

    def record(self, draft: TurnDraft, answer: Answer) -> Turn:
        """Keep the turn with its whole answer and citations."""
        return self._append(draft, answer.answer, answer, TurnStatus.COMPLETE)

    def interrupt(self, draft: TurnDraft) -> Turn:
        """Keep the turn as interrupted: its question, and no answer (never a half-written one)."""
        return self._append(draft, "", None, TurnStatus.INTERRUPTED)

    def page(self, caller: Caller, *, limit: int, cursor: str | None) -> ConversationPage:
        """The caller's conversations, newest first."""
        return self.store.page(owner_of(caller), limit=check_page_limit(limit), cursor=cursor)

    def get(self, caller: Caller, conversation_id: str) -> Conversation:
        """The caller's conversation with its turns; NotFoundError for anyone else's."""
        owner = owner_of(caller)
        summary = self.store.summary(owner, check_conversation_id(conversation_id))
        if summary is None:
            raise not_found(conversation_id)
        return Conversation(**summary.model_dump(), history=self.store.turns(owner, conversation_id))

    def delete(self, caller: Caller, conversation_id: str) -> None:
        """Delete the caller's conversation; NotFoundError for anyone else's."""
        if not self.store.delete(owner_of(caller), check_conversation_id(conversation_id)):
            raise not_found(conversation_id)

    def _rewrite(self, question: str, history: list[Exchange]) -> tuple[str, str, str | None]:
        """(standalone question, what rewrote it, why the rewrite failed)."""
        if not history:
            return question, AS_ASKED, None
        try:
            standalone = self._rewriter.rewrite(question, history)
        except Exception as exc:  # noqa: BLE001 - any failure of the rewrite means the question is used as asked
            reason = f"{self._rewriter.name}: {type(exc).__name__}: {exc}"[:300]
            logger.warning("the follow-up rewrite failed, the question is used as asked", extra={"reason": reason})
            return question, AS_ASKED, f"The follow-up could not be rewritten ({reason}); it was searched as asked."
        return standalone, self._rewriter.name if standalone != question else AS_ASKED, None

    def _append(self, draft: TurnDraft, text: str, answer: Answer | None, status: TurnStatus) -> Turn:
        now = self._clock()
        conversation_id, index = draft.context.conversation_id, draft.context.turn
        if draft.new:
            self.store.create(draft.owner, conversation_id, title_of(draft.question), now, now + self._ttl)
        attempts = 0
        while True:
            turn = Turn(
                index=index,
                question=draft.question,
                standalone_question=draft.standalone_question,
                answer=text,
                citations=answer.citations if answer is not None else [],
                at=now,
                status=status,
                cited_sources=cited_sources(answer) if answer is not None else {},
            )
            try:
                self.store.append(draft.owner, conversation_id, turn, now + self._ttl)
                return turn
            except ConflictError:
                # Another request of the same conversation recorded its turn first: this one goes after it.
                attempts += 1
                summary = self.store.summary(draft.owner, conversation_id)
                if summary is None or attempts == _APPEND_ATTEMPTS:
                    raise
                index = summary.turns + 1


def answer_in_conversation(
    conversations: Conversations,
    retriever: Retriever,
    synthesizer: Synthesizer,
    caller: Caller,
    request: QueryRequest,
    *,
    stage: Stage = untimed,
    instructions: str | None = None,
) -> tuple[Answer, TurnContext]:
    """Answer `request` as a turn of the caller's conversation (a new one without `conversation_id`), and
    record the turn: what the REST route, the CLI and the MCP tool share. `stage("rewrite")` wraps the
    history's read and the rewrite, as `answer_question`'s stages wrap retrieval and synthesis."""
    with stage("rewrite"):
        draft = conversations.begin(caller, request.conversation_id, request.query)
    answer = answer_question(
        retriever,
        synthesizer,
        caller,
        standalone(request, draft.standalone_question),
        stage=stage,
        instructions=instructions,
    )
    turn = conversations.record(draft, answer)
    # The turn's number moves on when another request of the conversation recorded first: the context
    # returned names the turn as kept, so its `response_id` is the one feedback finds.
    return answer, TurnContext.model_validate(draft.context.model_dump(exclude={"response_id"}) | {"turn": turn.index})


def cited_sources(answer: Answer) -> dict[int, str]:
    """The source (`source_key`) of each [n] the answer cites, for the feedback on it."""
    return {
        citation.source: source_key(answer.sources[citation.source - 1].chunk.document)
        for citation in answer.citations
        if citation.source <= len(answer.sources)
    }


def standalone(request: QueryRequest, question: str) -> SearchRequest:
    """The search request a turn retrieves with: the caller's, with the standalone question."""
    return SearchRequest.model_validate(
        request.model_dump(exclude={"conversation_id", "stream"}, exclude_unset=True) | {"query": question}
    )


def owner_of(caller: Caller) -> Owner:
    """The owner a caller's conversations have: the caller's tenant and user, nothing from input."""
    return Owner(caller.tenant_id, caller.user_id)
