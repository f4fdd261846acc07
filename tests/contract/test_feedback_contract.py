"""One FeedbackStore contract, run against the local SQLite store and DynamoDB (under moto).

What it must hold: a feedback is its owner's (another user of the tenant, or the same user id in another
tenant, reads nothing); a feedback replaces only the one it was read as (a stale `previous` is a
conflict and changes nothing); each source's tally is always the sum of the feedback counting for it,
replacements moving a vote rather than adding one; tallies are per tenant; tenant erasure removes the
tenant's feedback and tallies, every user's, in bounded steps and nothing of a tenant whose id shares its
prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from citewise.aws.dynamodb_feedback import DynamoFeedback
from citewise.domain.errors import ConflictError
from citewise.ports.conversations import Owner
from citewise.ports.feedback import Feedback, FeedbackStore, SourceTally
from citewise_local.feedback import LocalFeedback
from tests.contract.stores import TABLE, local_or_dynamo

ALICE = Owner("acme", "alice")
BOB = Owner("acme", "bob")
ALICE_ELSEWHERE = Owner("acme-eu", "alice")
RESPONSE = "c0193a4b5c6d7e8f9a0b1c2d3e4f5-1"
_start = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["local", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FeedbackStore]:
    yield from local_or_dynamo(
        request, lambda: LocalFeedback(tmp_path / "feedback.db"), lambda client: DynamoFeedback(TABLE, client=client)
    )


def feedback(
    helpful: bool, *sources: str, citation: int | None = None, seconds: int = 0, **changes: object
) -> Feedback:
    values: dict[str, object] = {
        "response_id": RESPONSE,
        "citation": citation,
        "helpful": helpful,
        "sources": list(sources),
        "at": _start + timedelta(seconds=seconds),
    }
    return Feedback.model_validate(values | changes)


def test_feedback_reads_back_whole_for_its_owner_only(store: FeedbackStore) -> None:
    # Given alice's feedback on citation 2 of her answer, with a comment
    given = feedback(False, "runbooks", citation=2, comment="outdated: the job was renamed")
    store.put(ALICE, given, previous=None)
    # Then she reads it back whole, on that citation only
    assert store.get(ALICE, RESPONSE, 2) == given
    assert store.get(ALICE, RESPONSE, None) is None
    assert store.get(ALICE, RESPONSE, 1) is None
    # And nobody else reads it: a colleague, or the same user id in a tenant whose id shares the prefix
    assert store.get(BOB, RESPONSE, 2) is None
    assert store.get(ALICE_ELSEWHERE, RESPONSE, 2) is None


def test_tallies_count_every_users_feedback_per_source(store: FeedbackStore) -> None:
    # Given alice found the answer helpful (it cited two sources) and bob found its citation 1 unhelpful
    store.put(ALICE, feedback(True, "jira", "runbooks"), previous=None)
    store.put(BOB, feedback(False, "jira", citation=1), previous=None)
    # Then each source counts what counted for it
    assert store.tally("acme", "jira") == SourceTally(helpful=1, not_helpful=1)
    assert store.tally("acme", "runbooks") == SourceTally(helpful=1, not_helpful=0)
    assert store.tallies("acme") == {
        "jira": SourceTally(helpful=1, not_helpful=1),
        "runbooks": SourceTally(helpful=1, not_helpful=0),
    }
    # And a source nobody rated, or another tenant, has none
    assert store.tally("acme", "wiki") is None
    assert store.tallies("acme-eu") == {}
    assert store.tally("acme-eu", "jira") is None


def test_a_replacement_moves_the_vote_and_never_adds_one(store: FeedbackStore) -> None:
    # Given alice's helpful feedback, replaced by an unhelpful one, then by a helpful one with a comment
    first = feedback(True, "jira")
    store.put(ALICE, first, previous=None)
    second = feedback(False, "jira", seconds=1)
    store.put(ALICE, second, previous=first)
    assert store.tally("acme", "jira") == SourceTally(helpful=0, not_helpful=1)
    third = feedback(False, "jira", seconds=2, comment="still wrong")
    store.put(ALICE, third, previous=second)
    # Then the tally counts her once, as she said last, and she reads the last one back
    assert store.tally("acme", "jira") == SourceTally(helpful=0, not_helpful=1)
    assert store.get(ALICE, RESPONSE, None) == third


def test_a_stale_replacement_is_a_conflict_and_changes_nothing(store: FeedbackStore) -> None:
    # Given alice's feedback, replaced once
    first = feedback(True, "jira")
    store.put(ALICE, first, previous=None)
    second = feedback(False, "jira", seconds=1)
    store.put(ALICE, second, previous=first)
    # When a request that read the first one (or none) writes after that
    with pytest.raises(ConflictError):
        store.put(ALICE, feedback(True, "jira", seconds=2), previous=first)
    with pytest.raises(ConflictError):
        store.put(ALICE, feedback(True, "jira", seconds=3), previous=None)
    # Then neither the feedback nor the tally moved
    assert store.get(ALICE, RESPONSE, None) == second
    assert store.tally("acme", "jira") == SourceTally(helpful=0, not_helpful=1)


def test_feedback_that_counts_for_no_source_moves_no_tally(store: FeedbackStore) -> None:
    store.put(ALICE, feedback(True), previous=None)
    assert store.get(ALICE, RESPONSE, None) is not None
    assert store.tallies("acme") == {}


def test_tenant_erasure_removes_every_users_feedback_and_the_tallies_in_bounded_steps(store: FeedbackStore) -> None:
    # Given feedback of two users of acme (two items, and the tallies of two sources), and of acme-eu
    store.put(ALICE, feedback(True, "jira"), previous=None)
    store.put(BOB, feedback(False, "jira", "wiki", citation=1), previous=None)
    store.put(ALICE_ELSEWHERE, feedback(True, "jira"), previous=None)
    assert store.count_tenant("acme") == 4
    # When acme is erased two items at a time
    erased = []
    while deleted := store.erase_tenant("acme", limit=2):
        assert deleted <= 2
        erased.append(deleted)
    # Then all of it went, and nothing of acme-eu
    assert sum(erased) == 4
    assert store.count_tenant("acme") == 0
    assert store.tallies("acme") == {} and store.get(ALICE, RESPONSE, None) is None
    assert store.count_tenant("acme-eu") == 2
    assert store.tally("acme-eu", "jira") == SourceTally(helpful=1, not_helpful=0)
