"""The PageFetcher port: one web page fetched politely and safely, and the rules of a fetchable URL.

A fetch never raises for what the web does (a timeout, a 404, a refusal): it answers a `FetchedPage` whose
`outcome` says what happened and whose `reason` is a short stable code, so a refresh records it per page
and goes on. What is public is decided here once, for the API (a 400 at registration, `check_public_url`)
and for the fetcher (every resolved address of every hop, `address_refusal`): both refuse the same things.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn, Protocol
from urllib.parse import urlsplit, urlunsplit

from citewise.domain.errors import ValidationError

PAGE_CONTENT_TYPES: frozenset[str] = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "application/pdf",
        "text/markdown",
        "text/x-markdown",
        "text/plain",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }
)
"""Media types of pages: what the parsers take (`citewise.ingest.parsing.SUPPORTED_CONTENT_TYPES`; a test
holds the two equal)."""
SITEMAP_CONTENT_TYPES: frozenset[str] = frozenset(
    {"application/xml", "text/xml", "application/gzip", "application/x-gzip"}
)
"""Media types of sitemaps (`citewise.ingest.web_pages.sitemap_urls`), plain or gzip."""
ACCEPTED_CONTENT_TYPES: frozenset[str] = PAGE_CONTENT_TYPES | SITEMAP_CONTENT_TYPES
"""What a fetch reads; anything else FAILED "content_type", its body never read. A page of a sitemap's
type is no document: the refresh reads it as a sitemap or leaves it."""


class FetchOutcome(StrEnum):
    FETCHED = "fetched"  # 200 with a body of an accepted content type
    NOT_MODIFIED = "not_modified"  # 304 to a conditional request
    GONE = "gone"  # 404 or 410
    REFUSED = "refused"  # never requested: robots.txt, non-public address, scheme, credentials
    FAILED = "failed"  # timeout, too large, bad content type, 5xx, too many redirects, 429 given up


@dataclass(frozen=True)
class Validators:
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class FetchedPage:
    url: str  # as asked
    final_url: str  # after redirects (each one re-checked)
    outcome: FetchOutcome
    status: int | None = None  # the HTTP status, None if never answered
    body: bytes = b""
    content_type: str | None = None  # media type without parameters, lower case
    validators: Validators = Validators()
    reason: str | None = None  # why REFUSED/FAILED: a short code such as "robots", "private_address",
    # "too_large", "timeout", "content_type", "http_5xx", "throttled"


class PageFetcher(Protocol):
    def fetch(self, url: str, *, validators: Validators | None = None) -> FetchedPage:
        """One page, politely (robots.txt, per-host delay and connection limit, Retry-After) and
        safely (public addresses only, every redirect re-checked, size and time caps)."""
        ...


_Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_REFUSED_NETWORKS: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.ip_network(network), kind)
    for network, kind in (
        # Ranges `is_global` already excludes on current Pythons, named so that a Python whose table lacks
        # one (they have changed between patch releases) still refuses it, and so the message says which.
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignment"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        # IPv6 forms that carry an IPv4 address (a gateway would reach it): refused whatever they embed.
        ("::ffff:0:0/96", "IPv4-mapped"),
        ("::/96", "IPv4-compatible"),
        ("64:ff9b::/96", "NAT64"),
        ("64:ff9b:1::/48", "NAT64"),
        ("2002::/16", "6to4"),
        ("2001::/32", "Teredo"),
        ("fc00::/7", "unique local"),
        ("fec0::/10", "site-local"),
        ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"),
    )
)
_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def address_refusal(address: str, *, allow_loopback: bool = False) -> str | None:
    """Why a connection to `address` (an IP literal) is refused, in words, or None if it is public.

    Public means `ipaddress`'s `is_global` and none of the refused ranges above; with `allow_loopback`
    (local mode and tests only) 127.0.0.0/8 and ::1 are allowed too, and nothing else is.
    """
    ip: _Address = ipaddress.ip_address(address.split("%", 1)[0])  # a zone id names an interface
    if allow_loopback and any(ip in network for network in _LOOPBACK):
        return None
    for network, kind in _REFUSED_NETWORKS:
        if ip.version == network.version and ip in network:
            return f"{kind} address {ip}"
    if ip.is_loopback:
        return f"loopback address {ip}"
    if not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return f"non-public address {ip}"
    return None


def check_public_url(url: str, *, allow_loopback: bool = False) -> str:
    """`url` without its fragment, if it may be fetched: http(s), no credentials, a host, and that host
    not an address (or `localhost`) that `address_refusal` refuses. Raises `ValidationError` whose
    `details["reason"]` is the fetcher's reason code ("scheme", "credentials", "host", "private_address").

    Syntax only: a host name's addresses are checked when it is resolved, at every fetch.
    """
    if any(character.isspace() or ord(character) < 0x20 for character in url):
        _refuse("the URL contains whitespace or control characters", "host", url)
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        _refuse(f"only http and https URLs can be fetched, not {parts.scheme or 'a relative URL'}", "scheme", url)
    if "@" in parts.netloc:
        _refuse("a URL with credentials (user@ or user:password@) is refused", "credentials", url)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        _refuse("the URL names no host", "host", url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        _refuse("the URL's port is not a number from 0 to 65535", "host", url)
    if host == "localhost" or host.endswith(".localhost"):
        host = "127.0.0.1"  # RFC 6761: always loopback, whatever a resolver says
    refusal = _literal_refusal(host, allow_loopback)
    if refusal:
        _refuse(f"the URL's host is not public: {refusal}", "private_address", url)
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path, parts.query, ""))


def _literal_refusal(host: str, allow_loopback: bool) -> str | None:
    try:
        return address_refusal(host, allow_loopback=allow_loopback)
    except ValueError:
        return None  # a name, checked when it resolves


def _refuse(message: str, reason: str, url: str) -> NoReturn:
    raise ValidationError(message, details={"reason": reason, "url": url[:2048]})
