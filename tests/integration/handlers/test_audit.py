"""The audit trail through the functions, on the local stack and on the AWS adapters (CloudWatch Logs and
DynamoDB under moto, the OpenSearch double): every access kind leaves one record with the right fields
and never a document's text; questions are keyed hashes unless full questions are on; only the
operator exports a tenant's trail; a trail that cannot be written fails no request, loudly. On AWS every
call is held to the function's role (`RoleCheck`): the PutLogEvents and FilterLogEvents grants are
exercised."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citewise.ports.audit import AuditQuery, AuditRecord
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings, load_settings
from tests.integration.handlers.harness import LambdaContext, Output, Stack, api_event, claims

pytestmark = pytest.mark.parametrize("stack", ["local", "aws-double"], indirect=True)

ALICE = claims("acme", "alice")
CAROL = claims("acme", "carol", groups="admin")
GINA = claims("acme-eu", "gina")
OPERATOR = claims(None, "ops-1", groups="operators")
SECRET = "The vault opens at nine with the brass key."
RUNBOOK = f"# Vault\n\n{SECRET}\n".encode()
QUESTION = "When does the vault open?"


def trail(**query: Any) -> list[AuditRecord]:
    """Every record of the stack's trail matching `query`, oldest first (read as the CLI reads it)."""
    services = build_services(load_settings(Settings))
    try:
        records, cursor = [], None
        while True:
            page = services.audit_log.read(AuditQuery(**query), limit=100, cursor=cursor)
            records += page.records
            cursor = page.next_cursor
            if cursor is None:
                return records
    finally:
        services.close()


def mcp_tool(stack: Stack, name: str, arguments: dict[str, Any], identity: dict[str, str] = ALICE) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = stack.handler("mcp")(api_event("POST", "/mcp", body=message, identity=identity), LambdaContext())
    return dict(json.loads(response["body"])["result"])


def export(stack: Stack, tenant: str, identity: dict[str, str], **query: str) -> tuple[int, Any]:
    return stack.api("GET", f"/v1/admin/tenants/{tenant}/audit", identity=identity, query=query)


def test_every_access_kind_leaves_one_record_with_its_ids_and_never_text(stack: Stack) -> None:
    # Given a document uploaded by alice (its upload is the first change recorded)
    doc_id = stack.upload_and_ingest(ALICE, "vault.md", RUNBOOK)
    # When alice reads it every way there is, over REST and MCP, and carol changes the settings and deletes it
    status, answered = stack.api("POST", "/v1/query", body={"query": QUESTION}, identity=ALICE)
    assert status == 200
    conversation_id = answered["conversation"]["conversation_id"]
    assert stack.api("POST", "/v1/search", body={"query": QUESTION}, identity=ALICE)[0] == 200
    assert stack.api("GET", "/v1/documents", identity=ALICE)[0] == 200
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)[0] == 200
    for name, arguments in (
        ("rag_query", {"query": QUESTION}),
        ("search", {"query": QUESTION}),
        ("list_documents", {}),
        ("get_document", {"document_id": doc_id}),
    ):
        assert not mcp_tool(stack, name, arguments).get("isError"), name
    assert stack.api("PUT", "/v1/settings", body={"freshness_weight": 0.5}, identity=CAROL)[0] == 200
    assert stack.api("DELETE", f"/v1/documents/{doc_id}", identity=CAROL)[0] == 204
    # Then the trail holds one record of each, in order, with the caller, the ids and the outcome
    records = trail(tenant_id="acme")
    assert [(r.action, r.channel, r.user_id, r.outcome) for r in records] == [
        ("upload.create", "rest", "alice", "ok"),
        ("query", "rest", "alice", "ok"),
        ("search", "rest", "alice", "ok"),
        ("document.list", "rest", "alice", "ok"),
        ("document.get", "rest", "alice", "ok"),
        ("mcp.rag_query", "mcp", "alice", "ok"),
        ("mcp.search", "mcp", "alice", "ok"),
        ("mcp.list_documents", "mcp", "alice", "ok"),
        ("mcp.get_document", "mcp", "alice", "ok"),
        ("settings.update", "rest", "carol", "ok"),
        ("document.delete", "rest", "carol", "ok"),
    ]
    # (a question over REST names the conversation it is a turn of, then the documents it read)
    assert records[1].resources == [conversation_id, doc_id]
    assert all(r.resources == [doc_id] for r in records if r.action not in ("settings.update", "query")), records
    assert all(r.request_id and r.tenant_id == "acme" and not r.operator for r in records)
    # And the questions are keyed hashes, equal for the same question, never the question or the text
    hashes = {r.question_hash for r in records if r.action in ("query", "search", "mcp.rag_query", "mcp.search")}
    assert len(hashes) == 1 and next(iter(hashes), "").startswith("hmac-sha256:")
    written = "".join(r.model_dump_json() for r in records)
    assert "vault" not in written.lower() and SECRET not in written


