"""The PageFetcher port: one web page fetched politely and safely (issue 31's contract between helpers).

A minimal copy on the `sources` branch, so the refresh logic can be written and tested against it before
the `web-fetch` branch (which owns this module, its fetcher and the full address checks) is merged: the
classes below are the contract's text. `check_public_url` here makes the syntax checks only (scheme,
credentials, host, and an address literal that is not public); web-fetch's version replaces it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol
from urllib.parse import urlsplit

from citewise.domain.errors import ValidationError


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


def check_public_url(url: str, *, allow_loopback: bool = False) -> str:
    """`url` if it is an http(s) URL with a host and no credentials whose host, when it is an address
    literal, is a public one; else ValidationError whose `details.reason` names why. Names are not
    resolved here: the fetcher checks every address it connects to."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise _refused(url, "scheme", "only http and https URLs can be fetched")
    if parts.username is not None or parts.password is not None:
        raise _refused(url, "credentials", "a URL may not carry a user name or password")
    host = parts.hostname
    if not host:
        raise _refused(url, "no_host", "the URL has no host")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            if not allow_loopback:
                raise _refused(url, "private_address", "the host is this machine") from None
        return url
    if address.is_loopback and allow_loopback:
        return url
    if not address.is_global or address.is_multicast:
        raise _refused(url, "private_address", "the host is not a public address")
    return url


def _refused(url: str, reason: str, message: str) -> ValidationError:
    return ValidationError(f"{message}: {url[:200]}", details={"field": "url", "reason": reason})
