"""The streaming runtime loop of the query function against a fake Lambda Runtime API over real HTTP: a
streamed route's response goes out chunked in the streamed mode, as it is written, and a failure part-way
goes in the trailers; any other route's response goes out whole, as AWS's own loop posts it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from citewise.api.streaming import DELIMITER
from citewise.api.streaming_runtime import STREAMED_TYPE, RuntimeApi, invoke_once

QUERY = {"httpMethod": "POST", "resource": "/v1/query", "body": "{}"}
SEARCH = {"httpMethod": "POST", "resource": "/v1/search", "body": "{}"}


class FakeRuntimeApi(ThreadingHTTPServer):
    """Hands out `event` once, and keeps what the runtime posted: path, headers, body chunks, trailers."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.event = event
        self.posted: list[dict[str, Any]] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeRuntimeApi

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps(self.server.event).encode()
        self.send_response(200)
        self.send_header("Lambda-Runtime-Aws-Request-Id", "req-1")
        self.send_header("Lambda-Runtime-Deadline-Ms", "9999999999999")
        self.send_header("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:1:function:query")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        chunks, trailers = [], {}
        if self.headers.get("Transfer-Encoding") == "chunked":
            while size := int(self.rfile.readline().strip(), 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while line := self.rfile.readline().strip():
                name, _, value = line.decode().partition(": ")
                trailers[name] = value
        else:
            chunks.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posted.append(
            {"path": self.path, "headers": dict(self.headers), "chunks": chunks, "trailers": trailers}
        )
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def runtime_api(request: pytest.FixtureRequest) -> Iterator[FakeRuntimeApi]:
    server = FakeRuntimeApi(request.param)
    yield server
    server.shutdown()
    server.server_close()


def _stream_handler(event: dict[str, Any], context: Any) -> Iterator[bytes]:
    yield b'{"statusCode": 200, "headers": {"Content-Type": "text/event-stream"}}' + DELIMITER
    yield b'event: text\ndata: {"text": "Rotate"}\n\n'
    yield b"event: answer\ndata: {}\n\n"


def _failing_stream_handler(event: dict[str, Any], context: Any) -> Iterator[bytes]:
    yield b'{"statusCode": 200}' + DELIMITER
    raise RuntimeError("the model went away")


def _buffered(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "body": json.dumps({"remaining_ms": context.get_remaining_time_in_millis() > 0})}


@pytest.mark.parametrize("runtime_api", [QUERY], indirect=True)
def test_a_streamed_route_is_posted_chunk_by_chunk_in_the_streamed_mode(runtime_api: FakeRuntimeApi) -> None:
    invoke_once(RuntimeApi(runtime_api.address), _buffered, _stream_handler)
    (posted,) = runtime_api.posted
    assert posted["path"] == "/2018-06-01/runtime/invocation/req-1/response"
    assert posted["headers"]["Lambda-Runtime-Function-Response-Mode"] == "streaming"
    assert posted["headers"]["Content-Type"] == STREAMED_TYPE
    assert posted["chunks"] == list(_stream_handler({}, None)) and posted["trailers"] == {}


@pytest.mark.parametrize("runtime_api", [QUERY], indirect=True)
def test_a_failure_after_the_first_byte_goes_in_the_trailers(runtime_api: FakeRuntimeApi) -> None:
    invoke_once(RuntimeApi(runtime_api.address), _buffered, _failing_stream_handler)
    (posted,) = runtime_api.posted
    assert posted["chunks"] == [b'{"statusCode": 200}' + DELIMITER]
    assert posted["trailers"]["Lambda-Runtime-Function-Error-Type"] == "Runtime.RuntimeError"


@pytest.mark.parametrize("runtime_api", [SEARCH], indirect=True)
def test_a_buffered_route_is_posted_whole(runtime_api: FakeRuntimeApi) -> None:
    invoke_once(RuntimeApi(runtime_api.address), _buffered, _stream_handler)
    (posted,) = runtime_api.posted
    assert "Lambda-Runtime-Function-Response-Mode" not in posted["headers"]
    assert json.loads(posted["chunks"][0]) == {"statusCode": 200, "body": '{"remaining_ms": true}'}
