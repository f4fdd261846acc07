"""The Conversations service and the follow-up rewriters, on the local store (a SQLite file), without a model
server: the deterministic rewrite, the history budget, a failing rewriter, an interrupted turn, the Bedrock
rewriter on a Converse fake held to the API model, the OpenAI-compatible one on the chat server double."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from citewise.aws.bedrock_rewriter import BedrockRewriter
from citewise.builtin.rewriter import DeterministicRewriter, refers_back
from citewise.domain.errors import GenerationError, NotFoundError
from citewise.domain.models import Answer, Caller, Citation
from citewise.ports.conversations import Owner, TurnStatus
from citewise.ports.rewriter import Exchange, HistoryBudget, UnusableRewrite
from citewise.query.conversations import Conversations
from citewise_local.conversations import LocalConversations
from citewise_local.openai_rewriter import OpenAIRewriter
from tests.doubles.chat_server import chat_server
from tests.doubles.models import FakeConverse, ScriptedModel

ALICE = Caller(tenant_id="acme", user_id="alice")
BOB = Caller(tenant_id="acme", user_id="bob")
DLQ = "How does the dead-letter queue work?"
CITATION = Citation(source=1, doc_id="d", chunk_id="d:0", path="dlq.md", title="DLQ", quote="five receives", score=1.0)


def answer(text: str = "After five receives [1].") -> Answer:
    return Answer(answer=text, citations=[CITATION], sources=[], grounded=True)


def exchange(question: str, answer_text: str = "") -> Exchange:
    return Exchange(question=question, standalone_question=question, answer=answer_text)


class Failing:
    name = "bedrock"

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        raise GenerationError("bedrock:Converse was throttled")


class Recording(DeterministicRewriter):
    def __init__(self) -> None:
        self.seen: list[list[Exchange]] = []

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        self.seen.append(list(history))
        return super().rewrite(question, history)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalConversations]:
    local = LocalConversations(tmp_path / "conversations.db")
    yield local
    local.close()


def service(store: LocalConversations, rewriter: object = None, **budget: int) -> Conversations:
    return Conversations(
        store,
        rewriter or DeterministicRewriter(),  # type: ignore[arg-type]
        ttl=timedelta(days=30),
        budget=HistoryBudget(**budget),
    )


# --- the deterministic rewrite -------------------------------------------------------------------------


def test_a_follow_up_that_refers_back_carries_the_previous_topic() -> None:
    rewriter = DeterministicRewriter()
    history = [exchange(DLQ)]
    assert rewriter.rewrite("And what does it cost?", history) == "And what does it cost? (dead-letter queue)"
    assert rewriter.rewrite("How long are its messages kept?", history).endswith("(dead-letter queue)")
    # A question of its own is left alone, and so is a first question
    assert rewriter.rewrite("How are documents encrypted at rest in the bucket?", history) == (
        "How are documents encrypted at rest in the bucket?"
    )
    assert rewriter.rewrite("And what does it cost?", []) == "And what does it cost?"
    # A chain of follow-ups keeps the first topic: the previous standalone question carries it
    chained = [Exchange(question="And the cost?", standalone_question="And the cost? (dead-letter queue)", answer="")]
    assert rewriter.rewrite("Is that per month?", chained) == "Is that per month? (cost dead-letter queue)"


def test_what_reads_as_a_follow_up() -> None:
    assert refers_back("And what does it cost?")
    assert refers_back("what about retries")
    assert refers_back("Why?")
    assert not refers_back("How are uploads scanned for malware before ingestion?")


# --- the service ----------------------------------------------------------------------------------------


def test_a_new_conversation_is_created_with_its_first_turn_only(store: LocalConversations) -> None:
    conversations = service(store)
    # Given a turn begun without a conversation
    draft = conversations.begin(ALICE, None, DLQ)
    # Then nothing is written until it is recorded (a failed answer leaves no conversation behind)
    assert store.page(Owner("acme", "alice")).conversations == []
    conversations.record(draft, answer())
    shown = conversations.get(ALICE, draft.context.conversation_id)
    assert (shown.title, shown.turns) == (DLQ, 1)
    assert shown.history[0].citations == [CITATION] and shown.history[0].status is TurnStatus.COMPLETE


def test_an_interrupted_turn_is_kept_without_an_answer(store: LocalConversations) -> None:
    conversations = service(store)
    first = conversations.begin(ALICE, None, DLQ)
    conversations.record(first, answer())
    # When the client goes away during the second answer
    draft = conversations.begin(ALICE, first.context.conversation_id, "And what does it cost?")
    conversations.interrupt(draft)
    # Then the turn is kept as interrupted, with its standalone question and no (half-written) answer
    turn = conversations.get(ALICE, first.context.conversation_id).history[1]
    assert (turn.status, turn.answer, turn.citations) == (TurnStatus.INTERRUPTED, "", [])
    assert turn.standalone_question == "And what does it cost? (dead-letter queue)"


def test_a_failed_rewrite_uses_the_question_as_asked_and_says_so(store: LocalConversations) -> None:
    first = service(store).begin(ALICE, None, DLQ)
    service(store).record(first, answer())
    # When the rewriter fails on a follow-up
    draft = service(store, Failing()).begin(ALICE, first.context.conversation_id, "And what does it cost?")
    # Then the question goes to retrieval as asked, and the turn's context says why
    assert draft.standalone_question == "And what does it cost?"
    assert draft.context.rewriter == "none"
    assert draft.context.rewrite_notice is not None and "throttled" in draft.context.rewrite_notice


def test_a_conversation_longer_than_the_budget_drops_its_oldest_turns(store: LocalConversations) -> None:
    # Given a conversation of eight turns
    conversations = service(store)
    draft = conversations.begin(ALICE, None, "question 1")
    conversations.record(draft, answer("x" * 100))
    for n in range(2, 9):
        draft = conversations.begin(ALICE, draft.context.conversation_id, f"question {n} about walnuts")
        conversations.record(draft, answer("x" * 100))
    # When a follow-up is asked with room for three turns of history
    recording = Recording()
    follow_up = service(store, recording, turns=3).begin(ALICE, draft.context.conversation_id, "And why?")
    # Then the rewrite sees the three newest, and the turn says five were dropped; nothing failed
    assert [e.question for e in recording.seen[0]] == [f"question {n} about walnuts" for n in (6, 7, 8)]
    assert (follow_up.context.turn, follow_up.context.dropped_turns) == (9, 5)
    # And a character budget drops more, keeping the newest turn whatever its size
    recording = Recording()
    tight = service(store, recording, turns=6, chars=150).begin(ALICE, draft.context.conversation_id, "And why?")
    assert [e.question for e in recording.seen[0]] == ["question 8 about walnuts"]
    assert tight.context.dropped_turns == 7


def test_another_owner_gets_not_found(store: LocalConversations) -> None:
    conversations = service(store)
    draft = conversations.begin(ALICE, None, DLQ)
    conversations.record(draft, answer())
    conversation_id = draft.context.conversation_id
    for attempt in (
        lambda: conversations.begin(BOB, conversation_id, "And the cost?"),
        lambda: conversations.get(BOB, conversation_id),
        lambda: conversations.delete(BOB, conversation_id),
        lambda: conversations.get(ALICE, "c" + "0" * 28),
        lambda: conversations.get(ALICE, "not an id"),
    ):
        with pytest.raises(NotFoundError):
            attempt()
    assert conversations.get(ALICE, conversation_id).turns == 1


def test_two_turns_racing_on_one_conversation_are_both_kept_in_order(store: LocalConversations) -> None:
    conversations = service(store)
    first = conversations.begin(ALICE, None, DLQ)
    conversations.record(first, answer())
    # Given two follow-ups begun together (both as turn 2)
    one = conversations.begin(ALICE, first.context.conversation_id, "And the cost?")
    two = conversations.begin(ALICE, first.context.conversation_id, "And the retention?")
    # When both are recorded, the second goes after the first
    conversations.record(one, answer())
    assert conversations.record(two, answer()).index == 3
    history = conversations.get(ALICE, first.context.conversation_id).history
    assert [t.question for t in history] == [DLQ, "And the cost?", "And the retention?"]


# --- the model rewriters ---------------------------------------------------------------------------------


def test_the_bedrock_rewriter_sends_one_short_converse_request_and_checks_the_reply() -> None:
    model = ScriptedModel(reply=' "What does the dead-letter queue cost?" ')
    rewriter = BedrockRewriter("amazon.nova-lite-v1:0", client=FakeConverse(model))
    history = [exchange(DLQ, "After five receives [1].")]
    assert rewriter.rewrite("And what does it cost?", history) == "What does the dead-letter queue cost?"
    system, user = model.prompts[0]
    assert "standalone" in system and "User: How does the dead-letter queue work?" in user
    assert user.endswith("Last question: And what does it cost?\nStandalone question:")
    request = rewriter.request("And what does it cost?", history)
    assert request["inferenceConfig"] == {"maxTokens": 200, "temperature": 0.0}
    # A reply that cannot be a question is refused (the service then uses the question as asked)
    with pytest.raises(UnusableRewrite):
        BedrockRewriter("m", client=FakeConverse(ScriptedModel(reply="  "))).rewrite("And?", history)


def test_the_openai_rewriter_asks_the_endpoint_and_falls_back_on_its_failure(store: LocalConversations) -> None:
    model = ScriptedModel(reply="What does the dead-letter queue cost?")
    with chat_server(model) as server:
        rewriter = OpenAIRewriter(server.url, "llama3.2", timeout=5, max_tokens=200)
        assert rewriter.rewrite("And what does it cost?", [exchange(DLQ)]) == "What does the dead-letter queue cost?"
        assert server.requests[-1].body["stream"] is False
        # When the endpoint fails, the service keeps the question as asked
        conversations = service(store, rewriter)
        first = conversations.begin(ALICE, None, DLQ)
        conversations.record(first, answer())
        server.fail_next("vllm_internal")
        draft = conversations.begin(ALICE, first.context.conversation_id, "And what does it cost?")
        assert draft.standalone_question == "And what does it cost?"
        assert draft.context.rewrite_notice is not None and "openai" in draft.context.rewrite_notice
