"""The MCP server driven by the official SDK's own client (`ClientSession`), over both transports:
stdio (`citewise mcp` spawned as a local client would) and streamable HTTP (`/mcp` on a real
`citewise serve`, with the bearer tokens of the REST API).

Two tenants, a private document and a tool profile: no call, filter or profile surfaces another tenant's
or another user's private text, and a missing or bad token is refused at the HTTP layer.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.helpers import Api, citewise_script, serve, server_environment, upload, wait_for_status

pytestmark = pytest.mark.slow

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_profiles.toml"
HANDBOOK = b"# Vacation\n\nEmployees get 25 days of paid vacation per year. Unused days expire in March.\n"
WIDGETS = b"# Widgets\n\nThe widget standard requires a torque of 12 newton metres for every bolt.\n"
SALARY = b"# Salary\n\nThe salary review of the vacation team is scheduled for August, with a 7 percent raise.\n"
GLOBEX = b"# Vacation\n\nGlobex employees get 40 days of paid vacation per year.\n"
SECRETS = ("7 percent", "Globex", "40 days")
"""Text only alice of acme (the private document) or globex may read: bob of acme must never see it."""

Session = Callable[[], AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`citewise serve` with a profile file, and the documents of two tenants ingested through the API."""
    root = tmp_path_factory.mktemp("mcp")
    env = server_environment(root / "home") | {"CITEWISE_MCP_PROFILES": str(PROFILES)}
    api = serve(root / "home", root / "server.log", env)
    try:
        alice, globex = api.token("acme", "alice"), api.token("globex", "gina")
        for token, path, data, visibility in (
            (alice, "handbook/vacation.md", HANDBOOK, "shared"),
            (alice, "external/widgets.md", WIDGETS, "shared"),
            (alice, "private/salary.md", SALARY, "private"),
            (globex, "handbook/vacation.md", GLOBEX, "shared"),
        ):
            doc_id = upload(api, token, path, data, "text/markdown", visibility=visibility)
            assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
        yield api
    finally:
        api.process.send_signal(signal.SIGTERM)
        try:
            api.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            api.process.kill()
            api.process.wait()
    assert not [token for token in api.tokens.values() if token in api.log.read_text()]


def http_session(api: Api, token: str | None) -> Session:
    @asynccontextmanager
    async def session() -> AsyncIterator[ClientSession]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as client,
            streamable_http_client(f"{api.url}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as client_session,
        ):
            await client_session.initialize()
            yield client_session

    return session


def stdio_session(api: Api, tenant: str, user: str) -> Session:
    @asynccontextmanager
    async def session() -> AsyncIterator[ClientSession]:
        # The same home as the server: the local index and registry are files any process can read.
        parameters = StdioServerParameters(
            command=citewise_script(), args=["mcp", "--tenant", tenant, "--user", user], env=api.env
        )
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as client_session:
            await client_session.initialize()
            yield client_session

    return session


@pytest.fixture(params=["stdio", "http"])
def as_user(request: pytest.FixtureRequest, server: Api) -> Callable[[str, str], Session]:
    """A session factory for (tenant, user) on the transport of this run."""
    if request.param == "stdio":
        return lambda tenant, user: stdio_session(server, tenant, user)
    return lambda tenant, user: http_session(server, server.token(tenant, user))


def run(scenario: Callable[[], Any]) -> Any:
    return anyio.run(scenario)


