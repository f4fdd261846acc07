"""The refresh of a web source (`citewise.ingest.sources`) against a site double: what it asks for, what it
stores, what it removes, where it stops, and that a second refresh is refused while one runs."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from citewise.domain.errors import ForbiddenError, NotFoundError, ValidationError
from citewise.domain.models import Caller
from citewise.domain.sources import (
    RefreshRunningError,
    RefreshStatus,
    SourceCategory,
    SourceKind,
    SourceSpec,
    VersionTemplate,
    page_path,
    url_key,
)
from citewise.ingest.sources import (
    Refresher,
    register_source,
    remove_source,
    request_refresh,
    start_due,
    start_refresh,
)
from citewise.ports.sources import RefreshMessage
from citewise.ports.web import FetchOutcome, PageFetcher
from citewise_local.sources import LocalSources
from tests.doubles.web import FakeSite, Page, html, sitemap, sitemap_index

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ADMIN = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
MEMBER = Caller(tenant_id="acme", user_id="bob")
SITE = "https://docs.example.com"


@dataclass
class Documents:
    """A DocumentWriter double: the documents stored (path -> body, metadata) and every write."""

    stored: dict[str, tuple[bytes, dict[str, str], str]] = field(default_factory=dict)
    writes: int = 0

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        self.stored[path] = (data, metadata, owner)
        self.writes += 1

    def remove(self, tenant_id: str, path: str) -> None:
        self.stored.pop(path, None)


@dataclass
class Queue:
    sent: list[RefreshMessage] = field(default_factory=list)

    def send(self, message: RefreshMessage, *, delay_seconds: int = 0) -> None:
        self.sent.append(message)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalSources]:
    sources = LocalSources(tmp_path / "sources.db")
    yield sources
    sources.close()


def docs_site(n: int = 5, *, validators: bool = True) -> FakeSite:
    urls = [f"{SITE}/3.12/page-{i}.html" for i in range(n)]
    site = FakeSite(
        {url: Page(html(f"Page {i}", f"Text of page {i}."), validators=validators) for i, url in enumerate(urls)}
    )
    site.pages[f"{SITE}/sitemap.xml"] = Page(sitemap(*urls), content_type="application/xml", validators=False)
    return site


def refresh(store: LocalSources, site: PageFetcher, documents: Documents, source_id: str) -> tuple[Refresher, object]:
    queue = Queue()
    start_refresh(store, queue, "acme", source_id, now=NOW)
    refresher = Refresher(store, site, documents, source_key="source", source_date_key="updated_at", clock=lambda: NOW)
    return refresher, refresher.run(queue.sent[0])


def sitemap_source(store: LocalSources, **spec: object) -> str:
    fields: dict[str, object] = {"kind": "sitemap", "url": f"{SITE}/sitemap.xml", "category": "official_docs"}
    return register_source(store, ADMIN, SourceSpec.model_validate(fields | spec), now=NOW).source_id


def test_the_double_has_the_ports_shape() -> None:
    assert inspect.signature(FakeSite.fetch) == inspect.signature(PageFetcher.fetch)


def test_a_first_refresh_stores_every_page_with_the_contracts_path_and_metadata(store: LocalSources) -> None:
    # Given a sitemap of five pages and a source with a version template
    site, documents = docs_site(), Documents()
    source_id = sitemap_source(store, version_template=f"{SITE}/{{version}}/")
    # When it is refreshed
    _, run = refresh(store, site, documents, source_id)
    # Then every page is stored at its path, owned by the admin, with the contract's metadata
    url = f"{SITE}/3.12/page-0.html"
    body, metadata, owner = documents.stored[page_path(source_id, url, "html")]
    assert page_path(source_id, url, "html") == f"sources/{source_id}/{url_key(url)}.html"
    assert owner == "carol" and b"Text of page 0." in body
    assert metadata == {
        "source_id": source_id,
        "url": url,
        "category": "official_docs",
        "source": "official_docs",
        "version": "3.12",
    }
    assert len(documents.stored) == 5
    assert run.status is RefreshStatus.COMPLETED
    assert (run.summary.requests, run.summary.new, run.summary.changed) == (6, 5, 0)
    # And the source records the run and its next refresh (a day later for official docs)
    source = store.source("acme", source_id)
    assert source.running is None and source.last_run == run
    assert source.next_refresh_at == NOW + timedelta(hours=24)


@pytest.mark.parametrize("validators", [True, False], ids=["etag", "content-hash"])
def test_when_one_page_of_n_changes_only_it_is_stored_again(store: LocalSources, validators: bool) -> None:
    # Given a refreshed site of 20 pages, with or without ETags
    site, documents = docs_site(20, validators=validators), Documents()
    source_id = sitemap_source(store)
    refresh(store, site, documents, source_id)
    site.log.clear()
    writes = documents.writes
    # When one page changes and the source is refreshed again
    site.pages[f"{SITE}/3.12/page-7.html"] = Page(html("Page 7", "New text."), validators=validators)
    _, run = refresh(store, site, documents, source_id)
    # Then one request per page and one for the sitemap, and one page stored
    assert site.requests() == 21
    assert documents.writes - writes == 1
    assert run.summary.changed == 1
    if validators:
        assert (run.summary.not_modified, run.summary.unchanged) == (19, 0)
    else:
        assert (run.summary.not_modified, run.summary.unchanged) == (0, 19)


def test_a_page_gone_is_removed_after_gone_after_refreshes_in_a_row(store: LocalSources) -> None:
    site, documents = docs_site(3), Documents()
    source_id = sitemap_source(store, gone_after=2)
    refresh(store, site, documents, source_id)
    gone = f"{SITE}/3.12/page-1.html"
    del site.pages[gone]  # and from the sitemap
    site.pages[f"{SITE}/sitemap.xml"] = Page(sitemap(*(u for u in site.pages if "page" in u)), validators=False)
    # The first refresh that finds it gone keeps its document
    _, run = refresh(store, site, documents, source_id)
    assert (run.summary.gone, run.summary.removed) == (1, 0)
    assert page_path(source_id, gone, "html") in documents.stored
    # The second removes it, and it is asked for no more
    _, run = refresh(store, site, documents, source_id)
    assert (run.summary.gone, run.summary.removed) == (1, 1)
    assert page_path(source_id, gone, "html") not in documents.stored
    site.log.clear()
    refresh(store, site, documents, source_id)
    assert gone not in [url for url, _ in site.log]


def test_a_page_back_before_gone_after_keeps_its_document(store: LocalSources) -> None:
    site, documents = docs_site(2), Documents()
    source_id = sitemap_source(store, gone_after=2)
    refresh(store, site, documents, source_id)
    url = f"{SITE}/3.12/page-0.html"
    page = site.pages.pop(url)
    refresh(store, site, documents, source_id)
    site.pages[url] = page
    refresh(store, site, documents, source_id)
    del site.pages[url]
    _, run = refresh(store, site, documents, source_id)
    assert run.summary.removed == 0  # the misses counted again from zero


def test_caps_stop_the_refresh_and_say_so(store: LocalSources) -> None:
    site, documents = docs_site(10), Documents()
    source_id = sitemap_source(store, max_pages=4)
    _, run = refresh(store, site, documents, source_id)
    assert run.status is RefreshStatus.CAPPED and run.summary.capped == "max_pages"
    assert len(documents.stored) == 4
    # Bytes: every page is ~100 bytes; a 1 KiB cap stops after about ten
    big = FakeSite({f"{SITE}/p{i}": Page(b"x" * 400, content_type="text/plain") for i in range(10)})
    listed = register_source(
        store, ADMIN, SourceSpec(kind=SourceKind.URLS, urls=list(big.pages), max_bytes=1024), now=NOW
    ).source_id
    _, run = refresh(store, big, documents, listed)
    assert run.summary.capped == "max_bytes" and run.summary.bytes == 1200 and big.requests() == 3


def test_a_crawl_follows_links_under_its_prefix_to_its_depth(store: LocalSources) -> None:
    site = FakeSite(
        {
            f"{SITE}/guide/": Page(html("Guide", "Start.", "intro.html", "/blog/post.html", "https://other.example/")),
            f"{SITE}/guide/intro.html": Page(html("Intro", "Intro.", "deep.html", "#top")),
            f"{SITE}/guide/deep.html": Page(html("Deep", "Deep.", "deeper.html")),
            f"{SITE}/guide/deeper.html": Page(html("Deeper", "Too deep.")),
            f"{SITE}/blog/post.html": Page(html("Post", "Outside.")),
        }
    )
    documents = Documents()
    spec = SourceSpec(kind=SourceKind.CRAWL, url=f"{SITE}/guide/", depth=2, category=SourceCategory.TUTORIAL)
    source_id = register_source(store, ADMIN, spec, now=NOW).source_id
    _, run = refresh(store, site, documents, source_id)
    assert sorted(url for url, _ in site.log) == [
        f"{SITE}/guide/",
        f"{SITE}/guide/deep.html",
        f"{SITE}/guide/intro.html",
    ]
    assert run.summary.new == 3
    # A second refresh gets 304 for the pages and still visits the children it cannot read links from
    site.log.clear()
    _, run = refresh(store, site, documents, source_id)
    assert run.summary.not_modified == 3 and len(site.log) == 3


def test_a_sitemap_index_is_followed_and_failures_are_counted_by_reason(store: LocalSources) -> None:
    site = docs_site(2)
    urls = [url for url in site.pages if "page" in url]
    site.pages[f"{SITE}/sitemap.xml"] = Page(
        sitemap_index(f"{SITE}/a.xml", f"{SITE}/b.xml"), content_type="application/xml", validators=False
    )
    site.pages[f"{SITE}/a.xml"] = Page(sitemap(urls[0], f"{SITE}/robots-only"), content_type="application/xml")
    site.pages[f"{SITE}/b.xml"] = Page(sitemap(urls[1], f"{SITE}/down"), content_type="application/xml")
    site.refused[f"{SITE}/robots-only"] = "robots"
    site.failed[f"{SITE}/down"] = "http_5xx"
    documents = Documents()
    _, run = refresh(store, site, documents, sitemap_source(store))
    assert run.summary.new == 2 and run.summary.failed == 2
    assert run.summary.reasons == {"robots": 1, "http_5xx": 1}
    assert FetchOutcome.REFUSED in [outcome for _, outcome in site.log]


def test_a_second_refresh_is_refused_while_one_runs(store: LocalSources) -> None:
    source_id = sitemap_source(store)
    queue = Queue()
    request_refresh(store, queue, ADMIN, source_id, now=NOW)
    with pytest.raises(RefreshRunningError) as refused:
        request_refresh(store, queue, ADMIN, source_id, now=NOW + timedelta(minutes=1))
    assert refused.value.http_status == 409 and refused.value.code == "REFRESH_RUNNING"
    assert len(queue.sent) == 1
    # And the schedule leaves it to the running refresh
    assert start_due(store, queue, now=NOW + timedelta(minutes=1)) == []
    assert len(queue.sent) == 1


def test_a_run_out_of_time_saves_and_continues_where_it_stopped(store: LocalSources) -> None:
    site, documents = docs_site(6), Documents()
    source_id = sitemap_source(store)
    queue = Queue()
    start_refresh(store, queue, "acme", source_id, now=NOW)
    refresher = Refresher(store, site, documents, source_key="source", source_date_key="updated_at", clock=lambda: NOW)
    budget = iter([100.0, 100.0, 100.0, 0.0])
    partial = refresher.run(queue.sent[0], time_left=lambda: next(budget, 0.0))
    assert partial is not None and partial.finished_at is None
    assert partial.summary.new == 3 and partial.summary.pending == 3
    assert store.source("acme", source_id).running.run.summary.pending == 3
    finished = refresher.run(queue.sent[0])
    assert finished is not None and finished.summary.new == 6 and finished.summary.pending == 0
    assert len([url for url, _ in site.log if "page" in url]) == 6  # no page asked for twice
    # A stale message does nothing
    assert refresher.run(queue.sent[0]) is None


def test_the_schedule_starts_due_sources_once(store: LocalSources) -> None:
    due = sitemap_source(store)
    queue = Queue()
    assert [m.source_id for m in start_due(store, queue, now=NOW)] == [due]
    assert start_due(store, queue, now=NOW) == []


def test_registration_is_for_admins_and_refuses_unsafe_urls(store: LocalSources) -> None:
    spec = SourceSpec(kind=SourceKind.SITEMAP, url=f"{SITE}/sitemap.xml")
    with pytest.raises(ForbiddenError):
        register_source(store, MEMBER, spec, now=NOW)
    # The syntax is refused by the model, naming the reason
    for url, reason in [
        ("https://user:pw@docs.example.com/", "credentials"),
        ("ftp://docs.example.com/sitemap.xml", "scheme"),
        ("http://:80/sitemap.xml", "host"),
        ("http://[docs.example.com]/", "malformed"),
        ("https://[::1]/", "malformed"),
        ("http://[0]/", "malformed"),
    ]:
        with pytest.raises(ValueError, match=reason):
            SourceSpec(kind=SourceKind.SITEMAP, url=url)
    # An address that is not public, by the registration
    for url in [
        "https://127.0.0.1/sitemap.xml",
        "http://169.254.169.254/latest/meta-data/",
        "https://10.0.0.8/",
        "http://localhost:8080/",
        "http://224.0.0.1/",
    ]:
        with pytest.raises(ValidationError) as refused:
            register_source(store, ADMIN, SourceSpec(kind=SourceKind.SITEMAP, url=url), now=NOW)
        assert refused.value.details["reason"] == "private_address", url
    # The local-only switch lets loopback through, and nothing else
    local = SourceSpec(kind=SourceKind.SITEMAP, url="http://127.0.0.1:8000/sitemap.xml")
    assert register_source(store, ADMIN, local, now=NOW, allow_loopback=True).spec == local
    with pytest.raises(ValidationError):
        register_source(
            store, ADMIN, SourceSpec(kind=SourceKind.URLS, urls=["http://10.1.2.3/"]), now=NOW, allow_loopback=True
        )


def test_removing_a_source_removes_its_documents(store: LocalSources) -> None:
    site, documents = docs_site(3), Documents()
    source_id = sitemap_source(store)
    refresh(store, site, documents, source_id)
    with pytest.raises(ForbiddenError):
        remove_source(store, documents, MEMBER, source_id, now=NOW)
    assert remove_source(store, documents, ADMIN, source_id, now=NOW) == 3
    assert documents.stored == {}
    assert store.source("acme", source_id) is None
    with pytest.raises(NotFoundError):
        remove_source(store, documents, ADMIN, source_id, now=NOW)


def test_a_source_is_not_removed_while_it_refreshes(store: LocalSources) -> None:
    source_id = sitemap_source(store)
    request_refresh(store, Queue(), ADMIN, source_id, now=NOW)
    with pytest.raises(RefreshRunningError):
        remove_source(store, Documents(), ADMIN, source_id, now=NOW)


@pytest.mark.parametrize(
    ("template", "url", "version"),
    [
        ("https://docs.python.org/{version}/", "https://docs.python.org/3.12/library/os.html", "3.12"),
        ("/{version}/", "https://fastapi.example/0.115.0/tutorial/", "0.115.0"),
        ("/docs/*/v{version}/", "https://x.example/docs/en/v2.1/", "2.1"),
        ("https://docs.python.org/{version}/", "https://docs.python.org/library/os.html", None),
    ],
)
def test_version_templates_read_the_version_from_the_url(template: str, url: str, version: str | None) -> None:
    assert VersionTemplate(template).version(url) == version


def test_a_version_template_matches_in_linear_time_on_a_hostile_url() -> None:
    import time

    template = VersionTemplate("/*/*/*/{version}/*/*/x")
    hostile = "https://a.example/" + "a/" * 400 + "!" * 600
    started = time.perf_counter()
    assert template.version(hostile) is None
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("template", ["no placeholder", "/{version}/{version}/", "/{ver sion}/", ""])
def test_a_version_template_needs_exactly_one_placeholder(template: str) -> None:
    with pytest.raises(ValueError, match="version"):
        SourceSpec(kind=SourceKind.SITEMAP, url=f"{SITE}/sitemap.xml", version_template=template)
