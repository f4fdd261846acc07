"""Bedrock embedders against a real botocore client whose calls a `Stubber` answers (no network).

Request and response bodies have the shapes of the Bedrock model-parameter pages for Titan Text
Embeddings v2 and Cohere Embed v3. Stubber answers before botocore's retry handler runs, so these tests
check citewise's own behaviour: what is sent, how answers are read, and how failures are reported.
"""

from __future__ import annotations

import io
import json
import math
import threading
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from citewise.aws import clients as aws
from citewise.aws.bedrock_embeddings import (
    COHERE_MAX_CHARS,
    TITAN_MAX_CHARS,
    CohereEmbedder,
    TitanEmbedder,
    clip,
    split_for_titan,
)
from citewise.domain.errors import EmbeddingServiceError, ThrottledError, ValidationError

TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"
JSON = "application/json"


class JsonBody:
    """Matches an InvokeModel `body` (str or bytes) whose JSON equals `expected`; records what it saw."""

    def __init__(self, expected: Any = None) -> None:
        self.expected = expected
        self.seen: Any = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str | bytes):
            return False
        self.seen = json.loads(other)
        return self.expected is None or self.seen == self.expected

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JsonBody({self.expected!r})"


def invoke_response(payload: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None) -> dict[str, Any]:
    """An InvokeModel response as botocore parses it: the body is a stream, headers in the metadata."""
    data = raw if raw is not None else json.dumps(payload).encode()
    response: dict[str, Any] = {"body": StreamingBody(io.BytesIO(data), len(data)), "contentType": JSON}
    if headers is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": 200, "HTTPHeaders": headers}
    return response


def expected_call(model_id: str, body: JsonBody) -> dict[str, Any]:
    return {"modelId": model_id, "body": body, "contentType": JSON, "accept": JSON}


def unit(dimension: int, axis: int, scale: float = 1.0) -> list[float]:
    """A vector along one axis (scaled, so tests can see re-normalisation)."""
    vector = [0.0] * dimension
    vector[axis] = scale
    return vector


# --- Titan Text Embeddings v2 ----------------------------------------------------------------------


def test_titan_sends_one_text_with_dimension_and_normalize_and_counts_tokens(client: Any, stub: Stubber) -> None:
    # Given a 256-dimension Titan embedder and the model's answer
    embedder = TitanEmbedder(dimension=256, client=client)
    body = JsonBody({"inputText": "how are tenants isolated?", "dimensions": 256, "normalize": True})
    stub.add_response(
        "invoke_model",
        invoke_response(
            {
                "embedding": unit(256, 3, scale=2.0),
                "inputTextTokenCount": 7,
                "embeddingsByType": {"float": unit(256, 3, scale=2.0)},
            }
        ),
        expected_call(TITAN, body),
    )
    # When a query is embedded
    vector = embedder.embed_query("how are tenants isolated?")
    # Then the request is Titan's v2 body, the vector is unit length and the tokens are counted
    assert vector == unit(256, 3)
    assert embedder.usage == 7
    assert embedder.name == "bedrock:amazon.titan-embed-text-v2:0:256"
    assert embedder.dimension == 256


@pytest.mark.parametrize("dimension", [256, 512, 1024])
def test_titan_accepts_its_three_dimensions(dimension: int) -> None:
    assert TitanEmbedder(dimension=dimension, client=object()).dimension == dimension


@pytest.mark.parametrize("dimension", [0, 384, 768, 1536])
def test_titan_rejects_other_dimensions(dimension: int) -> None:
    with pytest.raises(ValueError, match="256, 512, 1024"):
        TitanEmbedder(dimension=dimension, client=object())


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_titan_rejects_an_empty_text_before_calling_bedrock(client: Any, stub: Stubber, text: str) -> None:
    # Given no stubbed response: any call would fail the test
    embedder = TitanEmbedder(client=client)
    # Then an empty text among others is a validation error and nothing is sent
    with pytest.raises(ValidationError):
        embedder.embed_documents(["fine", text])


