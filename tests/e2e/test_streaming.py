"""Streamed answers over `citewise serve`: `POST /v1/query` with `Accept: text/event-stream` (or
`"stream": true`) answers server-sent events, the last of which is exactly the non-streamed answer; errors
before the stream are the usual JSON; a client that leaves mid-stream stops the model's generation."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from citewise.client import CitewiseClient, CitewiseClientError
from tests.doubles.chat_server import ChatServer
from tests.e2e.helpers import Api, new_tenant, upload, wait_for_status

GUIDE = (
    b"# Operations\n\nRotate the signing key every ninety days. Keys live in KMS.\n\n"
    b"Alarms fire when the dead-letter queue is not empty.\n"
)
QUESTION = "How often is the signing key rotated?"


def parse_events(body: bytes) -> list[tuple[str, Any]]:
    """(name, data) of each server-sent event of `body`."""
    events = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.fixture(scope="module")
def indexed(api: Api) -> str:
    """A token of a tenant with the guide indexed."""
    token = api.token(new_tenant(), "ana")
    doc_id = upload(api, token, "guide.md", GUIDE, "text/markdown")
    assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
    return token


@pytest.mark.parametrize("ask", ["accept", "body"])
def test_a_streamed_answer_ends_with_exactly_the_answer_of_the_plain_call(api: Api, indexed: str, ask: str) -> None:
    # Given the plain answer to a question
    plain = api.request("POST", "/v1/query", token=indexed, json_body={"query": QUESTION})
    assert plain.status == 200, plain.body
    # When the same question asks for a stream
    headers, body = (
        ({"Accept": "text/event-stream"}, {"query": QUESTION})
        if ask == "accept"
        else ({}, {"query": QUESTION, "stream": True})
    )
    streamed = api.request("POST", "/v1/query", token=indexed, json_body=body, headers=headers)
    # Then the events are the sources, the text and its citations, then the very same answer
    assert streamed.status == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = parse_events(streamed.body)
    names = [name for name, _ in events]
    assert names[0] == "sources" and names[-1] == "answer" and "text" in names and "citation" in names
    final = events[-1][1]
    expected = plain.json()
    # (each call is a turn of a conversation of its own: the same turn, of another conversation)
    assert final["conversation"]["conversation_id"] != expected["conversation"]["conversation_id"]
    assert {**final, "request_id": None, "conversation": None} == {**expected, "request_id": None, "conversation": None}
    # and its response id names that turn of that conversation
    for answer in (final, expected):
        assert answer["conversation"]["response_id"] == f"{answer['conversation']['conversation_id']}-1"
    other = {"conversation_id": "", "response_id": ""}
    assert {**final["conversation"], **other} == {**expected["conversation"], **other}
    assert final["request_id"] == streamed.headers["x-amzn-requestid"]
    assert "".join(data["text"] for name, data in events if name == "text") == final["answer"]
    assert [data["citation"] for name, data in events if name == "citation"] == final["citations"]


def test_errors_before_the_stream_are_the_usual_json(api: Api, indexed: str) -> None:
    sse = {"Accept": "text/event-stream"}
    unauthenticated = api.request("POST", "/v1/query", json_body={"query": QUESTION}, headers=sse)
    invalid = api.request("POST", "/v1/query", token=indexed, json_body={"query": "", "stream": True})
    for reply, code in ((unauthenticated, "UNAUTHORIZED"), (invalid, "VALIDATION_ERROR")):
        assert reply.headers["content-type"].startswith("application/json")
        assert reply.json()["error"]["code"] == code and reply.json()["error"]["request_id"]


def test_a_client_leaving_mid_stream_stops_the_generation(paced_model: tuple[Api, ChatServer]) -> None:
    # Given a tenant with the guide indexed, and a model that would write for 10 s
    api, chat = paced_model
    token = api.token(new_tenant(), "ana")
    doc_id = upload(api, token, "guide.md", GUIDE, "text/markdown")
    assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
    # When a client reads the first text of a streamed answer and leaves
    address = urlsplit(api.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    connection.request(
        "POST",
        "/v1/query",
        json.dumps({"query": QUESTION, "stream": True}),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200
    seen = b""
    while b"event: text" not in seen:
        seen += response.read1(4096)
    connection.close()
    # Then the model call is closed long before its end, and the server says the generation stopped
    assert chat.abandoned.wait(10.0)
    assert chat.chunks_sent < 400
    assert "its generation was stopped" in api.log.read_text()
    # And the conversation keeps the turn as interrupted: its question, no half-written answer
    for _ in range(100):
        listed = api.request("GET", "/v1/conversations", token=token).json()["conversations"]
        if listed:
            break
        time.sleep(0.1)
    (conversation,) = listed
    shown = api.request("GET", f"/v1/conversations/{conversation['conversation_id']}", token=token).json()
    (turn,) = shown["history"]
    assert (turn["question"], turn["status"], turn["answer"], turn["citations"]) == (QUESTION, "interrupted", "", [])


def test_the_client_streams_the_answer_it_would_return(api: Api, indexed: str) -> None:
    client = CitewiseClient(api.url, indexed)
    events = list(client.query_stream(QUESTION))
    assert [e.event for e in events][0] == "sources" and events[-1].event == "answer"
    streamed, plain = events[-1].answer(), client.query(QUESTION)
    # (each call is the first turn of a conversation of its own)
    assert streamed.conversation is not None and plain.conversation is not None
    assert streamed.conversation.turn == plain.conversation.turn == 1
    unset = {"request_id": "", "conversation": None}
    assert streamed.model_copy(update=unset) == plain.model_copy(update=unset)
    assert "".join(e.data["text"] for e in events if e.event == "text") == plain.answer


def test_a_streamed_follow_up_is_the_next_turn_of_its_conversation(api: Api, indexed: str) -> None:
    client = CitewiseClient(api.url, indexed)
    first = client.query(QUESTION)
    assert first.conversation is not None
    conversation_id = first.conversation.conversation_id
    events = list(client.query_stream(QUESTION, conversation_id=conversation_id))
    streamed = events[-1].answer()
    assert streamed.conversation is not None
    assert (streamed.conversation.conversation_id, streamed.conversation.turn) == (conversation_id, 2)
    assert [turn.status for turn in client.get_conversation(conversation_id).history] == ["complete", "complete"]


def test_the_client_reads_an_error_before_the_stream_as_its_error(api: Api, indexed: str) -> None:
    with pytest.raises(CitewiseClientError) as raised:
        list(CitewiseClient(api.url, indexed).query_stream(""))
    assert raised.value.code == "VALIDATION_ERROR" and raised.value.request_id
