"""Web sources end to end on a real documentation site: Python 3.11's documentation (Sphinx), served by
tests/doubles/docsite.py on 127.0.0.1 under `/3.11/`, refreshed into a local home by the real refresh
logic (`citewise.ingest.sources`), the real fetcher (`citewise.builtin.web_fetch`, its loopback switch on)
and the real ingest pipeline (hashing embedder); the test skips where the pages cannot be had.

What the fetcher alone does on the site (hostile redirects, the bomb, 429s) is tests/integration/
test_docsite.py's and test_web_fetch.py's; here, what a tenant's sources make of it: documents with their
source, URL, category and version, answers citing them, refreshes that cost conditional requests only,
a changed page re-ingested alone, a page gone removed after `gone_after` refreshes, robots.txt, the caps
and the time limit reported, one refresh at a time, removal and tenant isolation."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher
from citewise.domain.errors import NotFoundError
from citewise.domain.models import Caller, Document, DocumentStatus, SearchRequest
from citewise.domain.sources import RefreshRun, RefreshRunningError, SourceCategory, SourceKind, SourceSpec
from citewise.ingest.sources import register_source, remove_source, request_refresh, visible_source
from citewise.query.answering import answer_question
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from tests.doubles.docsite import DocSite, python_docs

pytestmark = pytest.mark.slow

VERSION = "3.11"
PAGES = [
    f"{VERSION}/library/json.html",
    f"{VERSION}/library/csv.html",
    f"{VERSION}/library/pathlib.html",
    f"{VERSION}/library/datetime.html",
    f"{VERSION}/tutorial/introduction.html",
    f"{VERSION}/howto/logging.html",
]
ADMIN = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
MEMBER = Caller(tenant_id="acme", user_id="dave")
OTHER = Caller(tenant_id="globex", user_id="carol", groups=("admin",))
MAX_PAGE_BYTES = 1024 * 1024


def versioned_site(root: Path) -> DocSite:
    """The documentation under `/3.11/` of `root` (a version in the URL, as docs.python.org has), the
    sitemap listing `PAGES`; to be started with `with`."""
    shutil.copytree(python_docs(), root / VERSION)
    return DocSite(root, pages=PAGES)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocSite]:
    with versioned_site(tmp_path_factory.mktemp("docsite")) as served:
        yield served


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """A local home with the real fetcher: loopback allowed, no politeness delay, and caps small enough
    for the slow and the huge page to meet them within a test."""
    settings = Settings(home=tmp_path / "home", embedder="hashing", web_allow_loopback=True, web_host_delay=0)
    built = build_services(settings)
    fetcher = WebPageFetcher(
        allow_loopback=True,
        limits=FetchLimits(max_bytes=MAX_PAGE_BYTES, read_timeout=1.0, total_timeout=2.0, host_delay=0.0),
    )
    built.__dict__["page_fetcher"] = fetcher  # the cached property, with the test's caps
    try:
        yield built
    finally:
        built.close()


def _refresh(services: Services, source_id: str) -> RefreshRun:
    """A tenant admin's refresh now, run to its end (as `citewise serve`'s loop runs what was queued)."""
    request_refresh(services.sources, services.refresh_queue, ADMIN, source_id, now=datetime.now(UTC))
    message = services.refresh_queue.receive()  # type: ignore[attr-defined]  # the local queue
    assert message is not None and message.source_id == source_id
    run = services.refresher().run(message)
    assert run is not None and run.finished_at is not None
    return run


def _documents(services: Services, caller: Caller, source_id: str) -> dict[str, Document]:
    """The caller's documents brought by the source, by URL."""
    listed = services.registry.list(caller.tenant_id, visible_to=caller.user_id, path_prefix=f"sources/{source_id}/")
    return {str(document.attributes["url"]): document for document in listed.items}


def _stored(documents: dict[str, Document]) -> dict[str, tuple[str, str | None]]:
    """Each document's object version and content hash: what changes when a page is stored again."""
    return {url: (document.version, document.content_hash) for url, document in documents.items()}


def _register(services: Services, **spec: object) -> str:
    return register_source(
        services.sources, ADMIN, SourceSpec.model_validate(spec), now=datetime.now(UTC), allow_loopback=True
    ).source_id


