"""Web sources through `citewise serve`: Python 3.11's documentation served on 127.0.0.1 (tests/doubles/
docsite.py, under `/3.11/`), a server started with CITEWISE_WEB_ALLOW_LOOPBACK, its refresh loop fetching
the pages and its ingest queue indexing them, driven over HTTP as a tenant's admin and members would.

The loopback switch is the server's alone: its functions' settings refuse it, as on Lambda, so the
documents function still answers 400 to a source on 127.0.0.1, and the test's admin registers the site
with `citewise sources add` on the server's home (whose settings take the switch). tests/integration/
test_sources_docsite.py covers the rest of what a refresh makes of the site (caps, robots.txt, the slow and
the huge page, gone pages) without a server."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.doubles.docsite import DocSite
from tests.e2e.helpers import Api, citewise_script, new_tenant, serve, server_environment
from tests.integration.test_sources_docsite import PAGES, VERSION, versioned_site

pytestmark = pytest.mark.slow
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocSite]:
    with versioned_site(tmp_path_factory.mktemp("docsite")) as served:
        yield served


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`citewise serve` with the loopback switch and no politeness delay (the site is the test's)."""
    root = tmp_path_factory.mktemp("serve")
    home = root / "home"
    env = server_environment(home) | {"CITEWISE_WEB_ALLOW_LOOPBACK": "true", "CITEWISE_WEB_HOST_DELAY": "0"}
    running = serve(home, root / "server.log", env)
    try:
        yield running
    finally:
        running.process.send_signal(signal.SIGTERM)
        status = running.process.wait(timeout=30)
    assert status == 0, running.log.read_text()[-3000:]  # stopped cleanly, its refresh thread with it


def _add(server: Api, tenant: str, *options: str) -> dict[str, Any]:
    """`citewise sources add --tenant T ... --json` on the server's home."""
    done = subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), "sources", "add", "--tenant", tenant, *options, "--json"],
        env=server.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _start(server: Api, token: str, source_id: str) -> str:
    """POST the refresh; the id of the run that holds the source. A source just added is due at once, so
    the server's own loop may have started its first refresh a moment before: then the POST is refused
    with 409 naming that run, which does the same work."""
    asked = server.request("POST", f"/v1/sources/{source_id}/refresh", token=token)
    if asked.status == 409:
        assert asked.json()["error"]["code"] == "REFRESH_RUNNING", asked.body
        return str(asked.json()["error"]["details"]["run_id"])
    assert asked.status == 202, asked.body
    return str(asked.json()["running"]["run"]["run_id"])


def _refresh(server: Api, token: str, source_id: str) -> dict[str, Any]:
    """Start a refresh (`_start`), then wait until it ended; the run."""
    run_id = _start(server, token, source_id)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        source = server.request("GET", f"/v1/sources/{source_id}", token=token).json()
        if source["last_run"] is not None and source["last_run"]["run_id"] == run_id:
            return dict(source["last_run"])
        time.sleep(0.1)
    pytest.fail(f"the refresh of {source_id} did not end within {TIMEOUT_S}s")


def _documents(server: Api, token: str, source_id: str, count: int) -> dict[str, dict[str, Any]]:
    """The source's documents by URL, once there are `count` of them and none is waiting for ingestion."""
    deadline = time.monotonic() + TIMEOUT_S
    items: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        reply = server.request("GET", f"/v1/documents?path_prefix=sources/{source_id}/&limit=100", token=token)
        assert reply.status == 200, reply.body
        items = reply.json()["items"]
        if len(items) == count and all(item["status"] in ("INDEXED", "FAILED") for item in items):
            return {item["attributes"]["url"]: item for item in items}
        time.sleep(0.1)
    pytest.fail(f"expected {count} settled documents of {source_id}, found {items}")


