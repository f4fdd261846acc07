"""Access integrity at the upload edge, on both stacks: nobody damages a document they may not modify.

Each test plays a hostile member of the same tenant (bob) against alice's documents through the real
functions: the documents function issues the upload URLs, the client PUTs them (to moto's S3, or the
local store), and the ingest function receives the S3 notifications. Where a write could bypass the
URLs (any S3 client of the bucket), it is made directly, signed for bob as a URL would have signed it,
to show that ingestion refuses it by itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.handlers.harness import Output, Stack, claims, s3_notification

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
CAROL_ADMIN = claims("acme", "carol", groups="admin")
NO_FAILURES: dict[str, list[Any]] = {"batchItemFailures": []}
PLAN = b"# Launch plan\n\nThe launch moves to the heron wing in spring.\n"


def _request(stack: Stack, who: dict[str, str], filename: str, data: bytes, **fields: Any) -> tuple[int, Any]:
    content_type = "application/json" if filename.endswith(".metadata.json") else "text/markdown"
    body = {"filename": filename, "content_type": content_type, "size": len(data), **fields}
    return stack.api("POST", "/v1/uploads", body=body, identity=who)


def _upload(stack: Stack, who: dict[str, str], filename: str, data: bytes, **fields: Any) -> dict[str, Any]:
    """Request a URL, PUT the bytes and deliver the notification, as the whole flow would."""
    status, upload = _request(stack, who, filename, data, **fields)
    assert status == 200, upload
    stack.put_upload(upload, data)
    _notify(stack, filename, data)
    return upload


def _notify(stack: Stack, filename: str, data: bytes = b"") -> None:
    notification = s3_notification("ObjectCreated:Put", f"tenants/acme/{filename}", size=len(data))
    assert stack.ingest(notification) == NO_FAILURES


def _sidecar(**attributes: Any) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def _document(stack: Stack, doc_id: str, who: dict[str, str] = ALICE) -> dict[str, Any]:
    status, body = stack.api("GET", f"/v1/documents/{doc_id}", identity=who)
    assert status == 200, body
    return dict(body)


def _hits(stack: Stack, who: dict[str, str], query: str) -> list[str]:
    status, body = stack.api("POST", "/v1/search", body={"query": query}, identity=who)
    assert status == 200, body
    return [hit["chunk"]["text"] for hit in body["hits"]]


# --- 1. sidecar injection -------------------------------------------------------------------------------


@pytest.mark.parametrize(("visibility", "refusal"), [("shared", 403), ("private", 409)])
def test_nobody_else_may_request_a_sidecar_upload_for_a_document(stack: Stack, visibility: str, refusal: int) -> None:
    # Given alice's document
    _upload(stack, ALICE, "plan.md", PLAN, visibility=visibility)
    # When bob asks to upload its sidecar, then he is refused as for the document itself
    status, body = _request(stack, BOB, "plan.md.metadata.json", _sidecar(owner="bob"))
    assert status == refusal and body["error"]["code"] == {403: "FORBIDDEN", 409: "CONFLICT"}[refusal]


def test_a_sidecar_that_reaches_the_bucket_for_someone_else_changes_nothing(stack: Stack) -> None:
    # Given alice's indexed document with her own sidecar
    upload = _upload(stack, ALICE, "plan.md", PLAN)
    _upload(stack, ALICE, "plan.md.metadata.json", _sidecar(team="launch"))
    before = _document(stack, upload["document_id"])
    assert (before["status"], before["attributes"]) == ("INDEXED", {"team": "launch"})
    # When a sidecar signed for bob lands anyway (written straight to the bucket), with a valid attribute
    # and then with a reserved key that would fail the document
    for attack in (_sidecar(team="bob-rules"), _sidecar(owner="bob", visibility="shared")):
        stack.put_object("tenants/acme/plan.md.metadata.json", attack, content_type="application/json", owner="bob")
        _notify(stack, "plan.md.metadata.json")
        # Then alice's document is exactly as it was, her sidecar is back in place, and it still answers
        assert _document(stack, upload["document_id"]) == before
        assert stack.read_object("tenants/acme/plan.md.metadata.json") == _sidecar(team="launch")
    assert any("heron wing" in text for text in _hits(stack, ALICE, "launch heron wing"))


def test_the_owner_and_a_tenant_admin_may_write_the_sidecar(stack: Stack) -> None:
    upload = _upload(stack, ALICE, "plan.md", PLAN)
    _upload(stack, ALICE, "plan.md.metadata.json", _sidecar(team="launch"))
    assert _document(stack, upload["document_id"])["attributes"] == {"team": "launch"}
    # A tenant admin's sidecar is signed for alice, whose document it stays
    _upload(stack, CAROL_ADMIN, "plan.md.metadata.json", _sidecar(team="ops", year=2026))
    document = _document(stack, upload["document_id"])
    assert (document["attributes"], document["owner"]) == ({"team": "ops", "year": 2026}, "alice")


# --- 2. pre-planted sidecar -----------------------------------------------------------------------------


def test_a_sidecar_planted_before_the_document_does_not_touch_another_users_document(stack: Stack) -> None:
    # Given bob's sidecar, with a reserved key, planted where alice will put her private plan
    _upload(stack, BOB, "plan.md.metadata.json", _sidecar(owner="bob", visibility="shared"))
    # And nobody else may now take over that waiting sidecar
    status, body = _request(stack, CAROL_ADMIN, "plan.md.metadata.json", _sidecar(team="x"))
    assert status == 409 and body["error"]["code"] == "CONFLICT"
    # When alice uploads her private plan
    upload = _upload(stack, ALICE, "plan.md", PLAN, visibility="private")
    # Then it is hers, private, indexed without bob's metadata, and invisible to bob
    document = _document(stack, upload["document_id"])
    assert (document["status"], document["owner"], document["visibility"]) == ("INDEXED", "alice", "private")
    assert document["attributes"] == {}
    assert stack.api("GET", f"/v1/documents/{upload['document_id']}", identity=BOB)[0] == 404
    assert _hits(stack, BOB, "launch heron wing") == []
    # And she may replace the planted sidecar with her own, which applies
    _upload(stack, ALICE, "plan.md.metadata.json", _sidecar(team="launch"))
    assert _document(stack, upload["document_id"])["attributes"] == {"team": "launch"}
    # And delete and re-upload her document
    assert stack.api("DELETE", f"/v1/documents/{upload['document_id']}", identity=ALICE)[0] == 204
    _upload(stack, ALICE, "plan.md", PLAN, visibility="private")
    assert _document(stack, upload["document_id"])["status"] == "INDEXED"


def test_a_failed_first_ingest_keeps_the_uploaders_owner_and_visibility(stack: Stack) -> None:
    # Given alice's own malformed sidecar, then her private document
    _upload(stack, ALICE, "plan.md.metadata.json", b'{"metadataAttributes": {"x": NaN}}')
    upload = _upload(stack, ALICE, "plan.md", PLAN, visibility="private")
    # Then the document is FAILED with the reason, still hers and private
    document = _document(stack, upload["document_id"])
    assert (document["status"], document["owner"], document["visibility"]) == ("FAILED", "alice", "private")
    assert document["error"].startswith("VALIDATION_ERROR") and "NaN" in document["error"]
    assert stack.api("GET", f"/v1/documents/{upload['document_id']}", identity=BOB)[0] == 404
    # And she may fix it: a good sidecar re-ingests the document
    _upload(stack, ALICE, "plan.md.metadata.json", _sidecar(team="launch"))
    assert _document(stack, upload["document_id"])["status"] == "INDEXED"


# --- 3. stale presigned URL -----------------------------------------------------------------------------


def test_a_url_issued_while_the_path_was_free_cannot_overwrite_a_document_created_since(stack: Stack) -> None:
    # Given an upload URL bob got while the path was free
    status, stale = _request(stack, BOB, "notes.md", b"bob's notes, 29 bytes long..")
    assert status == 200
    # And alice's private document created there since
    upload = _upload(stack, ALICE, "notes.md", PLAN, visibility="private")
    # When bob uses his URL, then the store refuses it (S3: 412 Precondition Failed)
    assert stack.send_upload(stale, b"bob's notes, 29 bytes long..") == 412
    # And alice's document, content and access are untouched
    assert stack.read_object("tenants/acme/notes.md") == PLAN
    document = _document(stack, upload["document_id"])
    assert (document["status"], document["owner"], document["visibility"]) == ("INDEXED", "alice", "private")


def test_a_url_for_a_replacement_dies_when_the_document_changes(stack: Stack) -> None:
    _upload(stack, ALICE, "notes.md", PLAN)
    status, first = _request(stack, ALICE, "notes.md", b"second")
    assert status == 200
    _upload(stack, ALICE, "notes.md", b"third!")
    assert stack.send_upload(first, b"second") == 412
    assert stack.read_object("tenants/acme/notes.md") == b"third!"


def test_ingest_refuses_an_object_written_for_someone_else_and_restores_the_owners(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given alice's private document
    upload = _upload(stack, ALICE, "notes.md", PLAN, visibility="private")
    before = _document(stack, upload["document_id"])
    # When an object signed for bob lands over it anyway (any S3 client of the bucket could write it)
    stack.put_object("tenants/acme/notes.md", b"# Bob's now\n\nEverything here is bob's.\n", owner="bob")
    capsys.readouterr()
    _notify(stack, "notes.md")
    # Then ingestion refuses it, says why, and brings alice's version back
    output = Output.parse(capsys.readouterr().out)
    [logged] = output.messages("document ingested")
    assert logged["outcome"] == "refused" and "'bob'" in logged["reason"] and "'alice'" in logged["reason"]
    assert output.metric("UploadsRefused") == [1.0]
    # (the library's own warning is a structured line of the same invocation, with its correlation keys)
    [warning] = output.messages("upload refused")
    assert warning["level"] == "WARNING" and warning["restored"] is True
    assert warning["function_request_id"] == logged["function_request_id"]
    assert stack.read_object("tenants/acme/notes.md") == PLAN
    # And alice's document never changed hands, content or visibility
    after = _document(stack, upload["document_id"])
    assert {k: after[k] for k in ("status", "owner", "visibility", "content_hash")} == {
        k: before[k] for k in ("status", "owner", "visibility", "content_hash")
    }
    assert any("heron wing" in text for text in _hits(stack, ALICE, "launch heron wing"))
    assert _hits(stack, BOB, "bob everything") == []
