"""The PageFetcher port: one web page fetched politely and safely (issue 31's contract between helpers).

A copy on the `sources` branch, so the refresh logic can be written and tested against it before the
`web-fetch` branch (which owns this module and its fetcher) is merged: the classes below are the
contract's text (formatted by ruff). The contract's `check_public_url` is in `citewise.domain.weburl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


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
