"""Sitemaps, links and main content of web pages (citewise.ingest.web_pages): logic on bytes, no network."""

from __future__ import annotations

import gzip
import importlib
import sys
from datetime import UTC, datetime

import pytest

from citewise.domain.errors import ValidationError
from citewise.ingest import web_pages
from citewise.ingest.parsing.html import parse_html
from citewise.ingest.web_pages import SitemapEntry, extract_page, page_links, sitemap_urls
from citewise.ports.web import FetchedPage, FetchOutcome, Validators

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def _urlset(*entries: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{"".join(entries)}</urlset>'.encode()


def test_a_urlset_gives_its_pages_with_their_last_modification() -> None:
    body = _urlset(
        "<url><loc> https://docs.example/a.html </loc><lastmod>2026-03-01T10:00:00+01:00</lastmod></url>",
        "<url><loc>https://docs.example/b.html</loc><lastmod>2026-03-02</lastmod><priority>0.5</priority></url>",
        "<url><loc>https://docs.example/c.html</loc></url>",
    )

    assert sitemap_urls(body) == [
        SitemapEntry("https://docs.example/a.html", datetime(2026, 3, 1, 9, 0, tzinfo=UTC)),
        SitemapEntry("https://docs.example/b.html", datetime(2026, 3, 2, tzinfo=UTC)),
        SitemapEntry("https://docs.example/c.html", None),
    ]


def test_a_sitemap_index_names_sitemaps() -> None:
    body = (
        f"<sitemapindex {NS}><sitemap><loc>https://docs.example/s1.xml</loc><lastmod>2026-01-05</lastmod></sitemap>"
        "<sitemap><loc>https://docs.example/s2.xml.gz</loc></sitemap></sitemapindex>"
    ).encode()

    assert sitemap_urls(body) == [
        SitemapEntry("https://docs.example/s1.xml", datetime(2026, 1, 5, tzinfo=UTC), sitemap=True),
        SitemapEntry("https://docs.example/s2.xml.gz", None, sitemap=True),
    ]


def test_a_gzip_sitemap_a_sitemap_without_namespace_repeats_and_other_schemes() -> None:
    body = gzip.compress(
        b"<urlset><url><loc>https://docs.example/a</loc></url><url><loc>https://docs.example/a</loc></url>"
        b"<url><loc>ftp://docs.example/f</loc></url><url><loc>javascript:x</loc></url><url><lastmod>2026</lastmod>"
        b"</url><url><loc>http://docs.example/b</loc><lastmod>not a date</lastmod></url></urlset>"
    )

    assert [entry.url for entry in sitemap_urls(body)] == ["https://docs.example/a", "http://docs.example/b"]


def test_a_sitemap_keeps_at_most_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_pages, "MAX_SITEMAP_ENTRIES", 3)
    body = _urlset(*(f"<url><loc>https://docs.example/{n}</loc></url>" for n in range(10)))

    assert [entry.url for entry in sitemap_urls(body)] == [f"https://docs.example/{n}" for n in range(3)]


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>
<urlset><url><loc>https://docs.example/&lol4;</loc></url></urlset>"""
EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>https://docs.example/&secret;</loc></url></urlset>"""
EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE urlset SYSTEM "http://169.254.169.254/latest/meta-data/">
<urlset><url><loc>https://docs.example/a</loc></url></urlset>"""


@pytest.mark.parametrize(
    "body",
    [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD, b"<html><body>not xml", b"", b"<feed><entry/></feed>"],
    ids=["billion-laughs", "external-entity", "external-dtd", "not-xml", "empty", "another-root"],
)
def test_anything_but_a_plain_sitemap_is_refused(body: bytes) -> None:
    with pytest.raises(ValidationError) as raised:
        sitemap_urls(body)

    assert raised.value.details == {"reason": "sitemap"}


def test_a_gzip_bomb_stops_at_the_size_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_pages, "MAX_SITEMAP_BYTES", 1024 * 1024)
    bomb = gzip.compress(b"<urlset>" + b" " * (8 * 1024 * 1024) + b"</urlset>")

    with pytest.raises(ValidationError, match="over 1048576 bytes"):
        sitemap_urls(bomb)


def test_page_links_are_absolute_fragment_free_http_links_in_order() -> None:
    html = b"""<html><head></head><body>
      <a href="intro.html#start">Intro</a> <a href="/api/">API</a> <a href="intro.html">again</a>
      <a href="https://other.example/x?y=1#z">elsewhere</a> <a href="mailto:a@b.example">mail</a>
      <a href="javascript:void(0)">js</a> <a href="#top">top</a> <a href="ads.html" rel="sponsored nofollow">ad</a>
      <a>no href</a> <a href="  ../up.html ">up</a></body></html>"""

    assert page_links(html, "https://docs.example/guide/index.html") == [
        "https://docs.example/guide/intro.html",
        "https://docs.example/api/",
        "https://other.example/x?y=1",
        "https://docs.example/guide/index.html",
        "https://docs.example/up.html",
    ]


def test_page_links_follow_the_base_element() -> None:
    html = b'<head><base href="https://docs.example/v2/"></head><a href="page.html">p</a>'

    assert page_links(html, "https://docs.example/v1/other.html") == ["https://docs.example/v2/page.html"]


