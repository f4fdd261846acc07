"""/v1/sources through the documents function, on the local stack and on the AWS adapters (every AWS call
held to the function's role): who may register, read, refresh and remove; bad URLs named; one refresh at
a time; removal removes the documents a refresh stored."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from citewise.domain.sources import page_path
from citewise.ingest.sources import start_refresh
from citewise.runtime.services import Services
from citewise.runtime.settings import load_settings
from tests.doubles.web import FakeSite, Page, html
from tests.integration.handlers.harness import Stack, claims
from tests.unit.test_source_refresh import Queue

ADMIN = claims("acme", "carol", groups="admin")
MEMBER = claims("acme", "bob")
OTHER_ADMIN = claims("globex", "gina", groups="admin")
PAGE = "https://docs.example.com/3.12/intro.html"
SPEC = {"kind": "urls", "urls": [PAGE], "category": "official_docs", "version_template": "/{version}/"}


def register(stack: Stack, body: dict[str, Any] = SPEC, who: dict[str, str] = ADMIN) -> tuple[int, Any]:
    return stack.api("POST", "/v1/sources", body=body, identity=who)


@pytest.mark.parametrize("stack", ["local", "s3vectors"], indirect=True)
def test_an_admin_registers_members_read_and_other_tenants_see_nothing(stack: Stack) -> None:
    # When the tenant admin registers a source
    status, source = register(stack)
    assert status == 201, source
    assert source["spec"]["category"] == "official_docs" and source["created_by"] == "carol"
    source_id = source["source_id"]
    # Then every member lists and reads it; another tenant's admin finds nothing
    status, listed = stack.api("GET", "/v1/sources", identity=MEMBER)
    assert status == 200 and [s["source_id"] for s in listed["items"]] == [source_id]
    assert stack.api("GET", f"/v1/sources/{source_id}", identity=MEMBER)[0] == 200
    assert stack.api("GET", "/v1/sources", identity=OTHER_ADMIN)[1] == {"items": []}
    assert stack.api("GET", f"/v1/sources/{source_id}", identity=OTHER_ADMIN)[0] == 404
    for method, path in (("DELETE", f"/v1/sources/{source_id}"), ("POST", f"/v1/sources/{source_id}/refresh")):
        assert stack.api(method, path, identity=OTHER_ADMIN)[0] == 404
        # And a member who is no admin may not change it
        status, body = stack.api(method, path, identity=MEMBER)
        assert (status, body["error"]["code"]) == (403, "FORBIDDEN")
    assert register(stack, who=MEMBER)[0] == 403


@pytest.mark.parametrize("stack", ["local", "s3vectors"], indirect=True)
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://user:secret@docs.example.com/", "credentials"),
        ("http://169.254.169.254/latest/meta-data/", "private_address"),
        ("http://127.0.0.1:8080/", "private_address"),
        ("http://[fd00::1]/", "malformed"),
        ("http://10.0.0.8/", "private_address"),
    ],
)
def test_a_bad_url_is_400_naming_the_reason(stack: Stack, url: str, reason: str) -> None:
    status, body = register(stack, {"kind": "sitemap", "url": url})
    assert status == 400, body
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["request_id"]
    # the reason: the address check's `details.reason`, or the syntax check's message for the field
    details = body["error"]["details"]
    assert details.get("reason") == reason or reason in details["errors"][0]["msg"], body


@pytest.mark.parametrize("stack", ["local"], indirect=True)
def test_a_non_http_scheme_is_400(stack: Stack) -> None:
    status, body = register(stack, {"kind": "urls", "urls": ["file:///etc/passwd"]})
    assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR"
    assert "scheme" in body["error"]["details"]["errors"][0]["msg"]


@pytest.mark.parametrize("stack", ["local", "s3vectors"], indirect=True)
def test_a_second_refresh_is_409_and_removal_waits_for_the_run(stack: Stack) -> None:
    source_id = register(stack)[1]["source_id"]
    status, queued = stack.api("POST", f"/v1/sources/{source_id}/refresh", identity=ADMIN)
    assert status == 202, queued
    assert queued["running"]["run"]["run_id"]
    status, body = stack.api("POST", f"/v1/sources/{source_id}/refresh", identity=ADMIN)
    assert (status, body["error"]["code"]) == (409, "REFRESH_RUNNING")
    status, body = stack.api("DELETE", f"/v1/sources/{source_id}", identity=ADMIN)
    assert (status, body["error"]["code"]) == (409, "REFRESH_RUNNING")


@pytest.mark.parametrize("stack", ["local", "s3vectors"], indirect=True)
def test_removing_a_source_removes_the_documents_its_refresh_stored(stack: Stack) -> None:
    # Given a source refreshed once: its page is stored in the tenant's blob store (and, locally, indexed)
    source_id = register(stack)[1]["source_id"]
    site = FakeSite({PAGE: Page(html("Intro", "The walrus operator arrived in 3.8."))})
    services = Services(load_settings(), page_fetcher=site)
    queue = Queue()
    start_refresh(services.sources, queue, "acme", source_id, now=datetime.now(UTC))
    run = services.refresher().run(queue.sent[0])
    assert run is not None and run.summary.new == 1
    key = f"tenants/acme/{page_path(source_id, PAGE, 'html')}"
    assert b"walrus" in stack.read_object(key)
    if stack.kind == "local":  # stored and ingested by the same pipeline as an upload
        status, listed = stack.api("GET", "/v1/documents", identity=MEMBER)
        assert [d["path"] for d in listed["items"]] == [page_path(source_id, PAGE, "html")]
        assert listed["items"][0]["attributes"]["version"] == "3.12"
    # When the admin removes the source
    assert stack.api("DELETE", f"/v1/sources/{source_id}", identity=ADMIN)[0] == 204
    # Then its page's object is gone (on AWS the bucket's notification then removes the document)
    with pytest.raises(Exception):  # noqa: B017, PT011 - S3's NoSuchKey or the local store's NotFoundError
        stack.read_object(key)
    assert stack.api("GET", f"/v1/sources/{source_id}", identity=ADMIN)[0] == 404
    if stack.kind == "local":
        assert stack.api("GET", "/v1/documents", identity=MEMBER)[1]["items"] == []
