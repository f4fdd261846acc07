"""Conversations: a user's questions and answers kept together, so a follow-up is asked in context.

A conversation belongs to one user of one tenant (`Owner`, taken from the authenticated Caller only):
every call of the store takes the owner, and a conversation another owner holds is not found, exactly
as one that never existed, so nobody (another user, another tenant, the operator) learns it exists.

A turn is written once, whole, as one item: the question, the standalone question retrieval used, the
answer and its citations, the time, and its status. `COMPLETE` turns hold the answer; an `INTERRUPTED`
turn (the client went away before the answer was whole, `citewise.query.conversations`) holds the
question and no answer text, so a half-written answer (whose citations were never checked whole) is
never kept. Appending is conditional on the turn's number: two requests racing on one conversation
cannot both write turn n (ConflictError for the second).

Every `ConversationStore` passes `tests/contract/test_conversations_contract.py`, including the
`TenantStore` rules of tenant erasure (`citewise.ports.erasure`).
"""

from __future__ import annotations

import re
import secrets
import time
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple, Protocol

from pydantic import Field, model_validator

from citewise.domain.errors import NotFoundError, ValidationError
from citewise.domain.models import CONVERSATION_ID_PATTERN, Citation, Frozen
from citewise.ports.erasure import ERASE_BATCH

MAX_TITLE_CHARS = 120
PAGE_LIMIT = 100


class Owner(NamedTuple):
    """Who a conversation belongs to: one user of one tenant (from the Caller, never from input)."""

    tenant_id: str
    user_id: str


class TurnStatus(StrEnum):
    """Whether a turn's answer was delivered whole."""

    COMPLETE = "complete"
    INTERRUPTED = "interrupted"


class Turn(Frozen):
    """One question and its answer, as the conversation keeps it."""

    index: int = Field(ge=1, description="1 for the conversation's first turn.")
    question: str = Field(description="The question as the user asked it.")
    standalone_question: str = Field(description="The question retrieval used (rewritten from a follow-up).")
    answer: str = Field(default="", description="Empty for an interrupted turn: its answer was never completed.")
    citations: list[Citation] = Field(default_factory=list)
    at: datetime
    status: TurnStatus = TurnStatus.COMPLETE
    cited_sources: dict[int, str] = Field(
        default_factory=dict,
        description="The source of each cited [n] (`citewise.ports.feedback.source_key`): what feedback on the "
        "answer counts for. Empty for a turn kept before it was recorded.",
    )


class ConversationSummary(Frozen):
    """A conversation without its turns: what the listing shows."""

    conversation_id: str
    title: str = Field(description="The first question, shortened.")
    created_at: datetime
    updated_at: datetime
    turns: int = Field(ge=0, description="How many turns it holds.")


class Conversation(ConversationSummary):
    """A conversation with its turns, oldest first."""

    history: list[Turn]


class ConversationPage(Frozen):
    """One page of the owner's conversations, newest first; `next_cursor` resumes after it."""

    conversations: list[ConversationSummary]
    next_cursor: str | None = None


AS_ASKED = "none"
"""`TurnContext.rewriter` when the question went to retrieval as asked."""


class TurnContext(Frozen):
    """Where an answer sits in its conversation, and what retrieval was asked."""

    conversation_id: str = Field(description="Pass it back as `conversation_id` to ask a follow-up.")
    turn: int = Field(ge=1, description="This turn's number in the conversation (1: its first question).")
    response_id: str = Field(default="", description="The answer's id, for `POST /v1/feedback`.")
    standalone_question: str = Field(description="The question retrieval and the answer used.")
    rewriter: str = Field(
        description="What made the follow-up standalone (`deterministic`, `bedrock`, `openai`); `none` when the "
        "question was used as asked (a first question, or a failed rewrite: see `rewrite_notice`)."
    )
    rewrite_notice: str | None = Field(
        default=None, description="Why the rewrite failed and the question was used as asked; null otherwise."
    )
    dropped_turns: int = Field(
        default=0, ge=0, description="Older turns left out of the rewrite's history to stay within its budget."
    )

    @model_validator(mode="after")
    def _response_id(self) -> TurnContext:
        # Derived, never chosen: the id always names this very turn (`citewise.ports.feedback`).
        object.__setattr__(self, "response_id", response_id_of(self.conversation_id, self.turn))
        return self


class ConversationStore(Protocol):
    """Where conversations live: the registry table on AWS, a SQLite file locally."""

    def create(self, owner: Owner, conversation_id: str, title: str, at: datetime, expires_at: datetime) -> None:
        """Store a new empty conversation; ConflictError if the id exists (ids are random: never in practice)."""
        ...

    def summary(self, owner: Owner, conversation_id: str) -> ConversationSummary | None:
        """The owner's conversation without its turns; None if the owner has no such conversation."""
        ...

    def turns(self, owner: Owner, conversation_id: str, *, last: int | None = None) -> list[Turn]:
        """The conversation's turns, oldest first (the `last` newest only, when given); [] when the owner
        has no such conversation."""
        ...

    def append(self, owner: Owner, conversation_id: str, turn: Turn, expires_at: datetime) -> None:
        """Add `turn` (whole, in one write) as the conversation's turn `turn.index`, and move its
        `updated_at` and expiry on. NotFoundError if the owner has no such conversation; ConflictError if
        the conversation does not have exactly `turn.index - 1` turns (another turn came first)."""
        ...

    def page(self, owner: Owner, *, limit: int = PAGE_LIMIT, cursor: str | None = None) -> ConversationPage:
        """The owner's conversations, newest first; a cursor not issued for this owner: ValidationError."""
        ...

    def delete(self, owner: Owner, conversation_id: str) -> bool:
        """Delete the conversation and its turns; whether the owner had it."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's items (conversations and turns, every user's); how many."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """How many of the tenant's items (conversations and turns) remain."""
        ...


def new_conversation_id() -> str:
    """A fresh id of CONVERSATION_ID_PATTERN: ids sort by creation time to the millisecond (the listing's
    order, newest first) and cannot be guessed (64 random bits)."""
    return f"c{time.time_ns() // 1_000_000:012x}{secrets.token_hex(8)}"


def response_id_of(conversation_id: str, turn: int) -> str:
    """The id of the answer given as turn `turn` of `conversation_id` (`citewise.ports.feedback`)."""
    return f"{conversation_id}-{turn}"


def check_conversation_id(conversation_id: str) -> str:
    """`conversation_id` if it has the shape of one; NotFoundError otherwise (an id that cannot exist is not
    found, like one that does not: the same answer for either)."""
    if not re.fullmatch(CONVERSATION_ID_PATTERN, conversation_id):
        raise NotFoundError("no such conversation", details={"conversation_id": conversation_id[:64]})
    return conversation_id


def not_found(conversation_id: str) -> NotFoundError:
    """The one answer for a conversation the caller does not have, whoever holds it."""
    return NotFoundError("no such conversation", details={"conversation_id": conversation_id})


def title_of(question: str) -> str:
    """A conversation's title: its first question on one line, shortened."""
    line = " ".join(question.split())
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def check_page_limit(limit: int) -> int:
    """`limit` if it is a page size a store serves."""
    if not 1 <= limit <= PAGE_LIMIT:
        raise ValidationError(f"limit must be between 1 and {PAGE_LIMIT}", details={"field": "limit"})
    return limit
