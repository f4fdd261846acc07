"""The PageFetcher port: one web page fetched politely and safely, and the rules of a fetchable URL.

A fetch never raises for what the web does (a timeout, a 404, a refusal): it answers a `FetchedPage` whose
`outcome` says what happened and whose `reason` is a short stable code, so a refresh records it per page
and goes on. What is public is decided once (`citewise.domain.weburl`), for the API (a 400 at registration,
`check_public_url`) and for the fetcher (every resolved address of every hop, `address_refusal`): both
refuse the same things.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

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
