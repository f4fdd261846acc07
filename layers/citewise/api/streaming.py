"""Streamed answers of `POST /v1/query`: server-sent events, in the response format API Gateway streams.

A request asks for a stream with `Accept: text/event-stream` or `"stream": true`. Whatever fails before
the stream starts (validation, identity, quota) is the usual JSON error response. Then the events:

- `sources`: `{"sources": [hit, ...]}` once retrieval is done (rank order);
- `text`: `{"text": "...", "reset": false}`, the answer's next words. Joined, they are the final answer's
  text; `reset: true` (only when a guardrail or content filter stopped the model) withdraws what was sent;
- `citation`: `{"citation": {...}, "span": [start, end] | null}`, once its marker has been sent and its
  quote verified; `span` is the sentence it supports in the answer's text;
- `answer`: exactly the body the non-streamed call returns; the stream then ends;
- `error`: `{"error": {"code", "message", "details", "request_id"}}`, the usual error body, when the
  answer fails after the stream started; the stream then ends.

On AWS the query function's streamed invocation writes `http_stream`'s bytes: the JSON of the status and
headers, eight NUL bytes, then the body, the format a REST API integration with
`ResponseTransferMode.STREAM` expects (docs/aws.md). `citewise serve` runs the same handler.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from citewise.domain.errors import CitewiseError, error_body
from citewise.domain.models import Answer
from citewise.ports.synthesizer import AnswerDone, CitationDelta, TextDelta
from citewise.query.answering import QueryEvent, SourcesFound
from citewise.runtime.observability import logger

EVENT_STREAM = "text/event-stream"
DELIMITER = b"\0" * 8
"""What separates the JSON of a streamed response's status and headers from its body (API Gateway, Lambda)."""
STREAM_HEADERS = {"Content-Type": f"{EVENT_STREAM}; charset=utf-8", "Cache-Control": "no-cache"}


@dataclass
class StreamSlot:
    """Where a route leaves the body of a streamed response for the handler (which sends it after the
    resolver has answered with the status and headers); one per invocation, in the resolver's context."""

    frames: Iterator[bytes] | None = None


StreamEnd = Callable[[Answer | None], None]
"""Called once when a stream ends: with the final answer, or None if it was interrupted or failed."""


def wants_stream(accept: str | None, stream: bool) -> bool:
    """Whether a request asks for server-sent events: `"stream": true`, or an `Accept` naming them."""
    return stream or any(part.split(";")[0].strip().lower() == EVENT_STREAM for part in (accept or "").split(","))


def event(name: str, data: Any) -> bytes:
    """One server-sent event (its JSON holds no newline, so one `data:` line)."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def payload(item: QueryEvent) -> tuple[str, dict[str, Any]]:
    """The name and data of the server-sent event of `item` (the `answer` event's without its request id)."""
    if isinstance(item, SourcesFound):
        return "sources", {"sources": [hit.model_dump(mode="json") for hit in item.hits]}
    if isinstance(item, TextDelta):
        return "text", {"text": item.text, "reset": item.reset}
    if isinstance(item, CitationDelta):
        span = list(item.span) if item.span is not None else None
        return "citation", {"citation": item.citation.model_dump(mode="json"), "span": span}
    return "answer", item.answer.model_dump(mode="json")


def sse_frames(
    events: Generator[QueryEvent, None, None], final: Mapping[str, Any], ended: StreamEnd
) -> Generator[bytes, None, None]:
    """The events of an answer as server-sent events; `ended` is called once, however the stream ends.
    `final` is what the last event adds to the answer (its conversation and `request_id`), so that it holds
    exactly QueryResponse's body.

    A failure is an `error` event; a reader that leaves (the iterator closed) closes `events`, which stops
    the generation.
    """
    answered: Answer | None = None
    try:
        for item in events:
            name, data = payload(item)
            if isinstance(item, AnswerDone):
                answered, data = item.answer, {**data, **final}  # exactly QueryResponse's body
            yield event(name, data)
    except Exception as exc:  # noqa: BLE001 - every failure leaves as the API's error body
        if not isinstance(exc, CitewiseError):
            logger.exception("unhandled error in a streamed answer")
        elif exc.http_status >= 500:
            logger.warning("backend failure", extra={"code": exc.code, "error_message": exc.message})
        yield event("error", error_body(exc, str(final.get("request_id", "")))[1])
    finally:
        events.close()  # closing it closes the model call
        ended(answered)


def http_stream(response: dict[str, Any], body: Iterator[bytes] | None) -> Generator[bytes, None, None]:
    """A proxy `response` (status and headers), then `body` (or the response's own body) in the streamed
    response format: the metadata's JSON, `DELIMITER`, the body's bytes as they come."""
    metadata = {"statusCode": response.get("statusCode", 200), "headers": response.get("headers") or {}}
    if response.get("multiValueHeaders"):
        metadata["multiValueHeaders"] = response["multiValueHeaders"]
    yield json.dumps(metadata).encode() + DELIMITER
    if body is not None:
        yield from body
        return
    text = response.get("body") or ""
    if text:
        yield base64.b64decode(text) if response.get("isBase64Encoded") else text.encode()
