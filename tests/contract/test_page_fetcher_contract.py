"""One PageFetcher contract (citewise.ports.web), run against every adapter over the documentation site
double on 127.0.0.1: today the `WebPageFetcher` of Lambda and local mode, with its local-only loopback
switch. A double of the port (a scripted fetcher for a refresh's unit tests) joins `ADAPTERS` and is held
to the same answers.

What a caller relies on: a fetch never raises for what the web does; `url` is as asked and `final_url`
where the answer came from; `content_type` is the bare media type in lower case; `validators` are the
answer's (a 304's are the request's when it sends none); a body only with FETCHED; `status` None only
when nothing answered; `reason` a short code with REFUSED and FAILED only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher
from citewise.ports.web import FetchedPage, FetchOutcome, PageFetcher, Validators
from tests.doubles.docsite import DocSite

ADAPTERS: dict[str, Callable[[], PageFetcher]] = {
    "web": lambda: WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0.0, total_timeout=2.0)),
}
PAGE = "<html><head><title>Page</title></head><body><p>Text.</p></body></html>"


@pytest.fixture(params=sorted(ADAPTERS))
def fetcher(request: pytest.FixtureRequest) -> PageFetcher:
    return ADAPTERS[request.param]()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[DocSite]:
    (tmp_path / "page.html").write_text(PAGE, encoding="utf-8")
    with DocSite(tmp_path) as served:
        served.slow_seconds = 3.0
        yield served


def _well_formed(page: FetchedPage, asked: str) -> None:
    assert page.url == asked
    assert (page.body != b"") == (page.outcome is FetchOutcome.FETCHED)
    assert (page.reason is not None) == (page.outcome in (FetchOutcome.REFUSED, FetchOutcome.FAILED))
    if page.outcome is FetchOutcome.REFUSED:
        assert page.status is None


def test_fetched(fetcher: PageFetcher, site: DocSite) -> None:
    url = f"{site.url}/page.html"

    page = fetcher.fetch(url)

    _well_formed(page, url)
    assert (page.outcome, page.status, page.final_url) == (FetchOutcome.FETCHED, 200, url)
    assert page.body == PAGE.encode() and page.content_type == "text/html"
    assert page.validators.etag is not None and page.validators.last_modified is not None


def test_not_modified_keeps_the_validators(fetcher: PageFetcher, site: DocSite) -> None:
    url = f"{site.url}/page.html"
    first = fetcher.fetch(url)

    again = fetcher.fetch(url, validators=first.validators)
    by_date = fetcher.fetch(url, validators=Validators(last_modified=first.validators.last_modified))

    _well_formed(again, url)
    assert (again.outcome, again.status, again.validators) == (FetchOutcome.NOT_MODIFIED, 304, first.validators)
    assert by_date.outcome is FetchOutcome.NOT_MODIFIED


def test_gone(fetcher: PageFetcher, site: DocSite) -> None:
    site.remove("page.html")
    url = f"{site.url}/page.html"

    page = fetcher.fetch(url)

    _well_formed(page, url)
    assert (page.outcome, page.status) == (FetchOutcome.GONE, 404)


def test_redirected(fetcher: PageFetcher, site: DocSite) -> None:
    url = f"{site.url}/old/page.html"

    page = fetcher.fetch(url)

    _well_formed(page, url)
    assert (page.outcome, page.final_url) == (FetchOutcome.FETCHED, f"{site.url}/page.html")


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/private/secret.html", "robots"), ("/hostile/metadata", "private_address")],
)
def test_refused(fetcher: PageFetcher, site: DocSite, path: str, reason: str) -> None:
    page = fetcher.fetch(site.url + path)

    _well_formed(page, site.url + path)
    assert (page.outcome, page.reason) == (FetchOutcome.REFUSED, reason)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/data.json", "content_type"),
        ("/error.html", "http_5xx"),
        ("/loop", "too_many_redirects"),
        ("/slow.html", "timeout"),
        ("/huge.html", "too_large"),
    ],
)
def test_failed(fetcher: PageFetcher, site: DocSite, path: str, reason: str) -> None:
    page = fetcher.fetch(site.url + path)

    _well_formed(page, site.url + path)
    assert (page.outcome, page.reason) == (FetchOutcome.FAILED, reason)


@pytest.mark.parametrize(
    ("url", "reason"), [("ftp://docs.example/", "scheme"), ("https://u:p@docs.example/", "credentials")]
)
def test_refused_without_a_request(fetcher: PageFetcher, site: DocSite, url: str, reason: str) -> None:
    page = fetcher.fetch(url)

    _well_formed(page, url)
    assert (page.outcome, page.reason) == (FetchOutcome.REFUSED, reason)
    assert site.requests == []
