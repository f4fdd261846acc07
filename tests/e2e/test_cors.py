"""CORS in a real headless browser: a page served from an allowed origin calls `citewise serve
--cors-origin ORIGIN` with a token and reads the JSON (successes, the functions' errors, the server's own
401, the MCP endpoint); a page from another origin cannot read anything.

The pages come from two small HTTP servers on this machine, on two ports: two origins. The browser is
Debian's Chromium driven by Playwright, as in test_swagger_ui.py.
"""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import BrowserContext

from tests.e2e.helpers import Api, serve, server_environment

PAGE = b"<!doctype html><html><head><title>app</title></head><body>app</body></html>"
# Runs in the page: one fetch, and what the page could read of its answer.
FETCH = """async ([url, options]) => {
  try {
    const response = await fetch(url, options);
    return {status: response.status, body: await response.json()};
  } catch (error) {
    return {error: String(error)};
  }
}"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Quiet."""


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """(allowed, other): two origins on this machine, each serving a blank page."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Page) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tuple(f"http://127.0.0.1:{server.server_address[1]}" for server in servers)  # type: ignore[misc]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def cors_api(tmp_path_factory: pytest.TempPathFactory, origins: tuple[str, str]) -> Iterator[Api]:
    """`citewise serve --cors-origin <allowed>`, stopped at the end."""
    root = tmp_path_factory.mktemp("cors")
    server = serve(root / "home", root / "server.log", server_environment(root / "home"), "--cors-origin", origins[0])
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)


def fetch_from(browser: BrowserContext, origin: str, url: str, **options: Any) -> dict[str, Any]:
    """`fetch(url, options)` run by a page of `origin`: {status, body} if the page could read the JSON,
    else {error}."""
    page = browser.new_page()
    try:
        page.goto(origin + "/")
        return dict(page.evaluate(FETCH, [url, options]))
    finally:
        page.close()


def test_a_page_on_an_allowed_origin_reads_the_api_and_another_cannot(
    cors_api: Api, browser: BrowserContext, origins: tuple[str, str]
) -> None:
    allowed, other = origins
    token = cors_api.token(f"t-{uuid.uuid4().hex[:12]}", "alice")
    bearer = {"Authorization": f"Bearer {token}"}
    json_post = {"method": "POST", "headers": {**bearer, "Content-Type": "application/json"}}
    # When a page of the allowed origin lists the documents and searches (both preflighted: a token, JSON)
    listed = fetch_from(browser, allowed, f"{cors_api.url}/v1/documents", headers=bearer)
    searched = fetch_from(browser, allowed, f"{cors_api.url}/v1/search", body='{"query": "tea"}', **json_post)
    # Then it reads their JSON
    assert listed == {"status": 200, "body": {"items": [], "next_cursor": None}}
    assert searched["status"] == 200 and searched["body"]["hits"] == []
    # And it reads the errors too: a function's (404) and the server's own (401, no token)
    missing = fetch_from(browser, allowed, f"{cors_api.url}/v1/documents/{'0' * 32}", headers=bearer)
    assert missing["status"] == 404 and missing["body"]["error"]["code"] == "NOT_FOUND"
    anonymous = fetch_from(browser, allowed, f"{cors_api.url}/v1/documents")
    assert anonymous["status"] == 401 and anonymous["body"]["error"]["code"] == "UNAUTHORIZED"
    # And the MCP endpoint's answer
    ping = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    assert fetch_from(browser, allowed, f"{cors_api.url}/mcp", body=ping, **json_post) == {
        "status": 200,
        "body": {"jsonrpc": "2.0", "id": 1, "result": {}},
    }
    # When a page of another origin asks the same, with the same token
    for url, options in [
        (f"{cors_api.url}/v1/documents", {"headers": bearer}),
        (f"{cors_api.url}/v1/search", {"body": '{"query": "tea"}', **json_post}),
        (f"{cors_api.url}/v1/health", {}),
    ]:
        # Then the browser lets it read nothing
        assert fetch_from(browser, other, url, **options) == {"error": "TypeError: Failed to fetch"}, url
