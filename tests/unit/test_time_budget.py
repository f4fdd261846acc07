"""The invocation's time budget (`citewise.domain.deadline`) bounds every AWS call.

Real botocore clients talk to a small HTTP server on loopback that answers like Bedrock Runtime, only
slowly or with throttling errors, so the read timeout and the retry decisions are botocore's own, not a
stub's. The OpenSearch adapter is driven against the test double stalled the same way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from opensearchpy import OpenSearch

from citewise.aws import clients as aws
from citewise.aws.bedrock_embeddings import TitanEmbedder
from citewise.aws.bedrock_synthesis import BedrockSynthesizer
from citewise.aws.opensearch import OpenSearchIndex
from citewise.domain import deadline
from citewise.domain.errors import EmbeddingServiceError, GenerationError, SearchBackendError, ThrottledError
from citewise.domain.models import Caller
from tests.doubles.opensearch_server import FakeOpenSearch, running
from tests.factories import hit

MODEL = "amazon.nova-lite-v1:0"
HITS = [hit(1, "Uploads use presigned URLs.")]


@dataclass
class Bedrock:
    """What the loopback Bedrock answers: `stall` seconds of silence, or an error with its status."""

    stall: float = 0.0
    error: tuple[int, str] | None = None
    attempts: list[float] = field(default_factory=list)


@pytest.fixture
def bedrock(aws_credentials: None) -> Iterator[tuple[Bedrock, Any]]:
    """A loopback Bedrock Runtime and a citewise-configured client (5 attempts, 60 s reads) pointed at it."""
    behaviour = Bedrock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the base class's naming
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            behaviour.attempts.append(time.monotonic())
            time.sleep(behaviour.stall)
            status, body, headers = 200, b"{}", {}
            if behaviour.error is not None:
                status, code = behaviour.error
                body = json.dumps({"message": "injected"}).encode()
                headers = {"x-amzn-ErrorType": code}
            try:
                self.send_response(status)
                for name, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting, as intended

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    made = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=f"http://{host!s}:{port}",
        config=aws.client_config(max_attempts=5, read_timeout=60),
    )
    aws.follow_deadline(made)
    try:
        yield behaviour, made
    finally:
        server.shutdown()
        server.server_close()


def _timed(call: Any) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        call()
    return raised.value, time.monotonic() - started


def test_a_slow_converse_ends_as_a_generation_error_inside_the_budget(bedrock: tuple[Bedrock, Any]) -> None:
    # Given Bedrock takes 5 s to answer, and the invocation has 1.5 s left after the reserve
    behaviour, client = bedrock
    behaviour.stall = 5.0
    synthesizer = BedrockSynthesizer(MODEL, client=client)

    # When a question is answered inside that budget
    with deadline.budget(2500, reserve=1.0):
        error, elapsed = _timed(lambda: synthesizer.answer("q", HITS))

    # Then the read timed out at the budget, was not retried, and is a GENERATION_ERROR
    assert isinstance(error, GenerationError)
    assert "ReadTimeoutError" in error.message
    assert 1.3 < elapsed < 2.3
    assert len(behaviour.attempts) == 1


def test_a_throttled_converse_stops_retrying_at_the_budget_and_is_throttled(bedrock: tuple[Bedrock, Any]) -> None:
    # Given Bedrock throttles every attempt, and a client allowed five attempts
    behaviour, client = bedrock
    behaviour.error = (429, "ThrottlingException")
    synthesizer = BedrockSynthesizer(MODEL, client=client)

    # When a question is answered with 2 s of budget
    with deadline.budget(3000, reserve=1.0):
        error, elapsed = _timed(lambda: synthesizer.answer("q", HITS))

    # Then fewer than five attempts fitted, the call ended inside the budget, and it is THROTTLED
    assert isinstance(error, ThrottledError)
    assert error.details["aws_error"] == "ThrottlingException"
    assert elapsed < 2.0
    assert 1 <= len(behaviour.attempts) < 5


def test_an_unavailable_service_is_throttled_and_retried_outside_a_budget(bedrock: tuple[Bedrock, Any]) -> None:
    # Given Bedrock answers 503 ServiceUnavailableException / When embedding without a budget
    behaviour, client = bedrock
    behaviour.error = (503, "ServiceUnavailableException")
    error, _ = _timed(lambda: TitanEmbedder(client=client).embed_query("hello"))

    # Then all five attempts were made and the caller is told to retry later
    assert isinstance(error, ThrottledError)
    assert len(behaviour.attempts) == 5


def test_no_attempt_is_sent_when_the_budget_is_spent(bedrock: tuple[Bedrock, Any]) -> None:
    behaviour, client = bedrock
    with deadline.budget(1200, reserve=1.0):
        error, _ = _timed(lambda: TitanEmbedder(client=client).embed_query("hello"))
    assert isinstance(error, EmbeddingServiceError)
    assert "time budget" in error.message and error.details["aws_error"] == "none"
    assert behaviour.attempts == []


def test_the_budget_reaches_the_embedders_worker_threads() -> None:
    # Given a client that records the budget each call sees, on four worker threads
    seen: list[float | None] = []

    class Recording:
        def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
            seen.append(deadline.remaining())
            body = json.dumps({"embedding": [1.0] + [0.0] * 255, "inputTextTokenCount": 1}).encode()
            return {"body": _Body(body), "contentType": "application/json"}

    # When texts are embedded inside a budget
    with deadline.budget(20_000):
        TitanEmbedder(dimension=256, client=Recording(), workers=4).embed_documents([f"t{i}" for i in range(8)])

    # Then every call, whichever thread made it, saw the budget
    assert len(seen) == 8 and all(left is not None and 0 < left < 20 for left in seen)


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


def test_service_unavailable_from_the_stubbed_api_is_throttled(client: Any, stub: Stubber) -> None:
    stub.add_client_error("converse", service_error_code="ServiceUnavailableException", http_status_code=503)
    with pytest.raises(ThrottledError):
        BedrockSynthesizer(MODEL, client=client).answer("q", HITS)


def test_a_stalled_opensearch_search_ends_as_a_search_backend_error_inside_the_budget() -> None:
    # Given the double stalls its next search for 5 s, and an adapter whose own timeout is 30 s
    with running(FakeOpenSearch()) as server:
        client = OpenSearch(hosts=[server.url], timeout=30, max_retries=0)
        index = OpenSearchIndex(client, "chunks", serverless=False)
        index.ensure("hashing-64", 64)
        server.fake.stall_next_request(5.0, path="_search")

        # When a search runs with 1.5 s of budget
        with deadline.budget(2500, reserve=1.0):
            error, elapsed = _timed(lambda: index.keyword_search(Caller(tenant_id="t", user_id="u"), "x", None, 5))

        # Then it timed out at the budget, as SEARCH_BACKEND_ERROR; with no budget left it is not sent at all
        assert isinstance(error, SearchBackendError)
        assert 1.3 < elapsed < 2.3
        sent = len(server.fake.requests)
        with deadline.budget(1100, reserve=1.0), pytest.raises(SearchBackendError, match="no time left"):
            index.keyword_search(Caller(tenant_id="t", user_id="u"), "x", None, 5)
        assert len(server.fake.requests) == sent
        client.close()


def test_outside_a_budget_nothing_is_bounded() -> None:
    assert deadline.remaining() is None
    assert deadline.bounded(60.0) == 60.0
    with deadline.budget(10_000, reserve=1.0):
        left = deadline.remaining()
        assert left is not None and 8.5 < left <= 9.0
        assert deadline.bounded(60.0) <= 9.0
        assert deadline.bounded(2.0) == 2.0
    assert deadline.remaining() is None
