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
from typing import Final
from urllib.parse import urlsplit

from citewise.domain.errors import ValidationError

URL_PATTERN: Final = r"^https?://[A-Za-z0-9._~%!$&'()*+,;=-]+(:[0-9]{0,5})?([/?#][!-~]*)?$"
"""An http(s) URL of printable ASCII (a name in punycode, a path percent-encoded) whose authority is a host
(a name or an IPv4 address) with an optional port, without user info. No bracketed IPv6 literal: no
pattern tells a valid one from `[0]`, and a documentation site has a name; an IPv6 address is still
checked where the fetcher resolves a name to one. ASCII classes only, so the OpenAPI document's pattern
and Python's `re` accept exactly the same strings."""
_URL = re.compile(URL_PATTERN)


def check_url_syntax(url: str) -> str:
    """`url` if it has `URL_PATTERN`'s shape, else ValidationError whose `details.reason` says why."""
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https"):
        raise _refused(url, "scheme", "only http and https URLs can be fetched")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise _refused(url, "credentials", "a URL may not carry a user name or password")
    if not authority or authority.startswith(":"):
        raise _refused(url, "host", "the URL has no host")
    if not _URL.fullmatch(url):
        raise _refused(
            url, "malformed", "the URL is malformed: printable ASCII, a host name or IPv4 address (no IPv6 literal)"
        )
    return url


def check_public_url(url: str, *, allow_loopback: bool = False) -> str:
    """`url` if its syntax is right (`check_url_syntax`) and its host, when an address literal, is a
    public address (or, with `allow_loopback`, a loopback one); else ValidationError naming the reason."""
    host = urlsplit(check_url_syntax(url)).hostname or ""
    loopback_names = host == "localhost" or host.endswith(".localhost")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if loopback_names and not allow_loopback:
            raise _refused(url, "private_address", "the host is this machine") from None
        return url
    if address.is_loopback and allow_loopback:
        return url
    if not address.is_global or address.is_multicast:
        raise _refused(url, "private_address", "the host is not a public address")
    return url


def _refused(url: str, reason: str, message: str) -> ValidationError:
    return ValidationError(f"{reason}: {message} ({url[:200]})", details={"field": "url", "reason": reason})
