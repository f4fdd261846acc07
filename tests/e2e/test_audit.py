"""The audit trail end to end through `citewise serve`: requests answered by the server's threads at once
each leave one whole record in the home's `audit.jsonl`, the operator exports a tenant's trail over HTTP,
and `citewise audit` reads the same file beside the running server."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.e2e.helpers import Api, citewise_script, mint_operator, new_tenant, upload, wait_for_status

NOTE = b"# Vault\n\nThe vault opens at nine with the brass key.\n"


def _export(api: Api, operator: str, tenant: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        reply = api.request(
            "GET", f"/v1/admin/tenants/{tenant}/audit?limit=7" + (f"&cursor={cursor}" if cursor else ""), token=operator
        )
        assert reply.status == 200, reply.body
        page = reply.json()
        records += page["records"]
        cursor = page["next_cursor"]
        if cursor is None:
            return records


def test_parallel_requests_each_leave_one_record_the_operator_exports_and_the_cli_reads(api: Api) -> None:
    # Given a tenant with a document
    tenant = new_tenant()
    token = api.token(tenant, "alice")
    doc_id = upload(api, token, "vault.md", NOTE, "text/markdown")
    assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"

    # When 24 searches and document reads arrive at once
    def ask(n: int) -> str:
        if n % 2:
            reply = api.request("POST", "/v1/search", token=token, json_body={"query": f"vault {n}"})
        else:
            reply = api.request("GET", f"/v1/documents/{doc_id}", token=token)
        assert reply.status == 200, reply.body
        return reply.headers["x-amzn-requestid"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        request_ids = set(pool.map(ask, range(24)))

    # Then the operator's export holds one record of each, with the document's id and no text
    records = _export(api, mint_operator(api, "ops"), tenant)
    answered = [r for r in records if r["request_id"] in request_ids]
    assert len(answered) == 24 and {r["request_id"] for r in answered} == request_ids
    assert {r["action"] for r in answered} == {"search", "document.get"}
    assert all(r["resources"] == [doc_id] and r["outcome"] == "ok" for r in answered)
    assert "brass" not in json.dumps(records)

    # And `citewise audit` reads the same trail beside the running server
    done = subprocess.run(
        [citewise_script(), "audit", "--home", str(api.home), "--tenant", tenant, "--action", "search", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=api.env,
    )
    searched = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(searched) == 12 and all(r["tenant_id"] == tenant for r in searched)
