"""Which URLs citewise may be asked to fetch: http(s), a host, no credentials, no private address literal.

The syntax (`URL_PATTERN`, stated in the OpenAPI document too) is checked where a URL enters, each
failure naming its reason (`scheme`, `credentials`, `host`, `malformed`); `check_public_url` adds
the address check a registration makes (`private_address`: loopback, private, link-local such as
169.254.169.254, multicast, reserved; an IPv6 literal is not taken at all), which the local-only loopback
switch relaxes for loopback alone. Names are not resolved here: the fetcher resolves, checks every
address and connects to the one it checked (`citewise.ports.web`), so a name that resolves to a private
address later is refused there.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final, NoReturn
from urllib.parse import urlsplit, urlunsplit

from citewise.domain.errors import ValidationError

_PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
URL_PATTERN: Final = rf"^https?://[A-Za-z0-9_~%!$&'()*+,;=-][A-Za-z0-9._~%!$&'()*+,;=-]*(:{_PORT}?)?([/?#][!-~]*)?$"
"""An http(s) URL of printable ASCII (a name in punycode, a path percent-encoded) whose authority is a host
(a name or an IPv4 address, not starting with a dot: all dots is no host) with an optional port
(0-65535), without user info. No bracketed IPv6 literal: no pattern tells a valid one from `[0]`, and a
documentation site has a name; an IPv6 address is still
checked where the fetcher resolves a name to one. ASCII classes only, so the OpenAPI document's pattern
and Python's `re` accept exactly the same strings."""
_URL = re.compile(URL_PATTERN)


def check_url_syntax(url: str) -> str:
    """`url` if it has `URL_PATTERN`'s shape, else ValidationError whose `details.reason` says why."""
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https"):
        _refuse("only http and https URLs can be fetched", "scheme", url)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        _refuse("a URL may not carry a user name or password", "credentials", url)
    if not authority or authority.startswith(":"):
        _refuse("the URL has no host", "host", url)
    if not _URL.fullmatch(url):
        _refuse(
            "the URL is malformed: printable ASCII, a host name or IPv4 address (no IPv6 literal)", "malformed", url
        )
    return url


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
    raise ValidationError(f"{reason}: {message}", details={"field": "url", "reason": reason, "url": url[:2048]})
