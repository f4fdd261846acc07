"""The OpenAI-compatible synthesizer over real HTTP: what it sends, every shape of answer it reads, and
every way an endpoint fails (down, stalled, trickling, refusing, throttling, talking nonsense), each a
`GenerationError` (or `ThrottledError`) within the deadline, never a hang.

The server is tests/doubles/chat_server.py on 127.0.0.1; the grounding of the text is the shared one
(test_grounding.py) and the Synthesizer contract is tests/contract/test_synthesizer_contract.py.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from citewise.domain.errors import GenerationError, ThrottledError
from citewise.ports.grounding import BLOCKED_ANSWER, system_prompt, user_message
from citewise.ports.synthesizer import NO_ANSWER, AnswerDone, TextDelta
from citewise_local import openai_synthesis
from citewise_local.openai_synthesis import OpenAIChatSynthesizer
from tests.doubles.chat_server import ChatServer, chat_server
from tests.doubles.models import ScriptedModel
from tests.factories import hit

HITS = [
    hit(1, "Alarms fire when the dead-letter queue is not empty."),
    hit(2, "Rotate the signing key every ninety days. Keys live in KMS.", page=3),
]
QUESTION = "How often should the signing key be rotated?"
REPLY = "Rotate the signing key every ninety days [2]."
KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server(ScriptedModel(REPLY)) as running:
        yield running


def synthesizer(server: ChatServer, **kwargs: object) -> OpenAIChatSynthesizer:
    options: dict[str, object] = {"timeout": 5.0, **kwargs}
    return OpenAIChatSynthesizer(server.url, "llama3.2", **options)  # type: ignore[arg-type]


def sse(*events: object, done: bool = True, newline: str = "\n") -> bytes:
    """A server-sent events body of these chat completion chunks."""
    lines = [f"data: {json.dumps(event)}{newline}{newline}" for event in events]
    return ("".join(lines) + (f"data: [DONE]{newline}{newline}" if done else "")).encode()


def chunk(content: str | None, finish_reason: str | None = None, **extra: object) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}],
        **extra,
    }


# --- the request -----------------------------------------------------------------------------------


def test_the_request_is_a_streamed_chat_completion_with_the_shared_prompt(server: ChatServer) -> None:
    # Given a synthesizer with explicit settings and an API key
    instructions = "Reference material: cite every claim."
    chat = synthesizer(server, api_key=SecretStr(KEY), max_tokens=300, temperature=0.2)
    # When it answers with an operator's instructions
    chat.answer(QUESTION, HITS, instructions=instructions)
    # Then it posted one streamed chat completion: the rules plus instructions, then the numbered sources
    (received,) = server.requests
    assert received.body == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": system_prompt(instructions)},
            {"role": "user", "content": user_message(QUESTION, HITS)},
        ],
        "max_tokens": 300,
        "temperature": 0.2,
        "stream": True,
    }
    assert received.headers["Authorization"] == f"Bearer {KEY}"
    assert received.headers["Content-Type"] == "application/json"


def test_without_a_key_no_authorization_is_sent(server: ChatServer) -> None:
    synthesizer(server).answer(QUESTION, HITS)
    assert "Authorization" not in server.requests[0].headers


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"max_tokens": 0}, {"base_url": "ftp://host/v1"}, {"base_url": "localhost:11434"}]
)
def test_bad_settings_are_refused_at_configuration(kwargs: dict[str, object]) -> None:
    options: dict[str, object] = {"base_url": "http://localhost:11434/v1", "model": "llama3.2", **kwargs}
    with pytest.raises(ValueError):
        OpenAIChatSynthesizer(**options)  # type: ignore[arg-type]


def test_the_endpoint_in_errors_has_no_credentials_of_the_url() -> None:
    chat = OpenAIChatSynthesizer("https://user:secret@llm.example:8443/api/v1/", "m")
    assert chat.endpoint == "https://llm.example:8443/api/v1/chat/completions"


# --- the answer ------------------------------------------------------------------------------------


def test_a_streamed_answer_is_grounded_with_its_usage(server: ChatServer) -> None:
    answer = synthesizer(server).answer(QUESTION, HITS)
    assert answer.answer == "Rotate the signing key every ninety days [1]."
    assert [(c.source, c.doc_id, c.page, c.quote) for c in answer.citations] == [
        (1, "d2", 3, "Rotate the signing key every ninety days.")
    ]
    assert answer.usage == {"input_tokens": 412, "output_tokens": 31, "total_tokens": 443}


def test_a_server_that_ignores_stream_and_answers_json_is_read_too(server: ChatServer) -> None:
    server.ignores_stream = True
    answer = synthesizer(server).answer(QUESTION, HITS)
    assert answer.grounded and answer.answer == "Rotate the signing key every ninety days [1]."
    assert answer.usage == {"input_tokens": 412, "output_tokens": 31, "total_tokens": 443}


def test_any_well_formed_event_stream_is_read(server: ChatServer) -> None:
    # Given CRLF line endings, comments, other fields, a role-only delta, a null content, a data field
    # split over two lines, and the finish on the last content chunk with usage but no [DONE]
    body = b": keep-alive\r\n\r\nevent: message\r\nid: 1\r\n" + sse(
        chunk(None), chunk("Rotate the signing"), done=False, newline="\r\n"
    )
    body += b'data: {"choices": [{"delta": {"content": " key every ninety"},\r\ndata: "finish_reason": null}]}\r\n\r\n'
    body += sse(chunk(" days [2].", "stop", usage={"prompt_tokens": 9, "completion_tokens": 4}), done=False)
    server.respond_next(200, "text/event-stream; charset=utf-8", body)
    # When answered
    answer = synthesizer(server).answer(QUESTION, HITS)
    # Then the pieces make the answer
    assert answer.answer == "Rotate the signing key every ninety days [1]."
    assert answer.usage == {"input_tokens": 9, "output_tokens": 4}


def test_a_null_error_field_is_no_error(server: ChatServer) -> None:
    body = {"choices": [{"message": {"content": REPLY}, "finish_reason": "stop"}], "error": None}
    server.respond_next(200, "application/json", json.dumps(body).encode())
    assert synthesizer(server).answer(QUESTION, HITS).grounded


def test_thinking_is_not_part_of_the_answer(server: ChatServer) -> None:
    server.model.reply = "<think>Source 1 is about alarms [1].</think>\nRotate the signing key every ninety days [2]."
    answer = synthesizer(server).answer(QUESTION, HITS)
    assert answer.answer == "Rotate the signing key every ninety days [1]." and answer.sources[0] == HITS[1]


def test_an_answer_cut_at_max_tokens_keeps_its_valid_citations(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.respond_next(
        200, "text/event-stream", sse(chunk("Rotate the signing key every ninety days [2]. Keys"), chunk("", "length"))
    )
    with caplog.at_level(logging.WARNING):
        answer = synthesizer(server, max_tokens=12).answer(QUESTION, HITS)
    # The text and its valid citation are kept; the unfinished last sentence cites nothing, so not grounded
    assert answer.answer == "Rotate the signing key every ninety days [1]. Keys"
    assert answer.citations[0].quote == "Rotate the signing key every ninety days." and not answer.grounded
    assert "cut at max_tokens=12" in caplog.text


def test_a_content_filtered_answer_says_so_and_cites_nothing(server: ChatServer) -> None:
    server.respond_next(200, "text/event-stream", sse(chunk("I cannot help with [1]", "content_filter")))
    answer = synthesizer(server).answer(QUESTION, HITS)
    assert (answer.answer, answer.citations, answer.sources, answer.grounded) == (BLOCKED_ANSWER, [], [], False)


def test_an_uncited_answer_is_the_honest_no_answer(server: ChatServer) -> None:
    server.model.reply = "The documents do not say."
    assert synthesizer(server).answer(QUESTION, HITS).answer == NO_ANSWER


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("ollama_model_not_found", 404, 'model "llama9" not found, try pulling it first'),
        ("vllm_context_length", 400, "This model's maximum context length is 4096 tokens."),
        ("vllm_internal", 500, "CUDA out of memory."),
        ("openai_invalid_key", 401, "Incorrect API key provided."),
    ],
)
def test_an_http_error_is_a_generation_error_with_the_servers_message(
    server: ChatServer, name: str, status: int, message: str
) -> None:
    server.fail_next(name)
    with pytest.raises(GenerationError, match=f"HTTP {status}: ") as raised:
        synthesizer(server, api_key=SecretStr(KEY)).answer(QUESTION, HITS)
    assert message in raised.value.message and len(raised.value.message) < 400
    assert raised.value.details == {
        "action": "chat.completions",
        "endpoint": server.url + "/chat/completions",
        "model": "llama3.2",
        "status": status,
    }
    assert KEY not in raised.value.message


def test_429_is_throttled_with_the_retry_after(server: ChatServer) -> None:
    server.fail_next("openai_rate_limit")
    with pytest.raises(ThrottledError, match="throttled \\(HTTP 429\\): Rate limit reached") as raised:
        synthesizer(server).answer(QUESTION, HITS)
    assert raised.value.details["retry_after"] == "20" and raised.value.code == "THROTTLED"


def test_an_html_error_page_is_not_quoted(server: ChatServer) -> None:
    server.respond_next(502, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>")
    with pytest.raises(GenerationError) as raised:
        synthesizer(server).answer(QUESTION, HITS)
    assert raised.value.message.endswith("failed: HTTP 502")


@pytest.mark.parametrize(
    ("content_type", "body", "problem"),
    [
        ("application/json", b'{"choices": [{"message": {"content": "Rotate [2]', "not JSON"),
        ("application/json", b"[1, 2]", "not a JSON object"),
        ("application/json", b'{"choices": []}', "no choices"),
        ("application/json", b'{"choices": [{"message": {"role": "assistant"}}]}', "no message content"),
        ("application/json", b'{"choices": [{"message": {"content": "  "}}]}', "no text"),
        ("text/event-stream", b"data: {not json}\n\n", "not JSON"),
        ("text/event-stream", b"data: 42\n\n", "not a JSON object"),
        ("text/event-stream", b"data: [DONE]\n\n", "no text"),
    ],
)
def test_a_body_that_is_not_a_chat_completion_is_a_generation_error(
    server: ChatServer, content_type: str, body: bytes, problem: str
) -> None:
    server.respond_next(200, content_type, body)
    with pytest.raises(GenerationError, match=f"returned an unusable answer: .*{problem}"):
        synthesizer(server).answer(QUESTION, HITS)


def test_an_error_inside_a_stream_is_a_generation_error(server: ChatServer) -> None:
    body = sse(chunk("Rotate"), {"error": {"message": "the model crashed", "type": "server_error"}})
    server.respond_next(200, "text/event-stream", body)
    with pytest.raises(GenerationError, match="failed: the model crashed"):
        synthesizer(server).answer(QUESTION, HITS)


def test_a_stream_cut_before_the_answer_ended_is_a_generation_error(server: ChatServer) -> None:
    server.cut_next()
    with pytest.raises(GenerationError, match="the stream ended before the answer did"):
        synthesizer(server).answer(QUESTION, HITS)


def test_a_runaway_body_is_cut_at_the_bound(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_synthesis, "MAX_RESPONSE_BYTES", 1000)
    server.model.reply = "Rotate the signing key every ninety days [2]. " * 100
    with pytest.raises(GenerationError, match="exceeds 1000 bytes"):
        synthesizer(server).answer(QUESTION, HITS)


@pytest.mark.parametrize("fault", ["stall before headers", "stall after headers", "trickle"])
def test_a_stalled_or_trickling_server_hits_the_total_deadline(server: ChatServer, fault: str) -> None:
    # Given a server that never finishes: silent, silent after its first chunk, or a byte every 50 ms
    if fault == "trickle":
        server.trickle_next()
    else:
        server.stall_next(after_headers=fault == "stall after headers")
    # When answered with a total deadline of 0.5 s
    started = time.monotonic()
    with pytest.raises(GenerationError, match="did not answer within 0.5 s") as raised:
        synthesizer(server, timeout=0.5).answer(QUESTION, HITS)
    # Then it gives up at the deadline, not later (a per-read timeout would never end the trickle)
    assert 0.5 <= time.monotonic() - started < 1.5
    assert raised.value.details["timeout_s"] == 0.5 and raised.value.code == "GENERATION_ERROR"


def test_an_endpoint_that_is_down_is_a_generation_error_at_once() -> None:
    # Given a port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(GenerationError, match="failed: ConnectionRefusedError") as raised:
        OpenAIChatSynthesizer(f"http://127.0.0.1:{port}/v1", "llama3.2").answer(QUESTION, HITS)
    assert time.monotonic() - started < 1.0
    assert raised.value.details["endpoint"] == f"http://127.0.0.1:{port}/v1/chat/completions"


def test_no_hits_means_no_call(server: ChatServer) -> None:
    assert synthesizer(server).answer(QUESTION, []).answer == NO_ANSWER
    assert server.requests == []


def test_the_key_is_never_logged_nor_shown(server: ChatServer, caplog: pytest.LogCaptureFixture) -> None:
    # Given a keyed synthesizer whose first request is refused and whose second succeeds
    chat = synthesizer(server, api_key=SecretStr(KEY))
    server.fail_next("openai_invalid_key")
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(GenerationError) as raised:
            chat.answer(QUESTION, HITS)
        chat.answer(QUESTION, HITS)
    # Then the key went to the server, and nowhere else
    assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in caplog.text and KEY not in str(raised.value.to_dict()) and KEY not in repr(vars(chat))


# --- streaming ----------------------------------------------------------------------------------------


def test_leaving_a_stream_closes_the_model_call_and_leaves_no_thread(server: ChatServer) -> None:
    # Given a model writing a long cited answer at a readable pace
    server.model.reply = " ".join(["Rotate the signing key every ninety days [2]."] * 40)
    server.pace = 0.05
    timers = {t for t in threading.enumerate() if isinstance(t, threading.Timer)}
    stream = synthesizer(server, timeout=30.0).stream(QUESTION, HITS)
    # When the reader takes the first text and leaves
    first = next(e for e in stream if isinstance(e, TextDelta))
    stream.close()
    # Then the endpoint sees its client gone long before the answer's end, and no deadline thread is left
    assert first.text.startswith("Rotate the signing key")
    assert server.abandoned.wait(5.0)
    assert server.chunks_sent < 60
    assert {t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()} <= timers


def test_thinking_split_across_tokens_is_not_streamed(server: ChatServer) -> None:
    # Given a reasoning model whose thinking tags arrive cut into pieces
    server.model.reply = "<think>Source 1 is about alarms [1]. </think> Rotate the signing key every ninety days [2]."
    # When streamed
    events = list(synthesizer(server).stream(QUESTION, HITS))
    # Then none of the thinking is sent
    assert (
        "".join(e.text for e in events if isinstance(e, TextDelta)) == "Rotate the signing key every ninety days [1]."
    )


def test_a_filter_stopping_a_stream_after_cited_text_withdraws_it(server: ChatServer) -> None:
    # Given a content filter that stops the model after a cited sentence
    server.respond_next(
        200,
        "text/event-stream",
        sse(chunk("Rotate the signing key every ninety days [2]. "), chunk("And then", "content_filter")),
    )
    # When streamed
    events = list(synthesizer(server).stream(QUESTION, HITS))
    # Then the cited text was sent, then withdrawn by the blocked answer, which the stream ends with
    texts = [e for e in events if isinstance(e, TextDelta)]
    assert texts[0].text.startswith("Rotate") and texts[-1] == TextDelta(BLOCKED_ANSWER, reset=True)
    assert isinstance(events[-1], AnswerDone) and events[-1].answer.answer == BLOCKED_ANSWER
