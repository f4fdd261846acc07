"""Swagger UI at /v1/docs in a real headless browser: it renders from the bundled assets with no request
leaving the machine, authorises with a token from `citewise token`, and "Try it out" -> Execute with the
pre-filled examples gets each route's documented success.

The browser is Debian's Chromium (`make test` installs it; never `playwright install`, which downloads a
browser build of its own), driven by Playwright. Without Chromium the test fails: a skipped browser test
would pass the suite without ever looking at the page.
"""

from __future__ import annotations

import ipaddress
import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import BrowserContext, Page, Request, Route

from tests.e2e.helpers import Api, settle_source, upload, wait_for_status

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
# What a route answers with its pre-filled example: its documented success. Deleting a document
# answers 204 with no body.
SUCCESS = {
    operation["operationId"]: min(code for code in operation["responses"] if code.startswith("2"))
    for path in json.loads(DOCUMENT.read_text())["paths"].values()
    for operation in path.values()
}
# The operator's routes refuse every tenant identity, this tenant admin's included (docs/operations.md).
OPERATOR_ONLY = {
    operation["operationId"]
    for path, operations in json.loads(DOCUMENT.read_text())["paths"].items()
    if path.startswith("/v1/admin/")
    for operation in operations.values()
}
# Executed in this order: the document routes last, deleting after reading; then the operator's.
ORDER = ["health", "openapi", "createUpload", "query", "search", "listDocuments", "getTenantSettings"]
ORDER += ["replaceTenantSettings", "getUsage", "createCredential", "listCredentials", "revokeCredential"]
ORDER += ["listSources", "createSource", "getSource", "getSourceStats", "deleteSource", "refreshSource"]
ORDER += ["listConversations", "getConversation", "giveFeedback", "deleteConversation"]
ORDER += ["getDocument", "getDocumentText", "getDocumentContent", "deleteDocument", *sorted(OPERATOR_ONLY)]


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _authorize(page: Page, token: str) -> None:
    page.click("button.authorize")
    dialog = page.locator(".modal-ux")
    dialog.locator("input").fill(token)
    dialog.locator("button.authorize").click()
    dialog.locator("button.btn-done").click()


def _execute(page: Page, operation_id: str, path_id: str, body: str | None = None) -> str:
    """Open the operation, "Try it out", fill a path id (and the body, where the schema's example would not
    name anything of the tenant's), Execute: the status Swagger UI shows. Closed again after, so the page
    does not grow with every response it renders."""
    block = page.locator(f"div.opblock[id$='-{operation_id}']")
    summary = block.locator(".opblock-summary").first
    summary.click()
    block.locator("button.try-out__btn").click()
    for name, value in (("id", path_id), ("tenant_id", "acme")):
        field = block.locator(f"tr[data-param-name='{name}'] input")
        if field.count():
            field.fill(value)
    if body is not None:
        block.locator("textarea.body-param__text").fill(body)
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table td.response-col_status:not(.col_header)")
    shown = status.inner_text().strip()
    summary.click()
    return shown


def test_swagger_ui_renders_offline_authorizes_and_tries_every_route(
    api: Api, browser: BrowserContext, tmp_path: Path
) -> None:
    # Given a tenant admin's token and one indexed document (the routes with an {id} need one)
    token = api.token(f"t-{uuid.uuid4().hex[:12]}", "alice", "admin")
    doc_id = upload(api, token, "ops/runbook.md", b"# Runbook\n\nRedrive the dead letters.\n", "text/markdown")
    assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
    # And a credential of the tenant's programs, for the revoke route's {id}
    created = api.request("POST", "/v1/credentials", token=token, json_body={"name": "swagger", "user": "bot"})
    credential_id = created.json()["credential"]["credential_id"]
    asked = api.request("POST", "/v1/query", token=token, json_body={"query": "What do I redrive?"})
    conversation_id = asked.json()["conversation"]["conversation_id"]
    response_id = asked.json()["conversation"]["response_id"]
    # And two web sources: one to read and refresh, one to delete (a source being refreshed is not deleted)
    read, deleted = (
        api.request(
            "POST", "/v1/sources", token=token, json_body={"kind": "urls", "urls": [f"https://docs.example.com/{n}"]}
        ).json()["source_id"]
        for n in range(2)
    )
    for source_id in (read, deleted):
        settle_source(api, token, source_id)
    # And a browser that may reach nothing but this machine
    left_the_machine: list[str] = []

    def only_loopback(route: Route, request: Request) -> None:
        if _is_loopback(request.url):
            route.continue_()
        else:
            left_the_machine.append(request.url)
            route.abort()

    browser.route("**/*", only_loopback)
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    statuses: dict[str, Any] = {}
    try:
        # When the docs page loads
        page.goto(f"{api.url}/v1/docs")
        # Then Swagger UI renders every operation of the OpenAPI document
        page.locator("div.opblock").first.wait_for()
        rendered = page.locator("div.opblock").evaluate_all("blocks => blocks.map(block => block.id)")
        assert sorted(name.rsplit("-", 1)[-1] for name in rendered) == sorted(SUCCESS)
        assert set(ORDER) == set(SUCCESS)
        # And, authorised with the token, every tenant route's "Try it out" gets its documented success,
        # and each operator's route answers the tenant admin 403
        _authorize(page, token)
        ids = {"revokeCredential": credential_id, "getConversation": conversation_id}
        ids["deleteConversation"] = conversation_id
        ids |= {"getSource": read, "refreshSource": read, "deleteSource": deleted, "getSourceStats": "ops"}
        bodies = {
            "createSource": json.dumps({"kind": "urls", "urls": ["https://docs.example.com/new"]}),
            "giveFeedback": json.dumps({"response_id": response_id, "helpful": True}),
        }
        statuses = {
            operation: _execute(page, operation, ids.get(operation, doc_id), bodies.get(operation))
            for operation in ORDER
        }
        assert statuses == {op: "403" if op in OPERATOR_ONLY else code for op, code in SUCCESS.items()}
        # And the page never reached beyond loopback nor logged an error
        assert left_the_machine == []
        # (but the 403s the operator's routes answered, which the browser logs)
        forbidden = "Failed to load resource: the server responded with a status of 403 (Forbidden)"
        assert errors == [forbidden] * len(OPERATOR_ONLY)
    except BaseException:
        shot = tmp_path / "swagger-ui.png"
        page.screenshot(path=shot, full_page=True)
        print(f"screenshot: {shot}; statuses: {statuses}; console errors: {errors}")
        raise
