"""`WebPageFetcher`: the `PageFetcher` on urllib3 (already in the Lambda runtime with botocore).

Safety (no server-side request forgery): each hop's URL passes `check_public_url`; its host is resolved
once, every address it resolves to must pass `address_refusal`, and the connection goes to the address that
was checked (a pool per address, with the original `Host` header and, for https, the original name for SNI
and the certificate check), so a second DNS answer never decides where bytes go (DNS rebinding). Redirects
are followed here, never by urllib3, each one checked again, at most `max_redirects`. A body is streamed
and dropped over `max_bytes` (counted after decompression), the connect and read timeouts bound each
socket wait and `total_timeout` the whole fetch, and only `ACCEPTED_CONTENT_TYPES` are read.

Politeness: robots.txt per origin (RFC 9309: a 4xx means no rules, a 5xx means keep out; no answer at
all fails the page with its reason), cached for the fetcher's life; per host at most
`connections_per_host` requests at once and `host_delay` seconds between request starts (more when
robots.txt asks for a crawl-delay, up to `max_crawl_delay`); a 429 or 503 with `Retry-After` is waited
out when the wait fits `retry_after_cap` and the fetch's deadline, `throttle_retries` times at most, then
the page FAILED "throttled".
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import urllib3
from urllib3.exceptions import HTTPError, SSLError, TimeoutError

from citewise import __version__
from citewise.domain.errors import ValidationError
from citewise.ports.web import (
    ACCEPTED_CONTENT_TYPES,
    FetchedPage,
    FetchOutcome,
    Validators,
    address_refusal,
    check_public_url,
)

Resolver = Callable[[str, int], list[str]]
"""(host, port) -> the IP addresses the host resolves to, as strings."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_THROTTLED = frozenset({429, 503})
_CHUNK = 64 * 1024
_ROBOTS_MAX_BYTES = 512 * 1024
"""RFC 9309 asks crawlers to read at least 500 KiB of a robots.txt."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `getaddrinfo` gives for `host`, in its order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def user_agent(contact_url: str | None = None) -> str:
    """`citewise/<version>`, with `(+<contact_url>)` where site owners can read who crawls them."""
    return f"citewise/{__version__}" + (f" (+{contact_url})" if contact_url else "")


@dataclass(frozen=True)
class FetchLimits:
    """The caps of one fetch and the politeness towards one host."""

    max_bytes: int = 10 * 1024 * 1024
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    total_timeout: float = 30.0
    max_redirects: int = 5
    host_delay: float = 1.0
    connections_per_host: int = 1
    max_crawl_delay: float = 10.0
    retry_after_cap: float = 30.0
    throttle_retries: int = 2

    def __post_init__(self) -> None:
        if not 1 <= self.connections_per_host <= 2:
            raise ValueError("connections_per_host is 1 or 2: a crawler opens no more to one host")


class _Stop(Exception):
    """Ends a fetch with this outcome (REFUSED or FAILED) and reason."""

    def __init__(self, outcome: FetchOutcome, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: urllib3.HTTPHeaderDict
    body: bytes = b""
    content_type: str | None = None


@dataclass
class _Host:
    """What politeness remembers of one host: the connections in use and when the next may start."""

    slots: threading.BoundedSemaphore
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_start: float = 0.0
    delay: float = 0.0


class WebPageFetcher:
    """The `PageFetcher` of Lambda and local mode; thread-safe, one per refresh run or process."""

    def __init__(
        self,
        *,
        limits: FetchLimits | None = None,
        agent: str | None = None,
        allow_loopback: bool = False,
        resolver: Resolver = system_resolver,
        ca_certs: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`allow_loopback` lets 127.0.0.0/8 and ::1 through (tests and local mode only: the Lambda settings
        refuse the setting that turns it on); `ca_certs` a CA bundle file instead of the system's."""
        self.limits = limits or FetchLimits()
        self.agent = agent or user_agent()
        self._allow_loopback = allow_loopback
        self._resolve = resolver
        self._ca_certs = ca_certs
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._hosts: dict[tuple[str, int], _Host] = {}
        self._robots: dict[str, RobotFileParser | bool] = {}
        self._pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}

    def fetch(self, url: str, *, validators: Validators | None = None) -> FetchedPage:
        return self._follow(
            url, validators, robots=True, accept=ACCEPTED_CONTENT_TYPES, max_bytes=self.limits.max_bytes
        )

    def __enter__(self) -> WebPageFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the kept connections."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def _follow(
        self,
        url: str,
        validators: Validators | None,
        *,
        robots: bool,
        accept: frozenset[str] | None,
        max_bytes: int,
    ) -> FetchedPage:
        deadline = self._clock() + self.limits.total_timeout
        current = url
        try:
            for _ in range(self.limits.max_redirects + 1):
                current = self._checked(current)
                if robots and not self._robots_allow(current):
                    raise _Stop(FetchOutcome.REFUSED, "robots")
                answer = self._exchange(current, validators, deadline, accept, max_bytes)
                location = answer.headers.get("location")
                if answer.status in _REDIRECTS and location:
                    current = urljoin(current, location.strip())
                    continue
                return _page(url, current, answer, validators)
            raise _Stop(FetchOutcome.FAILED, "too_many_redirects")
        except _Stop as stop:
            return FetchedPage(url, current, stop.outcome, status=stop.status, reason=stop.reason)

    def _checked(self, url: str) -> str:
        try:
            return check_public_url(url, allow_loopback=self._allow_loopback)
        except ValidationError as exc:
            raise _Stop(FetchOutcome.REFUSED, str(exc.details.get("reason", "url"))) from exc

    def _exchange(
        self,
        url: str,
        validators: Validators | None,
        deadline: float,
        accept: frozenset[str] | None,
        max_bytes: int,
    ) -> _Answer:
        """One request (repeated after a Retry-After that fits), its body read when it is a page."""
        parts = urlsplit(url)
        host, port = _endpoint(url)
        headers = self._headers(parts.netloc.rsplit("@", 1)[-1], validators, accept)
        for attempt in range(self.limits.throttle_retries + 1):
            address = self._public_address(host, port)
            with self._polite(host, port, deadline):
                answer = self._request(parts.scheme, host, port, address, url, headers, deadline, accept, max_bytes)
            if answer.status not in _THROTTLED:
                return answer
            wait = _retry_after(answer.headers.get("retry-after"))
            if wait is None:
                if answer.status == 503:
                    raise _Stop(FetchOutcome.FAILED, "http_5xx", answer.status)
                wait = max(self.limits.host_delay, 1.0)
            fits = wait <= self.limits.retry_after_cap and self._clock() + wait < deadline
            if attempt == self.limits.throttle_retries or not fits:
                raise _Stop(FetchOutcome.FAILED, "throttled", answer.status)
            self._hold_host(host, port, wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _headers(self, netloc: str, validators: Validators | None, accept: frozenset[str] | None) -> dict[str, str]:
        headers = {
            "Host": netloc,
            "User-Agent": self.agent,
            "Accept": ", ".join(sorted(accept)) if accept else "*/*",
            "Accept-Encoding": "gzip, deflate",
        }
        if validators and validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators and validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
        return headers

    def _public_address(self, host: str, port: int) -> str:
        """The first address of `host`, once every address it resolves to is known public."""
        try:
            addresses = self._resolve(host, port)
        except OSError as exc:
            raise _Stop(FetchOutcome.FAILED, "dns") from exc
        if not addresses:
            raise _Stop(FetchOutcome.FAILED, "dns")
        for address in addresses:
            if address_refusal(address, allow_loopback=self._allow_loopback):
                raise _Stop(FetchOutcome.REFUSED, "private_address")
        return addresses[0]

    def _request(
        self,
        scheme: str,
        host: str,
        port: int,
        address: str,
        url: str,
        headers: dict[str, str],
        deadline: float,
        accept: frozenset[str] | None,
        max_bytes: int,
    ) -> _Answer:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise _Stop(FetchOutcome.FAILED, "timeout")
        timeout = urllib3.Timeout(
            connect=min(self.limits.connect_timeout, remaining), read=min(self.limits.read_timeout, remaining)
        )
        try:
            response = self._pool(scheme, host, port, address).urlopen(
                "GET",
                target,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                assert_same_host=False,
                timeout=timeout,
            )
        except TimeoutError as exc:
            raise _Stop(FetchOutcome.FAILED, "timeout") from exc
        except SSLError as exc:
            raise _Stop(FetchOutcome.FAILED, "tls") from exc
        except HTTPError as exc:
            raise _Stop(FetchOutcome.FAILED, "connection") from exc
        try:
            return self._answer(response, deadline, accept, max_bytes)
        finally:
            response.release_conn()

    def _answer(
        self, response: urllib3.BaseHTTPResponse, deadline: float, accept: frozenset[str] | None, max_bytes: int
    ) -> _Answer:
        status, headers = response.status, response.headers
        if status != 200:
            # A 304 has no body, so its connection is kept; any other body is not read, and its connection
            # is closed rather than drained (a 404 page may be large, or slow).
            response.drain_conn() if status == 304 else response.close()
            return _Answer(status, headers)
        content_type = _media_type(headers.get("content-type"))
        if accept is not None and content_type not in accept:
            response.close()
            raise _Stop(FetchOutcome.FAILED, "content_type", status)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            response.close()
            raise _Stop(FetchOutcome.FAILED, "too_large", status)
        body = bytearray()
        try:
            while chunk := response.read1(_CHUNK):
                body += chunk
                if len(body) > max_bytes:
                    response.close()
                    raise _Stop(FetchOutcome.FAILED, "too_large", status)
                if self._clock() > deadline:
                    response.close()
                    raise _Stop(FetchOutcome.FAILED, "timeout", status)
        except TimeoutError as exc:
            raise _Stop(FetchOutcome.FAILED, "timeout", status) from exc
        except HTTPError as exc:
            raise _Stop(FetchOutcome.FAILED, "connection", status) from exc
        return _Answer(status, headers, bytes(body), content_type)

    def _pool(self, scheme: str, host: str, port: int, address: str) -> urllib3.HTTPConnectionPool:
        """The kept pool that connects to `address` (never to a new resolution of `host`)."""
        key = (scheme, host, port, address)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                size = self.limits.connections_per_host
                if scheme == "https":
                    pool = urllib3.HTTPSConnectionPool(
                        address,
                        port,
                        maxsize=size,
                        server_hostname=host,
                        assert_hostname=host,
                        cert_reqs="CERT_REQUIRED",
                        ca_certs=self._ca_certs,
                    )
                else:
                    pool = urllib3.HTTPConnectionPool(address, port, maxsize=size)
                self._pools[key] = pool
            return pool

    def _host(self, host: str, port: int) -> _Host:
        with self._lock:
            state = self._hosts.get((host, port))
            if state is None:
                state = _Host(
                    threading.BoundedSemaphore(self.limits.connections_per_host), delay=self.limits.host_delay
                )
                self._hosts[(host, port)] = state
            return state

    @contextmanager
    def _polite(self, host: str, port: int, deadline: float) -> Iterator[None]:
        """Hold one of the host's connection slots, started no sooner than its delay allows."""
        state = self._host(host, port)
        if not state.slots.acquire(timeout=max(0.0, deadline - self._clock())):
            raise _Stop(FetchOutcome.FAILED, "timeout")
        try:
            with state.lock:
                now = self._clock()
                start = max(now, state.next_start)
                state.next_start = start + state.delay
            if start > now:
                if start >= deadline:
                    raise _Stop(FetchOutcome.FAILED, "timeout")
                self._sleep(start - now)
            yield
        finally:
            state.slots.release()

    def _hold_host(self, host: str, port: int, seconds: float) -> None:
        """Start nothing more on the host for `seconds` (its Retry-After)."""
        state = self._host(host, port)
        with state.lock:
            state.next_start = max(state.next_start, self._clock() + seconds)

    def _robots_allow(self, url: str) -> bool:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        with self._lock:
            rules = self._robots.get(origin)
        if rules is None:
            rules = self._read_robots(origin)
            with self._lock:
                self._robots[origin] = rules
            if isinstance(rules, RobotFileParser):
                delay = rules.crawl_delay(self.agent)
                if delay is not None:
                    state = self._host(*_endpoint(url))
                    state.delay = max(state.delay, min(float(delay), self.limits.max_crawl_delay))
        if isinstance(rules, bool):
            return rules
        return rules.can_fetch(self.agent, url)

    def _read_robots(self, origin: str) -> RobotFileParser | bool:
        """The origin's rules; True (no rules) for a 4xx, False (keep out) when it cannot be read.

        A refusal (the host is not public) or no answer at all (DNS, connection, TLS, timeout) ends the
        page's fetch with that reason instead, and is not remembered: it says nothing of the site's rules,
        and the page would meet it too.
        """
        page = self._follow(f"{origin}/robots.txt", None, robots=False, accept=None, max_bytes=_ROBOTS_MAX_BYTES)
        if page.outcome is FetchOutcome.REFUSED or page.status is None:
            raise _Stop(page.outcome, page.reason or "robots")
        if page.outcome is FetchOutcome.FETCHED:
            rules = RobotFileParser()
            rules.parse(page.body.decode("utf-8", errors="replace").splitlines())
            return rules
        if page.outcome is FetchOutcome.GONE or (page.status is not None and 400 <= page.status < 500):
            return True
        return False


def _page(url: str, final_url: str, answer: _Answer, sent: Validators | None) -> FetchedPage:
    status = answer.status
    received = Validators(etag=answer.headers.get("etag"), last_modified=answer.headers.get("last-modified"))
    if status == 200:
        return FetchedPage(url, final_url, FetchOutcome.FETCHED, status, answer.body, answer.content_type, received)
    if status == 304:
        kept = received if (received.etag or received.last_modified) else (sent or Validators())
        return FetchedPage(url, final_url, FetchOutcome.NOT_MODIFIED, status, validators=kept)
    if status in (404, 410):
        return FetchedPage(url, final_url, FetchOutcome.GONE, status)
    reason = "http_5xx" if status >= 500 else "redirect_without_location" if status in _REDIRECTS else "http_status"
    return FetchedPage(url, final_url, FetchOutcome.FAILED, status, reason=reason)


def _endpoint(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL: what politeness counts per, and what is resolved."""
    parts = urlsplit(url)
    return (parts.hostname or "").rstrip("."), parts.port or (443 if parts.scheme == "https" else 80)


def _media_type(header: str | None) -> str | None:
    media = (header or "").split(";", 1)[0].strip().lower()
    return media or None


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), None when absent or unreadable."""
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())
