"""Usage metering through the functions, on the local stack and on the AWS adapters (moto DynamoDB, the
OpenSearch double): an upload's ingest, REST queries and searches and MCP tool calls land in the caller's
tenant's counters of the day, and a meter that fails costs no request its answer. On AWS every call is
held to the function's role (`RoleCheck`), so the query and MCP functions' UpdateItem grant is exercised."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from citewise.ports.usage import UsageCounts, total
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings, load_settings
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims

pytestmark = pytest.mark.parametrize("stack", ["local", "aws-double"], indirect=True)

ALICE = claims("acme", "alice")
GLOBEX = claims("globex", "gina")
RUNBOOK = (
    b"# Key rotation\n\nRotate the signing keys every 90 days with `cdk deploy`. The old key stays valid for a day.\n"
)


def usage_today(tenant_id: str) -> UsageCounts:
    services = build_services(load_settings(Settings))
    try:
        today = datetime.now(UTC).date()
        return total(services.usage.read(tenant_id, today, today))
    finally:
        services.close()


def mcp_tool(stack: Stack, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    event = api_event("POST", "/mcp", body=message, identity=ALICE)
    response = stack.handler("mcp")(event, LambdaContext())
    return dict(json.loads(response["body"])["result"])


def test_ingest_queries_searches_and_tool_calls_are_counted_for_the_callers_tenant(stack: Stack) -> None:
    # Given a document uploaded and ingested by a user of acme
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    # When acme asks two questions and runs a search over REST, and one of each through MCP
    for _ in range(2):
        assert stack.api("POST", "/v1/query", body={"query": "How often are keys rotated?"}, identity=ALICE)[0] == 200
    assert stack.api("POST", "/v1/search", body={"query": "key rotation"}, identity=ALICE)[0] == 200
    assert not mcp_tool(stack, "rag_query", {"query": "How often are keys rotated?"}).get("isError")
    assert not mcp_tool(stack, "search", {"query": "key rotation"}).get("isError")
    # Then acme's counters of today hold each of them, and the ingest's work
    counted = usage_today("acme")
    assert (counted.rest_queries, counted.rest_searches, counted.mcp_queries, counted.mcp_searches) == (2, 1, 1, 1)
    assert (counted.documents_ingested, counted.documents_failed, counted.pages) == (1, 0, 1)
    assert counted.chunks_embedded >= 1 and counted.chunks_reused == 0
    assert counted.embedding_tokens_estimated > 0  # the hashing embedder reports no tokens
    # And another tenant counted nothing
    assert usage_today("globex") == UsageCounts()


def test_a_failing_meter_costs_no_request_its_answer(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a document, and a usage store that fails every write
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)

    def broken(*_: object, **__: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("citewise_local.usage.LocalUsage.add", broken)
    monkeypatch.setattr("citewise.aws.dynamodb_usage.DynamoUsage.add", broken)
    # When acme asks a question and searches
    status, answer = stack.api("POST", "/v1/query", body={"query": "How often are keys rotated?"}, identity=ALICE)
    searched, hits = stack.api("POST", "/v1/search", body={"query": "key rotation"}, identity=ALICE)
    # Then both are answered as usual
    assert status == 200 and answer["citations"], answer
    assert searched == 200 and hits["hits"], hits
