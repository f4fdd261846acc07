"""Feedback on answers: whether an answer, or one of its citations, helped the user who asked.

A response is a conversation turn (`citewise.ports.conversations`): its id is the conversation id and the
turn's number (`c…-3`, `response_id_of`), returned in every answer's `conversation.response_id`. Only
the turn's owner can give feedback on it: another user (of the same tenant or another) gets 404, exactly
as for the conversation itself. One feedback per (response, citation) per user: giving it again replaces it.
`citation` is the answer's `[n]` (None: the answer as a whole).

What a feedback counts for is fixed when it is given, from what the turn recorded as cited
(`Turn.cited_sources`): the source of citation n, or every source the answer cited. A document's source is
its `source_id` attribute (a page of a registered web source) or, for an upload, its provenance `source`
(`source_key`). Each source keeps a tally (helpful, not helpful) that a store changes in the same atomic
write as the feedback it counts (replacing a feedback moves its vote), so a tally is always the sum of
the feedback it says it counts.

Every `FeedbackStore` passes `tests/contract/test_feedback_contract.py`, including the `TenantStore`
rules of tenant erasure (`citewise.ports.erasure`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final, Protocol

from pydantic import Field, StrictBool

from citewise.domain.errors import NotFoundError
from citewise.domain.models import CONVERSATION_ID_PATTERN, DocumentMetadata, Frozen
from citewise.domain.tenant_settings import SourceName
from citewise.ports.conversations import Owner
from citewise.ports.erasure import ERASE_BATCH

SOURCE_ID_KEY: Final = "source_id"
"""The document attribute naming its registered web source (issue 31's contract)."""
MAX_COMMENT_CHARS = 2000
MAX_CITATION = 100
MAX_SOURCES = 50
"""Sources one feedback counts for at most: more than an answer cites, and one DynamoDB transaction holds them."""
RESPONSE_ID_PATTERN = CONVERSATION_ID_PATTERN.removesuffix("$") + r"-[1-9][0-9]{0,5}$"


class FeedbackRequest(Frozen):
    """What the user who asked says of an answer or of one of its citations."""

    response_id: str = Field(
        pattern=RESPONSE_ID_PATTERN,
        description="The answer's `conversation.response_id` (its conversation and turn).",
        examples=["c0193a4b5c6d7e8f9a0b1c2d3e4f5-1"],
    )
    citation: int | None = Field(
        default=None, ge=1, le=MAX_CITATION, description="The citation's [n]; null or absent: the answer as a whole."
    )
    helpful: StrictBool = Field(description="Whether it helped.")
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS, description="Free text, optional.")


class Feedback(Frozen):
    """A feedback as kept: the request, the sources it counts for, and when it was given."""

    response_id: str
    citation: int | None = None
    helpful: bool
    comment: str | None = None
    sources: list[SourceName] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description="The sources this feedback counts for: the cited document's (or every cited one's, for the "
        "whole answer).",
    )
    at: datetime


class FeedbackReceipt(Frozen):
    """The feedback kept, and whether it replaced an earlier one on the same answer and citation."""

    feedback: Feedback
    replaced: bool


class SourceTally(Frozen):
    """The feedback one source has received, every user of the tenant together."""

    helpful: int = Field(default=0, ge=0)
    not_helpful: int = Field(default=0, ge=0)

    @property
    def rated(self) -> int:
        return self.helpful + self.not_helpful


class SourceStats(Frozen):
    """How a source's citations were rated by the tenant's users."""

    source_id: str
    helpful: int = Field(ge=0, description="Feedback that found an answer or citation of this source helpful.")
    not_helpful: int = Field(ge=0)
    rated: int = Field(ge=0, description="`helpful + not_helpful`: the volume.")
    helpful_share: float | None = Field(description="`helpful / rated`; null before any feedback.")
    effectiveness: float = Field(
        ge=0,
        le=1,
        description="The share smoothed by a prior of `prior_votes` votes at 0.5: what the ranking signal uses.",
    )
    ranks: bool = Field(description="Whether the volume reaches the minimum the ranking signal needs to use it.")


class FeedbackStore(Protocol):
    """Where feedback and the per-source tallies live: the registry table on AWS, a SQLite file locally."""

    def get(self, owner: Owner, response_id: str, citation: int | None) -> Feedback | None:
        """The owner's feedback on that response and citation (None: the answer as a whole), if any."""
        ...

    def put(self, owner: Owner, feedback: Feedback, *, previous: Feedback | None) -> None:
        """Keep `feedback` in place of `previous` (what `get` read; None when there was none), and move the
        tallies of their sources in the same atomic write. ConflictError if the stored feedback is no
        longer `previous` (another request changed it in between)."""
        ...

    def tally(self, tenant_id: str, source: str) -> SourceTally | None:
        """The source's tally; None when no feedback ever counted for it."""
        ...

    def tallies(self, tenant_id: str) -> dict[str, SourceTally]:
        """Every source's tally in the tenant: what the ranking signal reads."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's items (every user's feedback and the tallies); how many."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """How many of the tenant's items (feedback and tallies) remain."""
        ...


def parse_response_id(response_id: str) -> tuple[str, int]:
    """(conversation id, turn) of a response id; NotFoundError for one that cannot exist."""
    if not re.fullmatch(RESPONSE_ID_PATTERN, response_id):
        raise NotFoundError("no such response", details={"response_id": response_id[:64]})
    conversation_id, _, turn = response_id.rpartition("-")
    return conversation_id, int(turn)


def source_key(document: DocumentMetadata) -> str:
    """What a document's feedback counts for: its `source_id` attribute, else its provenance `source`
    ('' for an upload with neither, which counts for no source)."""
    source_id = document.attributes.get(SOURCE_ID_KEY)
    return source_id if isinstance(source_id, str) and source_id else document.source


def moved(previous: Feedback | None, feedback: Feedback) -> dict[str, tuple[int, int]]:
    """Source -> (change of helpful, change of not helpful) when `feedback` replaces `previous`: what a
    store adds to the tallies, sources whose tally does not change left out."""
    changes: dict[str, list[int]] = {}
    for given, sign in ((previous, -1), (feedback, 1)):
        if given is None:
            continue
        for source in given.sources:
            change = changes.setdefault(source, [0, 0])
            change[0 if given.helpful else 1] += sign
    return {
        source: (helpful, not_helpful) for source, (helpful, not_helpful) in changes.items() if helpful or not_helpful
    }
