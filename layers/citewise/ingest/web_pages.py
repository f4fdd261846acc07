"""Web pages -> what a refresh needs: a sitemap's URLs, a page's links, a page's main content and date.

Logic only, no network: the bytes come from a `PageFetcher`. A sitemap is XML from anyone, so it is read
by defusedxml (no DTD, so no entity expansion and no external entity) and at most `MAX_SITEMAP_ENTRIES`
of it are kept, the protocol's own limit per file. The main content of an HTML page is found by
trafilatura (navigation, headers, footers, side bars and cookie banners dropped) and handed back as HTML
that `citewise.ingest.parsing.html` turns into headings and paragraphs, with the page's title and date.

trafilatura and lxml are pyproject's `web` extra, not runtime dependencies: on AWS they are in the web
layer, which only the function extracting pages carries. So they are imported at the first page
extracted, never at import: sitemaps and links need neither, and a function without them that is asked
to extract a page fails there, saying what is missing.
"""

from __future__ import annotations

import html
import zlib
from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit
from xml.etree.ElementTree import Element  # noqa: S405 - a type only: parsing is defusedxml's

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError as XmlError
from defusedxml.ElementTree import fromstring

from citewise.domain.errors import ParseError, ValidationError
from citewise.domain.provenance import iso, try_instant
from citewise.ingest.parsing.encoding import decode_text
from citewise.ingest.parsing.html import parse_html
from citewise.ports.web import FetchedPage

MAX_SITEMAP_ENTRIES = 50_000
"""URLs kept of one sitemap or sitemap index: the sitemaps.org protocol's limit per file."""
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
"""Uncompressed bytes of one sitemap (the protocol's limit): a gzip bomb stops there."""
_GZIP_MAGIC = b"\x1f\x8b"
_PILCROW = "\u00b6"
WEB_EXTRA_MISSING = (
    "extracting a web page needs trafilatura: install citewise's `web` extra (pip install 'citewise[web]'); "
    "on AWS, the function needs the web layer (FunctionsFactory.add_web_layer)"
)
_INLINE_PARENTS = frozenset(
    {"p", "li", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "a", "b", "i"}
)


@dataclass(frozen=True)
class SitemapEntry:
    """One `<loc>` of a sitemap; `sitemap` when it names another sitemap (an index's entry)."""

    url: str
    lastmod: datetime | None = None
    sitemap: bool = False


@dataclass(frozen=True)
class ExtractedPage:
    """What a fetched page becomes before the ingest path: the body to store and parse, and its date."""

    title: str | None
    body: bytes
    content_type: str
    source_date: datetime | None


