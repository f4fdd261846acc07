"""The query and documents functions, driven by API Gateway events, on both stacks."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from citewise.api.routes import ROUTES
from tests.integration.handlers.harness import ROOT, LambdaContext, Stack, api_event, claims

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
ADMIN = claims("acme", "carol", groups="admin")
GLOBEX = claims("globex", "gina")
RUNBOOK = b"# Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n"


def test_upload_ingest_query_gives_a_cited_answer(stack: Stack) -> None:
    # Given a document uploaded through a presigned URL and ingested from its S3 event
    doc_id = stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    # Then it is INDEXED with its counts
    status, document = stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)
    assert status == 200
    assert document["status"] == "INDEXED" and document["chunk_count"] >= 1 and document["owner"] == "alice"
    # When a colleague asks about it
    status, answer = stack.api("POST", "/v1/query", body={"query": "How often are signing keys rotated?"}, identity=BOB)
    # Then the answer cites the document with a verbatim quote, and carries the request id
    assert status == 200, answer
    assert answer["grounded"] is True and "[1]" in answer["answer"]
    citation = answer["citations"][0]
    assert citation["doc_id"] == doc_id and citation["path"] == "runbooks/keys.md"
    assert citation["quote"] in RUNBOOK.decode()
    assert answer["request_id"]


def test_search_returns_ranked_chunks_with_scores_and_metadata(stack: Stack) -> None:
    stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)
    stack.upload_and_ingest(ALICE, "otters.md", b"# Otters\n\nOtters float on their backs.\n")
    status, body = stack.api("POST", "/v1/search", body={"query": "otters float", "top_k": 1}, identity=ALICE)
    assert status == 200
    [hit] = body["hits"]
    assert hit["chunk"]["document"]["path"] == "otters.md" and hit["chunk"]["document"]["tenant_id"] == "acme"
    assert hit["score"] > 0 and hit["keyword_score"] is not None


def test_another_tenant_sees_nothing_and_cannot_name_a_tenant_in_the_body(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)
    status, body = stack.api("POST", "/v1/search", body={"query": "signing keys"}, identity=GLOBEX)
    assert status == 200 and body["hits"] == []
    status, answer = stack.api("POST", "/v1/query", body={"query": "signing keys"}, identity=GLOBEX)
    assert status == 200 and answer["grounded"] is False and answer["citations"] == []
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=GLOBEX)[0] == 404
    assert stack.api("DELETE", f"/v1/documents/{doc_id}", identity=GLOBEX)[0] == 404
    assert stack.api("GET", "/v1/documents", identity=GLOBEX)[1]["items"] == []
    # A tenant named in the body is an unknown field, not a way in
    status, error = stack.api("POST", "/v1/search", body={"query": "keys", "tenant_id": "acme"}, identity=GLOBEX)
    assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR"
    # Nor can a filter on the tenant key widen the search
    wide = {"query": "keys", "filters": {"equals": {"key": "tenant_id", "value": "acme"}}}
    status, error = stack.api("POST", "/v1/search", body=wide, identity=GLOBEX)
    assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR"


def test_private_documents_are_for_their_owner_only(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "diary.md", b"# Diary\n\nThe heron returned today.\n", visibility="private")
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)[0] == 200
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=BOB)[0] == 404
    assert [d["path"] for d in stack.api("GET", "/v1/documents", identity=BOB)[1]["items"]] == []
    assert [d["path"] for d in stack.api("GET", "/v1/documents", identity=ALICE)[1]["items"]] == ["diary.md"]
    assert stack.api("POST", "/v1/search", body={"query": "heron"}, identity=BOB)[1]["hits"] == []
    assert len(stack.api("POST", "/v1/search", body={"query": "heron"}, identity=ALICE)[1]["hits"]) == 1
    # Bob cannot learn it exists by deleting it, nor take its path by uploading over it
    assert stack.api("DELETE", f"/v1/documents/{doc_id}", identity=BOB)[0] == 404
    request = {"filename": "diary.md", "content_type": "text/markdown", "size": 5}
    status, error = stack.api("POST", "/v1/uploads", body=request, identity=BOB)
    assert status == 409 and error["error"]["code"] == "CONFLICT" and "heron" not in json.dumps(error)


def test_delete_removes_object_chunks_and_record_for_the_owner_or_an_admin(stack: Stack) -> None:
    mine = stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)
    other = stack.upload_and_ingest(ALICE, "otters.md", b"# Otters\n\nOtters float.\n")
    # A colleague may read a shared document but not delete it
    status, error = stack.api("DELETE", f"/v1/documents/{mine}", identity=BOB)
    assert status == 403 and error["error"]["code"] == "FORBIDDEN"
    # The owner may
    status, body = stack.api("DELETE", f"/v1/documents/{mine}", identity=ALICE)
    assert status == 204 and body is None
    assert stack.api("GET", f"/v1/documents/{mine}", identity=ALICE)[0] == 404
    hits = stack.api("POST", "/v1/search", body={"query": "signing keys"}, identity=ALICE)[1]["hits"]
    assert [h["chunk"]["document"]["path"] for h in hits] == ["otters.md"]
    if stack.kind == "aws":
        assert "Contents" not in stack.s3.list_objects_v2(Bucket="citewise-docs", Prefix="tenants/acme/keys.md")
    # So may a tenant admin
    assert stack.api("DELETE", f"/v1/documents/{other}", identity=ADMIN)[0] == 204
    assert stack.api("GET", "/v1/documents", identity=ALICE)[1]["items"] == []


def test_listing_pages_with_a_cursor_and_filters(stack: Stack) -> None:
    for name in ("a/1.md", "a/2.md", "a/3.md", "b/1.md"):
        stack.upload_and_ingest(ALICE, name, f"# {name}\n\nText of {name}.\n".encode())
    status, first = stack.api("GET", "/v1/documents", query={"limit": "2", "path_prefix": "a/"}, identity=ALICE)
    assert status == 200 and [d["path"] for d in first["items"]] == ["a/1.md", "a/2.md"]
    query = {"limit": "2", "path_prefix": "a/", "cursor": first["next_cursor"]}
    status, second = stack.api("GET", "/v1/documents", query=query, identity=ALICE)
    assert [d["path"] for d in second["items"]] == ["a/3.md"] and second["next_cursor"] is None
    # `source` is the content's origin (here the first folder), `channel` how it arrived
    status, body = stack.api("GET", "/v1/documents", query={"status": "INDEXED", "source": "a"}, identity=ALICE)
    assert [d["path"] for d in body["items"]] == ["a/1.md", "a/2.md", "a/3.md"]
    assert {d["channel"] for d in body["items"]} == {"s3" if stack.kind == "aws" else "local"}
    assert stack.api("GET", "/v1/documents", query={"status": "FAILED"}, identity=ALICE)[1]["items"] == []
    for bad in ({"limit": "0"}, {"limit": "101"}, {"status": "DONE"}, {"cursor": "not-a-cursor"}):
        status, error = stack.api("GET", "/v1/documents", query=bad, identity=ALICE)
        assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR", bad


def test_a_document_that_cannot_be_parsed_shows_failed_with_the_reason(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "empty.md", b" \n")
    status, document = stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)
    assert status == 200 and document["status"] == "FAILED" and document["error"].startswith("PARSE_ERROR")


@pytest.mark.parametrize(
    ("request_body", "status", "code"),
    [
        (
            {"filename": "scan.exe", "content_type": "application/octet-stream", "size": 10},
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            {"filename": "big.pdf", "content_type": "application/pdf", "size": 60 * 1024 * 1024},
            413,
            "PAYLOAD_TOO_LARGE",
        ),
        ({"filename": "../globex/x.md", "content_type": "text/markdown", "size": 10}, 400, "VALIDATION_ERROR"),
        ({"filename": "x.md", "content_type": "text/markdown", "size": 0}, 400, "VALIDATION_ERROR"),
        ({"filename": "x.md", "content_type": "text/markdown", "size": 5, "owner": "bob"}, 400, "VALIDATION_ERROR"),
        (
            {"filename": "x.md", "content_type": "text/markdown", "size": 5, "metadata": {"owner": "bob"}},
            400,
            "VALIDATION_ERROR",
        ),
    ],
)
def test_bad_upload_requests_are_refused_clearly(
    stack: Stack, request_body: dict[str, object], status: int, code: str
) -> None:
    got, error = stack.api("POST", "/v1/uploads", body=request_body, identity=ALICE)
    assert (got, error["error"]["code"]) == (status, code)
    assert error["error"]["request_id"]


def test_an_upload_url_is_scoped_to_the_callers_tenant_and_signed_for_its_owner(stack: Stack) -> None:
    request = {"filename": "notes.md", "content_type": "text/markdown", "size": 5, "visibility": "private"}
    status, upload = stack.api("POST", "/v1/uploads", body=request, identity=ALICE)
    assert status == 200
    assert set(upload) >= {"document_id", "url", "headers", "expires_at"}
    assert upload["headers"]["x-amz-meta-owner"] == "alice" and upload["headers"]["x-amz-meta-visibility"] == "private"
    if stack.kind == "aws":
        assert "/tenants/acme/notes.md?" in upload["url"]


@pytest.mark.parametrize(
    ("identity", "status", "code"),
    [(None, 401, "UNAUTHORIZED"), (claims(tenant=None), 403, "FORBIDDEN"), (claims(tenant="a/b"), 403, "FORBIDDEN")],
)
def test_no_identity_is_401_and_no_tenant_is_403(
    stack: Stack, identity: dict[str, str] | None, status: int, code: str
) -> None:
    for method, path, body in (("POST", "/v1/query", {"query": "x"}), ("GET", "/v1/documents", None)):
        got, error = stack.api(method, path, body=body, identity=identity)
        assert (got, error["error"]["code"]) == (status, code)


def test_iam_principals_map_to_tenants_through_a_tenant_map_file(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given IAM mode with a tenant map larger than Lambda allows all variables together (4 KB), in a file
    stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)
    tenant_map = {f"arn:aws:iam::123456789012:role/App{n:04d}": f"tenant-{n:04d}" for n in range(300)}
    tenant_map["arn:aws:iam::123456789012:role/SupportAgent"] = "acme"
    assert len(json.dumps(tenant_map)) > 4 * 1024
    (tmp_path / "tenant_map.json").write_text(json.dumps(tenant_map), encoding="utf-8")
    monkeypatch.setenv("CITEWISE_AUTH_MODE", "iam")
    monkeypatch.setenv("CITEWISE_TENANT_MAP_FILE", str(tmp_path / "tenant_map.json"))
    stack.handlers.clear()  # a cold start with the new settings
    # Then a mapped role reads its tenant's documents and another is refused
    agent = "arn:aws:sts::123456789012:assumed-role/SupportAgent/agent-session"
    status, body = stack.api("POST", "/v1/search", body={"query": "signing keys"}, iam_arn=agent)
    assert status == 200 and [h["chunk"]["document"]["path"] for h in body["hits"]] == ["keys.md"]
    other = "arn:aws:sts::123456789012:assumed-role/App0001/s"
    status, body = stack.api("POST", "/v1/search", body={"query": "signing keys"}, iam_arn=other)
    assert status == 200 and body["hits"] == []  # tenant-0001 has no documents
    status, error = stack.api("POST", "/v1/search", body={"query": "keys"}, iam_arn="arn:aws:iam::123456789012:role/X")
    assert status == 403 and error["error"]["code"] == "FORBIDDEN"


def test_iam_principals_map_to_tenants_by_role(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)
    monkeypatch.setenv("CITEWISE_AUTH_MODE", "iam")
    monkeypatch.setenv("CITEWISE_TENANT_MAP", json.dumps({"arn:aws:iam::123456789012:role/SupportAgent": "acme"}))
    stack.handlers.clear()  # a cold start with the new settings
    agent = "arn:aws:sts::123456789012:assumed-role/SupportAgent/agent-session"
    status, body = stack.api("POST", "/v1/search", body={"query": "signing keys"}, iam_arn=agent)
    assert status == 200 and [h["chunk"]["document"]["path"] for h in body["hits"]] == ["keys.md"]
    stranger = "arn:aws:sts::123456789012:assumed-role/Other/s"
    status, error = stack.api("POST", "/v1/search", body={"query": "signing keys"}, iam_arn=stranger)
    assert status == 403 and error["error"]["code"] == "FORBIDDEN"
    # Claims are ignored in IAM mode: no principal means no identity
    status, error = stack.api("POST", "/v1/search", body={"query": "keys"}, identity=ALICE, iam_arn="")
    assert status == 401


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        ('{"query": "x", "unknown": 1}', "application/json", 400, "VALIDATION_ERROR"),
        ('{"query": ""}', "application/json", 400, "VALIDATION_ERROR"),
        ('{"query": "x", "top_k": 51}', "application/json", 400, "VALIDATION_ERROR"),
        ('{"query": "x", "filters": {"equals": {"key": "k"}}}', "application/json", 400, "VALIDATION_ERROR"),
        (
            '{"query": "x", "filters": {"equals": {"key": "k", "value": 1}, "in": {"key": "k", "value": ["a"]}}}',
            "application/json",
            400,
            "VALIDATION_ERROR",
        ),
        ("{not json", "application/json", 400, "VALIDATION_ERROR"),
        ("[]", "application/json", 400, "VALIDATION_ERROR"),
        ("query=x", "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"),
        ('{"query": "x"}', "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
)
def test_bad_query_bodies_get_one_error_shape_with_the_request_id(
    stack: Stack, body: str, content_type: str, status: int, code: str
) -> None:
    event = api_event("POST", "/v1/query", body=body, identity=ALICE, content_type=content_type)
    response = stack.handler("query")(event, LambdaContext())
    error = json.loads(response["body"])["error"]
    assert (response["statusCode"], error["code"]) == (status, code)
    assert error["request_id"] == event["requestContext"]["requestId"]
    assert set(error) == {"code", "message", "details", "request_id"}


def test_an_unexpected_failure_is_an_internal_error_that_reveals_nothing(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from citewise.query.retrieval import Retriever

    def explode(*_: object) -> None:
        raise RuntimeError("secret connection string postgres://u:p@h")

    monkeypatch.setattr(Retriever, "retrieve", explode)
    status, error = stack.api("POST", "/v1/search", body={"query": "x"}, identity=ALICE)
    assert status == 500 and error["error"]["code"] == "INTERNAL_ERROR"
    assert "postgres" not in json.dumps(error) and "Traceback" not in json.dumps(error)


def test_unknown_routes_are_404_and_health_needs_no_identity(stack: Stack) -> None:
    status, error = stack.api("GET", "/v1/nothing-here", identity=ALICE)
    assert status == 404 and error["error"]["code"] == "NOT_FOUND"
    status, health = stack.api("GET", "/v1/health")
    assert status == 200 and health["status"] == "ok"
    status, error = stack.api("GET", "/v1/documents/not-an-id", identity=ALICE)
    assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR"


def test_the_served_openapi_document_is_the_checked_in_one_and_covers_every_route(stack: Stack) -> None:
    status, served = stack.api("GET", "/v1/openapi.json")
    assert status == 200
    assert served == json.loads((ROOT / "docs" / "openapi.json").read_text()), "run `make openapi`"
    for route in (route for route in ROUTES if route.openapi):  # /mcp is JSON-RPC (tests/e2e/test_mcp.py)
        operation = served["paths"][route.path][route.method.lower()]
        assert ("security" in operation) is route.authenticated, route


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        (b"\xff\xfe{}", "application/json", 400, "VALIDATION_ERROR"),
        (b"--x\r\n\r\nquery\r\n--x--", "multipart/form-data", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
)
def test_bodies_that_cannot_be_decoded_are_client_errors(
    stack: Stack, raw: bytes, content_type: str, status: int, code: str
) -> None:
    # Given a body API Gateway passes base64-encoded (bytes that are not UTF-8, a multipart body with no
    # boundary), which Powertools fails to decode before validation runs
    event = api_event(
        "POST", "/v1/uploads", body=base64.b64encode(raw).decode(), identity=ALICE, content_type=content_type
    )
    event["isBase64Encoded"] = True
    # When it reaches the handler, then the answer is a client error in the one error shape
    response = stack.handler("documents")(event, LambdaContext())
    assert (response["statusCode"], json.loads(response["body"])["error"]["code"]) == (status, code)


@pytest.mark.parametrize("stack", ["aws-double"], indirect=True)  # the local adapters call no service
def test_a_query_with_no_time_left_answers_a_search_backend_error_not_a_timeout(stack: Stack) -> None:
    # Given the AWS stack, and an invocation that has only 1.2 s left (the reserve takes 1 s of it)
    opensearch = stack.opensearch
    assert opensearch is not None
    stack.upload_and_ingest(ALICE, "keys.md", RUNBOOK)

    class AlmostOut(LambdaContext):
        def get_remaining_time_in_millis(self) -> int:
            return 1200

    # When a search runs in that invocation
    sent = len(opensearch.requests)
    event = api_event("POST", "/v1/search", body={"query": "signing keys"}, identity=BOB)
    response = stack.handler("query")(event, AlmostOut())

    # Then the function answers the structured error itself, and no search was sent to OpenSearch
    assert response["statusCode"] == 502, response
    assert json.loads(response["body"])["error"]["code"] == "SEARCH_BACKEND_ERROR"
    assert len(opensearch.requests) == sent


def _events(body: bytes) -> list[tuple[str, Any]]:
    blocks = [block.splitlines() for block in body.decode().split("\n\n") if block]
    return [(lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: "))) for lines in blocks]


def test_the_streamed_handler_answers_events_in_the_streamed_proxy_format(stack: Stack) -> None:
    # Given an indexed runbook and the plain answer to a question about it
    stack.upload_and_ingest(ALICE, "runbooks/keys.md", RUNBOOK)
    question = {"query": "How often are signing keys rotated?"}
    status, plain = stack.api("POST", "/v1/query", body=question, identity=BOB)
    assert status == 200
    # When the streamed handler is asked for events (as API Gateway's STREAM integration invokes it)
    metadata, body = stack.stream("/v1/query", body={**question, "stream": True}, identity=BOB)
    # Then the metadata is the status and the event-stream type, and the body the events, ending with the
    # plain answer (its own request id aside)
    headers = {
        k.lower(): v for k, v in {**metadata.get("headers", {}), **metadata.get("multiValueHeaders", {})}.items()
    }
    assert metadata["statusCode"] == 200 and "text/event-stream" in str(headers["content-type"])
    events = _events(body)
    assert events[0][0] == "sources" and events[-1][0] == "answer"
    # (each call is a turn of a conversation of its own: its id differs, nothing else)
    unset = {"request_id": "", "conversation": None}
    assert {**events[-1][1], **unset} == {**plain, **unset}
    assert events[-1][1]["conversation"]["turn"] == plain["conversation"]["turn"] == 1
    # And a request refused before the stream is the usual JSON error, whole, after its status
    metadata, body = stack.stream("/v1/query", body={"query": "", "stream": True}, identity=BOB)
    assert metadata["statusCode"] == 400 and json.loads(body)["error"]["code"] == "VALIDATION_ERROR"
