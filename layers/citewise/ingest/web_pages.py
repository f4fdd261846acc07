"""Pages of the web as citewise reads them: sitemaps, links, and a page's main content (no network).

A STAND-IN on the `sources` branch with the contract's signatures (issue 31): the `web-fetch` branch owns
this module (a hardened sitemap parser, main-content extraction with a maintained library, the page's
own date) and replaces it when merged. This one reads what the refresh logic and its tests need: a
sitemap or sitemap index parsed with expat (no external entities), `<a href>` links, and the page
body unchanged as the extracted content.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit
from xml.etree import ElementTree

from citewise.ports.web import FetchedPage

_MAX_SITEMAP_ENTRIES = 50_000
"""The sitemap protocol's own limit on the URLs of one file."""


@dataclass(frozen=True)
class SitemapEntry:
    """One `<loc>` of a sitemap (a page) or of a sitemap index (another sitemap)."""

    url: str
    lastmod: str | None = None


@dataclass(frozen=True)
class ExtractedPage:
    """What of a fetched page becomes a document."""

    title: str | None
    body: bytes
    content_type: str
    source_date: datetime | None


def sitemap_urls(body: bytes) -> list[SitemapEntry]:
    """The `<loc>` entries of a sitemap or sitemap index, in order; [] for what is not one."""
    try:
        root = ElementTree.fromstring(body)  # noqa: S314 - stand-in; expat resolves no external entity
    except ElementTree.ParseError:
        return []
    entries = []
    for element in root:
        loc = next((child.text for child in element if child.tag.endswith("loc")), None)
        lastmod = next((child.text for child in element if child.tag.endswith("lastmod")), None)
        if loc and loc.strip():
            entries.append(SitemapEntry(loc.strip(), lastmod.strip() if lastmod else None))
    return entries[:_MAX_SITEMAP_ENTRIES]


def page_links(html: bytes, base_url: str) -> list[str]:
    """The page's links as absolute http(s) URLs without fragments, in order, each once."""
    parser = _Links()
    parser.feed(html.decode("utf-8", "replace"))
    found: dict[str, None] = {}
    for href in parser.hrefs:
        url = urldefrag(urljoin(base_url, href.strip())).url
        if urlsplit(url).scheme in ("http", "https"):
            found.setdefault(url)
    return list(found)


def extract_page(page: FetchedPage) -> ExtractedPage:
    """The page as fetched (the stand-in extracts nothing)."""
    return ExtractedPage(title=None, body=page.body, content_type=page.content_type or "text/html", source_date=None)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)
