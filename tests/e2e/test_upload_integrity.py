"""Access integrity at the upload edge over real HTTP: a hostile member of the same tenant (bob) against
alice's documents, through `citewise serve`, its presigned uploads and its ingest worker."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tests.e2e.helpers import INGEST_TIMEOUT_S, Api, upload, wait_for_status

PLAN = b"# Launch plan\n\nThe launch moves to the heron wing in spring.\n"


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _ask(api: Api, token: str, filename: str, data: bytes, **fields: Any) -> tuple[int, Any]:
    content_type = "application/json" if filename.endswith(".metadata.json") else "text/markdown"
    body = {"filename": filename, "content_type": content_type, "size": len(data), **fields}
    reply = api.request("POST", "/v1/uploads", token=token, json_body=body)
    return reply.status, reply.json()


def _put(api: Api, grant: dict[str, Any], data: bytes) -> int:
    return api.request("PUT", grant["url"], data=data, headers=grant["headers"]).status


def _sidecar(**attributes: Any) -> bytes:
    return json.dumps({"metadataAttributes": attributes}).encode()


def _settled(api: Api, token: str, doc_id: str, **expected: Any) -> dict[str, Any]:
    """The document once its ingestion settled with the expected fields (a sidecar re-ingests it)."""
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    while True:
        document = wait_for_status(api, token, doc_id)
        if all(document.get(key) == value for key, value in expected.items()) or time.monotonic() > deadline:
            return document
        time.sleep(0.1)


def test_a_sidecar_is_part_of_its_document(api: Api) -> None:
    tenant = _tenant()
    alice, bob, admin = api.token(tenant, "alice"), api.token(tenant, "bob"), api.token(tenant, "carol", "admin")
    # Given alice's shared and private documents
    shared = upload(api, alice, "plan.md", PLAN, "text/markdown")
    private = upload(api, alice, "secret.md", PLAN, "text/markdown", visibility="private")
    assert wait_for_status(api, alice, shared)["status"] == "INDEXED"
    assert wait_for_status(api, alice, private)["status"] == "INDEXED"
    # When bob asks to write their sidecars, then he may not: as for the documents themselves
    assert _ask(api, bob, "plan.md.metadata.json", _sidecar(owner="bob"))[0] == 403
    assert _ask(api, bob, "secret.md.metadata.json", _sidecar(owner="bob"))[0] == 409
    # And a tenant admin's sidecar applies, to a document that stays alice's
    status, grant = _ask(api, admin, "plan.md.metadata.json", _sidecar(team="ops"))
    assert status == 200 and grant["document_id"] == shared
    assert _put(api, grant, _sidecar(team="ops")) == 200
    document = _settled(api, alice, shared, attributes={"team": "ops"})
    assert (document["attributes"], document["owner"]) == ({"team": "ops"}, "alice")


def test_a_planted_sidecar_neither_breaks_nor_claims_another_users_document(api: Api) -> None:
    tenant = _tenant()
    alice, bob = api.token(tenant, "alice"), api.token(tenant, "bob")
    # Given bob's sidecar with reserved keys planted where alice's private plan will go
    planted = _sidecar(owner="bob", visibility="shared")
    status, grant = _ask(api, bob, "plan.md.metadata.json", planted)
    assert status == 200 and _put(api, grant, planted) == 200
    # When alice uploads her private plan
    doc_id = upload(api, alice, "plan.md", PLAN, "text/markdown", visibility="private")
    # Then it is INDEXED, hers and private, with none of bob's metadata, and bob cannot see it
    document = wait_for_status(api, alice, doc_id)
    assert (document["status"], document["owner"], document["visibility"]) == ("INDEXED", "alice", "private")
    assert document["attributes"] == {}
    assert api.request("GET", f"/v1/documents/{doc_id}", token=bob).status == 404
    # And she may delete it and upload it again
    assert api.request("DELETE", f"/v1/documents/{doc_id}", token=alice).status == 204
    assert upload(api, alice, "plan.md", PLAN, "text/markdown", visibility="private") == doc_id
    assert wait_for_status(api, alice, doc_id)["status"] == "INDEXED"


def test_a_stale_upload_url_cannot_overwrite_a_document_created_since(api: Api) -> None:
    tenant = _tenant()
    alice, bob = api.token(tenant, "alice"), api.token(tenant, "bob")
    # Given a URL bob got while the path was free, then alice's private document there
    bobs = b"bob's notes"
    status, stale = _ask(api, bob, "notes.md", bobs)
    assert status == 200
    doc_id = upload(api, alice, "notes.md", PLAN, "text/markdown", visibility="private")
    before = wait_for_status(api, alice, doc_id)
    # When bob uses it, then the store answers as S3 does: 412 Precondition Failed
    reply = api.request("PUT", stale["url"], data=bobs, headers=stale["headers"])
    assert reply.status == 412 and b"<Code>PreconditionFailed</Code>" in reply.body
    # And alice's document keeps its owner, visibility and content
    after = wait_for_status(api, alice, doc_id)
    assert {k: after[k] for k in ("owner", "visibility", "content_hash", "status")} == {
        k: before[k] for k in ("owner", "visibility", "content_hash", "status")
    }