def test_a_refused_access_is_recorded_with_its_error_code(stack: Stack) -> None:
    # Given a document of alice's
    doc_id = stack.upload_and_ingest(ALICE, "vault.md", RUNBOOK)
    # When another tenant asks for it, a member deletes what she may not, and a tool call fails
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=GINA)[0] == 404
    assert stack.api("PUT", "/v1/settings", body={}, identity=ALICE)[0] == 403
    assert mcp_tool(stack, "get_document", {"document_id": "0" * 32}).get("isError")
    assert mcp_tool(stack, "no_such_tool", {}).get("isError")
    # Then each is recorded under the caller's own tenant, with the code the caller got
    assert [(r.action, r.resources, r.outcome) for r in trail(tenant_id="acme-eu")] == [
        ("document.get", [doc_id], "NOT_FOUND")
    ]
    acme = [(r.action, r.outcome) for r in trail(tenant_id="acme")][1:]  # after the upload
    assert acme == [
        ("settings.update", "FORBIDDEN"),
        ("mcp.get_document", "NOT_FOUND"),
        ("mcp.unknown_tool", "UNKNOWN_TOOL"),
    ]


def test_the_operator_on_a_tenant_route_and_a_request_without_identity_are_recorded(stack: Stack) -> None:
    # When the operator lists a tenant's documents, and a request arrives with no usable identity
    assert stack.api("GET", "/v1/documents", identity=OPERATOR)[0] == 403
    assert stack.api("POST", "/v1/search", body={"query": QUESTION}, identity=claims("acme", ""))[0] == 401
    # Then each is on record as refused: the operator as the operator, the other as nobody
    assert [(r.action, r.tenant_id, r.user_id, r.operator, r.outcome) for r in trail()] == [
        ("document.list", None, "ops-1", True, "FORBIDDEN"),
        ("search", None, None, False, "UNAUTHORIZED"),
    ]


def test_the_operators_read_of_a_tenants_usage_is_on_that_tenants_trail(stack: Stack) -> None:
    assert stack.api("GET", "/v1/admin/tenants/acme/usage", identity=OPERATOR)[0] == 200
    assert stack.api("GET", "/v1/admin/usage", identity=OPERATOR)[0] == 200
    assert [(r.action, r.user_id, r.operator) for r in trail(tenant_id="acme")] == [("admin.usage.get", "ops-1", True)]
    assert [(r.action, r.tenant_id) for r in trail(action="admin.usage.list")] == [("admin.usage.list", None)]


