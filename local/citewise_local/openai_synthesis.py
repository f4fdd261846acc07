"""The Synthesizer on any OpenAI-compatible chat-completions endpoint: Ollama, vLLM, llama.cpp's server,
LM Studio (`CITEWISE_SYNTHESIZER=openai`; docs/generation.md).

It keeps the Bedrock synthesizer's contract with the same code: the prompt and the grounding of the
model's text come from `citewise.ports.grounding` (numbered sources, the fixed citation rules plus an
operator's instructions, unknown markers dropped, quotes verbatim, `NO_ANSWER` without a valid citation).

Never a hang: one answer has a total deadline (`timeout`, connect to last byte), not only a timeout per
read, which a slow-but-alive server (a token every few seconds from a model on a laptop's CPU) would never
hit. The answer is requested as a stream (`stream: true`, server-sent events), so the deadline is checked
at every chunk; a watchdog thread shuts the socket at the deadline, so even a read blocked on a server
that stalls, or trickles a byte at a time, returns at once. A server that ignores `stream` and answers
plain JSON is read the same way.

Failures are `GenerationError` (GENERATION_ERROR): endpoint unreachable, deadline passed, an HTTP error
(the server's own error message is kept, cut short), a body that is not a chat completion. HTTP 429 is
`ThrottledError` (THROTTLED). The API key is a bearer token; it appears in no message and no log line.

The standard library's `http.client` is the HTTP client: it needs nothing installed and lets the watchdog
reach the socket.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from citewise.domain.errors import GenerationError, ThrottledError
from citewise.domain.models import Answer, SearchHit
from citewise.ports.grounding import Grounder, blocked, system_prompt, user_message
from citewise.ports.synthesizer import AnswerDone, AnswerEvent, collected, replayed, unanswered

logger = logging.getLogger(__name__)

ACTION = "chat.completions"
CONNECT_TIMEOUT = 5.0
"""Seconds to open the connection (within the total deadline): a local endpoint that is up accepts at once."""
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""A bound on what is read: an answer of `max_tokens` tokens is far smaller, a runaway body is not."""
MAX_ERROR_MESSAGE = 200
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class _Unusable(Exception):
    """The body is not a chat completion (the message says why); `_complete` makes it a GenerationError."""


@dataclass(frozen=True, slots=True)
class _Reply:
    """How the endpoint's answer ended: why it stopped, the token counts (for metrics)."""

    finish_reason: str | None
    usage: dict[str, int] | None


