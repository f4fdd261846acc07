"""HTML: block-level elements become blocks, h1-h6 give structure, chrome and code are skipped.

Built on the stdlib `html.parser`, which tolerates the unclosed and misnested tags of real pages.
"""

from __future__ import annotations

import re
from datetime import datetime
from html.parser import HTMLParser

from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import try_instant
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.limits import ParseBudget

_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "html",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "ul",
        *_HEADINGS,
    }
)
_TABLE_TAGS = frozenset({"table", "thead", "tbody", "tfoot", "tr"})
_CELL_TAGS = frozenset({"td", "th"})
# Contents that are not the document's text: code, styling, navigation chrome, templates.
_SKIPPED_TAGS = frozenset({"script", "style", "nav", "noscript", "template"})
# Anything else inside <head> means the author left <head> unclosed and the body has begun.
_META_DATE_NAMES = (
    "article:modified_time",
    "og:updated_time",
    "dcterms.modified",
    "last-modified",
    "date",
    "dc.date",
    "dcterms.date",
    "article:published_time",
)
"""`<meta>` names (or properties, or http-equiv) of the content's date, the last change first."""
_PERMALINK_CLASSES = frozenset(
    {"headerlink", "anchor", "hash-link", "header-anchor", "heading-anchor", "anchorjs-link"}
)
"""Classes of the permalink anchor documentation generators put in a heading (Sphinx and Python-Markdown,
GitHub, Docusaurus, VitePress, AnchorJS): its "¶" or "#" is not part of the heading."""
_HEAD_TAGS = frozenset({"title", "meta", "link", "base", *_SKIPPED_TAGS})
_HTML_WHITESPACE = re.compile(r"[ \t\n\r\f]+")
_CELL_SEPARATOR = " | "


def parse_html(text: str, filename: str, budget: ParseBudget | None = None) -> ParsedDocument:
    """Parse decoded HTML; the title is `<title>`, else the first h1."""
    builder = DocumentBuilder(filename, budget)
    reader = _HtmlReader(builder)
    reader.feed(_defused(text))
    reader.close()
    return builder.build(title=reader.title or builder.first_heading(1), source_date=reader.source_date)


def _defused(text: str) -> str:
    """`text` with every `<` after its last `>` written `&lt;`, which reads the same.

    No tag, comment or declaration can close there, and `html.parser` (CPython's, before the fix of
    CVE-2025-6069) rescans the rest of the document for each such `<` at `close()`: "a <" repeated 20,000
    times (60 KB) took 77 s, 40,000 times 420 s. Escaped, they are text from the start, as `close()`
    would have made them, and the parse is linear.
    """
    last = text.rfind(">")
    tail = text[last + 1 :]
    return text if "<" not in tail else text[: last + 1] + tail.replace("<", "&lt;")


def _is_permalink(attrs: dict[str, str | None]) -> bool:
    """Whether a heading's `<a>` is its permalink: a generator's class for one, or hidden from readers."""
    classes = (attrs.get("class") or "").lower().split()
    return attrs.get("aria-hidden") == "true" or not _PERMALINK_CLASSES.isdisjoint(classes)


def _collapse(text: str) -> str:
    return _HTML_WHITESPACE.sub(" ", text).strip()


class _HtmlReader(HTMLParser):
    def __init__(self, builder: DocumentBuilder) -> None:
        super().__init__(convert_charrefs=True)
        self._builder = builder
        self.title: str | None = None
        self._meta_dates: dict[str, str] = {}
        self._title_parts: list[str] | None = None
        self._in_head = False
        self._skip_depth = 0
        self._heading_level: int | None = None
        self._in_permalink = False
        self._pre_depth = 0
        self._text: list[str] = []
        self._row: list[list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "head":
            self._in_head = True
            return
        if self._in_head and tag not in _HEAD_TAGS:
            self._in_head = False
        if tag == "meta":
            self._meta(dict(attrs))
        if tag == "title":
            self._title_parts = []
        elif tag in _SKIPPED_TAGS:
            self._skip_depth += 1
        elif self._skipping:
            return
        elif tag == "br":
            self._target().append("\n" if self._pre_depth else " ")
        elif tag == "a" and self._heading_level is not None and _is_permalink(dict(attrs)):
            self._in_permalink = True
        elif tag in _CELL_TAGS:
            self._start_cell()
        elif tag in _TABLE_TAGS:
            self._flush_text()
            self._flush_row()
            if tag == "tr":
                self._row = [[]]
        elif tag in _BLOCK_TAGS and self._row is None:
            # Inside a table cell, paragraphs and lists stay part of the cell's row.
            self._flush_text()
            if tag in _HEADINGS:
                self._heading_level = _HEADINGS[tag]
            elif tag == "pre":
                self._pre_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self._in_head = False
        elif tag == "title":
            self._end_title()
        elif tag in _SKIPPED_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif self._skipping:
            return
        elif tag == "a":
            self._in_permalink = False
        elif tag in _TABLE_TAGS:
            self._flush_row()
        elif tag in _BLOCK_TAGS and self._row is None:
            self._flush_text()
            if tag in _HEADINGS:
                self._heading_level = None
            elif tag == "pre":
                self._pre_depth = max(0, self._pre_depth - 1)

    def handle_data(self, data: str) -> None:
        if self._title_parts is not None:
            self._title_parts.append(data)
        elif not self._skipping and not self._in_permalink:
            self._target().append(data)

    def _meta(self, attrs: dict[str, str | None]) -> None:
        name = (attrs.get("name") or attrs.get("property") or attrs.get("http-equiv") or "").strip().lower()
        content = attrs.get("content")
        if name in _META_DATE_NAMES and content:
            self._meta_dates.setdefault(name, content)

    @property
    def source_date(self) -> datetime | None:
        """The first `<meta>` date of `_META_DATE_NAMES` that parses; a site's malformed one is passed over."""
        for name in _META_DATE_NAMES:
            moment = try_instant(self._meta_dates.get(name))
            if moment is not None:
                return moment
        return None

    def close(self) -> None:
        super().close()
        self._flush_text()
        self._flush_row()

    @property
    def _skipping(self) -> bool:
        return self._in_head or self._skip_depth > 0

    def _target(self) -> list[str]:
        return self._row[-1] if self._row is not None else self._text

    def _start_cell(self) -> None:
        if self._row is None:
            # A cell outside any <tr> still starts a row of its own.
            self._flush_text()
            self._row = []
        self._row.append([])

    def _end_title(self) -> None:
        if self._title_parts is not None and self.title is None:
            self.title = _collapse("".join(self._title_parts)) or None
        self._title_parts = None

    def _flush_text(self) -> None:
        raw = "".join(self._text)
        self._text = []
        if self._heading_level is not None:
            self._builder.heading(raw, self._heading_level)
            self._in_permalink = False  # an anchor left open ends with its heading
        elif self._pre_depth:
            self._builder.block(raw)
        else:
            self._builder.block(_collapse(raw))

    def _flush_row(self) -> None:
        if self._row is not None:
            cells = (_collapse("".join(cell)) for cell in self._row)
            self._builder.block(_CELL_SEPARATOR.join(cell for cell in cells if cell))
        self._row = None