def body(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    return result.structured_content


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The error body of an error result: the JSON line that ends its text."""
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return json.loads(block.text.splitlines()[-1])["error"]  # type: ignore[no-any-return]


def test_tools_are_listed_called_and_answer_with_structured_results(as_user: Callable[[str, str], Session]) -> None:
    async def scenario() -> None:
        async with as_user("acme", "alice")() as session:
            assert session.initialize_result is not None
            assert session.initialize_result.server_info.name == "citewise"
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {
                "rag_query",
                "search",
                "list_documents",
                "get_document",
                "list_sources",
                "rag_query_external",
            }
            assert all(
                tool.output_schema and tool.annotations and tool.annotations.read_only_hint for tool in tools.values()
            )

            # The SDK client validates each structured result against the tool's output schema.
            answer = await session.call_tool("rag_query", {"query": "How many days of paid vacation do employees get?"})
            assert answer.is_error is False
            assert "25 days" in body(answer)["answer"] and body(answer)["sources"][0]["path"] == "handbook/vacation.md"
            assert isinstance(answer.content[0], types.TextContent) and "handbook/vacation.md" in answer.content[0].text

            hits = body(await session.call_tool("search", {"query": "torque bolt", "top_k": 1}))["hits"]
            assert hits[0]["path"] == "external/widgets.md" and "12 newton metres" in hits[0]["text"]

            listed = body(await session.call_tool("list_documents", {"filters": {"path_prefix": "private/"}}))
            [private] = listed["documents"]
            assert private["visibility"] == "private" and private["owner"] == "alice"
            detail = body(await session.call_tool("get_document", {"document_id": private["document_id"]}))
            assert detail["has_text"] is True and detail["chunk_ids"] and "7 percent" not in str(detail)

            nothing = await session.call_tool(
                "rag_query", {"query": "vacation", "filters": {"equals": {"key": "source", "value": "nowhere"}}}
            )
            assert nothing.is_error is False and body(nothing)["sources"] == [] and body(nothing)["grounded"] is False

    run(scenario)


def test_errors_are_tool_results_with_stable_codes(as_user: Callable[[str, str], Session]) -> None:
    async def scenario() -> None:
        async with as_user("acme", "alice")() as session:
            for name, arguments, code in (
                ("get_document", {"document_id": "0" * 32}, "NOT_FOUND"),
                (
                    "search",
                    {"query": "x", "filters": {"equals": {"key": "tenant_id", "value": "globex"}}},
                    "VALIDATION_ERROR",
                ),
                ("rag_query", {}, "VALIDATION_ERROR"),
                ("rag_query_internal", {"query": "x"}, "UNKNOWN_TOOL"),
            ):
                # The SDK client checks any structured content against the tool's output schema: an error
                # has none, and its text ends with the API's error body.
                result = await session.call_tool(name, arguments)
                assert result.is_error is True and result.structured_content is None, name
                error = error_of(result)
                assert error["code"] == code and error["message"] and error["request_id"]

    run(scenario)


def test_a_profile_answers_inside_its_scope_only(as_user: Callable[[str, str], Session]) -> None:
    async def scenario() -> None:
        async with as_user("acme", "alice")() as session:
            answer = body(
                await session.call_tool("rag_query_external", {"query": "torque for every bolt, vacation days"})
            )
            assert answer["tool"] == "rag_query_external" and answer["sources"]
            assert all(source["path"].startswith("external/") for source in answer["sources"])
            widened = await session.call_tool(
                "rag_query_external",
                {"query": "vacation", "filters": {"startsWith": {"key": "path", "value": "handbook/"}}},
            )
            assert body(widened)["sources"] == []

    run(scenario)


def test_no_tool_filter_or_profile_surfaces_another_tenants_or_users_private_text(
    as_user: Callable[[str, str], Session],
) -> None:
    question = "vacation days salary review August raise Globex"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("rag_query", {"query": question, "max_sources": 20}),
        ("rag_query", {"query": question, "filters": {"equals": {"key": "owner", "value": "alice"}}}),
        ("rag_query_external", {"query": question, "filters": {"startsWith": {"key": "path", "value": "private/"}}}),
        ("search", {"query": question, "top_k": 50}),
        ("search", {"query": question, "filters": {"equals": {"key": "visibility", "value": "private"}}}),
        ("list_documents", {"limit": 100}),
    ]

    async def scenario() -> None:
        async with as_user("acme", "bob")() as session:
            seen = [str(await session.call_tool(name, arguments)) for name, arguments in calls]
            listed = body(await session.call_tool("list_documents", {}))
            assert {d["path"] for d in listed["documents"]} == {"handbook/vacation.md", "external/widgets.md"}
        async with as_user("acme", "alice")() as session:
            private = body(await session.call_tool("list_documents", {"filters": {"path_prefix": "private/"}}))
            private_id = private["documents"][0]["document_id"]
        async with as_user("acme", "bob")() as session:
            refused = await session.call_tool("get_document", {"document_id": private_id})
            assert refused.is_error is True and error_of(refused)["code"] == "NOT_FOUND"
        async with as_user("globex", "alice")() as session:  # alice's name, another tenant
            seen += [str(await session.call_tool(name, arguments)) for name, arguments in calls[:2]]
            refused = await session.call_tool("get_document", {"document_id": private_id})
            assert refused.is_error is True and error_of(refused)["code"] == "NOT_FOUND"
        for text in seen[: len(calls)]:
            assert not [secret for secret in SECRETS if secret in text]
        for text in seen[len(calls) :]:
            assert "7 percent" not in text and "25 days" not in text

    run(scenario)


@pytest.mark.parametrize("token", [None, "not-a-token", "a.b.c"])
def test_a_missing_or_bad_token_is_refused_with_401(server: Api, token: str | None) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    reply = server.request(
        "POST", "/mcp", token=token, json_body=initialize, headers={"Accept": "application/json, text/event-stream"}
    )
    assert reply.status == 401
    assert reply.json()["error"]["code"] == "UNAUTHORIZED"
    # RFC 9728 section 5.1, as the MCP authorization spec asks: where the protected-resource metadata is.
    metadata_url = f"{server.url}/.well-known/oauth-protected-resource/mcp"
    assert reply.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'

    async def scenario() -> None:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with http_session(server, token)():
                pass
        assert raised.group_contains(MCPError, depth=None)

    run(scenario)


def test_the_protected_resource_metadata_names_the_mcp_endpoint_and_its_authorization_server(server: Api) -> None:
    # Public, as RFC 9728 documents are: a client reads it before it has a token.
    reply = server.request("GET", "/.well-known/oauth-protected-resource/mcp")
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/json")
    assert reply.json() == {
        "resource": f"{server.url}/mcp",  # the URL the client calls, exactly (RFC 9728 section 3.3)
        "authorization_servers": [server.url],  # `citewise serve` verifies the tokens `citewise token` issues
        "bearer_methods_supported": ["header"],
        "resource_name": "citewise",
    }


def test_the_event_stream_is_not_offered_and_sessions_are_stateless(server: Api) -> None:
    token = server.token("acme", "alice")
    stream = server.request("GET", "/mcp", token=token, headers={"Accept": "text/event-stream"})
    assert stream.status == 405 and stream.headers["allow"] == "POST"
    listed = server.request(
        "POST",
        "/mcp",
        token=token,
        json_body={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert listed.status == 200 and "mcp-session-id" not in listed.headers
    assert listed.json()["id"] == 7 and len(listed.json()["result"]["tools"]) == 6
    notified = server.request(
        "POST", "/mcp", token=token, json_body={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert notified.status == 202 and notified.body == b""


# --- the MCP Inspector, the protocol's reference client ---------------------------------------------------

INSPECTOR = Path(__file__).resolve().parent / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
"""Pinned in tests/e2e/inspector/package-lock.json and installed by `make test` (npm ci)."""
TOOL_ERROR_EXIT = 5
"""The Inspector CLI's exit code for a result it accepted that has `isError: true`; a result it rejects
(one whose structured content does not match the tool's output schema) exits 1 with no result."""


AUTH_REQUIRED_EXIT = 3
"""Its exit code when the server asks for a token it does not have."""


def run_inspector(server: Api, home: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The Inspector's CLI with `arguments`; its catalog and stored state in `home`, not the user's."""
    if not INSPECTOR.exists():
        pytest.fail(f"no MCP Inspector at {INSPECTOR}: `make test` installs it (npm ci in tests/e2e/inspector)")
    env = {**server.env, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")}
    command = [str(INSPECTOR), "--cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


@pytest.fixture(params=["stdio", "http"])
def inspector(request: pytest.FixtureRequest, server: Api, tmp_path: Path) -> Callable[..., tuple[int, dict[str, Any]]]:
    """Run the Inspector's CLI against `citewise mcp` (stdio) or `/mcp` (HTTP) as alice of acme:
    (exit code, the JSON it printed)."""
    if request.param == "stdio":
        # The Inspector starts the server with a minimal environment: the home and its settings go with -e.
        settings = [
            option
            for name, value in server.env.items()
            if name.startswith("CITEWISE_")
            for option in ("-e", f"{name}={value}")
        ]
        target = [*settings, citewise_script(), "mcp", "--tenant", "acme", "--user", "alice"]
    else:
        bearer = f"Authorization: Bearer {server.token('acme', 'alice')}"
        target = [f"{server.url}/mcp", "--transport", "http", "--header", bearer]

    def run(*options: str) -> tuple[int, dict[str, Any]]:
        done = run_inspector(server, tmp_path, *target, *options)
        assert done.stdout.strip(), done.stderr
        return done.returncode, json.loads(done.stdout)

    return run


def test_without_a_token_the_inspector_tells_the_user_how_to_get_one(server: Api, tmp_path: Path) -> None:
    done = run_inspector(
        server, tmp_path, f"{server.url}/mcp", "--transport", "http", "--method", "tools/list", "--stored-auth-only"
    )
    assert done.returncode == AUTH_REQUIRED_EXIT, done.stdout + done.stderr
    assert "citewise token" in done.stdout + done.stderr


def test_the_inspector_lists_the_tools_and_finds_their_schemas_portable(
    inspector: Callable[..., tuple[int, dict[str, Any]]],
) -> None:
    code, listed = inspector("--method", "tools/list", "--strict")
    assert code == 0, listed
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == {"rag_query", "search", "list_documents", "get_document", "list_sources", "rag_query_external"}
    assert "$ref" in json.dumps(tools["rag_query"]["inputSchema"]["properties"]["filters"])


def test_the_inspector_accepts_a_result(inspector: Callable[..., tuple[int, dict[str, Any]]]) -> None:
    code, result = inspector(
        "--method", "tools/call", "--tool-name", "rag_query", "--tool-arg", "query=How many days of paid vacation?"
    )
    assert code == 0, result
    assert result["isError"] is False and "25 days" in result["structuredContent"]["answer"]


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("get_document", ["document_id=" + "0" * 32], "NOT_FOUND"),
        ("search", ['filters={"equals": {"key": "tenant_id", "value": "globex"}}', "query=x"], "VALIDATION_ERROR"),
        ("list_documents", ["limit=1000"], "VALIDATION_ERROR"),
    ],
)
# UNKNOWN_TOOL is not among them: the Inspector refuses to call a tool the server did not list, before any
# call (the SDK client's test above reaches it).
def test_the_inspector_accepts_every_error_and_the_agent_reads_its_code(
    inspector: Callable[..., tuple[int, dict[str, Any]]], name: str, arguments: list[str], error: str
) -> None:
    code, result = inspector("--method", "tools/call", "--tool-name", name, "--tool-arg", *arguments)
    assert code == TOOL_ERROR_EXIT, result  # accepted, as an error result: not rejected (exit 1)
    assert result["isError"] is True and "structuredContent" not in result
    [text] = [block["text"] for block in result["content"]]
    assert text.startswith(f"{error}: ") and "request_id: " in text
    body = json.loads(text.splitlines()[-1])["error"]
    assert body["code"] == error and body["message"] and body["request_id"]


def test_rag_query_reports_progress_when_the_client_asks(as_user: Callable[[str, str], Session]) -> None:
    # Given a session (the SDK client sends a progress token with a progress callback); on stdio the
    # notifications come as the answer is written, over HTTP in the event stream before the result
    heard: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with as_user("acme", "alice")() as session:
            question = {"query": "How many days of paid vacation do employees get?"}
            reported = await session.call_tool("rag_query", question, progress_callback=on_progress)
            plain = await session.call_tool("rag_query", question)
            return reported, plain  # type: ignore[return-value]

    reported, plain = run(scenario)
    # Then it heard what was retrieved, then the answer's text as it was written, in order; the result is
    # the one a call without progress gets
    assert heard and heard[0][1] is not None and heard[0][1].startswith("Retrieved")
    assert [p for p, _ in heard] == sorted(p for p, _ in heard)
    assert "".join(m or "" for _, m in heard[1:]) == body(plain)["answer"] == body(reported)["answer"]
