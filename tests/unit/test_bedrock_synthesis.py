"""The Converse synthesizer: what it asks Bedrock, and how it turns the Converse response into an answer.

Converse calls go through a real botocore client answered by a `Stubber` with the API's response shape
(`output.message.content`, `stopReason`, `usage`, `metrics`). The grounding it shares with every
generative synthesizer is tested on its own in test_grounding.py, and the Synthesizer contract in
tests/contract/test_synthesizer_contract.py.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import EventStreamError, ReadTimeoutError
from botocore.stub import ANY, Stubber

from citewise.aws import clients as aws
from citewise.aws.bedrock_synthesis import BedrockSynthesizer
from citewise.domain.errors import GenerationError, ThrottledError
from citewise.ports.grounding import BLOCKED_ANSWER, SYSTEM_PROMPT, system_prompt, user_message
from citewise.ports.synthesizer import NO_ANSWER, AnswerDone, TextDelta
from tests.doubles.models import FakeEventStream, converse_response, converse_stream_events
from tests.factories import hit

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


HITS = [
    hit(1, "Alarms fire when the dead-letter queue is not empty. Dashboards show latency.", page=4),
    hit(2, "Every tenant has its own prefix. Tenants are isolated by a mandatory filter on tenant_id."),
    hit(3, "Uploads use presigned URLs.", heading=("Guide", "Uploads")),
]


class Captured:
    """Matches any value and keeps it, for assertions on large request parts."""

    def __init__(self) -> None:
        self.value: Any = None

    def __eq__(self, other: object) -> bool:
        self.value = other
        return True

    __hash__ = None  # type: ignore[assignment]


# --- the request -----------------------------------------------------------------------------------


def test_the_request_has_the_system_prompt_numbered_sources_and_inference_settings(client: Any, stub: Stubber) -> None:
    # Given a synthesizer with explicit settings
    synthesizer = BedrockSynthesizer(MODEL, client=client, max_tokens=512, temperature=0.2)
    messages = Captured()
    stub.add_response(
        "converse",
        converse_response("Tenants are isolated by a mandatory filter on tenant_id [2]."),
        {
            "modelId": MODEL,
            "system": [{"text": SYSTEM_PROMPT}],
            "messages": messages,
            "inferenceConfig": {"maxTokens": 512, "temperature": 0.2},
        },
    )
    # When a question is answered (no guardrail configured: no guardrailConfig is sent)
    synthesizer.answer("How are tenants isolated?", HITS)
    # Then one user message numbers the sources in rank order, with where each comes from, then asks
    (message,) = messages.value
    assert message["role"] == "user"
    (block,) = message["content"]
    prompt = block["text"]
    assert prompt == user_message("How are tenants isolated?", HITS)
    assert prompt.index('<source id="1">') < prompt.index('<source id="2">') < prompt.index('<source id="3">')
    assert "title: Doc 1\npath: docs/1.md\npage: 4\ntext:\nAlarms fire" in prompt
    assert "section: Guide > Uploads" in prompt
    assert prompt.endswith("Question: How are tenants isolated?")


def test_operator_instructions_follow_the_fixed_rules(client: Any, stub: Stubber) -> None:
    # Given a tool profile's instructions
    instructions = "This is reference material: cite every claim."
    stub.add_response(
        "converse",
        converse_response("Uploads use presigned URLs [3]."),
        {
            "modelId": MODEL,
            "system": [{"text": system_prompt(instructions)}],
            "messages": ANY,
            "inferenceConfig": ANY,
        },
    )
    # When answered with them, then the system prompt is the rules followed by the instructions
    answer = BedrockSynthesizer(MODEL, client=client).answer("How do uploads work?", HITS, instructions=instructions)
    assert answer.grounded and system_prompt(instructions).startswith(SYSTEM_PROMPT)


def test_a_configured_guardrail_is_sent(client: Any, stub: Stubber) -> None:
    synthesizer = BedrockSynthesizer(MODEL, client=client, guardrail_identifier="gr-123", guardrail_version="2")
    stub.add_response(
        "converse",
        converse_response("Uploads use presigned URLs [3]."),
        {
            "modelId": MODEL,
            "system": ANY,
            "messages": ANY,
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
            "guardrailConfig": {"guardrailIdentifier": "gr-123", "guardrailVersion": "2"},
        },
    )
    assert synthesizer.answer("How do uploads work?", HITS).grounded


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_tokens": 0},
        {"temperature": 1.5},
        {"guardrail_identifier": "gr-123"},
        {"guardrail_version": "1"},
    ],
)
def test_bad_settings_are_refused_at_configuration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        BedrockSynthesizer(MODEL, client=object(), **kwargs)


# --- the answer ------------------------------------------------------------------------------------


def test_citations_are_renumbered_in_order_of_first_citation_with_verbatim_quotes(client: Any, stub: Stubber) -> None:
    # Given the model cites source 2, then source 1
    stub.add_response(
        "converse",
        converse_response(
            "Tenants are isolated by a mandatory filter on tenant_id [2]. "
            "An alarm fires when the dead-letter queue is not empty [1]."
        ),
    )
    synthesizer = BedrockSynthesizer(MODEL, client=client)
    # When answered
    answer = synthesizer.answer("How are tenants isolated and what alarms exist?", HITS)
    # Then source 2 became [1], source 1 became [2], and the uncited source comes last
    assert answer.answer == (
        "Tenants are isolated by a mandatory filter on tenant_id [1]. "
        "An alarm fires when the dead-letter queue is not empty [2]."
    )
    assert [h.chunk.chunk_id for h in answer.sources] == ["d2-00000", "d1-00000", "d3-00000"]
    assert answer.grounded
    # And each quote is the chunk sentence that matches the citing sentence best
    first, second = answer.citations
    assert (first.source, first.doc_id, first.quote) == (
        1,
        "d2",
        "Tenants are isolated by a mandatory filter on tenant_id.",
    )
    assert (second.source, second.doc_id, second.page, second.quote) == (
        2,
        "d1",
        4,
        "Alarms fire when the dead-letter queue is not empty.",
    )
    # And usage is kept for the cost metrics
    assert answer.usage == {"input_tokens": 1200, "output_tokens": 80, "total_tokens": 1280}


def test_a_marker_for_a_source_not_given_is_dropped_and_logged_without_text(
    client: Any, stub: Stubber, caplog: pytest.LogCaptureFixture
) -> None:
    # Given the model cites [7] of three sources, next to a valid [3]
    stub.add_response("converse", converse_response("Uploads use presigned URLs [7][3]. Also quantum tunnelling [7]."))
    # When answered
    with caplog.at_level(logging.WARNING):
        answer = BedrockSynthesizer(MODEL, client=client).answer("How do uploads work?", HITS)
    # Then [7] is gone (with its space), [3] became [1]
    assert answer.answer == "Uploads use presigned URLs [1]. Also quantum tunnelling."
    assert [(c.source, c.doc_id, c.quote) for c in answer.citations] == [(1, "d3", "Uploads use presigned URLs.")]
    # And the log names the number, never the document or answer text
    assert "[7]" in caplog.text
    assert "presigned" not in caplog.text and "quantum" not in caplog.text


def test_an_answer_citing_no_given_source_is_not_grounded(client: Any, stub: Stubber) -> None:
    stub.add_response("converse", converse_response("Tenants are probably isolated somehow [9]."))
    answer = BedrockSynthesizer(MODEL, client=client).answer("How are tenants isolated?", HITS)
    assert (answer.answer, answer.citations, answer.sources, answer.grounded) == (NO_ANSWER, [], [], False)


def test_no_hits_means_no_call(client: Any, stub: Stubber) -> None:
    # No stubbed response: a call would fail the test
    answer = BedrockSynthesizer(MODEL, client=client).answer("anything?", [])
    assert (answer.answer, answer.usage) == (NO_ANSWER, None)


@pytest.mark.parametrize("stop_reason", ["guardrail_intervened", "content_filtered"])
def test_a_blocked_request_says_so_and_cites_nothing(client: Any, stub: Stubber, stop_reason: str) -> None:
    # Given the guardrail's own message cites a source number
    stub.add_response(
        "converse", converse_response("Sorry, the model cannot answer this question [1].", stop_reason=stop_reason)
    )
    synthesizer = BedrockSynthesizer(MODEL, client=client, guardrail_identifier="gr-1", guardrail_version="DRAFT")
    answer = synthesizer.answer("something forbidden", HITS)
    assert (answer.answer, answer.citations, answer.sources, answer.grounded) == (BLOCKED_ANSWER, [], [], False)
    assert answer.usage == {"input_tokens": 1200, "output_tokens": 80, "total_tokens": 1280}


def test_an_answer_cut_at_max_tokens_keeps_its_valid_citations(client: Any, stub: Stubber) -> None:
    stub.add_response(
        "converse", converse_response("Uploads use presigned URLs [3]. Tenants are", stop_reason="max_tokens")
    )
    answer = BedrockSynthesizer(MODEL, client=client).answer("q", HITS)
    # The text and its valid citation are kept; the unfinished last sentence cites nothing, so not grounded
    assert answer.answer == "Uploads use presigned URLs [1]. Tenants are"
    assert answer.citations[0].quote == "Uploads use presigned URLs." and not answer.grounded


def test_an_answer_cut_by_the_context_window_keeps_its_citations_and_none_at_all_says_why(
    client: Any, stub: Stubber
) -> None:
    # Given the model stopped at its context window, once after some text and once before any
    stub.add_response(
        "converse",
        converse_response("Uploads use presigned URLs [3]. Tenants", stop_reason="model_context_window_exceeded"),
    )
    stub.add_response("converse", converse_response(None, stop_reason="model_context_window_exceeded"))
    synthesizer = BedrockSynthesizer(MODEL, client=client)

    # When each is answered / Then the text is kept, grounded; no text is a GENERATION_ERROR naming the cause
    assert synthesizer.answer("q", HITS).answer == "Uploads use presigned URLs [1]. Tenants"
    with pytest.raises(GenerationError, match="context window") as raised:
        synthesizer.answer("q", HITS)
    assert raised.value.details["stop_reason"] == "model_context_window_exceeded"


def test_the_default_client_is_made_on_first_answer_with_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, str | None]] = []

    class Client:
        def converse(self, **_: Any) -> dict[str, Any]:
            return converse_response("Uploads use presigned URLs [3].")

    def fake_client(service: str, *, region: str | None = None, **_: int) -> Client:
        made.append((service, region))
        return Client()

    monkeypatch.setattr(aws, "client", fake_client)
    synthesizer = BedrockSynthesizer(MODEL, region="eu-central-1")
    assert made == []
    synthesizer.answer("q", HITS)
    synthesizer.answer("q", HITS)
    assert made == [("bedrock-runtime", "eu-central-1")]


# --- failures --------------------------------------------------------------------------------------


def test_throttling_surfaces_as_throttled(client: Any, stub: Stubber) -> None:
    stub.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    with pytest.raises(ThrottledError) as raised:
        BedrockSynthesizer(MODEL, client=client).answer("q", HITS)
    assert raised.value.details == {"aws_error": "ThrottlingException", "action": "bedrock:Converse"}


def test_a_validation_error_is_a_generation_error_whose_aws_message_is_only_logged(
    client: Any, stub: Stubber, caplog: pytest.LogCaptureFixture
) -> None:
    # AWS's message may name the account and the role: the operator reads it in the log, the caller never
    denied = "User: arn:aws:sts::123456789012:assumed-role/citewise-dev-query/x is not authorized"
    stub.add_client_error("converse", service_error_code="ValidationException", service_message=denied)
    with caplog.at_level("WARNING"), pytest.raises(GenerationError) as raised:
        BedrockSynthesizer(MODEL, client=client).answer("q", HITS)
    assert raised.value.message == "bedrock:Converse failed: ValidationException"
    assert "123456789012" not in str(raised.value.to_dict())
    [logged] = [record for record in caplog.records if record.getMessage() == "AWS call failed"]
    assert logged.aws_message == denied and logged.action == "bedrock:Converse"  # type: ignore[attr-defined]


def test_a_read_timeout_is_a_generation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = aws.client("bedrock-runtime", region="us-east-1", max_attempts=1)

    def time_out(request: Any, **_: Any) -> None:
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.bedrock-runtime.Converse", time_out)
    with pytest.raises(GenerationError, match="ReadTimeoutError"):
        BedrockSynthesizer(MODEL, client=client).answer("q", HITS)


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (converse_response(None), "no text"),
        (converse_response("   "), "no text"),
        (converse_response("x [1]", stop_reason="malformed_model_output"), "malformed"),
    ],
)
def test_malformed_responses_are_generation_errors(
    client: Any, stub: Stubber, response: dict[str, Any], problem: str
) -> None:
    stub.add_response("converse", response)
    with pytest.raises(GenerationError, match=problem):
        BedrockSynthesizer(MODEL, client=client).answer("q", HITS)


def test_a_response_without_output_is_a_generation_error() -> None:
    # The API model makes `output` required, so only a client outside botocore could omit it.
    class Client:
        def converse(self, **_: Any) -> dict[str, Any]:
            return {"stopReason": "end_turn", "usage": {}, "metrics": {"latencyMs": 1}}

    with pytest.raises(GenerationError, match="no output message") as raised:
        BedrockSynthesizer(MODEL, client=Client()).answer("q", HITS)
    assert raised.value.details == {"action": "bedrock:Converse", "model": MODEL, "stop_reason": "end_turn"}


def test_only_text_blocks_make_the_answer(client: Any, stub: Stubber) -> None:
    response = converse_response(None)
    response["output"]["message"]["content"] = [
        {"reasoningContent": {"reasoningText": {"text": "Source 2 mentions tenants [2]."}}},
        {"text": "Every tenant has its own prefix [2]."},
    ]
    stub.add_response("converse", response)
    answer = BedrockSynthesizer(MODEL, client=client).answer("q", HITS)
    assert answer.answer == "Every tenant has its own prefix [1]."


# --- ConverseStream ---------------------------------------------------------------------------------


class StreamingClient:
    """`converse_stream` of a bedrock-runtime client answering `events` (checked against the API model)."""

    def __init__(self, events: list[dict[str, Any]], failure: Exception | None = None) -> None:
        self.stream = FakeEventStream(events)
        self.failure = failure

    def converse_stream(self, **request: Any) -> dict[str, Any]:
        if self.failure is None:
            return {"stream": self.stream}
        failure, stream = self.failure, self.stream

        class Failing(FakeEventStream):
            def __iter__(self) -> Any:
                yield from stream
                raise failure

        return {"stream": Failing([])}


REPLY = " ".join(["Tenants are isolated by a mandatory filter on tenant_id [2]."] * 20)


def test_leaving_a_stream_closes_the_converse_stream() -> None:
    client = StreamingClient(converse_stream_events(REPLY))
    stream = BedrockSynthesizer(MODEL, client=client).stream("How are tenants isolated?", HITS)
    first = next(e for e in stream if isinstance(e, TextDelta))
    stream.close()
    assert first.text.startswith("Tenants are isolated") and client.stream.closed
    assert client.stream.read < len(converse_stream_events(REPLY))


def test_a_stream_ends_with_the_answer_converse_gives() -> None:
    client = StreamingClient(converse_stream_events(REPLY))
    events = list(BedrockSynthesizer(MODEL, client=client).stream("How are tenants isolated?", HITS))
    assert isinstance(events[-1], AnswerDone) and events[-1].answer.usage == {
        "input_tokens": 1200,
        "output_tokens": 80,
        "total_tokens": 1280,
    }
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == events[-1].answer.answer


def test_a_guardrail_stopping_the_stream_withdraws_what_was_sent() -> None:
    events = converse_stream_events("Tenants are isolated by a filter [2]. Then", stop_reason="guardrail_intervened")
    answer = list(BedrockSynthesizer(MODEL, client=StreamingClient(events)).stream("q", HITS))
    texts = [e for e in answer if isinstance(e, TextDelta)]
    assert texts[0].text.startswith("Tenants") and texts[-1] == TextDelta(BLOCKED_ANSWER, reset=True)


@pytest.mark.parametrize(
    ("code", "error"), [("throttlingException", ThrottledError), ("modelStreamErrorException", GenerationError)]
)
def test_an_error_event_mid_stream_is_the_usual_error(code: str, error: type[Exception]) -> None:
    failure = EventStreamError({"Error": {"Code": code, "Message": "stopped"}}, "ConverseStream")
    client = StreamingClient(converse_stream_events(REPLY)[:3], failure)
    with pytest.raises(error):
        list(BedrockSynthesizer(MODEL, client=client).stream("q", HITS))