def test_titan_splits_a_60k_character_text_into_two_calls_and_averages_by_length(client: Any, stub: Stubber) -> None:
    # Given a 60,000-character text (over Titan's 50,000-character limit) and one answer per piece
    sentence = "The tenant index stores vectors. "
    text = (sentence * (60_000 // len(sentence) + 1))[:60_000]
    embedder = TitanEmbedder(dimension=1024, client=client, workers=1)
    bodies = [JsonBody(), JsonBody()]
    for axis, body in enumerate(bodies):
        stub.add_response(
            "invoke_model",
            invoke_response({"embedding": unit(1024, axis), "inputTextTokenCount": 5000 + axis}),
            expected_call(TITAN, body),
        )
    # When it is embedded
    (vector,) = embedder.embed_documents([text])
    # Then two calls covered the text, each piece within the limit and cut at whitespace
    pieces = [body.seen["inputText"] for body in bodies]
    assert all(len(piece) <= TITAN_MAX_CHARS for piece in pieces)
    assert " ".join(pieces).split() == text.split()
    assert all(piece == piece.strip() for piece in pieces)
    assert all(body.seen["dimensions"] == 1024 and body.seen["normalize"] is True for body in bodies)
    # And the vector is the length-weighted mean of the piece vectors, re-normalised
    first, second = (len(piece) for piece in pieces)
    norm = math.hypot(first, second)
    assert vector[0] == pytest.approx(first / norm)
    assert vector[1] == pytest.approx(second / norm)
    assert math.fsum(x * x for x in vector) == pytest.approx(1.0)
    assert embedder.usage == 10_001


def test_split_for_titan_keeps_short_texts_whole_and_cuts_unspaced_runs() -> None:
    assert split_for_titan("  short text  ") == ["  short text  "]
    # A run with no whitespace is cut into slices; ASCII counts a token per 4 characters...
    run = "x" * 40_000
    pieces = split_for_titan(run)
    assert "".join(pieces) == run
    assert [len(piece) for piece in pieces] == [32_768, 7_232]
    # ...other characters one each, so unspaced Chinese is cut at 8,192 characters
    hanzi = "字" * 20_000
    assert [len(piece) for piece in split_for_titan(hanzi)] == [8_192, 8_192, 3_616]
    # Punctuation-dense text is limited by its counted tokens, not only by characters
    dense = "!! " * 10_000
    assert all(piece.count("!") <= 8_192 for piece in split_for_titan(dense))
    assert len(split_for_titan(dense)) == 3


def test_titan_runs_calls_concurrently_and_keeps_the_input_order() -> None:
    # Given a client that only answers once four calls are in flight at the same time
    barrier = threading.Barrier(4, timeout=5)

    class ConcurrentClient:
        def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
            barrier.wait()
            axis = int(json.loads(kwargs["body"])["inputText"].split()[-1])
            return invoke_response({"embedding": unit(256, axis), "inputTextTokenCount": 2})

    embedder = TitanEmbedder(dimension=256, client=ConcurrentClient(), workers=4)
    # When eight texts are embedded
    vectors = embedder.embed_documents([f"text {axis}" for axis in range(8)])
    # Then the calls overlapped (or the barrier would have broken) and each vector is its own text's
    assert [vector.index(1.0) for vector in vectors] == list(range(8))
    assert embedder.usage == 16


def test_titan_throttling_surfaces_as_throttled_and_the_next_call_succeeds(client: Any, stub: Stubber) -> None:
    # Given Bedrock throttles the first call (after botocore's own retries) and answers the second
    embedder = TitanEmbedder(dimension=256, client=client)
    stub.add_client_error(
        "invoke_model",
        service_error_code="ThrottlingException",
        service_message="Too many requests",
        http_status_code=429,
    )
    stub.add_response("invoke_model", invoke_response({"embedding": unit(256, 0), "inputTextTokenCount": 1}))
    # Then the first is a ThrottledError (the queue retries it; the API answers 429)
    with pytest.raises(ThrottledError) as raised:
        embedder.embed_query("hello")
    assert raised.value.details == {"aws_error": "ThrottlingException", "action": "bedrock:InvokeModel"}
    # And the embedder is still usable
    assert embedder.embed_query("hello") == unit(256, 0)


def test_titan_access_denied_is_an_embedding_service_error(client: Any, stub: Stubber) -> None:
    stub.add_client_error("invoke_model", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(EmbeddingServiceError) as raised:
        TitanEmbedder(client=client).embed_query("hello")
    assert raised.value.details["aws_error"] == "AccessDeniedException"


def test_a_read_timeout_is_an_embedding_service_error_after_botocore_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a client with citewise's configuration whose every send times out
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = aws.client("bedrock-runtime", region="us-east-1", max_attempts=2)
    sends: list[str] = []

    def time_out(request: Any, **_: Any) -> None:
        sends.append(request.url)
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", time_out)
    # When a text is embedded
    with pytest.raises(EmbeddingServiceError) as raised:
        TitanEmbedder(client=client).embed_query("hello")
    # Then botocore sent it twice (max_attempts counts the first request) and the timeout became our error
    assert len(sends) == 2
    assert raised.value.details == {"action": "bedrock:InvokeModel"}
    assert "ReadTimeoutError" in raised.value.message


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (invoke_response(None, raw=b"<html>oops</html>"), "not JSON"),
        (invoke_response(["not", "an", "object"]), "not a JSON object"),
        (invoke_response({"inputTextTokenCount": 3}), "expected an embedding of 256 numbers, got NoneType"),
        (invoke_response({"embedding": [0.5] * 255}), "expected an embedding of 256 numbers, got 255"),
        (invoke_response({"embedding": ["0.5"] * 256}), "other than finite numbers"),
        (invoke_response({"embedding": [0.0] * 256}), "all zeros"),
    ],
)
def test_titan_malformed_answers_are_embedding_service_errors(
    client: Any, stub: Stubber, response: dict[str, Any], problem: str
) -> None:
    stub.add_response("invoke_model", response)
    with pytest.raises(EmbeddingServiceError, match=problem):
        TitanEmbedder(dimension=256, client=client).embed_query("hello")


def test_the_default_client_is_made_on_first_use_with_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given citewise.aws.clients.client records its calls
    made: list[tuple[str, str | None]] = []

    class Client:
        def invoke_model(self, **_: Any) -> dict[str, Any]:
            return invoke_response({"embedding": unit(256, 1), "inputTextTokenCount": 1})

    def fake_client(service: str, *, region: str | None = None, **_: int) -> Client:
        made.append((service, region))
        return Client()

    monkeypatch.setattr(aws, "client", fake_client)
    # When an embedder is configured, nothing is created; on the first call, one client is
    embedder = TitanEmbedder(dimension=256, region="eu-west-1")
    assert made == []
    embedder.embed_documents(["a", "b", "c"])
    embedder.embed_query("d")
    assert made == [("bedrock-runtime", "eu-west-1")]


# --- Cohere Embed v3 -------------------------------------------------------------------------------


def cohere_response(texts: list[str], axis: int = 0, tokens: int | None = None) -> dict[str, Any]:
    """Cohere's floats shape; Bedrock reports the input tokens only in a response header."""
    payload = {
        "embeddings": [unit(1024, (axis + i) % 1024, scale=0.5) for i in range(len(texts))],
        "id": "5c2c4a0a-6f8e-4c2b-9a43-2f1c3e0d9b11",
        "response_type": "embeddings_floats",
        "texts": texts,
    }
    headers = None if tokens is None else {"x-amzn-bedrock-input-token-count": str(tokens)}
    return invoke_response(payload, headers=headers)


def test_cohere_embeds_documents_in_batches_of_96_in_order(client: Any, stub: Stubber) -> None:
    # Given 200 documents
    texts = [f"document number {i}" for i in range(200)]
    embedder = CohereEmbedder(client=client)
    for start, end in [(0, 96), (96, 192), (192, 200)]:
        batch = texts[start:end]
        stub.add_response(
            "invoke_model",
            cohere_response(batch, axis=start, tokens=3 * len(batch)),
            expected_call(COHERE, JsonBody({"texts": batch, "input_type": "search_document", "truncate": "END"})),
        )
    # When they are embedded
    vectors = embedder.embed_documents(texts)
    # Then three calls of 96, 96 and 8 texts gave 200 unit vectors in input order
    assert [vector.index(1.0) for vector in vectors] == list(range(200))
    assert embedder.usage == 600
    assert embedder.name == "bedrock:cohere.embed-english-v3:1024"
    assert embedder.dimension == 1024


def test_cohere_embeds_a_query_as_a_search_query(client: Any, stub: Stubber) -> None:
    embedder = CohereEmbedder(model_id="cohere.embed-multilingual-v3", client=client)
    stub.add_response(
        "invoke_model",
        cohere_response(["wie werden Mandanten getrennt?"], axis=9),
        expected_call(
            "cohere.embed-multilingual-v3",
            JsonBody({"texts": ["wie werden Mandanten getrennt?"], "input_type": "search_query", "truncate": "END"}),
        ),
    )
    assert embedder.embed_query("wie werden Mandanten getrennt?") == unit(1024, 9)
    # Without the token header, usage cannot be known and stays as it was
    assert embedder.usage == 0
    assert embedder.name == "bedrock:cohere.embed-multilingual-v3:1024"


def test_cohere_clips_texts_over_2048_characters_at_a_word_boundary(client: Any, stub: Stubber) -> None:
    # Given a 3,000-character document
    long_text = "tenant " * 428 + "end"
    body = JsonBody()
    stub.add_response("invoke_model", cohere_response(["x", "y"]), expected_call(COHERE, body))
    # When embedded next to a short one
    CohereEmbedder(client=client).embed_documents(["short", long_text])
    # Then Bedrock got at most 2,048 characters of it, ending at a whole word; the short one unchanged
    short, clipped = body.seen["texts"]
    assert short == "short"
    assert len(clipped) <= COHERE_MAX_CHARS
    assert long_text.startswith(clipped) and clipped.endswith("tenant")


def test_clip_cuts_unspaced_text_hard() -> None:
    assert clip("x" * 3000, 2048) == "x" * 2048
    assert clip("short", 2048) == "short"
    # Leading whitespace never becomes the whole clipped text
    assert clip(" " * 3000 + "word " * 10, 2048) == ("word " * 10).strip()


def test_cohere_accepts_the_by_type_shape(client: Any, stub: Stubber) -> None:
    stub.add_response(
        "invoke_model",
        invoke_response({"embeddings": {"float": [unit(1024, 5)]}, "response_type": "embeddings_by_type"}),
    )
    assert CohereEmbedder(client=client).embed_query("q") == unit(1024, 5)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"embeddings": [unit(1024, 0)]}, "expected 2 embeddings, got 1"),
        ({"id": "x", "texts": ["a", "b"]}, "expected 2 embeddings, got none"),
        ({"embeddings": [unit(1024, 0), [1.0] * 384]}, "expected an embedding of 1024 numbers, got 384"),
    ],
)
def test_cohere_malformed_answers_are_embedding_service_errors(
    client: Any, stub: Stubber, payload: dict[str, Any], problem: str
) -> None:
    stub.add_response("invoke_model", invoke_response(payload))
    with pytest.raises(EmbeddingServiceError, match=problem):
        CohereEmbedder(client=client).embed_documents(["a", "b"])


def test_cohere_throttling_surfaces_as_throttled(client: Any, stub: Stubber) -> None:
    stub.add_client_error("invoke_model", service_error_code="ThrottlingException", http_status_code=429)
    with pytest.raises(ThrottledError):
        CohereEmbedder(client=client).embed_documents(["a"])


def test_cohere_rejects_empty_texts_and_bad_batch_sizes(client: Any, stub: Stubber) -> None:
    with pytest.raises(ValidationError):
        CohereEmbedder(client=client).embed_documents(["a", ""])
    with pytest.raises(ValueError, match="between 1 and 96"):
        CohereEmbedder(client=client, batch_size=97)
    assert CohereEmbedder(client=client).embed_documents([]) == []