def test_a_sitemap_source_becomes_documents_refreshed_by_conditional_requests(
    site: DocSite, services: Services
) -> None:
    # Given a tenant admin's sitemap source of the site, its version read from the URL
    source_id = _register(
        services,
        kind=SourceKind.SITEMAP,
        url=f"{site.url}/sitemap.xml",
        category=SourceCategory.OFFICIAL_DOCS,
        version_template="/{version}/",
        gone_after=2,
    )
    urls = [f"{site.url}/{page}" for page in PAGES]
    # When it is refreshed for the first time
    first = _refresh(services, source_id)
    # Then every page is a document of the tenant, indexed, with its source, URL, category and version
    assert (first.summary.new, first.summary.failed, first.summary.requests) == (len(PAGES), 0, len(PAGES) + 1)
    documents = _documents(services, MEMBER, source_id)
    assert sorted(documents) == sorted(urls)
    for url, document in documents.items():
        assert document.status is DocumentStatus.INDEXED, document.error
        assert document.owner == "carol" and document.source == "official_docs"
        assert document.attributes == document.attributes | {
            "source_id": source_id,
            "url": url,
            "category": "official_docs",
            "version": VERSION,
        }
    # And a member's question is answered citing a page of the site
    question = SearchRequest(query="How do I decode a JSON document into a Python object?", top_k=5)
    answer = answer_question(services.retriever, services.synthesizer, MEMBER, question)
    assert answer.grounded and answer.citations, answer
    assert answer.citations[0].doc_id == documents[f"{site.url}/{VERSION}/library/json.html"].doc_id

    # When it is refreshed again with nothing changed
    before = _stored(documents)
    site.requests.clear()
    second = _refresh(services, source_id)
    # Then it costs the sitemap and one conditional request per page, every one answered 304, and stores nothing
    page_requests = [request for request in site.requests if request.path != "/sitemap.xml"]
    assert sorted(request.path for request in page_requests) == sorted(f"/{page}" for page in PAGES)
    assert {request.status for request in page_requests} == {304}
    assert all("If-None-Match" in request.headers for request in page_requests)
    assert (second.summary.not_modified, second.summary.new + second.summary.changed, second.summary.bytes) == (
        len(PAGES),
        0,
        0,
    )
    assert _stored(_documents(services, MEMBER, source_id)) == before

    # When one page changes and one disappears
    changed, gone = f"{site.url}/{VERSION}/library/csv.html", f"{site.url}/{VERSION}/library/pathlib.html"
    site.change(changed.removeprefix(site.url))
    site.remove(gone.removeprefix(site.url))
    third = _refresh(services, source_id)
    # Then the changed page alone is stored again, and the gone page stays until its second miss
    after = _stored(_documents(services, MEMBER, source_id))
    assert (third.summary.changed, third.summary.gone, third.summary.removed) == (1, 1, 0)
    assert [url for url in before if after.get(url) != before[url]] == [changed]
    hits = services.retriever.retrieve(MEMBER, SearchRequest(query="Changed for the 1. time by the test")).hits
    assert [hit.chunk.document.attributes["url"] for hit in hits if "Changed for the 1. time" in hit.chunk.text] == [
        changed
    ]  # its new text is indexed
    fourth = _refresh(services, source_id)
    assert (fourth.summary.gone, fourth.summary.removed, fourth.summary.not_modified) == (1, 1, len(PAGES) - 1)
    assert gone not in _documents(services, MEMBER, source_id)
    site.restore(gone.removeprefix(site.url))

    # And another tenant sees none of it
    assert _documents(services, OTHER, source_id) == {}
    assert services.sources.tenant_sources(OTHER.tenant_id) == []
    with pytest.raises(NotFoundError):
        visible_source(services.sources, OTHER, source_id)
    with pytest.raises(NotFoundError):
        request_refresh(services.sources, services.refresh_queue, OTHER, source_id, now=datetime.now(UTC))
    elsewhere = answer_question(services.retriever, services.synthesizer, OTHER, question)
    assert elsewhere.citations == [] and not elsewhere.grounded

    # When a second refresh is asked while one holds the source: refused, not queued twice
    request_refresh(services.sources, services.refresh_queue, ADMIN, source_id, now=datetime.now(UTC))
    with pytest.raises(RefreshRunningError):
        request_refresh(services.sources, services.refresh_queue, ADMIN, source_id, now=datetime.now(UTC))
    # And removing the source is refused while it runs, then removes every document it brought once it ended
    with pytest.raises(RefreshRunningError):
        remove_source(services.sources, services.document_writer, ADMIN, source_id, now=datetime.now(UTC))
    message = services.refresh_queue.receive()  # type: ignore[attr-defined]
    assert message is not None and services.refresh_queue.receive() is None  # type: ignore[attr-defined]
    assert services.refresher().run(message) is not None
    removed = remove_source(services.sources, services.document_writer, ADMIN, source_id, now=datetime.now(UTC))
    assert removed == len(PAGES)
    assert _documents(services, MEMBER, source_id) == {}
    assert not answer_question(services.retriever, services.synthesizer, MEMBER, question).citations


def test_a_crawl_stops_at_its_page_cap_and_says_so(site: DocSite, services: Services) -> None:
    # Given a crawl of the library's pages, one link deep, at most 4 pages
    prefix = f"{site.url}/{VERSION}/library/"
    source_id = _register(services, kind=SourceKind.CRAWL, url=prefix, depth=1, max_pages=4, version=VERSION)
    # When it is refreshed
    site.requests.clear()
    run = _refresh(services, source_id)
    # Then it stops at the cap, says so, and requests nothing beyond it nor outside the prefix
    assert run.summary.capped == "max_pages" and run.status == "capped"
    assert run.summary.new == 4 and run.summary.requests == 4
    paths = [request.path for request in site.requests if request.path != "/robots.txt"]
    assert len(paths) == 4 and all(path.startswith(f"/{VERSION}/library/") for path in paths)
    documents = _documents(services, ADMIN, source_id)
    assert len(documents) == 4 and {document.attributes["version"] for document in documents.values()} == {VERSION}


def test_robots_the_huge_page_and_the_slow_page_are_reported_and_the_rest_stored(
    site: DocSite, services: Services
) -> None:
    # Given a list of pages: a page robots.txt forbids, the huge one, the slow one, and a real page
    site.slow_seconds = 3.0
    listed = ["/private/secret.html", "/huge.html", "/slow.html", f"/{VERSION}/library/json.html"]
    source_id = _register(services, kind=SourceKind.URLS, urls=[site.url + path for path in listed])
    site.requests.clear()
    # When it is refreshed
    run = _refresh(services, source_id)
    # Then the forbidden page is never requested, the huge one is refused at the cap, the slow one times
    # out, each reported by its reason, and the real page is stored
    assert site.count("/private/secret.html") == 0
    assert run.summary.reasons == {"robots": 1, "too_large": 1, "timeout": 1}
    assert (run.summary.failed, run.summary.new) == (3, 1)
    assert list(_documents(services, ADMIN, source_id)) == [f"{site.url}/{VERSION}/library/json.html"]
