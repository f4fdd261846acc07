"""The MCP function (`functions/mcp/handler.py`) from recorded API Gateway events, on the local stack and
on the AWS adapters (moto's DynamoDB, the OpenSearch double): the identity from the authorizer, the HTTP
rules of stateless streamable HTTP, and the tools over the documents the REST API uploaded."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from citewise.runtime.resource_metadata import METADATA_PATH
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def mcp(stack: Stack, message: Any, *, identity: dict[str, str] | None = ALICE, **options: Any) -> dict[str, Any]:
    """POST one message to the MCP function as API Gateway would; the proxy response."""
    event = api_event("POST", "/mcp", body=message, identity=identity, **options)
    for name, value in HEADERS.items():
        event["headers"][name] = value
        event["multiValueHeaders"][name] = [value]
    return stack.handler("mcp")(event, LambdaContext())


def tool(stack: Stack, name: str, arguments: dict[str, Any], identity: dict[str, str] = ALICE) -> types.CallToolResult:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = mcp(stack, message, identity=identity)
    assert response["statusCode"] == 200, response
    return types.CallToolResult.model_validate(json.loads(response["body"])["result"])


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The error body of an error result: the JSON line that ends its text (it has no structured content)."""
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return json.loads(block.text.splitlines()[-1])["error"]  # type: ignore[no-any-return]


