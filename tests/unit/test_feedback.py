"""Feedback (`citewise.ports.feedback`) and its ranking signal (`citewise.query.ranking`): response ids name
one turn, a replacement moves a vote, the signal is smoothed, waits for a volume, stays within its weight,
and is off by default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from citewise.aws.dynamodb_feedback import DynamoFeedback
from citewise.domain.errors import CitewiseError, ConflictError, NotFoundError
from citewise.domain.models import Caller
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.conversations import Owner, Turn, TurnContext, new_conversation_id
from citewise.ports.feedback import Feedback, FeedbackRequest, SourceTally, moved, parse_response_id, source_key
from citewise.query.feedback import FeedbackService
from citewise.query.ranking import UNKNOWN_EFFECTIVENESS, FeedbackPrior, Signals, rescore
from citewise.query.retrieval import Retriever
from citewise_local.conversations import LocalConversations
from citewise_local.feedback import LocalFeedback
from tests.factories import hit
from tests.unit.test_ranking import NOW, _hit

AT = datetime(2026, 11, 27, tzinfo=UTC)


def test_a_response_id_names_its_conversation_and_turn() -> None:
    conversation_id = new_conversation_id()
    context = TurnContext(conversation_id=conversation_id, turn=12, standalone_question="q", rewriter="none")
    assert context.response_id == f"{conversation_id}-12"
    assert parse_response_id(context.response_id) == (conversation_id, 12)
    # Derived, never taken from input: a stated one is replaced by the turn's own
    stated = TurnContext.model_validate(context.model_dump() | {"response_id": "anything"})
    assert stated.response_id == context.response_id


@pytest.mark.parametrize("response_id", ["", "c123-1", f"{'c' + '0' * 28}-0", f"{'c' + '0' * 28}", "x" * 40])
def test_an_id_that_cannot_name_a_response_is_not_found(response_id: str) -> None:
    with pytest.raises(NotFoundError):
        parse_response_id(response_id)


def test_a_document_counts_for_its_source_id_else_its_source() -> None:
    document = hit(1, "text").chunk.document
    assert source_key(document.model_copy(update={"source": "jira"})) == "jira"
    page = document.model_copy(update={"source": "official_docs", "attributes": {"source_id": "s-python"}})
    assert source_key(page) == "s-python"


def _given(helpful: bool, *sources: str) -> Feedback:
    return Feedback(response_id=f"{'c' + '0' * 28}-1", helpful=helpful, sources=list(sources), at=AT)


def test_a_replacement_moves_each_sources_vote() -> None:
    assert moved(None, _given(True, "a", "b")) == {"a": (1, 0), "b": (1, 0)}
    assert moved(_given(True, "a"), _given(False, "a")) == {"a": (-1, 1)}
    assert moved(_given(False, "a"), _given(False, "a")) == {}  # a new comment moves no tally
    assert moved(_given(True, "a", "b"), _given(True, "b")) == {"a": (-1, 0)}


def test_effectiveness_is_a_smoothed_share_once_the_volume_is_reached() -> None:
    prior = FeedbackPrior(prior_votes=4, min_votes=5)
    assert prior.effectiveness(None) == UNKNOWN_EFFECTIVENESS
    # Below the volume: neutral, however one-sided
    assert prior.effectiveness(SourceTally(helpful=0, not_helpful=4)) == UNKNOWN_EFFECTIVENESS
    # From it on: (helpful + 2) / (rated + 4), pulled to 0.5 the less the more votes
    assert prior.effectiveness(SourceTally(helpful=5, not_helpful=0)) == pytest.approx(7 / 9)
    assert prior.effectiveness(SourceTally(helpful=0, not_helpful=5)) == pytest.approx(2 / 9)
    assert prior.effectiveness(SourceTally(helpful=500, not_helpful=0)) == pytest.approx(502 / 504)


def test_the_feedback_signal_reorders_close_scores_within_its_weight() -> None:
    # Given two close hits, the first of a source users found unhelpful, the second of one they found helpful
    hits = [_hit(1, 0.9, source="community", age_days=None), _hit(2, 0.8, source="handbook", age_days=None)]
    tallies = {"community": SourceTally(not_helpful=20), "handbook": SourceTally(helpful=20)}
    signals = Signals(feedback_weight=0.5, feedback=tallies)
    # When re-scored
    ranked = rescore(hits, signals, NOW)
    # Then the helpful source's hit is first, each score fused x (1 - w (1 - effectiveness)), never above fused
    assert [h.chunk.document.doc_id for h in ranked] == ["d2", "d1"]
    for candidate in ranked:
        parts = candidate.components
        assert parts is not None and parts.feedback is not None
        assert parts.final == pytest.approx(parts.fused * (1 - 0.5 * (1 - parts.feedback)), abs=1e-6)
        assert parts.final <= parts.fused and parts.final >= parts.fused * 0.5
    assert [h.components.feedback for h in ranked if h.components] == pytest.approx([22 / 24, 2 / 24], abs=1e-6)


def test_the_feedback_signal_is_off_by_default_and_set_per_tenant() -> None:
    hits = [_hit(1, 0.9, source="community", age_days=None)]
    tallies = {"community": SourceTally(not_helpful=20)}
    # Off: the score is the fused one, and the hit says the signal is off
    (off,) = rescore(hits, Signals(feedback=tallies), NOW)
    assert off.score == 0.9 and off.components is not None and off.components.feedback is None
    # A tenant turns it on, and asks for more votes than the source has: neutral
    tenant = TenantSettings(feedback_weight=1.0, feedback_min_votes=50)
    signals = Signals(feedback=tallies).for_tenant(tenant)
    assert (signals.feedback_weight, signals.feedback_prior.min_votes) == (1.0, 50)
    (waiting,) = rescore(hits, signals, NOW)
    assert waiting.components is not None and waiting.components.feedback == UNKNOWN_EFFECTIVENESS
    assert waiting.score == pytest.approx(0.9 * UNKNOWN_EFFECTIVENESS)


@pytest.mark.parametrize(
    ("reasons", "conflict"),
    [
        ([{"Code": "ConditionalCheckFailed"}, {"Code": "None"}], True),  # the feedback changed since it was read
        ([{"Code": "None"}, {"Code": "TransactionConflict"}], True),  # another rating of the source in flight
        ([{"Code": "None"}, {"Code": "ValidationError"}], False),
    ],
)
def test_a_cancelled_feedback_transaction_is_a_conflict_only_when_a_retry_can_succeed(
    reasons: list[dict[str, str]], conflict: bool
) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    store = DynamoFeedback("citewise-documents", client=client)
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            modeled_fields={"CancellationReasons": reasons},
        )
        with pytest.raises(CitewiseError) as raised:
            store.put(Owner("acme", "alice"), _given(True, "jira"), previous=None)
    assert isinstance(raised.value, ConflictError) is conflict


class _Contended(LocalFeedback):
    """A feedback store whose first `conflicts` writes lose a race (ConflictError), as under contention."""

    def __init__(self, path: Path, conflicts: int) -> None:
        super().__init__(path)
        self.conflicts, self.writes = conflicts, 0

    def put(self, owner: Owner, feedback: Feedback, *, previous: Feedback | None) -> None:
        self.writes += 1
        if self.writes <= self.conflicts:
            raise ConflictError("another rating was in flight")
        super().put(owner, feedback, previous=previous)


def _no_retriever() -> Retriever:
    raise AssertionError("giving feedback reads no index")


@pytest.mark.parametrize(("conflicts", "kept"), [(0, True), (2, True), (3, False)])
def test_feedback_that_loses_a_race_is_written_again_from_a_fresh_read_twice_at_most(
    tmp_path: Path, conflicts: int, kept: bool
) -> None:
    # Given alice's answer, and a feedback store whose first writes lose races
    owner, conversation_id = Owner("acme", "alice"), new_conversation_id()
    conversations = LocalConversations(tmp_path / "conversations.db")
    conversations.create(owner, conversation_id, "q", AT, AT + timedelta(days=3650))
    turn = Turn(index=1, question="q", standalone_question="q", answer="a [1].", at=AT, cited_sources={1: "jira"})
    conversations.append(owner, conversation_id, turn, AT + timedelta(days=3650))
    store = _Contended(tmp_path / "feedback.db", conflicts)
    service = FeedbackService(store, conversations, _no_retriever, FeedbackPrior())
    caller = Caller(tenant_id="acme", user_id="alice")
    request = FeedbackRequest(response_id=f"{conversation_id}-1", helpful=True)
    # When she rates it, then it is kept after up to two lost races, and the third is a conflict
    if kept:
        assert service.give(caller, request).feedback.sources == ["jira"]
        assert store.tally("acme", "jira") == SourceTally(helpful=1)
    else:
        with pytest.raises(ConflictError):
            service.give(caller, request)
        assert store.tally("acme", "jira") is None
    assert store.writes == min(conflicts + 1, 3)
    store.close()
    conversations.close()