def test_a_docs_site_is_served_as_a_tenants_fresh_sources(server: Api, site: DocSite) -> None:
    tenant = new_tenant()
    admin, member = server.token(tenant, "carol", "admin"), server.token(tenant, "dave")
    # A source on 127.0.0.1 is refused by the API: its functions never take the loopback switch
    refused = server.request(
        "POST", "/v1/sources", token=admin, json_body={"kind": "sitemap", "url": f"{site.url}/sitemap.xml"}
    )
    assert refused.status == 400 and refused.json()["error"]["details"]["reason"] == "private_address"
    # Given the site's sitemap registered on the server's home, its version read from the URL
    source = _add(
        server, tenant, "--sitemap", f"{site.url}/sitemap.xml", "--category", "official_docs",
        "--version-template", "/{version}/",
    )  # fmt: skip
    source_id = source["source_id"]
    listed = server.request("GET", "/v1/sources", token=member)
    assert [item["source_id"] for item in listed.json()["items"]] == [source_id]

    # When an admin refreshes it through the API
    first = _refresh(server, admin, source_id)
    # Then its pages are documents of the tenant, indexed, with their source, URL, category and version
    assert first["summary"]["new"] == len(PAGES) and first["summary"]["failed"] == 0
    documents = _documents(server, member, source_id, len(PAGES))
    assert sorted(documents) == sorted(f"{site.url}/{page}" for page in PAGES)
    for url, document in documents.items():
        assert document["status"] == "INDEXED" and document["source"] == "official_docs"
        assert {key: document["attributes"][key] for key in ("source_id", "url", "category", "version")} == {
            "source_id": source_id,
            "url": url,
            "category": "official_docs",
            "version": VERSION,
        }
    # And a member's question is answered citing a page of the site
    question = {"query": "How do I decode a JSON document into a Python object?"}
    answer = server.request("POST", "/v1/query", token=member, json_body=question).json()
    json_page = documents[f"{site.url}/{VERSION}/library/json.html"]
    assert answer["grounded"] and answer["citations"][0]["doc_id"] == json_page["doc_id"], answer

    # When it is refreshed again with nothing changed: one conditional request per page, all 304
    site.requests.clear()
    second = _refresh(server, admin, source_id)
    pages = [request for request in site.requests if request.path != "/sitemap.xml"]
    assert len(pages) == len(PAGES) and {request.status for request in pages} == {304}
    assert second["summary"]["not_modified"] == len(PAGES) and second["summary"]["bytes"] == 0
    versions = {url: document["version"] for url, document in documents.items()}
    assert {url: doc["version"] for url, doc in _documents(server, member, source_id, len(PAGES)).items()} == versions

    # When one page changes: it alone is stored and indexed again
    changed = f"/{VERSION}/library/csv.html"
    site.change(changed)
    third = _refresh(server, admin, source_id)
    assert (third["summary"]["changed"], third["summary"]["not_modified"]) == (1, len(PAGES) - 1)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        now = {url: doc["version"] for url, doc in _documents(server, member, source_id, len(PAGES)).items()}
        if now != versions:
            break
        time.sleep(0.1)
    assert [url for url in versions if now[url] != versions[url]] == [site.url + changed]

    # And another tenant sees none of it
    intruder = server.token(new_tenant(), "carol", "admin")
    assert server.request("GET", "/v1/sources", token=intruder).json()["items"] == []
    assert server.request("GET", f"/v1/sources/{source_id}", token=intruder).status == 404
    assert server.request("POST", f"/v1/sources/{source_id}/refresh", token=intruder).status == 404
    assert server.request("DELETE", f"/v1/sources/{source_id}", token=intruder).status == 404
    elsewhere = server.request("POST", "/v1/query", token=intruder, json_body=question).json()
    assert elsewhere["citations"] == []

    # When the admin removes the source: every document it brought goes
    assert server.request("DELETE", f"/v1/sources/{source_id}", token=admin).status == 204
    _documents(server, member, source_id, 0)
    assert server.request("GET", f"/v1/sources/{source_id}", token=member).status == 404


def test_a_second_refresh_while_one_runs_is_refused(server: Api, site: DocSite) -> None:
    # Given a source whose one page answers slowly
    tenant = new_tenant()
    admin = server.token(tenant, "carol", "admin")
    site.slow_seconds = 3.0
    source_id = _add(server, tenant, "--url", f"{site.url}/slow.html")["source_id"]
    # When a refresh is asked while the first still runs
    first = _start(server, admin, source_id)
    second = server.request("POST", f"/v1/sources/{source_id}/refresh", token=admin)
    # Then the second is refused, naming the run that holds the source
    assert second.status == 409 and second.json()["error"]["code"] == "REFRESH_RUNNING"
    assert second.json()["error"]["details"]["run_id"] == first