def test_initialize_and_list_tools_answer_json_without_a_session(stack: Stack) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    response = mcp(stack, initialize)
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"] == "application/json"
    assert not any(name.lower() == "mcp-session-id" for name in response["headers"])
    result = types.InitializeResult.model_validate(json.loads(response["body"])["result"])
    assert result.protocol_version == "2025-06-18" and result.server_info.name == "citewise"
    notified = mcp(stack, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (notified["statusCode"], notified["body"]) == (202, "")
    listed = json.loads(mcp(stack, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["body"])["result"]
    assert {t.name for t in types.ListToolsResult.model_validate(listed).tools} == {
        "rag_query",
        "search",
        "list_documents",
        "get_document",
        "list_sources",
    }


def test_the_tools_read_what_the_api_uploaded_inside_the_callers_access(stack: Stack) -> None:
    shared = stack.upload_and_ingest(ALICE, "handbook/vacation.md", b"# Vacation\n\nWe get 25 days of paid vacation.\n")
    private = stack.upload_and_ingest(
        ALICE,
        "private/salary.md",
        b"# Salary\n\nThe review brings a 7 percent raise in August.\n",
        visibility="private",
    )
    answer = tool(stack, "rag_query", {"query": "How many days of paid vacation?"})
    assert answer.is_error is False and answer.structured_content is not None
    assert "25 days" in answer.structured_content["answer"]
    assert answer.structured_content["sources"][0]["path"] == "handbook/vacation.md"
    assert answer.structured_content["sources"][0]["char_count"] > 0
    detail = tool(stack, "get_document", {"document_id": shared})
    assert detail.structured_content is not None and detail.structured_content["chunk_ids"] == [f"{shared}-00000"]
    # bob: the private document is neither found, listed nor quoted
    refused = tool(stack, "get_document", {"document_id": private}, identity=BOB)
    assert refused.is_error is True and refused.structured_content is None
    assert error_of(refused) == {
        "code": "NOT_FOUND",
        "message": "no such document",
        "details": {"id": private},
        "request_id": error_of(refused)["request_id"],
    }
    listed = tool(stack, "list_documents", {}, identity=BOB).structured_content
    assert listed is not None and [d["path"] for d in listed["documents"]] == ["handbook/vacation.md"]
    searched = tool(stack, "search", {"query": "salary review raise August", "top_k": 50}, identity=BOB)
    assert "7 percent" not in str(searched)


def test_tool_errors_are_logged_with_the_requests_correlation_id(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    event = api_event(
        "POST",
        "/mcp",
        body={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        identity=ALICE,
    )
    response = stack.handler("mcp")(event, LambdaContext())
    result = types.CallToolResult.model_validate(json.loads(response["body"])["result"])
    assert result.is_error is True and error_of(result)["code"] == "UNKNOWN_TOOL"
    request_id = event["requestContext"]["requestId"]
    assert error_of(result)["request_id"] == request_id
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"tool error"' in line]
    assert logged and logged[0]["correlation_id"] == request_id and logged[0]["code"] == "UNKNOWN_TOOL"
    assert logged[0]["tenant_id"] == "acme"


@pytest.mark.parametrize(
    ("identity", "status"),
    [(None, 401), (claims(tenant=None), 403)],
)
def test_an_identity_the_function_cannot_use_is_refused_before_any_message(
    stack: Stack, identity: dict[str, str] | None, status: int
) -> None:
    response = mcp(stack, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, identity=identity)
    assert response["statusCode"] == status
    assert json.loads(response["body"])["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"body": "{not json"}, 400, -32700),
        ({"body": "[]"}, 400, -32600),
        ({"body": "[" * 100 + "]" * 100}, 400, -32700),
        ({"content_type": "text/plain"}, 415, -32600),
    ],
)
def test_bad_requests_are_answered_in_the_protocols_shape(
    stack: Stack, change: dict[str, str], status: int, code: int
) -> None:
    options = dict(change)  # the parameters are shared by the local and the AWS run
    message = options.pop("body", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    response = mcp(stack, message, **options)
    assert response["statusCode"] == status
    assert json.loads(response["body"])["error"]["code"] == code


def test_get_is_405_and_an_unknown_protocol_version_400(stack: Stack) -> None:
    response = stack.handler("mcp")(api_event("GET", "/mcp", identity=ALICE), LambdaContext())
    assert response["statusCode"] == 405 and response["headers"]["Allow"] == "POST"
    event = api_event("POST", "/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "ping"}, identity=ALICE)
    event["headers"]["MCP-Protocol-Version"] = "1999-01-01"
    assert stack.handler("mcp")(event, LambdaContext())["statusCode"] == 400


def _post(stack: Stack, body: Any, version: str | None) -> dict[str, Any]:
    """POST `body` to the MCP function with `MCP-Protocol-Version: version` (none if None)."""
    event = api_event("POST", "/mcp", body=body, identity=ALICE)
    event["headers"]["Accept"] = "application/json"
    if version is not None:
        event["headers"]["MCP-Protocol-Version"] = version
    return stack.handler("mcp")(event, LambdaContext())


@pytest.mark.parametrize("version", ["2025-03-26", None])
def test_a_batch_is_answered_message_by_message_where_the_revision_has_batches(
    stack: Stack, version: str | None
) -> None:
    # Given a 2025-03-26 client (stated, or no header: read as 2025-03-26) sending a JSON-RPC batch
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
        {"jsonrpc": "2.0", "id": 4, "method": "no/such"},
        7,
    ]
    response = _post(stack, batch, version)
    # Then each request gets its response in one array (the notification none), errors in place
    assert response["statusCode"] == 200
    answers = {json.dumps(a["id"]): a for a in json.loads(response["body"])}
    assert set(answers) == {"1", '"two"', "3", "4", "null"}
    assert answers["1"]["result"] == {}
    assert types.ListToolsResult.model_validate(answers['"two"']["result"]).tools
    assert answers["3"]["error"]["code"] == -32600 and "initialize" in answers["3"]["error"]["message"]
    assert answers["4"]["error"]["code"] == -32601 and answers["null"]["error"]["code"] == -32600
    # And a batch of notifications only is accepted with no body
    notified = _post(stack, [{"jsonrpc": "2.0", "method": "notifications/initialized"}], version)
    assert (notified["statusCode"], notified["body"]) == (202, "")


@pytest.mark.parametrize(
    ("version", "batch", "says"),
    [
        ("2025-06-18", [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "removed in MCP 2025-06-18"),
        ("2025-11-25", [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "removed in MCP 2025-06-18"),
        ("2025-03-26", [], "a batch holds 1 to 32 messages"),
        ("2025-03-26", [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(33)], "1 to 32"),
    ],
)
def test_a_batch_the_revision_forbids_or_out_of_bounds_is_an_invalid_request(
    stack: Stack, version: str, batch: list[Any], says: str
) -> None:
    response = _post(stack, batch, version)
    assert response["statusCode"] == 400
    error = json.loads(response["body"])["error"]
    assert error["code"] == -32600 and says in error["message"]


def test_the_protected_resource_metadata_and_the_401_that_points_to_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the API's base URL and its tokens' issuer, as the stack sets them in Cognito mode
    base, issuer = (
        "https://abc.execute-api.eu-west-1.amazonaws.com/dev",
        "https://cognito-idp.eu-west-1.amazonaws.com/x",
    )
    monkeypatch.setenv("CITEWISE_PUBLIC_URL", base)
    monkeypatch.setenv("CITEWISE_AUTHORIZATION_SERVER", issuer)
    metadata = stack.handler("mcp")(api_event("GET", METADATA_PATH), LambdaContext())
    assert metadata["statusCode"] == 200
    assert json.loads(metadata["body"]) == {
        "resource": f"{base}/mcp",
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "citewise",
    }
    refused = mcp(stack, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, identity=None)
    assert refused["statusCode"] == 401
    assert refused["headers"]["WWW-Authenticate"] == f'Bearer resource_metadata="{base}{METADATA_PATH}"'


def test_without_an_authorization_server_there_is_no_metadata(stack: Stack) -> None:
    # IAM mode: requests are signed with SigV4, and no OAuth server issues tokens for the API
    response = stack.handler("mcp")(api_event("GET", METADATA_PATH), LambdaContext())
    assert response["statusCode"] == 404 and json.loads(response["body"])["error"]["code"] == "NOT_FOUND"
