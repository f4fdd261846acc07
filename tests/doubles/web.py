"""A PageFetcher double: a site held in memory that answers as a well-behaved server does.

`FakeSite` implements `citewise.ports.web.PageFetcher` (mypy checks the assignment in the tests, and
`tests/unit/test_source_refresh.py` its signature against the port's): pages with an ETag (or none, for
servers without validators), 304 to a matching `If-None-Match`, GONE for a page not there, and REFUSED or
FAILED for the URLs a test names. Every request is logged, so a test counts what a refresh cost. The real
fetcher and the test site served on 127.0.0.1 come with the `web-fetch` branch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from citewise.ports.web import FetchedPage, FetchOutcome, Validators


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html"
    validators: bool = True
    """Whether the server sends an ETag (and honours If-None-Match)."""

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'


@dataclass
class FakeSite:
    """Pages by URL; `refused` and `failed` map URLs to the reason the fetcher would give."""

    pages: dict[str, Page] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    log: list[tuple[str, FetchOutcome]] = field(default_factory=list)

    def fetch(self, url: str, *, validators: Validators | None = None) -> FetchedPage:
        page = self._answer(url, validators)
        self.log.append((url, page.outcome))
        return page

    def _answer(self, url: str, validators: Validators | None) -> FetchedPage:
        if url in self.refused:
            return FetchedPage(url, url, FetchOutcome.REFUSED, reason=self.refused[url])
        if url in self.failed:
            return FetchedPage(url, url, FetchOutcome.FAILED, status=503, reason=self.failed[url])
        page = self.pages.get(url)
        if page is None:
            return FetchedPage(url, url, FetchOutcome.GONE, status=404)
        sent = Validators(etag=page.etag) if page.validators else Validators()
        if page.validators and validators is not None and validators.etag == page.etag:
            return FetchedPage(url, url, FetchOutcome.NOT_MODIFIED, status=304, validators=sent)
        return FetchedPage(
            url, url, FetchOutcome.FETCHED, status=200, body=page.body, content_type=page.content_type, validators=sent
        )

    def requests(self) -> int:
        """Requests the site answered (a refused URL was never requested)."""
        return sum(1 for _, outcome in self.log if outcome is not FetchOutcome.REFUSED)


def sitemap(*urls: str) -> bytes:
    """A sitemap listing `urls`."""
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'.encode()
    )


def sitemap_index(*urls: str) -> bytes:
    """A sitemap index listing the sitemaps at `urls`."""
    entries = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in urls)
    return (
        f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}'
        "</sitemapindex>"
    ).encode()


def html(title: str, text: str, *links: str) -> bytes:
    """A small HTML page with a heading, a paragraph and links."""
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p>{anchors}</body></html>".encode()
    )
