"""The web fetcher over real HTTP against the documentation site double (tests/doubles/docsite.py).

Two fetchers: one with the local-only loopback switch, which talks to the site at its 127.0.0.1 URL; and
one without it, as on Lambda, for which the site is `docs.example`: its resolver answers a public address
and the socket layer (urllib3's `create_connection`, patched) carries that one address, and no other, to
the site, so every check runs as it would on the internet and no byte leaves the machine.
"""

from __future__ import annotations

import email.utils
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3.util.connection

from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher
from citewise.ports.web import FetchOutcome, Validators
from tests.doubles.docsite import DocSite

PUBLIC_ADDRESS = "93.184.216.34"
HOST = "docs.example"
PAGES = {
    "index.html": "<html><head><title>Index</title></head><body><p>Start here.</p>"
    '<a href="guide/intro.html">Intro</a></body></html>',
    "guide/intro.html": "<html><head><title>Intro</title></head><body><h1>Intro</h1><p>Hello.</p></body></html>",
    "guide/gone.html": "<html><body><p>Soon gone.</p></body></html>",
}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[DocSite]:
    for name, text in PAGES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    with DocSite(tmp_path) as served:
        served.slow_seconds = 3.0
        yield served


class Sleeps:
    """A `sleep` that records and returns at once: politeness is checked by what it asks to wait."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def local_fetcher(**limits: Any) -> WebPageFetcher:
    return WebPageFetcher(allow_loopback=True, limits=FetchLimits(**{"host_delay": 0.0, **limits}))


class PublicRoute:
    """`docs.example` resolves to a public address; the socket layer carries that address to the site."""

    def __init__(self, site: DocSite, answers: Callable[[int], list[str]] | None = None) -> None:
        self.site = site
        self.answers = answers or (lambda _: [PUBLIC_ADDRESS])
        self.resolved: list[str] = []
        self.connected: list[tuple[str, int]] = []

    def resolve(self, host: str, port: int) -> list[str]:
        if host != HOST:
            raise socket.gaierror(f"{host} is not in this test's DNS")
        self.resolved.append(host)
        return self.answers(len(self.resolved))

    def connect(self, address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        self.connected.append(address)
        if address != (PUBLIC_ADDRESS, 80):
            raise OSError(f"the test's network has no route to {address}")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", int(self.site.url.rsplit(":", 1)[1])))  # a literal: no look-up
        return sock


@pytest.fixture
def route(site: DocSite, monkeypatch: pytest.MonkeyPatch) -> PublicRoute:
    public = PublicRoute(site)
    monkeypatch.setattr(urllib3.util.connection, "create_connection", public.connect)

    def no_second_resolution(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"something resolved {args[0]!r} again")

    monkeypatch.setattr(socket, "getaddrinfo", no_second_resolution)
    return public


def public_fetcher(route: PublicRoute, **limits: Any) -> WebPageFetcher:
    return WebPageFetcher(resolver=route.resolve, limits=FetchLimits(**{"host_delay": 0.0, **limits}))


# --- fetching, conditional requests, gone pages


def test_a_page_is_fetched_with_its_validators_and_media_type(site: DocSite) -> None:
    with local_fetcher() as fetcher:
        page = fetcher.fetch(f"{site.url}/guide/intro.html")

    assert (page.outcome, page.status, page.content_type) == (FetchOutcome.FETCHED, 200, "text/html")
    assert page.body == PAGES["guide/intro.html"].encode()
    assert page.validators.etag and page.validators.last_modified == "Thu, 01 Jan 2026 00:00:00 GMT"
    request = site.requests[-1]
    assert request.headers["User-Agent"].startswith("citewise/")
    assert "text/html" in request.headers["Accept"]


def test_a_conditional_request_answers_not_modified_until_the_page_changes(site: DocSite) -> None:
    fetcher = local_fetcher()
    first = fetcher.fetch(f"{site.url}/guide/intro.html")

    unchanged = fetcher.fetch(f"{site.url}/guide/intro.html", validators=first.validators)
    site.change("guide/intro.html")
    changed = fetcher.fetch(f"{site.url}/guide/intro.html", validators=first.validators)

    assert (unchanged.outcome, unchanged.status, unchanged.body) == (FetchOutcome.NOT_MODIFIED, 304, b"")
    assert unchanged.validators == first.validators
    assert site.requests[-2].headers["If-None-Match"] == first.validators.etag
    assert site.requests[-2].headers["If-Modified-Since"] == first.validators.last_modified
    assert changed.outcome is FetchOutcome.FETCHED and b"Changed for the 1. time" in changed.body
    assert changed.validators.etag != first.validators.etag


def test_last_modified_alone_makes_a_conditional_request(site: DocSite) -> None:
    page = local_fetcher().fetch(
        f"{site.url}/guide/intro.html", validators=Validators(last_modified="Fri, 02 Jan 2026 00:00:00 GMT")
    )

    assert page.outcome is FetchOutcome.NOT_MODIFIED
    assert "If-None-Match" not in site.requests[-1].headers


@pytest.mark.parametrize("status", [404, 410])
def test_a_removed_page_is_gone(site: DocSite, status: int) -> None:
    site.gone_status = status
    site.remove("guide/gone.html")

    page = local_fetcher().fetch(f"{site.url}/guide/gone.html")

    assert (page.outcome, page.status, page.reason) == (FetchOutcome.GONE, status, None)


def test_a_server_error_fails_the_page(site: DocSite) -> None:
    page = local_fetcher().fetch(f"{site.url}/error.html")

    assert (page.outcome, page.status, page.reason) == (FetchOutcome.FAILED, 500, "http_5xx")


# --- redirects


def test_a_redirect_is_followed_and_the_final_url_reported(site: DocSite) -> None:
    page = local_fetcher().fetch(f"{site.url}/old/guide/intro.html")

    assert page.outcome is FetchOutcome.FETCHED
    assert (page.url, page.final_url) == (f"{site.url}/old/guide/intro.html", f"{site.url}/guide/intro.html")


def test_redirects_stop_at_the_cap(site: DocSite) -> None:
    page = local_fetcher(max_redirects=3).fetch(f"{site.url}/loop")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "too_many_redirects")
    assert site.count("/loop") == 4


def test_a_redirect_to_the_metadata_service_is_refused_and_never_followed(site: DocSite) -> None:
    page = local_fetcher().fetch(f"{site.url}/hostile/metadata")

    assert (page.outcome, page.reason) == (FetchOutcome.REFUSED, "private_address")
    assert page.final_url == "http://169.254.169.254/latest/meta-data/"


def test_a_redirect_to_loopback_is_refused_without_the_switch(site: DocSite, route: PublicRoute) -> None:
    site.hostile_loopback_target = f"{site.url}/guide/intro.html"  # the site itself, reached as 127.0.0.1

    page = public_fetcher(route).fetch(f"http://{HOST}/hostile/loopback")

    assert (page.outcome, page.reason) == (FetchOutcome.REFUSED, "private_address")
    assert site.count("/guide/intro.html") == 0
    assert set(route.connected) == {(PUBLIC_ADDRESS, 80)}


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("ftp://docs.example/file", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("http://user:pass@docs.example/", "credentials"),
        ("http://[::ffff:127.0.0.1]/", "private_address"),
        ("http://10.0.0.1/", "private_address"),
    ],
)
def test_every_redirect_is_checked_again(site: DocSite, route: PublicRoute, target: str, reason: str) -> None:
    site.hostile_loopback_target = target

    page = public_fetcher(route).fetch(f"http://{HOST}/hostile/loopback")

    assert (page.outcome, page.reason) == (FetchOutcome.REFUSED, reason)


# --- hostile DNS answers


@pytest.mark.parametrize(
    "answers",
    [["10.0.0.7"], ["169.254.169.254"], [PUBLIC_ADDRESS, "127.0.0.1"], ["::1", PUBLIC_ADDRESS], ["fd00:ec2::254"]],
    ids=["private", "metadata", "public-then-loopback", "loopback-then-public", "ipv6-metadata"],
)
def test_a_host_resolving_to_any_non_public_address_is_refused_before_connecting(
    site: DocSite, route: PublicRoute, answers: list[str]
) -> None:
    route.answers = lambda _: answers

    page = public_fetcher(route).fetch(f"http://{HOST}/guide/intro.html")

    assert (page.outcome, page.reason, page.status) == (FetchOutcome.REFUSED, "private_address", None)
    assert route.connected == []
    assert site.requests == []


def test_a_rebinding_resolver_never_gets_the_connection_to_loopback(site: DocSite, route: PublicRoute) -> None:
    # Public on the odd answers, 127.0.0.1 on the even ones: a fetcher that checked one answer and then let
    # the connection resolve again would connect to loopback on its second look-up.
    route.answers = lambda n: [PUBLIC_ADDRESS] if n % 2 else ["127.0.0.1"]
    fetcher = public_fetcher(route)

    robots_then_refused = fetcher.fetch(f"http://{HOST}/guide/intro.html")  # answers 1 (robots), 2 (page)
    fetched = fetcher.fetch(f"http://{HOST}/guide/intro.html")  # answer 3

    assert (robots_then_refused.outcome, robots_then_refused.reason) == (FetchOutcome.REFUSED, "private_address")
    assert fetched.outcome is FetchOutcome.FETCHED
    assert route.connected and set(route.connected) == {(PUBLIC_ADDRESS, 80)}
    assert len(route.resolved) == 3  # one look-up per request, none by the connection
    assert {request.headers["Host"] for request in site.requests} == {HOST}


def test_an_unresolvable_host_fails(route: PublicRoute) -> None:
    page = public_fetcher(route).fetch("http://nowhere.example/")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "dns")


def test_a_url_the_fetcher_may_not_ask_for_is_refused_without_a_request(site: DocSite) -> None:
    fetcher = WebPageFetcher(limits=FetchLimits(host_delay=0.0))

    for url, reason in [
        (f"{site.url}/guide/intro.html", "private_address"),
        ("http://localhost/", "private_address"),
        ("gopher://docs.example/", "scheme"),
        ("https://a:b@docs.example/", "credentials"),
    ]:
        page = fetcher.fetch(url)
        assert (page.outcome, page.reason, page.status) == (FetchOutcome.REFUSED, reason, None)
    assert site.requests == []


# --- caps: size, time, content type


def test_a_page_over_the_size_cap_is_dropped_while_streaming(site: DocSite) -> None:
    started = time.monotonic()
    page = local_fetcher(max_bytes=1024 * 1024).fetch(f"{site.url}/huge.html")

    assert (page.outcome, page.reason, page.body) == (FetchOutcome.FAILED, "too_large", b"")
    assert time.monotonic() - started < 5


def test_a_declared_length_over_the_cap_is_not_read(site: DocSite) -> None:
    page = local_fetcher(max_bytes=64).fetch(f"{site.url}/guide/intro.html")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "too_large")


def test_the_size_cap_counts_decompressed_bytes(site: DocSite) -> None:
    page = local_fetcher(max_bytes=1024 * 1024).fetch(f"{site.url}/bomb.html")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "too_large")


def test_a_slow_page_fails_at_the_read_timeout(site: DocSite) -> None:
    started = time.monotonic()
    page = local_fetcher(read_timeout=0.5).fetch(f"{site.url}/slow.html")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "timeout")
    assert time.monotonic() - started < 2.5


def test_a_slow_page_fails_at_the_total_timeout(site: DocSite) -> None:
    started = time.monotonic()
    page = local_fetcher(read_timeout=10, total_timeout=1.0).fetch(f"{site.url}/slow.html")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "timeout")
    assert time.monotonic() - started < 2.5


def test_a_connect_timeout_fails_the_page(route: PublicRoute, monkeypatch: pytest.MonkeyPatch) -> None:
    def never_answers(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        raise TimeoutError("timed out")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", never_answers)

    page = public_fetcher(route).fetch(f"http://{HOST}/guide/intro.html")

    assert (page.outcome, page.reason, page.status) == (FetchOutcome.FAILED, "timeout", None)


def test_a_content_type_no_parser_takes_is_not_read(site: DocSite) -> None:
    page = local_fetcher().fetch(f"{site.url}/data.json")

    assert (page.outcome, page.status, page.reason, page.body) == (FetchOutcome.FAILED, 200, "content_type", b"")


# --- robots.txt and politeness


def test_robots_txt_is_read_once_per_site_and_honoured(site: DocSite) -> None:
    fetcher = local_fetcher()

    refused = fetcher.fetch(f"{site.url}/private/secret.html")
    fetched = [fetcher.fetch(f"{site.url}/{name}").outcome for name in ("index.html", "guide/intro.html")]

    assert (refused.outcome, refused.reason) == (FetchOutcome.REFUSED, "robots")
    assert fetched == [FetchOutcome.FETCHED, FetchOutcome.FETCHED]
    assert site.count("/private/secret.html") == 0
    assert site.count("/robots.txt") == 1


def test_rules_for_citewise_apply_to_citewise(site: DocSite) -> None:
    site.robots = "User-agent: citewise\nDisallow: /guide/\n\nUser-agent: *\nDisallow:\n"
    fetcher = local_fetcher()

    assert fetcher.fetch(f"{site.url}/guide/intro.html").reason == "robots"
    assert fetcher.fetch(f"{site.url}/index.html").outcome is FetchOutcome.FETCHED


@pytest.mark.parametrize(("status", "outcome"), [(404, FetchOutcome.FETCHED), (500, FetchOutcome.REFUSED)])
def test_robots_txt_missing_allows_everything_and_unreadable_allows_nothing(
    site: DocSite, status: int, outcome: FetchOutcome
) -> None:
    site.robots_status = status

    assert local_fetcher().fetch(f"{site.url}/guide/intro.html").outcome is outcome


def test_requests_to_one_host_are_spaced_by_the_delay(site: DocSite) -> None:
    sleeps = Sleeps()
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=2.0), sleep=sleeps)

    fetcher.fetch(f"{site.url}/index.html")  # robots.txt, then the page
    fetcher.fetch(f"{site.url}/guide/intro.html")

    # The recording sleep returns at once, so each wait counts from the same moment: 2 s apart, then 4.
    assert len(sleeps.waits) == 2
    assert 1.5 < sleeps.waits[0] <= 2.0 and 3.5 < sleeps.waits[1] <= 4.0


def test_a_crawl_delay_in_robots_txt_lengthens_the_delay_up_to_a_cap(site: DocSite) -> None:
    site.robots = "User-agent: *\nCrawl-delay: 60\n"
    sleeps = Sleeps()
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0, max_crawl_delay=5.0), sleep=sleeps)

    fetcher.fetch(f"{site.url}/index.html")
    fetcher.fetch(f"{site.url}/guide/intro.html")

    assert len(sleeps.waits) == 1 and 4.5 < sleeps.waits[0] <= 5.0


def test_one_connection_per_host_at_a_time(site: DocSite) -> None:
    site.slow_seconds = 0.5
    fetcher = local_fetcher(total_timeout=10)
    fetcher.fetch(f"{site.url}/index.html")  # robots.txt read before the race
    finished: list[float] = []

    def fetch_slow() -> None:
        fetcher.fetch(f"{site.url}/slow.html")
        finished.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=fetch_slow) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert max(finished) - started >= 1.0  # one after the other, not side by side


def test_retry_after_is_waited_out_then_the_page_fetched(site: DocSite) -> None:
    site.throttle_count, site.retry_after = 2, 3
    sleeps = Sleeps()
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0), sleep=sleeps)

    page = fetcher.fetch(f"{site.url}/throttled.html")

    assert page.outcome is FetchOutcome.FETCHED
    assert site.count("/throttled.html") == 3
    assert len(sleeps.waits) == 2 and all(2.5 < wait <= 3.0 for wait in sleeps.waits)


def test_retry_after_as_an_http_date_is_waited_out(site: DocSite) -> None:
    site.throttle_count, site.retry_after = 1, email.utils.formatdate(time.time() + 4, usegmt=True)
    sleeps = Sleeps()
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0), sleep=sleeps)

    page = fetcher.fetch(f"{site.url}/throttled.html")

    assert page.outcome is FetchOutcome.FETCHED
    assert len(sleeps.waits) == 1 and 2.0 < sleeps.waits[0] <= 4.0  # whole seconds in the date


def test_throttling_beyond_the_retries_fails_the_page_as_throttled(site: DocSite) -> None:
    site.throttle_count, site.retry_after = 10, 1
    fetcher = WebPageFetcher(
        allow_loopback=True, limits=FetchLimits(host_delay=0.0, throttle_retries=2), sleep=Sleeps()
    )

    page = fetcher.fetch(f"{site.url}/throttled.html")

    assert (page.outcome, page.status, page.reason) == (FetchOutcome.FAILED, 429, "throttled")
    assert site.count("/throttled.html") == 3


def test_a_retry_after_longer_than_the_cap_is_not_waited(site: DocSite) -> None:
    site.throttle_count, site.retry_after = 1, 3600
    sleeps = Sleeps()
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0), sleep=sleeps)

    page = fetcher.fetch(f"{site.url}/throttled.html")

    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, "throttled")
    assert sleeps.waits == [] and site.count("/throttled.html") == 1


def test_more_than_two_connections_per_host_is_refused_as_a_setting() -> None:
    with pytest.raises(ValueError, match="connections_per_host"):
        FetchLimits(connections_per_host=3)


# --- https: the connection goes to the checked address, the name is what TLS checks


def _certificate_files(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) files: a CA of the test's own, and a certificate
    it signs for `name`."""
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)

    def certificate(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey, ca: bool
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        else:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    files = (tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key")
    pem = serialization.Encoding.PEM
    files[0].write_bytes(certificate("citewise test CA", ca_key, "citewise test CA", ca_key, True).public_bytes(pem))
    files[1].write_bytes(certificate(name, server_key, "citewise test CA", ca_key, False).public_bytes(pem))
    files[2].write_bytes(server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return files


@pytest.mark.parametrize(
    ("certified", "outcome"), [(HOST, FetchOutcome.FETCHED), ("other.example", FetchOutcome.FAILED)]
)
def test_https_checks_the_certificate_against_the_name_not_the_address(
    tmp_path: Path, certified: str, outcome: FetchOutcome
) -> None:
    ca, certificate, key = _certificate_files(tmp_path, certified)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "page.html").write_text(PAGES["guide/intro.html"], encoding="utf-8")
    resolved: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]

    with DocSite(tmp_path / "site", tls=context) as site:
        port = site.url.rsplit(":", 1)[1]
        fetcher = WebPageFetcher(
            allow_loopback=True, resolver=resolve, ca_certs=str(ca), limits=FetchLimits(host_delay=0.0)
        )

        page = fetcher.fetch(f"https://{HOST}:{port}/page.html")

    assert page.outcome is outcome
    assert set(resolved) == {HOST}
    if outcome is FetchOutcome.FETCHED:
        assert {request.headers["Host"] for request in site.requests} == {f"{HOST}:{port}"}
    else:
        assert page.reason == "tls" and site.requests == []  # no request went over the failed handshake


def test_an_ipv6_address_is_connected_to_with_the_host_name_sent() -> None:
    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            hosts.append(self.headers["Host"])
            body = b"<p>over IPv6</p>" if self.path == "/page.html" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            """Quiet."""

    hosts: list[str] = []
    try:
        server = Server(("::1", 0), Handler)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        port = server.server_address[1]
        fetcher = WebPageFetcher(
            allow_loopback=True, resolver=lambda host, port: ["::1"], limits=FetchLimits(host_delay=0.0)
        )

        page = fetcher.fetch(f"http://{HOST}:{port}/page.html")
    finally:
        server.shutdown()
        server.server_close()

    assert (page.outcome, page.body) == (FetchOutcome.FETCHED, b"<p>over IPv6</p>")
    assert hosts == [f"{HOST}:{port}"] * 2  # robots.txt, then the page
