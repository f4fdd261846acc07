"""`citewise.client` never hands its bearer token to another origin: two real HTTP servers on two ports of
127.0.0.1 (two origins), the first answering every redirect status towards the second or towards itself.

Local sockets only (no network): the same standard-library server the client is meant to talk HTTP to.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from citewise.client import CitewiseClient, CitewiseClientError, _origin

TOKEN = "secret-token-7"  # noqa: S105 - a test value
REDIRECTS = (301, 302, 303, 307, 308)
HEALTH = json.dumps({"status": "ok", "version": "test"}).encode()
EMPTY_PAGE = json.dumps({"items": [], "next_cursor": None}).encode()


@dataclass
class Origin:
    """One server: what it saw (method, path, Authorization header) and where it redirects to."""

    server: ThreadingHTTPServer
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    redirect: tuple[int, str] | None = None  # (status, origin) of the Location of its first answer

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    origins: ClassVar[dict[int, Origin]] = {}

    def _serve(self) -> None:
        origin = self.origins[self.server.server_address[1]]
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        origin.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if origin.redirect is not None:
            status, location = origin.redirect
            origin.redirect = None
            self.send_response(status)
            self.send_header("Location", location + "/landed" + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = EMPTY_PAGE if "/documents" in self.path else HEALTH
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """Quiet: the test reads what each server saw, not its log."""


def _start() -> Origin:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    origin = Origin(server)
    _Handler.origins[server.server_address[1]] = origin
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return origin


@pytest.fixture
def origins() -> Iterator[tuple[Origin, Origin]]:
    """Two servers, two origins (same host, two ports), stopped after the test."""
    first, second = _start(), _start()
    yield first, second
    for origin in (first, second):
        origin.server.shutdown()
        origin.server.server_close()
        del _Handler.origins[origin.server.server_address[1]]


def _tokens(origin: Origin) -> list[str | None]:
    return [authorization for _, _, authorization in origin.seen]


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_get_redirected_to_another_origin_arrives_there_without_the_token(
    origins: tuple[Origin, Origin], status: int
) -> None:
    # Given an API whose routes redirect to another origin
    api, elsewhere = origins
    api.redirect = (status, elsewhere.url)
    # When the client reads through it
    CitewiseClient(api.url, TOKEN).list_documents()
    # Then the token reached the API, and the redirect was followed without it
    assert _tokens(api) == [f"Bearer {TOKEN}"]
    assert elsewhere.seen and _tokens(elsewhere) == [None]


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_post_redirected_to_another_origin_never_carries_the_token_there(
    origins: tuple[Origin, Origin], status: int
) -> None:
    # Given an API whose routes redirect to another origin
    api, elsewhere = origins
    api.redirect = (status, elsewhere.url)
    client = CitewiseClient(api.url, TOKEN)
    # When a POST is redirected: urllib turns a 301/302/303 into a GET, and refuses to repeat a POST on a
    # 307/308 (it would send the body again), which the client reports as that status
    if status in (307, 308):
        with pytest.raises(CitewiseClientError) as caught:
            client.query("q")
        assert caught.value.status == status
        # Then nothing reached the other origin
        assert elsewhere.seen == []
    else:
        with pytest.raises(CitewiseClientError, match="UNEXPECTED_RESPONSE"):  # the other server's answer
            client.query("q")
        # Then the other origin saw the GET urllib made of it, without the token
        assert elsewhere.seen == [("GET", "/landed/v1/query", None)]
    assert _tokens(api) == [f"Bearer {TOKEN}"]


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_redirect_within_the_origin_keeps_the_token(origins: tuple[Origin, Origin], status: int) -> None:
    # Given an API that moves its routes within its own origin
    api, _ = origins
    api.redirect = (status, api.url)
    # When the client reads through it
    CitewiseClient(api.url, TOKEN).list_documents()
    # Then both requests carried the token: same scheme, host and port
    assert [path.startswith("/landed") for _, path, _ in api.seen] == [False, True]
    assert _tokens(api) == [f"Bearer {TOKEN}"] * 2


def test_a_chain_that_leaves_the_origin_and_comes_back_does_not_get_the_token_back(
    origins: tuple[Origin, Origin],
) -> None:
    # Given an API redirecting elsewhere, and elsewhere redirecting back to the API
    api, elsewhere = origins
    api.redirect = (302, elsewhere.url)
    elsewhere.redirect = (302, api.url)
    # When the client follows the chain
    CitewiseClient(api.url, TOKEN).list_documents()
    # Then only the first request carried the token: once dropped, it is not put back
    assert _tokens(api) == [f"Bearer {TOKEN}", None] and _tokens(elsewhere) == [None]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("http://h:80/a", "http://H/b", True),
        ("https://h/a", "https://h:443/b?x", True),
        ("https://h/a", "http://h/a", False),  # a downgrade is another origin
        ("http://h/a", "http://h:8080/a", False),
        ("http://h/a", "http://g/a", False),
        ("http://h/a", "http://h:bad/a", False),
    ],
)
def test_an_origin_is_scheme_host_and_port(first: str, second: str, same: bool) -> None:
    assert (_origin(first) == _origin(second)) is same


def test_credentials_in_the_url_are_refused_so_no_message_can_repeat_them() -> None:
    with pytest.raises(ValueError, match="user or password"):
        CitewiseClient("http://alice:hunter2@127.0.0.1:1", TOKEN)


def test_a_connection_error_names_the_host_and_never_the_token() -> None:
    # Given a port nothing listens on (bound, then closed)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    server.server_close()
    # When the client cannot reach it
    with pytest.raises(CitewiseClientError) as caught:
        CitewiseClient(f"http://127.0.0.1:{port}", TOKEN, timeout=2).health()
    # Then the error says where, and carries no credential
    assert caught.value.code == "CONNECTION_ERROR" and f"127.0.0.1:{port}" in str(caught.value)
    assert TOKEN not in str(caught.value) and TOKEN not in repr(caught.value.details)
