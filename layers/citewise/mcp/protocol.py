"""A small MCP server for stateless HTTP: JSON-RPC 2.0 messages in, responses out, no session.

It speaks the handshake era of the protocol (revisions 2024-11-05 to 2025-11-25): `initialize`, `ping`,
`tools/list`, `tools/call`, and accepts any notification. Every request stands alone (the tools need no
session), so any Lambda instance can answer any message. Anything else is METHOD_NOT_FOUND, which is how
a client probing for a newer revision (`server/discover`) learns to fall back to `initialize`.

Written here rather than taken from the MCP SDK, whose server pulls in starlette, uvicorn, httpx and its
type models: on a Lambda cold start its types alone cost about 150 ms (docs/benchmarks.md). The local
package serves stdio with the SDK itself, and the tests hold this dispatcher to the SDK's own client and
types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from citewise import __version__
from citewise.domain.models import Caller
from citewise.mcp.tools import Progress, Toolbox

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The revisions this server negotiates, oldest first; the last is offered to a client asking another."""
SERVER_NAME = "citewise"
INSTRUCTIONS = (
    "citewise answers from the user's own documents, with citations. Use rag_query (or a more specific "
    "rag_query_* tool when one fits) to answer a question, search to read ranked passages, and "
    "list_documents / get_document to see what documents exist. Every tool is read-only and sees only what "
    "the user may read."
)

# JSON-RPC 2.0 error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

Message = dict[str, Any]


class RequestError(Exception):
    """A JSON-RPC error answer to a request that cannot be served (not a tool failure: those are results)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(message_id: str | int | None, code: int, text: str) -> Message:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}


def is_request(message: Any) -> bool:
    """Whether `message` is a JSON-RPC request (it has a method and an id, so it expects an answer)."""
    return isinstance(message, dict) and "method" in message and "id" in message


def dispatch(
    toolbox: Toolbox, caller: Caller, message: Any, request_id: str, *, progress: Progress | None = None
) -> Message | None:
    """The response to one JSON-RPC message from `caller`; None for a notification or a client's response.
    `progress` receives a `tools/call`'s progress messages (when its client sent a progress token)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_response(message_id_of(message), INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    if not is_request(message):
        # A notification (initialized, cancelled, ...) or a response: nothing to answer. A stateless server
        # sends no requests, so a response answers nothing here either.
        return None
    message_id = message["id"]
    if not isinstance(message_id, str | int) or isinstance(message_id, bool) or not isinstance(message["method"], str):
        return error_response(None, INVALID_REQUEST, "the id must be a string or an integer, the method a string")
    params = message.get("params") or {}
    if not isinstance(params, dict):
        return error_response(message_id, INVALID_PARAMS, "params must be an object")
    try:
        result = _serve(toolbox, caller, message["method"], params, request_id, progress)
    except RequestError as exc:
        return error_response(message_id, exc.code, exc.message)
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


def _serve(
    toolbox: Toolbox,
    caller: Caller,
    method: str,
    params: Mapping[str, Any],
    request_id: str,
    progress: Progress | None,
) -> dict[str, Any]:
    if method == "initialize":
        return initialize_result(params.get("protocolVersion"))
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": toolbox.definitions()}
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            raise RequestError(INVALID_PARAMS, "tools/call takes a tool `name` and an `arguments` object")
        return toolbox.call(caller, name, arguments, request_id, progress=progress)
    raise RequestError(METHOD_NOT_FOUND, f"method not found: {method}")


def initialize_result(requested: object) -> dict[str, Any]:
    """The answer to `initialize`: the client's revision if this server speaks it, else the newest it does."""
    version = requested if isinstance(requested, str) and requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
        "instructions": INSTRUCTIONS,
    }


def progress_token(message: Any) -> str | int | None:
    """The progress token a `tools/call` request carries in `params._meta`, if any."""
    params = message.get("params") if isinstance(message, dict) and message.get("method") == "tools/call" else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def progress_notification(token: str | int, progress: int, message: str) -> Message:
    """A `notifications/progress` message."""
    params = {"progressToken": token, "progress": progress, "message": message}
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def message_id_of(message: Any) -> str | int | None:
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None
