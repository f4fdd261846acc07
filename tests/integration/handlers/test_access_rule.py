"""One access rule, every entry point: caller x document x action, on both stacks.

The expected answers are written out below, not computed from `citewise.domain.access`, so a change to the rule
fails here first. Each case runs every entry point that reads or modifies a document: the API (GET, the
original and the parsed text, search, upload request, the upload itself through ingestion, DELETE), and on
the local stack the CLI.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest

from citewise_local.cli import main as cli
from tests.integration.handlers.harness import Stack, claims, s3_notification

ALICE = claims("acme", "alice")
CALLERS = {
    "owner": ALICE,
    "colleague": claims("acme", "bob"),
    "tenant admin": claims("acme", "carol", groups="admin"),
    "other tenant's admin": claims("globex", "gina", groups="admin"),
}
# (caller, visibility of alice's document) -> (may read, may modify)
RULE: dict[tuple[str, str], tuple[bool, bool]] = {
    ("owner", "shared"): (True, True),
    ("owner", "private"): (True, True),
    ("colleague", "shared"): (True, False),
    ("colleague", "private"): (False, False),
    ("tenant admin", "shared"): (True, True),
    ("tenant admin", "private"): (False, False),
    ("other tenant's admin", "shared"): (False, False),
    ("other tenant's admin", "private"): (False, False),
}
ORIGINAL = b"# Plan\n\nThe launch moves to the heron wing in spring.\n"
CHANGED = b"# Plan\n\nThe launch moves to the osprey wing in autumn.\n"
NO_FAILURES: dict[str, list[Any]] = {"batchItemFailures": []}


def _upload_request(stack: Stack, who: dict[str, str], data: bytes) -> tuple[int, Any]:
    body = {"filename": "plan.md", "content_type": "text/markdown", "size": len(data)}
    return stack.api("POST", "/v1/uploads", body=body, identity=who)


def _ingest(stack: Stack, tenant: str) -> None:
    assert stack.ingest(s3_notification("ObjectCreated:Put", f"tenants/{tenant}/plan.md")) == NO_FAILURES


def _searchable(stack: Stack, who: dict[str, str], words: str) -> bool:
    status, body = stack.api("POST", "/v1/search", body={"query": words}, identity=who)
    assert status == 200, body
    return any(words.split()[0] in hit["chunk"]["text"] for hit in body["hits"])


def _cli(stack: Stack, who: dict[str, str], *args: str) -> int:
    """`citewise ARGS --tenant T --user U [--group G]` on the local stack's home; its exit status."""
    identity = ["--tenant", who["custom:tenant_id"], "--user", who["sub"]]
    identity += ["--group", who["cognito:groups"]] if "cognito:groups" in who else []
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return cli([*args, *identity])


@pytest.mark.parametrize(("caller", "visibility"), list(RULE), ids=[f"{c}-{v}" for c, v in RULE])
def test_every_entry_point_follows_the_one_rule(stack: Stack, caller: str, visibility: str) -> None:
    may_read, may_modify = RULE[(caller, visibility)]
    who = CALLERS[caller]
    # Given alice's document
    body = {"filename": "plan.md", "content_type": "text/markdown", "size": len(ORIGINAL), "visibility": visibility}
    status, upload = stack.api("POST", "/v1/uploads", body=body, identity=ALICE)
    assert status == 200
    stack.put_upload(upload, ORIGINAL)
    _ingest(stack, "acme")
    doc_id = upload["document_id"]

    # Read: the record, its original and parsed text, and its chunks in search (the index's own access
    # filter, on each backend)
    for read in ("", "/content", "/text"):
        assert stack.api("GET", f"/v1/documents/{doc_id}{read}", identity=who)[0] == (200 if may_read else 404)
    assert _searchable(stack, who, "heron wing") is may_read
    if stack.kind == "local":
        assert (_cli(stack, who, "docs", "show", doc_id) == 0) is may_read

    # Modify by upload: the URL is granted, and the content it carries is what gets indexed. (Another
    # tenant's caller names the same path in its own tenant: granted, and alice's document untouched.)
    status, grant = _upload_request(stack, who, CHANGED)
    own_tenant = who["custom:tenant_id"] == "acme"
    assert status == (200 if may_modify or not own_tenant else 403 if may_read else 409), grant
    if status == 200:
        stack.put_upload(grant, CHANGED)
        _ingest(stack, who["custom:tenant_id"])
    assert _searchable(stack, ALICE, "osprey wing") is may_modify
    assert _searchable(stack, ALICE, "heron wing") is not may_modify
    assert stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)[1]["owner"] == "alice"

    # Modify by an object signed for the caller that reaches the bucket anyway: ingestion decides alone
    if own_tenant:
        stack.put_object("tenants/acme/plan.md", b"# Plan\n\nA forged kestrel plan.\n", owner=who["sub"])
        _ingest(stack, "acme")
        assert _searchable(stack, ALICE, "kestrel plan") is (who["sub"] == "alice")

    # Delete: through the CLI on the local stack, else the API
    if stack.kind == "local":
        assert (_cli(stack, who, "docs", "delete", doc_id) == 0) is may_modify
    else:
        expected = 204 if may_modify else 403 if may_read else 404
        assert stack.api("DELETE", f"/v1/documents/{doc_id}", identity=who)[0] == expected
    assert (stack.api("GET", f"/v1/documents/{doc_id}", identity=ALICE)[0] == 404) is may_modify