class OpenAIChatSynthesizer:
    """The `Synthesizer` over `POST {base_url}/chat/completions`, with citations checked against the hits.

    Token usage comes back on `Answer.usage` when the server reports it.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: SecretStr | None = None,
        timeout: float = 60.0,
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> None:
        """Configure only; nothing is contacted until the first answer.

        `base_url` is the API base up to `/v1` (`http://localhost:11434/v1` for Ollama); `timeout` is the
        total seconds one answer may take.
        """
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL such as http://localhost:11434/v1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.model = model
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + "/chat/completions"
        # Where errors say the endpoint is: without any user:password@ of the URL.
        self.endpoint = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{self._path}"
        self._api_key = api_key
        self._timeout = timeout
        self._max_tokens = max_tokens
        self._temperature = temperature

    def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
        """An answer citing only `hits`; with no hits the endpoint is not called.

        `instructions` (an operator's) follow the fixed rules in the system prompt.
        """
        return collected(self.stream(question, hits, instructions=instructions))

    def stream(
        self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None
    ) -> Generator[AnswerEvent, None, None]:
        """`answer` as the model writes it, token by token through `Grounder`; closing the stream closes the
        connection to the endpoint, which stops the generation there."""
        if not hits:
            yield from replayed(unanswered())
            return
        grounder, unthink = Grounder(hits), _Unthinker()
        blank = True
        completion = self._complete(self._body(question, hits, instructions))
        try:
            while True:
                try:
                    piece = next(completion)
                except StopIteration as done:
                    reply: _Reply = done.value
                    break
                # Reasoning models write their thinking inline before the answer; it is not the answer.
                text = unthink.feed(piece)
                blank = blank and not text.strip()
                yield from grounder.feed(text)
        finally:
            completion.close()
        text = unthink.finish()
        blank = blank and not text.strip()
        events = grounder.feed(text)
        if reply.finish_reason == "content_filter":
            logger.info("the answer was blocked (finish_reason content_filter)")
            yield from blocked(reply.usage, started=grounder.started)
            return
        if blank:
            raise self._unusable("the answer has no text")
        if reply.finish_reason == "length":
            logger.warning("the answer was cut at max_tokens=%d", self._max_tokens)
        yield from events
        rest, answer = grounder.finish()
        yield from rest
        yield AnswerDone(answer.model_copy(update={"usage": reply.usage}))

    def _body(self, question: str, hits: Sequence[SearchHit], instructions: str | None) -> bytes:
        return json.dumps(
            {
                "model": self.model,
                "messages": [
                    {"role": "system", "content": system_prompt(instructions)},
                    {"role": "user", "content": user_message(question, hits)},
                ],
                "max_tokens": self._max_tokens,
                "temperature": self._temperature,
                "stream": True,
            }
        ).encode()

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream, application/json",
            "User-Agent": "citewise",
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    def _complete(self, body: bytes) -> Generator[str, None, _Reply]:
        """POST the request and yield the answer's text as it is read, all within the deadline; closing the
        generator closes the connection."""
        deadline = _Deadline(self._timeout)
        connection = self._connection(deadline)
        started = time.monotonic()
        try:
            with deadline.watching(connection):
                connection.connect()
                # Connected: from here on a read may wait as long as the deadline allows (a model loading
                # into memory answers its first token after many seconds).
                connection.sock.settimeout(max(deadline.remaining(), 0.001))
                connection.request("POST", self._path, body, self._headers())
                response = connection.getresponse()
                if response.status >= 400:
                    raise self._http_error(response, _read_all(response, deadline))
                if "text/event-stream" in (response.getheader("Content-Type") or ""):
                    reply = yield from self._from_events(_events(response, deadline))
                else:
                    reply = yield from self._from_completion(_json(_read_all(response, deadline)))
        except _Unusable as exc:
            raise self._unusable(str(exc)) from exc
        except (OSError, http.client.HTTPException) as exc:
            if deadline.passed():
                raise GenerationError(
                    f"{ACTION} at {self.endpoint} did not answer within {self._timeout:g} s",
                    details=self._details(timeout_s=self._timeout),
                ) from exc
            raise GenerationError(
                f"{ACTION} at {self.endpoint} failed: {type(exc).__name__}: {exc}", details=self._details()
            ) from exc
        finally:
            connection.close()
        logger.info(
            "%s answered in %.2f s (finish_reason %s, usage %s)",
            ACTION,
            time.monotonic() - started,
            reply.finish_reason,
            reply.usage,
        )
        return reply

    def _connection(self, deadline: _Deadline) -> http.client.HTTPConnection:
        timeout = min(CONNECT_TIMEOUT, deadline.remaining())
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _from_completion(self, body: Any) -> Generator[str, None, _Reply]:
        """A plain chat completion: `choices[0].message.content`, `finish_reason`, `usage`."""
        choice = self._choice(body)
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._unusable("the completion has no message content")
        yield content
        return _Reply(_finish_reason(choice), _usage(body.get("usage")))

    def _from_events(self, events: Iterator[Any]) -> Generator[str, None, _Reply]:
        """A stream of chat completion chunks: each `delta.content` piece as it comes, until `[DONE]`."""
        finish_reason: str | None = None
        usage: dict[str, int] | None = None
        for chunk in events:
            if chunk is None:  # [DONE]
                break
            if not isinstance(chunk, dict):
                raise self._unusable("a chunk is not a JSON object")
            usage = _usage(chunk.get("usage")) or usage
            if chunk.get("choices") == [] and chunk.get("error") is None:  # the usage-only chunk some servers send
                continue
            choice = self._choice(chunk)
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                yield content
            finish_reason = _finish_reason(choice) or finish_reason
        else:
            if finish_reason is None:
                raise self._unusable("the stream ended before the answer did")
        return _Reply(finish_reason, usage)

    def _choice(self, body: Any) -> dict[str, Any]:
        """`choices[0]` of a completion or chunk; an `error` object in a 200 body is the server's failure."""
        if not isinstance(body, dict):
            raise self._unusable("the body is not a JSON object")
        if body.get("error") is not None:
            raise GenerationError(
                f"{ACTION} at {self.endpoint} failed: {_error_message(body)}", details=self._details()
            )
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._unusable("the body has no choices")
        return choices[0]

    def _http_error(self, response: http.client.HTTPResponse, data: bytes) -> GenerationError | ThrottledError:
        try:
            message = _error_message(json.loads(data))
        except ValueError:
            message = ""  # an HTML page from a proxy, say: nothing worth quoting
        status = response.status
        suffix = f": {message}" if message else ""
        if status == 429:
            retry_after = response.getheader("Retry-After")
            extra = {"retry_after": retry_after} if retry_after else {}
            return ThrottledError(
                f"{ACTION} at {self.endpoint} was throttled (HTTP 429){suffix}",
                details=self._details(status=status, **extra),
            )
        return GenerationError(
            f"{ACTION} at {self.endpoint} failed: HTTP {status}{suffix}", details=self._details(status=status)
        )

    def _unusable(self, problem: str) -> GenerationError:
        return GenerationError(
            f"{ACTION} at {self.endpoint} returned an unusable answer: {problem}", details=self._details()
        )

    def _details(self, **extra: object) -> dict[str, object]:
        return {"action": ACTION, "endpoint": self.endpoint, "model": self.model, **extra}


class _Unthinker:
    """A reasoning model's inline thinking (`<think>` to `</think>`, or to the end) left out of its text as
    it streams: text that may be the start of a tag is held until the next piece tells."""

    def __init__(self) -> None:
        self._held = ""
        self._thinking = False

    def feed(self, text: str) -> str:
        """The answer text of `text` that is certain now."""
        self._held += text
        out: list[str] = []
        while True:
            if self._thinking:
                end = self._held.find(THINK_CLOSE)
                if end < 0:
                    self._held = self._held[-(len(THINK_CLOSE) - 1) :]
                    return "".join(out)
                self._held, self._thinking = self._held[end + len(THINK_CLOSE) :], False
                continue
            start = self._held.find(THINK_OPEN)
            if start < 0:
                keep = next((n for n in range(len(THINK_OPEN) - 1, 0, -1) if self._held.endswith(THINK_OPEN[:n])), 0)
                cut = len(self._held) - keep
                out.append(self._held[:cut])
                self._held = self._held[cut:]
                return "".join(out)
            out.append(self._held[:start])
            self._held, self._thinking = self._held[start + len(THINK_OPEN) :], True

    def finish(self) -> str:
        """What was held back: text, unless it is unfinished thinking."""
        rest, self._held = ("" if self._thinking else self._held), ""
        return rest


class _Deadline:
    """The total time one answer may take, enforced on the connection by a watchdog thread."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds
        self._expired = threading.Event()

    def remaining(self) -> float:
        return max(self._end - time.monotonic(), 0.0)

    def passed(self) -> bool:
        return self._expired.is_set() or self.remaining() == 0.0

    def check(self) -> None:
        """Raise `TimeoutError` once the deadline has passed (also after the watchdog ended a read)."""
        if self.passed():
            raise TimeoutError("the deadline passed")

    @contextmanager
    def watching(self, connection: http.client.HTTPConnection) -> Iterator[None]:
        """At the deadline, shut the connection's socket: a read blocked on it returns at once."""
        timer = threading.Timer(self.remaining(), self._expire, args=(connection,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _expire(self, connection: http.client.HTTPConnection) -> None:
        self._expired.set()
        sock = connection.sock
        if sock is not None:
            with suppress(OSError):  # already closed: nothing to wake
                sock.shutdown(socket.SHUT_RDWR)


def _chunks(response: http.client.HTTPResponse, deadline: _Deadline) -> Iterator[bytes]:
    """The body as it arrives (one socket read at a time), within the deadline and the size bound."""
    received = 0
    while True:
        data = response.read1(65536)
        deadline.check()
        if not data:
            return
        received += len(data)
        if received > MAX_RESPONSE_BYTES:
            raise _Unusable(f"the response exceeds {MAX_RESPONSE_BYTES} bytes")
        yield data


def _read_all(response: http.client.HTTPResponse, deadline: _Deadline) -> bytes:
    return b"".join(_chunks(response, deadline))


def _events(response: http.client.HTTPResponse, deadline: _Deadline) -> Iterator[Any]:
    """The JSON of each server-sent event's data, or None for `[DONE]`.

    Per the SSE format: `data:` lines (one optional space after the colon) accumulate until a blank
    line ends the event; comments (`:`) and other fields (`event:`, `id:`) are skipped.
    """
    buffer = b""
    data: list[str] = []
    for block in _chunks(response, deadline):
        buffer += block
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if line:
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                continue
            if data:
                yield _event("\n".join(data))
                data = []
    if buffer.strip():
        line = buffer.rstrip(b"\r").decode("utf-8", errors="replace")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield _event("\n".join(data))


def _event(data: str) -> Any:
    return None if data.strip() == "[DONE]" else _json(data.encode())


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise _Unusable("the body is not JSON") from exc


def _finish_reason(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None


def _error_message(body: Any) -> str:
    """The server's own error message, cut short: OpenAI/Ollama `{"error": {"message"}}`, vLLM `{"message"}`,
    or `{"error": "..."}`."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    if error is None and isinstance(body, dict):
        error = body.get("message")
    text = error if isinstance(error, str) else ""
    return text[:MAX_ERROR_MESSAGE]


def _usage(value: Any) -> dict[str, int] | None:
    """The OpenAI `usage` as citewise's token counts; None if absent or malformed (usage is for metrics)."""
    if not isinstance(value, dict):
        return None
    names = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens", "total_tokens": "total_tokens"}
    usage = {ours: value[theirs] for theirs, ours in names.items() if isinstance(value.get(theirs), int)}
    return usage or None