def test_only_the_operator_exports_a_tenants_trail_and_the_export_is_recorded(stack: Stack) -> None:
    # Given two tenants whose ids share a prefix, each with a query on record
    for identity in (ALICE, GINA):
        stack.upload_and_ingest(identity, "vault.md", RUNBOOK)
        assert stack.api("POST", "/v1/query", body={"query": QUESTION}, identity=identity)[0] == 200
    # When a tenant's admin, or a member, asks for a trail, their own included
    for identity, tenant in ((CAROL, "acme"), (ALICE, "acme"), (CAROL, "acme-eu")):
        status, body = export(stack, tenant, identity)
        # Then it is refused, and learns nothing of it
        assert (status, body["error"]["code"]) == (403, "FORBIDDEN")
        assert "records" not in body
    # And the operator exports acme's trail alone, page by page (each page's request adds a record: a
    # page of 3 outruns them)
    status, first = export(stack, "acme", OPERATOR, limit="3")
    assert status == 200, first
    pages, cursor = [first], first["next_cursor"]
    while cursor:
        status, page = export(stack, "acme", OPERATOR, limit="3", cursor=cursor)
        assert status == 200, page
        pages.append(page)
        cursor = page["next_cursor"]
    exported = [AuditRecord.model_validate(record) for page in pages for record in page["records"]]
    assert {record.tenant_id for record in exported} == {"acme"}
    assert [r.action for r in exported if r.action != "admin.audit.export"] == ["upload.create", "query"]
    # And the refused attempts are on acme's record, the tenant of the identities that tried
    assert [(r.user_id, r.outcome) for r in exported if r.action == "admin.audit.export" and not r.operator] == [
        ("carol", "FORBIDDEN"),
        ("alice", "FORBIDDEN"),
        ("carol", "FORBIDDEN"),
    ]
    # And a cursor of acme's export does not move an export of acme-eu
    assert len(pages) > 1
    status, body = export(stack, "acme-eu", OPERATOR, cursor=str(first["next_cursor"]))
    assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR")
    # And the operator's exports are on acme's record, as the operator's
    exports = [r for r in trail(tenant_id="acme") if r.action == "admin.audit.export" and r.operator]
    assert len(exports) == len(pages) and all(r.user_id == "ops-1" and r.outcome == "ok" for r in exports)


def test_filters_narrow_the_export(stack: Stack) -> None:
    stack.upload_and_ingest(ALICE, "vault.md", RUNBOOK)
    assert stack.api("POST", "/v1/query", body={"query": QUESTION}, identity=ALICE)[0] == 200
    assert stack.api("GET", "/v1/documents", identity=CAROL)[0] == 200
    status, body = export(stack, "acme", OPERATOR, user="carol")
    assert status == 200 and [r["action"] for r in body["records"]] == ["document.list"]
    status, body = export(stack, "acme", OPERATOR, action="query")
    assert status == 200 and [r["user_id"] for r in body["records"]] == ["alice"]
    status, body = export(stack, "acme", OPERATOR, **{"from": "2999-01-01T00:00:00Z"})
    assert status == 200 and body["records"] == []
    status, body = export(stack, "acme", OPERATOR, **{"from": "not a time"})
    assert (status, body["error"]["code"]) == (400, "VALIDATION_ERROR")


def test_full_questions_are_kept_when_the_operator_turns_them_on(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_AUDIT_QUESTIONS", "full")
    stack.handlers.clear()  # a cold start with the new setting
    stack.upload_and_ingest(ALICE, "vault.md", RUNBOOK)
    assert stack.api("POST", "/v1/query", body={"query": QUESTION}, identity=ALICE)[0] == 200
    [query] = trail(tenant_id="acme", action="query")
    assert query.question == QUESTION and query.question_hash


def test_a_trail_that_cannot_be_written_fails_no_request_and_is_loud(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a document, and a trail that refuses every write
    stack.upload_and_ingest(ALICE, "vault.md", RUNBOOK)

    def broken(*_: object, **__: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("citewise_local.audit.LocalAudit.write", broken)
    monkeypatch.setattr("citewise.aws.cloudwatch_audit.CloudWatchAudit.write", broken)
    capsys.readouterr()
    # When alice asks a question, searches and calls a tool
    status, answer = stack.api("POST", "/v1/query", body={"query": QUESTION}, identity=ALICE)
    searched, hits = stack.api("POST", "/v1/search", body={"query": QUESTION}, identity=ALICE)
    result = mcp_tool(stack, "search", {"query": QUESTION})
    # Then each is answered as usual
    assert status == 200 and answer["citations"], answer
    assert searched == 200 and hits["hits"], hits
    assert not result.get("isError")
    # And each lost record is an ERROR line naming it and a count in the AuditWriteFailures metric
    output = Output.parse(capsys.readouterr().out)
    errors = output.messages("AUDIT RECORD NOT WRITTEN")
    assert [(e["level"], e["audit_action"]) for e in errors] == [
        ("ERROR", "query"),
        ("ERROR", "search"),
        ("ERROR", "mcp.search"),
    ]
    assert sum(output.metric("AuditWriteFailures")) == 3
