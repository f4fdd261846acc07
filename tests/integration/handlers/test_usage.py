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


ACME_ADMIN = claims("acme", "carol", groups="admin")
OPERATOR = claims(None, "ops-1", groups="operators")


def test_a_tenant_admin_reads_its_usage_and_cost_and_no_one_elses(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a price table of half a currency unit a REST query, before the functions start
    prices = {"currency": "EUR", "per_million": {"rest_queries": 500_000.0}}
    monkeypatch.setenv("CITEWISE_PRICES", json.dumps(prices))
    # And acme (ingest, three queries) beside acme-eu, a tenant whose id starts with acme's (one query)
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    stack.upload_and_ingest(claims("acme-eu", "eve"), "runbooks/keys.md", RUNBOOK)
    for _ in range(3):
        stack.api("POST", "/v1/query", body={"query": "How often are keys rotated?"}, identity=ALICE)
    stack.api("POST", "/v1/query", body={"query": "keys"}, identity=claims("acme-eu", "eve"))
    # When acme's admin reads its usage of this month
    status, report = stack.api("GET", "/v1/usage", identity=ACME_ADMIN)
    # Then it holds acme's work only, today's day, and the cost of three queries
    assert status == 200, report
    today = datetime.now(UTC).date()
    assert (report["tenant_id"], report["from"], report["to"]) == ("acme", str(today.replace(day=1)), str(today))
    assert (report["total"]["rest_queries"], report["total"]["documents_ingested"]) == (3, 1)
    assert [day["day"] for day in report["days"]] == [str(today)]
    assert report["cost"] == {"currency": "EUR", "total": 1.5, "by_counter": {"rest_queries": 1.5}}
    # And what acme stores now: its one document, its chunks and the bytes of its original
    assert report["stored"]["documents"] == 1 and report["stored"]["bytes"] == len(RUNBOOK)
    assert report["stored"]["chunks"] >= 1
    # And a member who is no admin is refused, naming the group
    status, refused = stack.api("GET", "/v1/usage", identity=ALICE)
    assert (status, refused["error"]["code"], refused["error"]["details"]) == (
        403,
        "FORBIDDEN",
        {"required_group": "admin"},
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "2026-11-10", "to": "2026-11-09"}, "to"),
        ({"from": "2025-11-01", "to": "2026-11-02"}, "from"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-02-30"}, "to"),
    ],
)
def test_a_bad_range_is_a_validation_error_naming_the_field(stack: Stack, query: dict[str, str], field: str) -> None:
    for path, identity in (("/v1/usage", ACME_ADMIN), ("/v1/admin/tenants/acme/usage", OPERATOR)):
        status, body = stack.api("GET", path, identity=identity, query=query)
        assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR"), (path, body)
        assert field in json.dumps(body["error"]["details"]), (path, body)


def test_the_operator_reads_every_tenants_usage_and_one_tenants_days(stack: Stack) -> None:
    # Given three tenants with work of today (two sharing a prefix), and no price table
    for tenant, queries in (("acme", 2), ("acme-eu", 1), ("globex", 0)):
        identity = claims(tenant, "u")
        stack.upload_and_ingest(identity, "runbooks/keys.md", RUNBOOK)
        for _ in range(queries):
            stack.api("POST", "/v1/query", body={"query": "keys"}, identity=identity)
    # When the operator lists the tenants' usage two at a time
    status, first = stack.api("GET", "/v1/admin/usage", identity=OPERATOR, query={"limit": "2"})
    assert status == 200, first
    status, second = stack.api(
        "GET", "/v1/admin/usage", identity=OPERATOR, query={"limit": "2", "cursor": str(first["next_cursor"])}
    )
    # Then each tenant comes once, in id order, with its own counters and no cost (no table)
    items = [*first["items"], *second["items"]]
    assert status == 200 and second["next_cursor"] is None
    assert [(i["tenant_id"], i["total"]["rest_queries"], i["cost"]) for i in items] == [
        ("acme", 2, None),
        ("acme-eu", 1, None),
        ("globex", 0, None),
    ]
    assert {(i["stored"]["documents"], i["stored"]["bytes"]) for i in items} == {(1, len(RUNBOOK))}
    # And one tenant's report is what its admin reads
    status, report = stack.api("GET", "/v1/admin/tenants/acme-eu/usage", identity=OPERATOR)
    assert status == 200 and report["tenant_id"] == "acme-eu" and report["total"]["rest_queries"] == 1
    assert report == stack.api("GET", "/v1/usage", identity=claims("acme-eu", "root", groups="admin"))[1]


@pytest.mark.parametrize("path", ["/v1/admin/usage", "/v1/admin/tenants/acme/usage"])
def test_no_tenant_identity_reads_the_operators_usage_routes(stack: Stack, path: str) -> None:
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    for identity in (ACME_ADMIN, ALICE):
        status, body = stack.api("GET", path, identity=identity)
        assert (status, body["error"]["code"]) == (403, "FORBIDDEN"), body
        assert "rest_queries" not in json.dumps(body)


def test_a_bad_tenant_id_in_the_path_is_a_validation_error(stack: Stack) -> None:
    status, body = stack.api("GET", "/v1/admin/tenants/%23tenants/usage", identity=OPERATOR)
    assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR"), body