def sitemap_urls(body: bytes) -> list[SitemapEntry]:
    """The entries of a sitemap (`<urlset>`) or of a sitemap index (`<sitemapindex>`, each entry
    `sitemap=True`), gzip or not, in document order, http(s) only, without repeats, at most
    `MAX_SITEMAP_ENTRIES`. ValidationError (reason "sitemap") for anything else, a DTD included."""
    xml = _gunzipped(body) if body[:2] == _GZIP_MAGIC else body
    try:
        root = fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except (XmlError, DefusedXmlException) as exc:
        raise ValidationError(f"not a sitemap: {type(exc).__name__}", details={"reason": "sitemap"}) from exc
    kind = _local_name(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise ValidationError(f"not a sitemap: the root element is <{kind}>", details={"reason": "sitemap"})
    entries: dict[str, SitemapEntry] = {}
    for item in root:
        if len(entries) >= MAX_SITEMAP_ENTRIES:
            break
        if _local_name(item.tag) not in ("url", "sitemap"):
            continue
        url = _child_text(item, "loc")
        if url and urlsplit(url).scheme in ("http", "https") and url not in entries:
            lastmod = try_instant(_child_text(item, "lastmod"))
            entries[url] = SitemapEntry(url, lastmod, sitemap=kind == "sitemapindex")
    return list(entries.values())


def page_links(html_body: bytes, base_url: str) -> list[str]:
    """The page's `<a href>` targets: absolute (against `<base href>` if any, else `base_url`), without
    fragment, http(s) only, `rel=nofollow` left out, without repeats, in document order."""
    reader = _LinkReader()
    reader.feed(decode_text(html_body, "page.html"))
    reader.close()
    base = urljoin(base_url, reader.base) if reader.base else base_url
    links: dict[str, None] = {}
    for href in reader.hrefs:
        url = urldefrag(urljoin(base, href.strip())).url
        if urlsplit(url).scheme in ("http", "https"):
            links[url] = None
    return list(links)


def extract_page(page: FetchedPage) -> ExtractedPage:
    """The page's main content as HTML (title, date meta and body) for citewise's HTML parser; a PDF,
    Markdown, text or docx page as fetched. The date is the page's own (its `<meta>` dates, else what
    trafilatura finds in it), else the server's Last-Modified."""
    served = try_instant(page.validators.last_modified)
    content_type = page.content_type or "application/octet-stream"
    if content_type not in ("text/html", "application/xhtml+xml"):
        return ExtractedPage(None, page.body, content_type, served)
    text = decode_text(page.body, "page.html")
    main, found_date = _main_content(text, page.final_url)
    if main is None:  # nothing trafilatura calls content: the page goes to the ingest path whole
        return ExtractedPage(None, page.body, content_type, found_date or served)
    try:
        whole = parse_html(text, "page.html")
        title, own_date = whole.title, whole.source_date
    except ParseError:  # no text outside the page's navigation and scripts: no title or <meta> date either
        title, own_date = None, None
    source_date = own_date or found_date or served
    head = f"<title>{html.escape(title)}</title>" if title else ""
    if source_date is not None:
        head += f'<meta name="date" content="{iso(source_date)}">'
    document = f"<!DOCTYPE html><html><head>{head}</head><body>{main}</body></html>"
    return ExtractedPage(title, document.encode("utf-8"), "text/html", source_date)


def _main_content(text: str, url: str) -> tuple[str | None, datetime | None]:
    """trafilatura's main content of the page as HTML (None when it finds too little: the whole page is
    kept then), and the date it finds in the page (htmldate: meta tags, JSON-LD, "Last updated on ...")."""
    # Imported here: a cold start that never extracts a page does not pay for them (module docstring).
    try:
        import trafilatura
        from lxml import etree
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(WEB_EXTRA_MISSING, name=exc.name) from exc

    extracted = trafilatura.extract(
        text,
        url=url,
        output_format="html",
        include_formatting=True,
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        with_metadata=True,
        date_extraction_params={"extensive_search": False, "original_date": False},
    )
    if not extracted:
        return None, None
    # trafilatura's HTML is well-formed markup, read as such: an HTML parser would close a paragraph at the
    # <pre> trafilatura writes for inline code, and cut it in two.
    # For trafilatura's own output only (it has no DTD, and entities are left as they are).
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=False)
    tree = etree.fromstring(extracted.encode("utf-8"), parser)
    date_meta = tree.find(".//meta[@name='date']")
    found_date = try_instant(date_meta.get("content") if date_meta is not None else None)
    body = tree.find("body")
    if body is None:
        return None, found_date
    for element in body.iter():
        parent = element.getparent()
        if element.tag == "pre" and parent is not None and parent.tag in _INLINE_PARENTS:
            element.tag = "code"
        # The text of a heading's permalink anchor ("¶") stays when trafilatura drops the anchor.
        element.text = _without_pilcrow(element.text)
        element.tail = _without_pilcrow(element.tail)
    main = html.escape(body.text or "", quote=False) + "".join(
        etree.tostring(child, encoding="unicode", method="html") for child in body
    )
    return main, found_date


def _without_pilcrow(text: str | None) -> str | None:
    return text[:-1] if text and text.endswith(_PILCROW) else text


def _gunzipped(body: bytes) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, MAX_SITEMAP_BYTES)
    except zlib.error as exc:
        raise ValidationError("not a sitemap: bad gzip data", details={"reason": "sitemap"}) from exc
    if inflater.unconsumed_tail:
        raise ValidationError(
            f"the sitemap is over {MAX_SITEMAP_BYTES} bytes uncompressed", details={"reason": "sitemap"}
        )
    return data


def _local_name(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1]


def _child_text(item: Element, name: str) -> str | None:
    for child in item:
        if _local_name(child.tag) == name:
            return (child.text or "").strip() or None
    return None


class _LinkReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        href = values.get("href")
        if not href:
            return
        if tag == "base" and self.base is None:
            self.base = href
        elif tag == "a" and "nofollow" not in (values.get("rel") or "").lower().split():
            self.hrefs.append(href)
