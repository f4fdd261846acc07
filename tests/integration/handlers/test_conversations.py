"""Conversations over the query function, on both backends (SQLite; DynamoDB under moto, every call held
to the function's role): a follow-up retrieves for the topic of the turn before it, the turns are kept
whole, and a conversation is its owner's alone (404 for everyone else, the operator included)."""

from __future__ import annotations

from typing import Any

from tests.integration.handlers.harness import Stack, claims

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
ALICE_OF_GLOBEX = claims("globex", "alice")
OPERATOR = claims(None, "ops-1", groups="operators")
DLQ = (
    b"# Dead-letter queue\n\nA message that fails five receives moves to the dead-letter queue, where it is kept "
    b"for fourteen days.\n\n## Pricing\n\nThe dead-letter queue costs nothing beyond its messages: each request "
    b"is billed as any SQS request.\n"
)
VAULT = b"# Vault\n\nThe vault opens at nine. Its cost is covered by the facilities budget.\n"


def ask(stack: Stack, question: str, identity: dict[str, str] = ALICE, **fields: Any) -> tuple[int, Any]:
    return stack.api("POST", "/v1/query", body={"query": question, **fields}, identity=identity)


def test_a_follow_up_is_asked_in_its_conversation_and_retrieves_for_its_topic(stack: Stack) -> None:
    # Given two documents that both speak of a cost
    stack.upload_and_ingest(ALICE, "dlq.md", DLQ)
    stack.upload_and_ingest(ALICE, "vault.md", VAULT)
    # When alice asks about the dead-letter queue, then a follow-up in the same conversation
    status, first = ask(stack, "How does the dead-letter queue work?")
    assert status == 200
    conversation = first["conversation"]
    assert (conversation["turn"], conversation["rewriter"], conversation["rewrite_notice"]) == (1, "none", None)
    status, follow_up = ask(stack, "And what does it cost?", conversation_id=conversation["conversation_id"])
    # Then the follow-up is turn 2, rewritten with the first turn's topic, and answered from the DLQ document
    assert status == 200
    context = follow_up["conversation"]
    assert context["conversation_id"] == conversation["conversation_id"] and context["turn"] == 2
    assert context["rewriter"] == "deterministic"
    assert "dead-letter" in context["standalone_question"] and "queue" in context["standalone_question"]
    assert follow_up["sources"][0]["chunk"]["document"]["path"] == "dlq.md"
    # And the conversation keeps both turns, whole, for alice
    status, listed = stack.api("GET", "/v1/conversations", identity=ALICE)
    assert status == 200
    assert [(c["conversation_id"], c["turns"]) for c in listed["conversations"]] == [
        (conversation["conversation_id"], 2)
    ]
    assert listed["conversations"][0]["title"] == "How does the dead-letter queue work?"
    status, shown = stack.api("GET", f"/v1/conversations/{conversation['conversation_id']}", identity=ALICE)
    assert status == 200
    turns = shown["history"]
    assert [(t["index"], t["question"], t["status"]) for t in turns] == [
        (1, "How does the dead-letter queue work?", "complete"),
        (2, "And what does it cost?", "complete"),
    ]
    assert turns[1]["standalone_question"] == context["standalone_question"]
    assert turns[1]["answer"] == follow_up["answer"] and turns[1]["citations"] == follow_up["citations"]


def test_a_conversation_is_its_owners_alone(stack: Stack) -> None:
    # Given alice's conversation
    stack.upload_and_ingest(ALICE, "dlq.md", DLQ)
    conversation_id = ask(stack, "How does the dead-letter queue work?")[1]["conversation"]["conversation_id"]
    path = f"/v1/conversations/{conversation_id}"
    # Then another user of her tenant and a user of her name in another tenant get 404 for it, every way
    for stranger in (BOB, ALICE_OF_GLOBEX):
        for method in ("GET", "DELETE"):
            status, body = stack.api(method, path, identity=stranger)
            assert (status, body["error"]["code"]) == (404, "NOT_FOUND"), (stranger, method)
        status, body = ask(stack, "And the cost?", stranger, conversation_id=conversation_id)
        assert (status, body["error"]["code"]) == (404, "NOT_FOUND")
        assert stack.api("GET", "/v1/conversations", identity=stranger) == (
            200,
            {"conversations": [], "next_cursor": None},
        )
    # And an unknown id is the same 404; the operator, who is no tenant's user, is refused the routes
    unknown = conversation_id[:-1] + ("0" if conversation_id[-1] != "0" else "1")
    assert ask(stack, "And the cost?", conversation_id=unknown)[0] == 404
    assert stack.api("GET", path, identity=OPERATOR)[0] == 403
    # And nothing of alice's changed
    shown = stack.api("GET", path, identity=ALICE)[1]
    assert len(shown["history"]) == 1


def test_a_bad_conversation_id_is_refused_and_a_deleted_conversation_is_gone(stack: Stack) -> None:
    # Given alice's conversation
    stack.upload_and_ingest(ALICE, "dlq.md", DLQ)
    conversation_id = ask(stack, "How does the dead-letter queue work?")[1]["conversation"]["conversation_id"]
    # Then an id that cannot be one is a validation error, in a body and in a path
    status, body = ask(stack, "And the cost?", conversation_id="../../#credentials")
    assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR")
    assert stack.api("GET", "/v1/conversations/not-an-id", identity=ALICE)[0] == 400
    # When she deletes it, it is gone: no turn can be added, nothing is listed
    assert stack.api("DELETE", f"/v1/conversations/{conversation_id}", identity=ALICE)[0] == 204
    assert stack.api("GET", f"/v1/conversations/{conversation_id}", identity=ALICE)[0] == 404
    assert ask(stack, "And the cost?", conversation_id=conversation_id)[0] == 404
    assert stack.api("GET", "/v1/conversations", identity=ALICE)[1]["conversations"] == []
