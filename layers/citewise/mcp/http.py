"""Streamable HTTP, stateless, with JSON responses: one POST carries one JSON-RPC message.

The transport of the MCP Lambda function (and of `/mcp` on `citewise serve`, which runs that function):
- POST a message with `Content-Type: application/json`; a request is answered 200 with its JSON-RPC
  response, a notification or a client's response 202 with no body. No session id is issued, so a client
  sends none and never opens the GET stream;
- GET (the server-sent-events stream) and any other method: 405, `Allow: POST`;
- a JSON-RPC batch (an array of messages) as the revision in use allows it: 2025-03-26 has batches
  (JSON-RPC 2.0's, which 2024-11-05 rests on too), 2025-06-18 removed them. A request whose
  `MCP-Protocol-Version` is one of the older two, or that has none (which the 2025-06-18 transport says
  to read as 2025-03-26), gets the array of its requests' responses (202 if it held only notifications);
  `initialize` may not be batched, and a batch holds at most `MAX_BATCH` messages. A batch under
  2025-06-18 or later is 400 with a JSON-RPC Invalid Request error saying so;
- a `tools/call` carrying a progress token (`params._meta.progressToken`) from a client that accepts
  `text/event-stream` is answered as an event stream: its progress notifications (what an answer tool
  retrieved, then its answer's text), then its response. The function answers whole, so they arrive
  together at the end: progress as it happens is what `citewise mcp` (stdio) sends;
- a body that is not JSON, an empty or oversized batch, an `Accept` without JSON, or an
  `MCP-Protocol-Version` this server does not speak: 4xx with a JSON-RPC error;
- the identity: API Gateway's authorizer has refused a request without a valid token before it gets
  here; an identity this function cannot use is 401 (none) or 403 (no tenant), before any message is read.
  A 401 names the protected-resource metadata in `WWW-Authenticate` when there is an authorization server;
- `GET /.well-known/oauth-protected-resource/mcp`, public: that metadata (RFC 9728,
  `citewise.runtime.resource_metadata`), or 404 where no authorization server issues tokens (IAM mode).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from citewise.domain.errors import CitewiseError, ForbiddenError, NotFoundError, error_body
from citewise.domain.jsonbody import JSON_MEDIA_TYPE, is_json, parse_json
from citewise.domain.models import Caller
from citewise.mcp.protocol import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    PROTOCOL_VERSIONS,
    Message,
    dispatch,
    error_response,
    message_id_of,
    progress_notification,
    progress_token,
)
from citewise.mcp.tools import Toolbox
from citewise.ports.erasure import TenantErasingError
from citewise.runtime.identity import caller_from_event
from citewise.runtime.observability import logger
from citewise.runtime.resource_metadata import METADATA_PATH, challenge, resource_metadata
from citewise.runtime.settings import McpSettings

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
ACCEPTED = ("application/json", "application/*", "*/*")
BATCH_VERSIONS = ("2024-11-05", "2025-03-26")
"""The revisions whose clients may send a JSON-RPC batch (2025-06-18 removed batches)."""
EVENT_STREAM = "text/event-stream"
UNSTATED_VERSION = "2025-03-26"
"""The revision of a request without `MCP-Protocol-Version`, as the 2025-06-18 transport prescribes."""
MAX_BATCH = 32
"""Messages in one batch at most: each may call a tool, and one invocation has one time budget."""


def respond(event: APIGatewayProxyEvent, toolbox: Toolbox, settings: McpSettings) -> dict[str, Any]:
    """The API Gateway proxy response to one HTTP request on the MCP endpoint (or its metadata)."""
    request_id = str(event.request_context.request_id or "")
    if event.resource == METADATA_PATH:
        return _metadata(settings, request_id)
    if event.http_method != "POST":
        return _reply(405, error_response(None, INVALID_REQUEST, "use POST: this server keeps no stream"), Allow="POST")
    try:
        caller = caller_from_event(event, settings, toolbox.services.credential_lookup)
    except CitewiseError as exc:
        status = 403 if isinstance(exc, ForbiddenError) else 401
        challenged = {"WWW-Authenticate": _challenge(settings)} if status == 401 else {}
        return _reply(status, error_response(None, INVALID_REQUEST, exc.message), **challenged)
    logger.append_keys(tenant_id=caller.tenant_id)
    if caller.credential_id is not None:
        logger.append_keys(credential_id=caller.credential_id)
    try:
        toolbox.services.check_not_erasing(caller.tenant_id)
    except TenantErasingError as exc:
        return _reply(exc.http_status, error_response(None, INVALID_REQUEST, f"{exc.code}: {exc.message}"))
    headers = {name.lower(): value for name, value in (event.headers or {}).items()}
    refused = _refused(headers)
    if refused is not None:
        return refused
    try:
        message = parse_json(event.decoded_body or "")
    except (ValueError, CitewiseError) as exc:  # JSONDecodeError is a ValueError; the limits a ValidationError
        text = exc.message if isinstance(exc, CitewiseError) else "the body is not JSON"
        return _reply(400, error_response(None, PARSE_ERROR, f"parse error: {text}"))
    if isinstance(message, list):
        return _batch(toolbox, caller, message, request_id, headers.get(PROTOCOL_VERSION_HEADER, UNSTATED_VERSION))
    token = progress_token(message) if EVENT_STREAM in headers.get("accept", "") else None
    notifications: list[Message] = []
    reported = token is not None
    progress = _collector(token, notifications) if token is not None else None
    try:
        response = dispatch(toolbox, caller, message, request_id, progress=progress)
    except Exception:  # a bug still answers in the protocol's shape
        logger.exception("MCP request failed")
        return _reply(500, error_response(message_id_of(message), INTERNAL_ERROR, "internal error"))
    if response is None:
        return _reply(202, None)
    return _events([*notifications, response]) if reported else _reply(200, response)


def _batch(toolbox: Toolbox, caller: Caller, messages: list[Any], request_id: str, version: str) -> dict[str, Any]:
    """The answer to a JSON-RPC batch under protocol revision `version` (see the module docstring)."""
    if version not in BATCH_VERSIONS:
        text = f"JSON-RPC batches were removed in MCP 2025-06-18 (this request speaks {version}): send one message"
        return _reply(400, error_response(None, INVALID_REQUEST, text))
    if not messages or len(messages) > MAX_BATCH:
        return _reply(400, error_response(None, INVALID_REQUEST, f"a batch holds 1 to {MAX_BATCH} messages"))
    responses = []
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "initialize":
            text = "initialize must not be part of a JSON-RPC batch"
            responses.append(error_response(message_id_of(message), INVALID_REQUEST, text))
            continue
        try:
            response = dispatch(toolbox, caller, message, request_id)
        except Exception:  # a bug answers this message in the protocol's shape; the others still get theirs
            logger.exception("MCP request failed")
            response = error_response(message_id_of(message), INTERNAL_ERROR, "internal error")
        if response is not None:
            responses.append(response)
    return _reply(200, responses) if responses else _reply(202, None)


def _refused(headers: dict[str, str]) -> dict[str, Any] | None:
    """The answer to a POST whose headers this server cannot serve, else None."""
    if not is_json(headers.get("content-type", "")):
        return _reply(415, error_response(None, INVALID_REQUEST, f"the body must be {JSON_MEDIA_TYPE}"))
    accept = headers.get("accept")
    if accept is not None and not any(kind.split(";")[0].strip() in ACCEPTED for kind in accept.split(",")):
        return _reply(406, error_response(None, INVALID_REQUEST, "the client must accept application/json"))
    version = headers.get(PROTOCOL_VERSION_HEADER)
    if version is not None and version not in PROTOCOL_VERSIONS:
        text = f"unsupported protocol version {version}; supported: {', '.join(PROTOCOL_VERSIONS)}"
        return _reply(400, error_response(None, INVALID_REQUEST, text))
    return None


def _challenge(settings: McpSettings) -> str:
    """Where the metadata is, when there is an authorization server to name (not in IAM mode)."""
    return challenge(settings.public_url) if settings.authorization_server else 'Bearer realm="citewise"'


def _metadata(settings: McpSettings, request_id: str) -> dict[str, Any]:
    """The endpoint's protected-resource metadata (`citewise.runtime.resource_metadata`); 404 without an
    authorization server, as in IAM mode, where clients sign requests with SigV4 instead."""
    if settings.authorization_server is None:
        status, body = error_body(NotFoundError("no OAuth authorization server: this API uses SigV4"), request_id)
    else:
        status, body = 200, resource_metadata(settings.public_url, settings.authorization_server)
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON_MEDIA_TYPE},
        "body": json.dumps(body, separators=(",", ":")),
    }


def _collector(token: str | int, notifications: list[Message]) -> Callable[[str], None]:
    """A progress sink that appends each message to `notifications` as a progress notification."""

    def progress(text: str) -> None:
        notifications.append(progress_notification(token, len(notifications) + 1, text))

    return progress


def _events(messages: list[Message]) -> dict[str, Any]:
    """A 200 answered as an event stream: each message one `message` event, the response last."""
    body = "".join(f"event: message\ndata: {json.dumps(m, separators=(',', ':'))}\n\n" for m in messages)
    return {"statusCode": 200, "headers": {"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}, "body": body}


def _reply(status: int, body: Message | list[Message] | None, **headers: str) -> dict[str, Any]:
    if body is None:
        return {"statusCode": status, "headers": headers, "body": ""}
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON_MEDIA_TYPE, **headers},
        "body": json.dumps(body, separators=(",", ":")),
    }
