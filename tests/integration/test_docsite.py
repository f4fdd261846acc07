"""The fetcher and the page logic on a real documentation site: Python 3.11's documentation, as Sphinx
rendered it, served by tests/doubles/docsite.py on 127.0.0.1 (the test skips where the pages cannot be had).

The walk a refresh makes: the sitemap, each page fetched and its main content extracted, then the same
pages again with their validators: what the second pass costs when nothing changed, and when one page
changed and one disappeared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher
from citewise.ingest.parsing.html import parse_html
from citewise.ingest.web_pages import extract_page, page_links, sitemap_urls
from citewise.ports.web import FetchedPage, FetchOutcome
from tests.doubles.docsite import DocSite, python_docs

pytestmark = pytest.mark.slow

PAGES = [
    "library/json.html",
    "library/csv.html",
    "library/pathlib.html",
    "library/datetime.html",
    "library/re.html",
    "tutorial/introduction.html",
    "tutorial/controlflow.html",
    "howto/logging.html",
]


@pytest.fixture(scope="module")
def site() -> Iterator[DocSite]:
    with DocSite(python_docs(), pages=PAGES) as served:
        yield served


def _crawl(fetcher: WebPageFetcher, urls: list[str], known: dict[str, FetchedPage]) -> dict[str, FetchedPage]:
    return {url: fetcher.fetch(url, validators=known[url].validators if url in known else None) for url in urls}


def test_a_refresh_of_the_real_site_costs_one_conditional_request_per_page_when_nothing_changed(
    site: DocSite,
) -> None:
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0))
    entries = sitemap_urls(fetcher.fetch(f"{site.url}/sitemap.xml").body)
    urls = [entry.url for entry in entries]
    assert urls == [f"{site.url}/{page}" for page in PAGES]

    first = _crawl(fetcher, urls, {})
    before = len(site.requests)
    second = _crawl(fetcher, urls, first)
    site.change("library/json.html")
    site.remove("library/csv.html")
    third = _crawl(fetcher, urls, first)

    assert {page.outcome for page in first.values()} == {FetchOutcome.FETCHED}
    assert {page.outcome for page in second.values()} == {FetchOutcome.NOT_MODIFIED}
    assert len(site.requests) - before == 2 * len(PAGES)  # robots.txt was read once, in the first pass
    assert site.count(status=304) == 2 * len(PAGES) - 2
    assert third[f"{site.url}/library/json.html"].outcome is FetchOutcome.FETCHED
    assert third[f"{site.url}/library/csv.html"].outcome is FetchOutcome.GONE
    assert [page.outcome for page in third.values()].count(FetchOutcome.NOT_MODIFIED) == len(PAGES) - 2


def test_real_pages_extract_to_their_main_text_with_their_title_and_links(site: DocSite) -> None:
    fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0))
    page = fetcher.fetch(f"{site.url}/library/json.html")

    extracted = extract_page(page)
    parsed = parse_html(extracted.body.decode("utf-8"), "json.html")
    raw = parse_html(page.body.decode("utf-8"), "json.html")

    assert extracted.title == "json — JSON encoder and decoder — Python 3.11.2 documentation"
    assert "JSON (JavaScript Object Notation)" in parsed.text
    assert "Be cautious when parsing JSON data from untrusted sources" in parsed.text
    for chrome in ("Table of Contents", "Previous topic", "Report a Bug", "Show Source", "Navigation"):
        assert chrome in raw.text  # what the raw page holds around the text ...
        assert chrome not in parsed.text  # ... and extraction leaves out
    assert f"{site.url}/library/marshal.html" in page_links(page.body, page.final_url)
