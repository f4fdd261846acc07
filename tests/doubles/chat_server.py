"""An OpenAI-compatible chat-completions endpoint over real HTTP on 127.0.0.1, for driving the
`openai` synthesizer (and `citewise ask` with it) without a model.

`POST /v1/chat/completions` checks the request (a model name, system and user messages, `stream`),
keeps it, and lets a `ScriptedModel` write the answer, which it sends in the response shapes of
tests/fixtures/chat_completions.json: with `stream: true` as server-sent events in chunked transfer
encoding, one `chat.completion.chunk` per few words, a final chunk with `finish_reason`, a usage chunk
and `data: [DONE]` (as Ollama and vLLM do); otherwise, or when `ignores_stream` is set (as some servers
do), one `chat.completion` JSON body.

A model writing at a readable speed: `pace` (seconds between the chunks of every streamed answer);
`abandoned` is set when a client leaves a streamed answer before its end.

Faults on demand, each for the next request: `fail_next` (a recorded error body: 4xx, 429 with
Retry-After, 5xx), `respond_next` (any status, type and bytes: malformed JSON, an HTML page),
`stall_next` (no answer at all, or headers and one chunk and then nothing), `trickle_next` (a byte at a
time, forever) and `cut_next` (the stream stops mid-answer without `[DONE]`). A stalled request is held
until the server closes, so a client without a deadline would hang the test.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.doubles.models import ScriptedModel

SHAPES: dict[str, Any] = json.loads((Path(__file__).parents[1] / "fixtures" / "chat_completions.json").read_text())
PATH = "/v1/chat/completions"
HOLD_SECONDS = 30.0  # the longest a stalled request is held (the server's close releases it sooner)


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    body: dict[str, Any]
    headers: dict[str, str]


Fault = Callable[["_Handler"], None]


class ChatServer:
    """The endpoint; `url` is the API base to configure (`http://127.0.0.1:<port>/v1`)."""

    def __init__(self, model: ScriptedModel | None = None) -> None:
        self.model = model or ScriptedModel()
        self.ignores_stream = False
        self.pace = 0.0
        """Seconds between the chunks of a streamed answer (a model writing at a human-visible pace)."""
        self.abandoned = threading.Event()
        """Set when a client left a streamed answer before its end: the write to it failed."""
        self.chunks_sent = 0
        self.requests: list[Received] = []
        self._faults: list[Fault] = []
        self._released = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.chat = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # --- faults --------------------------------------------------------------------------------

    def fail_next(self, name: str) -> None:
        """Answer the next request with the recorded error `name` of the fixtures."""
        error = SHAPES["errors"][name]
        body = json.dumps(error["body"]).encode()
        self.respond_next(error["status"], "application/json", body, headers=error.get("headers", {}))

    def respond_next(
        self, status: int, content_type: str, body: bytes, *, headers: dict[str, str] | None = None
    ) -> None:
        """Answer the next request with exactly these bytes."""

        def respond(handler: _Handler) -> None:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(body)

        self._faults.append(respond)

    def stall_next(self, *, after_headers: bool) -> None:
        """Hold the next request: before any byte, or after the headers and one chunk of the stream."""

        def stall(handler: _Handler) -> None:
            if after_headers:
                handler.start_stream()
                handler.send_event(self._chunk("Rotate the"))
            self._released.wait(HOLD_SECONDS)

        self._faults.append(stall)

    def trickle_next(self) -> None:
        """Send the next stream one byte every 50 ms, for as long as the client reads."""

        def trickle(handler: _Handler) -> None:
            handler.start_stream()
            event = f"data: {json.dumps(self._chunk('Rotate the signing key'))}\n\n".encode()
            while True:
                for byte in event:
                    if not handler.send_chunk(bytes([byte])) or self._released.wait(0.05):
                        return

        self._faults.append(trickle)

    def cut_next(self) -> None:
        """Stream two chunks of the next answer, then end the response without a finish or `[DONE]`."""

        def cut(handler: _Handler) -> None:
            handler.start_stream()
            handler.send_event(self._chunk("Rotate the"))
            handler.send_event(self._chunk(" signing key [2]"))
            handler.send_chunk(b"")

        self._faults.append(cut)

    # --- answers -------------------------------------------------------------------------------

    def _answer(self, handler: _Handler, request: dict[str, Any]) -> None:
        system, user = (message["content"] for message in request["messages"])
        text = self.model(system, user)
        if request.get("stream") and not self.ignores_stream:
            handler.start_stream()
            for piece in _pieces(text):
                if not handler.send_event(self._chunk(piece)):
                    self.abandoned.set()
                    return
                self.chunks_sent += 1
                if self.pace and self._released.wait(self.pace):
                    return
            last = copy.deepcopy(SHAPES["last_chunk"])
            handler.send_event(last)
            handler.send_event(SHAPES["usage_chunk"])
            handler.send_chunk(b"data: [DONE]\n\n")
            handler.send_chunk(b"")
            return
        completion = copy.deepcopy(SHAPES["completion"])
        completion["model"] = request["model"]
        completion["choices"][0]["message"]["content"] = text
        handler.send_json(200, completion)

    def _chunk(self, content: str) -> dict[str, Any]:
        chunk = copy.deepcopy(SHAPES["chunk"])
        chunk["choices"][0]["delta"]["content"] = content
        return chunk

    def _next_fault(self) -> Fault | None:
        return self._faults.pop(0) if self._faults else None


def _pieces(text: str, words: int = 3) -> Iterator[str]:
    """`text` in pieces of a few words, spaces kept, as a model streams tokens."""
    parts = text.split(" ")
    for start in range(0, len(parts), words):
        piece = " ".join(parts[start : start + words])
        yield piece if start == 0 else " " + piece


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the tests read what matters from `ChatServer.requests`."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        chat: ChatServer = self.server.chat  # type: ignore[attr-defined]
        # One request per connection, as the synthesizer makes them: the client closes after `[DONE]`, so
        # waiting for a next request on the connection would only read its reset.
        self.close_connection = True
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path != PATH:
            self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            request = json.loads(raw)
            problem = _problem(request)
        except ValueError:
            problem = "the body is not JSON"
        if problem:
            self.send_json(400, {"error": {"message": problem, "type": "invalid_request_error"}})
            return
        chat.requests.append(Received(request, dict(self.headers.items())))
        fault = chat._next_fault()
        if fault is not None:
            fault(self)
        else:
            chat._answer(self, request)

    def send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, body: Any) -> bool:
        return self.send_chunk(f"data: {json.dumps(body)}\n\n".encode())

    def send_chunk(self, data: bytes) -> bool:
        """Send one chunk of the chunked body (an empty one ends it); False if the client has gone."""
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except OSError:  # the client gave up (its deadline): nothing to send it
            return False
        return True


def _problem(request: Any) -> str:
    """What an OpenAI-compatible server would refuse in the request ('' if nothing)."""
    if not isinstance(request, dict) or not isinstance(request.get("model"), str) or not request["model"]:
        return "model is required"
    messages = request.get("messages")
    roles = [m.get("role") for m in messages] if isinstance(messages, list) else []
    if roles != ["system", "user"] or not all(isinstance(m.get("content"), str) for m in messages):
        return "expected a system and a user message with text content"
    if not isinstance(request.get("stream", False), bool):
        return "stream must be a boolean"
    return ""


@contextmanager
def chat_server(model: ScriptedModel | None = None) -> Iterator[ChatServer]:
    """A running `ChatServer`, closed (and any stalled request released) on exit."""
    server = ChatServer(model)
    try:
        yield server
    finally:
        server.close()
