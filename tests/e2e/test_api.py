"""The API end to end: upload, ingestion, answers with citations, tenant isolation, private documents,
bad tokens and bad bodies, through `citewise serve` and the real handlers."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import pytest

from tests.e2e.helpers import Api, Reply, citewise_script, mint, upload, wait_for_status
from tests.e2e.helpers import new_tenant as _tenant


def _error(reply: Reply, status: int, code: str) -> dict[str, Any]:
    assert reply.status == status, reply.body
    error = reply.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == reply.headers["x-amzn-requestid"]
    return dict(error)


RUNBOOK = (
    b"# Runbook\n\n## Dead letters\n\nWhen documents land in the dead-letter queue, fix the cause first, "
    b"then redrive the messages back to the ingestion queue.\n\n## Releases\n\nReleases ship on Tuesdays.\n"
)


def _hits(api: Api, token: str, query: str) -> list[dict[str, Any]]:
    reply = api.request("POST", "/v1/search", token=token, json_body={"query": query, "top_k": 10})
    assert reply.status == 200, reply.body
    return list(reply.json()["hits"])


def test_an_uploaded_document_is_indexed_and_answers_with_citations(api: Api) -> None:
    # Given a tenant's user and a Markdown runbook uploaded through a presigned URL
    token = api.token(_tenant(), "alice")
    doc_id = upload(api, token, "ops/runbook.md", RUNBOOK, "text/markdown")
    # When ingestion (triggered by the S3-shaped event) settles
    document = wait_for_status(api, token, doc_id)
    # Then the document is indexed with its title and chunks
    assert document["status"] == "INDEXED", document
    assert (document["path"], document["title"], document["owner"]) == ("ops/runbook.md", "Runbook", "alice")
    assert document["chunk_count"] >= 2
    # And a question gets an answer citing a verbatim span of it
    reply = api.request("POST", "/v1/query", token=token, json_body={"query": "What do I do with dead letters?"})
    assert reply.status == 200, reply.body
    answer = reply.json()
    assert answer["grounded"] is True
    assert answer["request_id"] == reply.headers["x-amzn-requestid"]
    assert answer["citations"], answer
    citation = answer["citations"][0]
    assert citation["doc_id"] == doc_id and citation["path"] == "ops/runbook.md"
    assert citation["quote"].encode() in RUNBOOK
    assert "redrive" in answer["answer"] and f"[{citation['source']}]" in answer["answer"]


def test_tenants_never_see_each_others_documents(api: Api) -> None:
    # Given a document of tenant A
    owner = api.token(_tenant(), "alice", "admin")
    doc_id = upload(api, owner, "ops/runbook.md", RUNBOOK, "text/markdown")
    assert wait_for_status(api, owner, doc_id)["status"] == "INDEXED"
    # And an admin of tenant B (same user name, even)
    intruder = api.token(_tenant(), "alice", "admin")
    # When B searches, asks, lists, reads and deletes
    hits = _hits(api, intruder, "dead-letter queue redrive")
    answer = api.request("POST", "/v1/query", token=intruder, json_body={"query": "dead-letter queue redrive"})
    listing = api.request("GET", "/v1/documents", token=intruder)
    read = api.request("GET", f"/v1/documents/{doc_id}", token=intruder)
    deleted = api.request("DELETE", f"/v1/documents/{doc_id}", token=intruder)
    # Then nothing of A's is visible, and A's document is untouched
    assert hits == []
    assert answer.status == 200 and answer.json()["citations"] == [] and answer.json()["grounded"] is False
    assert listing.status == 200 and listing.json()["items"] == []
    _error(read, 404, "NOT_FOUND")
    _error(deleted, 404, "NOT_FOUND")
    assert api.request("GET", f"/v1/documents/{doc_id}", token=owner).json()["status"] == "INDEXED"
    assert {hit["chunk"]["document"]["doc_id"] for hit in _hits(api, owner, "dead-letter queue redrive")} == {doc_id}


def test_a_private_document_is_visible_only_to_its_owner(api: Api) -> None:
    # Given alice's private document and bob in the same tenant
    tenant = _tenant()
    alice, bob = api.token(tenant, "alice"), api.token(tenant, "bob")
    doc_id = upload(
        api, alice, "me/diary.md", b"# Diary\n\nThe quokka visited at noon.\n", "text/markdown", visibility="private"
    )
    assert wait_for_status(api, alice, doc_id)["visibility"] == "private"
    # Then bob cannot find, read or list it; alice can
    assert _hits(api, bob, "quokka noon") == []
    _error(api.request("GET", f"/v1/documents/{doc_id}", token=bob), 404, "NOT_FOUND")
    assert api.request("GET", "/v1/documents", token=bob).json()["items"] == []
    assert [hit["chunk"]["document"]["doc_id"] for hit in _hits(api, alice, "quokka noon")] == [doc_id]
    assert [item["doc_id"] for item in api.request("GET", "/v1/documents", token=alice).json()["items"]] == [doc_id]


def test_a_deleted_document_is_gone_from_reads_and_search(api: Api) -> None:
    token = api.token(_tenant(), "alice")
    doc_id = upload(api, token, "tmp/note.md", b"# Note\n\nThe platypus password rotates weekly.\n", "text/markdown")
    assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
    assert api.request("DELETE", f"/v1/documents/{doc_id}", token=token).status == 204
    _error(api.request("GET", f"/v1/documents/{doc_id}", token=token), 404, "NOT_FOUND")
    assert _hits(api, token, "platypus password") == []


def test_a_document_that_cannot_be_parsed_is_failed_with_its_reason(api: Api) -> None:
    token = api.token(_tenant(), "alice")
    doc_id = upload(api, token, "broken.pdf", b"%PDF-1.7 this is not really a pdf", "application/pdf")
    document = wait_for_status(api, token, doc_id)
    assert document["status"] == "FAILED"
    assert document["error"]


def test_a_tampered_token_is_refused(api: Api) -> None:
    token = api.token(_tenant(), "alice")
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["custom:tenant_id"] = "someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    reply = api.request("GET", "/v1/documents", token=f"{header}.{forged}.{signature}")
    assert "signature" in _error(reply, 401, "UNAUTHORIZED")["message"]


def test_an_expired_token_is_refused(api: Api) -> None:
    token = mint(api, _tenant(), "alice", "--ttl", "3")
    assert api.request("GET", "/v1/documents", token=token).status == 200
    payload = token.split(".")[1]
    expires = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]
    time.sleep(max(0.0, expires - time.time()) + 0.2)
    reply = api.request("GET", "/v1/documents", token=token)
    assert "expired" in _error(reply, 401, "UNAUTHORIZED")["message"]


def test_no_token_is_refused_but_health_and_openapi_are_public(api: Api) -> None:
    _error(api.request("POST", "/v1/query", json_body={"query": "anything"}), 401, "UNAUTHORIZED")
    assert api.request("GET", "/v1/health").json()["status"] == "ok"
    document = api.request("GET", "/v1/openapi.json").json()
    assert "/v1/query" in document["paths"]


@pytest.mark.parametrize(
    "body",
    [
        {"question": "wrong field name"},
        {"query": ""},
        {"query": "fine", "top_k": 0},
        {"query": "fine", "filters": {"equals": {"key": "tenant_id", "value": "other"}}},
    ],
    ids=["unknown-field", "empty-query", "bad-top-k", "tenant-filter"],
)
def test_a_bad_body_is_a_validation_error_with_the_request_id(api: Api, body: dict[str, Any]) -> None:
    reply = api.request("POST", "/v1/query", token=api.token(_tenant(), "alice"), json_body=body)
    _error(reply, 400, "VALIDATION_ERROR")


def test_a_body_that_is_not_json_is_a_validation_error(api: Api) -> None:
    reply = api.request(
        "POST",
        "/v1/search",
        token=api.token(_tenant(), "alice"),
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    _error(reply, 400, "VALIDATION_ERROR")


def test_an_unknown_route_is_not_found(api: Api) -> None:
    _error(api.request("GET", "/v1/nothing-here", token=api.token(_tenant(), "alice")), 404, "NOT_FOUND")


def test_the_docs_page_points_swagger_ui_at_the_openapi_document(api: Api) -> None:
    reply = api.request("GET", "/v1/docs")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/html")
    assert "/v1/openapi.json" in reply.body.decode()


def test_serve_announces_its_url_and_refuses_a_port_in_use(api: Api) -> None:
    # The running server printed where it listens and how to get a token
    first_lines = api.log.read_text().splitlines()[:2]
    assert first_lines[0].startswith(f"citewise API on {api.url} ")
    assert "citewise token --tenant" in first_lines[1]
    # A second server on the same port fails with one error line
    port = api.url.rsplit(":", 1)[1]
    done = subprocess.run(  # noqa: S603
        [citewise_script(), "serve", "--port", port], env=api.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: VALIDATION_ERROR: cannot listen on 127.0.0.1:{port}")