DOCS_PAGE = b"""<!DOCTYPE html><html><head><title>Widgets - Example Docs</title>
<meta name="dcterms.modified" content="2026-02-03T04:05:06Z"></head><body>
<header><div class="logo">Example Docs</div><div class="top-links">Home Blog Pricing Sign in</div></header>
<div class="sidebar"><ul><li><a href="/a">Getting started</a></li><li><a href="/b">Installation guide</a></li>
<li><a href="/c">Configuration reference</a></li><li><a href="/d">Frequently asked questions</a></li></ul></div>
<main><article>
<h1>Widgets<a class="headerlink" href="#widgets">\xc2\xb6</a></h1>
<p>A widget turns a frobnicated stream into a sequence of gizmos. Call <code>make_widget()</code> with the
stream and a size; the widget reads the stream lazily and yields one gizmo per record it finds.</p>
<h2>Sizes<a class="headerlink" href="#sizes">\xc2\xb6</a></h2>
<p>The size bounds how many records a widget buffers before it yields. Small sizes keep memory low; large
sizes amortise the cost of reading. The default of sixty-four suits most streams we have measured.</p>
<p>Widgets are thread-safe once built, but building one is not: build them in one thread and share them.</p>
</article></main>
<footer><p>Copyright 2026 Example Corp. All rights reserved. Privacy policy. Terms of service.</p>
<p>Built with a documentation generator.</p></footer></body></html>"""


def _page(body: bytes, content_type: str = "text/html", last_modified: str | None = None) -> FetchedPage:
    return FetchedPage(
        "https://docs.example/widgets.html",
        "https://docs.example/widgets.html",
        FetchOutcome.FETCHED,
        200,
        body,
        content_type,
        Validators(etag='"1"', last_modified=last_modified),
    )


def test_the_main_content_keeps_headings_and_paragraphs_and_drops_the_chrome() -> None:
    extracted = extract_page(_page(DOCS_PAGE))

    parsed = parse_html(extracted.body.decode("utf-8"), "page.html")
    assert extracted.content_type == "text/html"
    assert extracted.title == parsed.title == "Widgets - Example Docs"
    assert "A widget turns a frobnicated stream" in parsed.text
    assert "build them in one thread and share them" in parsed.text
    for chrome in ("Sign in", "Installation guide", "Copyright 2026", "Built with"):
        assert chrome not in parsed.text
    headings = [block.heading_path[-1] for block in parsed.blocks if block.is_heading]
    assert headings == ["Widgets", "Sizes"]  # the permalink's pilcrow is not part of the heading


def test_inline_code_stays_inside_its_paragraph() -> None:
    parsed = parse_html(extract_page(_page(DOCS_PAGE)).body.decode("utf-8"), "page.html")

    assert any("Call make_widget() with the stream" in parsed.text[block.start : block.end] for block in parsed.blocks)


def test_the_page_date_comes_from_the_page_before_the_servers_last_modified() -> None:
    extracted = extract_page(_page(DOCS_PAGE, last_modified="Sun, 01 Mar 2026 00:00:00 GMT"))

    assert extracted.source_date == datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert parse_html(extracted.body.decode("utf-8"), "page.html").source_date == extracted.source_date


def test_without_a_date_in_the_page_the_servers_last_modified_is_the_date() -> None:
    # Not the footer's "Copyright 2026": a year in the text is no date of the content.
    undated = DOCS_PAGE.replace(b'<meta name="dcterms.modified" content="2026-02-03T04:05:06Z">', b"")

    extracted = extract_page(_page(undated, last_modified="Sun, 01 Mar 2026 00:00:00 GMT"))

    assert extracted.source_date == datetime(2026, 3, 1, tzinfo=UTC)


def test_a_page_of_navigation_only_still_gives_a_page() -> None:
    tiny = b"<html><head><title>Hi</title></head><body><nav><a href='/'>Home</a></nav></body></html>"

    extracted = extract_page(_page(tiny))

    assert extracted.content_type == "text/html"
    assert b"Home" in extracted.body


@pytest.mark.parametrize("content_type", ["application/pdf", "text/markdown", "text/plain"])
def test_other_formats_are_kept_as_fetched(content_type: str) -> None:
    extracted = extract_page(_page(b"%PDF-1.7 or # Title or text", content_type, "Sun, 01 Mar 2026 00:00:00 GMT"))

    assert (extracted.body, extracted.content_type, extracted.title) == (
        b"%PDF-1.7 or # Title or text",
        content_type,
        None,
    )
    assert extracted.source_date == datetime(2026, 3, 1, tzinfo=UTC)


def test_without_the_web_extra_the_module_imports_and_only_extraction_fails_saying_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a function without the web layer: neither trafilatura nor lxml can be imported
    for name in ("trafilatura", "lxml", "lxml.etree"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "citewise.ingest.web_pages")
    # When the module is imported, it imports, and sitemaps, links and non-HTML pages still work
    module = importlib.import_module("citewise.ingest.web_pages")
    assert module.sitemap_urls(_urlset("<url><loc>https://docs.example/a.html</loc></url>"))[0].url == (
        "https://docs.example/a.html"
    )
    assert module.page_links(b'<a href="/b.html">b</a>', "https://docs.example/a.html") == [
        "https://docs.example/b.html"
    ]
    assert module.extract_page(_page(b"# Widgets", "text/markdown")).body == b"# Widgets"
    # Then extracting an HTML page fails with an error naming the extra and the layer
    with pytest.raises(ModuleNotFoundError, match=r"citewise\[web\].*web layer") as raised:
        module.extract_page(_page(b"<html><body><main><p>Widgets turn.</p></main></body></html>"))
    assert raised.value.name == "trafilatura"
