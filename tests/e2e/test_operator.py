"""The platform operator end to end through `citewise serve`: `citewise token --operator`, the tenants'
listing, and the wall between the operator and the tenants in both directions."""

from __future__ import annotations

from typing import Any

from tests.e2e.helpers import Api, mint_operator, new_tenant, upload, wait_for_status

NOTE = b"# Note\n\nThe vault opens at nine.\n"


def _all_tenants(api: Api, token: str) -> list[str]:
    """Every tenant the operator's listing gives, page by page (the session's server has other tests' too)."""
    tenants: list[str] = []
    cursor: str | None = None
    while True:
        reply = api.request("GET", "/v1/admin/tenants?limit=3" + (f"&cursor={cursor}" if cursor else ""), token=token)
        assert reply.status == 200, reply.body
        page: dict[str, Any] = reply.json()
        assert len(page["items"]) <= 3
        tenants += [item["tenant_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return tenants


def test_the_operator_lists_tenants_and_is_walled_off_from_their_data(api: Api) -> None:
    # Given two tenants whose ids share a prefix, each with an indexed document
    first = new_tenant()
    second = f"{first}-eu"
    for tenant in (first, second):
        token = api.token(tenant, "alice")
        assert wait_for_status(api, token, upload(api, token, "note.md", NOTE, "text/markdown"))["status"] == "INDEXED"
    operator = mint_operator(api, "ops")

    # When the operator pages through the tenants, then both are there, once each, in id order
    tenants = _all_tenants(api, operator)
    assert tenants == sorted(tenants) and len(tenants) == len(set(tenants))
    assert {first, second} <= set(tenants)

    # A tenant's admin is refused the operator's route, with the structured error
    reply = api.request("GET", "/v1/admin/tenants", token=api.token(first, "carol", "admin"))
    assert reply.status == 403, reply.body
    error = reply.json()["error"]
    assert error["code"] == "FORBIDDEN" and error["request_id"] == reply.headers["x-amzn-requestid"]

    # And the operator reads no tenant's data: no search, no listing, no settings
    for method, path, body in (
        ("POST", "/v1/search", {"query": "vault"}),
        ("POST", "/v1/query", {"query": "When does the vault open?"}),
        ("GET", "/v1/documents", None),
        ("GET", "/v1/settings", None),
    ):
        reply = api.request(method, path, token=operator, json_body=body)
        assert reply.status == 403, (path, reply.body)
        assert reply.json()["error"]["code"] == "FORBIDDEN", path


def test_without_a_token_the_operators_route_is_401(api: Api) -> None:
    reply = api.request("GET", "/v1/admin/tenants")
    assert reply.status == 401 and reply.json()["error"]["code"] == "UNAUTHORIZED"


def test_the_operator_erases_a_tenant_over_http_and_reads_the_receipt(api: Api) -> None:
    # Given two tenants whose ids share a prefix, each with an indexed document
    first = new_tenant()
    second = f"{first}-eu"
    for tenant in (first, second):
        token = api.token(tenant, "alice")
        assert wait_for_status(api, token, upload(api, token, "note.md", NOTE, "text/markdown"))["status"] == "INDEXED"
    operator = mint_operator(api, "ops")
    # When the operator erases the first (locally the job runs within the request)
    reply = api.request("POST", f"/v1/admin/tenants/{first}/erasure", token=operator)
    # Then it is accepted and, read again, its receipt shows every store emptied
    assert reply.status == 202, reply.body
    reply = api.request("GET", f"/v1/admin/tenants/{first}/erasure", token=operator)
    receipt = reply.json()
    assert reply.status == 200 and receipt["status"] == "ERASED" and receipt["requested_by"] == "ops"
    assert all(part["remaining"] == 0 for part in receipt["stores"] if not part["kept"])
    # And the erased tenant finds nothing, its neighbour still finds its note, and the tenant's admin is refused
    found = api.request("POST", "/v1/search", token=api.token(first, "alice"), json_body={"query": "vault"})
    assert found.status == 200 and found.json()["hits"] == []
    found = api.request("POST", "/v1/search", token=api.token(second, "alice"), json_body={"query": "vault"})
    assert found.status == 200 and len(found.json()["hits"]) == 1
    admin = api.token(second, "carol", "admin")
    assert api.request("POST", f"/v1/admin/tenants/{second}/erasure", token=admin).status == 403
