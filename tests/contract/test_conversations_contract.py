"""One ConversationStore contract, run against the local SQLite store and DynamoDB (under moto).

What it must hold: a conversation is its owner's (another user of the tenant, or the same user id in
another tenant, finds nothing, reads no turn, deletes nothing, pages nothing); a turn is appended whole
and only as the next one (a second turn n is a conflict); a listing pages newest first with a cursor
bound to its owner; an expired conversation is gone for every read; tenant erasure removes the tenant's
conversations, every user's, in bounded steps and nothing of a tenant whose id shares its prefix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA, TTL_ATTRIBUTE
from citewise.aws.dynamodb_conversations import DynamoConversations
from citewise.domain.errors import ConflictError, NotFoundError, ValidationError
from citewise.domain.models import Citation
from citewise.ports.conversations import ConversationStore, Owner, Turn, TurnStatus, new_conversation_id
from citewise_local.conversations import LocalConversations
from tests.contract.stores import TABLE, local_or_dynamo

ALICE = Owner("acme", "alice")
BOB = Owner("acme", "bob")
ALICE_ELSEWHERE = Owner("acme-eu", "alice")


@pytest.fixture(params=["local", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    yield from local_or_dynamo(
        request,
        lambda: LocalConversations(tmp_path / "conversations.db"),
        lambda client: DynamoConversations(TABLE, client=client),
    )


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def later(days: int = 30) -> datetime:
    return now() + timedelta(days=days)


def turn(index: int, question: str = "How does the dead-letter queue work?", **changes: object) -> Turn:
    citation = Citation(
        source=1, doc_id="d1", chunk_id="d1:0", path="ops.md", title="Ops", quote="after five receives", score=0.9
    )
    values: dict[str, object] = {
        "index": index,
        "question": question,
        "standalone_question": question,
        "answer": "A message moves there after five receives [1].",
        "citations": [citation],
        "at": now(),
    }
    return Turn.model_validate(values | changes)


def started(store: ConversationStore, owner: Owner = ALICE, *, turns: int = 0, title: str = "ops") -> str:
    conversation_id = new_conversation_id()
    store.create(owner, conversation_id, title, now(), later())
    for index in range(1, turns + 1):
        store.append(owner, conversation_id, turn(index, f"question {index}"), later())
    return conversation_id


def test_turns_read_back_whole_and_in_order(store: ConversationStore) -> None:
    # Given a conversation with a complete turn and an interrupted one
    conversation_id = started(store)
    store.append(ALICE, conversation_id, turn(1), later())
    interrupted = turn(
        2, "And what does it cost?", standalone_question="dead-letter queue cost", answer="", citations=[]
    )
    store.append(ALICE, conversation_id, interrupted.model_copy(update={"status": TurnStatus.INTERRUPTED}), later())
    # Then both read back as written, oldest first, and the summary counts them
    turns = store.turns(ALICE, conversation_id)
    assert [t.index for t in turns] == [1, 2]
    assert turns[0] == turn(1).model_copy(update={"at": turns[0].at})
    assert turns[0].citations[0].quote == "after five receives"
    assert (turns[1].status, turns[1].answer, turns[1].standalone_question) == (
        TurnStatus.INTERRUPTED,
        "",
        "dead-letter queue cost",
    )
    summary = store.summary(ALICE, conversation_id)
    assert summary is not None and (summary.turns, summary.title) == (2, "ops")
    # And the newest turns only, when asked for
    assert [t.index for t in store.turns(ALICE, conversation_id, last=1)] == [2]


def test_another_owner_finds_nothing_of_a_conversation(store: ConversationStore) -> None:
    # Given alice's conversation
    conversation_id = started(store, turns=1)
    for stranger in (BOB, ALICE_ELSEWHERE):
        # Then another user of her tenant, and a user of the same name in another tenant, find nothing
        assert store.summary(stranger, conversation_id) is None
        assert store.turns(stranger, conversation_id) == []
        assert store.page(stranger).conversations == []
        assert store.delete(stranger, conversation_id) is False
        with pytest.raises(NotFoundError):
            store.append(stranger, conversation_id, turn(2), later())
    # And hers is untouched
    summary = store.summary(ALICE, conversation_id)
    assert summary is not None and summary.turns == 1


def test_a_turn_is_appended_only_as_the_next_one(store: ConversationStore) -> None:
    # Given a conversation with one turn
    conversation_id = started(store, turns=1)
    # Then a second turn 1 (a request that raced another) and a gap are conflicts, and change nothing
    for index in (1, 3):
        with pytest.raises(ConflictError):
            store.append(ALICE, conversation_id, turn(index), later())
    assert [t.index for t in store.turns(ALICE, conversation_id)] == [1]
    # And an unknown conversation is not found
    with pytest.raises(NotFoundError):
        store.append(ALICE, new_conversation_id(), turn(1), later())


def test_a_listing_pages_newest_first_with_a_cursor_bound_to_its_owner(store: ConversationStore) -> None:
    # Given five conversations of alice, one of bob, each started in a millisecond of its own (ids sort by
    # creation time to the millisecond)
    ids = []
    for n in range(5):
        ids.append(started(store, title=f"t{n}"))
        time.sleep(0.002)
    started(store, BOB)
    # When alice pages two at a time
    first = store.page(ALICE, limit=2)
    second = store.page(ALICE, limit=2, cursor=first.next_cursor)
    third = store.page(ALICE, limit=2, cursor=second.next_cursor)
    # Then she sees hers only, newest first, each once, and the last page says so
    seen = [c.conversation_id for page in (first, second, third) for c in page.conversations]
    assert seen == list(reversed(ids))
    assert third.next_cursor is None
    # And her cursor moves no one else's listing
    assert first.next_cursor is not None
    for stranger in (BOB, ALICE_ELSEWHERE):
        with pytest.raises(ValidationError):
            store.page(stranger, cursor=first.next_cursor)


def test_deleting_a_conversation_removes_it_and_its_turns(store: ConversationStore) -> None:
    # Given two conversations of alice
    kept, deleted = started(store, turns=1), started(store, turns=3)
    # When one is deleted
    assert store.delete(ALICE, deleted) is True
    # Then it is gone, turns and all, and the other stays
    assert store.summary(ALICE, deleted) is None
    assert store.turns(ALICE, deleted) == []
    assert [c.conversation_id for c in store.page(ALICE).conversations] == [kept]
    assert store.delete(ALICE, deleted) is False
    assert store.count_tenant("acme") == 2  # the kept conversation and its turn


def test_an_expired_conversation_is_gone_for_every_read(store: ConversationStore) -> None:
    # Given a conversation whose time to live has passed
    conversation_id = new_conversation_id()
    store.create(ALICE, conversation_id, "old", now() - timedelta(days=2), now() - timedelta(seconds=1))
    # Then no read finds it and no turn can be added
    assert store.summary(ALICE, conversation_id) is None
    assert store.page(ALICE).conversations == []
    with pytest.raises(NotFoundError):
        store.append(ALICE, conversation_id, turn(1), later())


def test_tenant_erasure_removes_every_users_conversations_in_bounded_steps(store: ConversationStore) -> None:
    # Given conversations of two users of acme, and of a tenant whose id extends acme's
    started(store, ALICE, turns=2)
    started(store, BOB, turns=1)
    other = started(store, ALICE_ELSEWHERE, turns=1)
    assert store.count_tenant("acme") == 5
    # When acme is erased two items at a time
    steps = []
    while erased := store.erase_tenant("acme", limit=2):
        assert erased <= 2
        steps.append(erased)
    # Then nothing of acme is left, and acme-eu keeps everything
    assert sum(steps) == 5 and store.count_tenant("acme") == 0
    assert store.page(ALICE).conversations == [] and store.page(BOB).conversations == []
    assert store.count_tenant("acme-eu") == 2
    assert [t.index for t in store.turns(ALICE_ELSEWHERE, other)] == [1]


def test_dynamodb_items_carry_the_tables_time_to_live(aws_credentials: None) -> None:
    # Given a conversation with a turn on DynamoDB
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName=TABLE, **TABLE_SCHEMA)
        store = DynamoConversations(TABLE, client=client)
        conversation_id = started(store, turns=1)
        # Then every item of it expires through the table's TTL attribute, and none is a document's
        items = client.scan(TableName=TABLE)["Items"]
        assert len(items) == 2
        assert all(TTL_ATTRIBUTE in item and "path" not in item for item in items)
        assert {item["tenant_id"]["S"] for item in items} == {"#conversations#acme"}
        assert any(item["doc_id"]["S"].endswith(conversation_id) for item in items)
