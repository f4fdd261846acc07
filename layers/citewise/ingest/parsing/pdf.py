"""PDF: the text layer page by page, one block per paragraph, every block tagged with its page.

The text comes from PDFium (pypdfium2), about five times faster than pypdf's layout mode on the same
pages. PDFium's text has every line but no blank lines, so the paragraph breaks the structure-aware
chunker needs are recovered from geometry (`citewise.ingest.parsing.pdf_lines`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import datetime

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from citewise.domain.errors import PayloadTooLargeError
from citewise.domain.models import ParsedDocument
from citewise.domain.provenance import as_utc
from citewise.ingest.parsing.builder import DocumentBuilder
from citewise.ingest.parsing.failures import parse_error
from citewise.ingest.parsing.limits import ParseBudget
from citewise.ingest.parsing.pdf_lines import Line, join_lines, paragraphs, pdf_date
from citewise.ingest.parsing.plaintext import split_paragraphs

# PDFium is not thread-safe: no two threads of a process may be inside it at once, even on two
# different documents. Local mode ingests on worker threads, so every call into it holds this lock.
_PDFIUM_LOCK = threading.Lock()
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
# PDFium ends each line of a page's text with a generated "\r\n"; a line that ends in a hyphen is
# instead joined to the next, the hyphen given as U+FFFE. The page's text keeps both, as the page shows
# them (its first line is the title when the metadata has none); a block's text joins its lines.
_LINE_END = "\r\n"
_HYPHEN_AT_LINE_END = "\ufffe"


def parse_pdf(
    data: bytes, filename: str, budget: ParseBudget, *, on_page: Callable[[int, int], None] | None = None
) -> ParsedDocument:
    """Parse a PDF's text layer; the title is the metadata title, else the first line of text.

    `on_page(done, total)` is called after each page's text is extracted, the slow part of a long PDF.
    The page limit is checked against the page count before any text is extracted, so an oversized
    document costs almost nothing to reject; the budget's expansion and time are checked after every
    page (a page's compressed content can hold any amount of text). Scanned PDFs (pages without text)
    are rejected because OCR is not supported.
    """
    with _PDFIUM_LOCK:
        document = _open(data, filename)
        try:
            page_count = len(document)
            _check_page_limit(page_count, filename, budget.limits.max_pages)
            texts = []
            extracted = 0
            for index in range(page_count):
                texts.append(_page_text(document, index, filename))
                extracted += len(texts[-1])
                budget.spend(extracted)
                budget.check_time()
                if on_page is not None:
                    on_page(len(texts), page_count)
            metadata = document.get_metadata_dict(skip_empty=True)
        finally:
            document.close()
    if not page_count:
        raise parse_error(filename, "the PDF has no pages")
    if not any(text.strip() for text in texts):
        raise parse_error(filename, "the PDF has no text layer (it may be scanned); OCR is not supported")
    builder = DocumentBuilder(filename, budget)
    for page_number, text in enumerate(texts, start=1):
        for paragraph in split_paragraphs(text):
            builder.block(join_lines(paragraph.split("\n")), page=page_number)
    return builder.build(
        title=_title(metadata.get("Title"), texts), page_count=page_count, source_date=_metadata_date(metadata)
    )


def _open(data: bytes, filename: str) -> pdfium.PdfDocument:
    try:
        # Many "encrypted" PDFs only restrict printing or copying: PDFium opens them with the empty
        # user password, whatever their cipher.
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise parse_error(filename, "the PDF is password protected") from exc
        raise parse_error(filename, f"it is not a readable PDF (PdfiumError: {exc})") from exc


def _metadata_date(metadata: dict[str, str]) -> datetime | None:
    """ModDate, else CreationDate, of the document information; a malformed one (PDF tools write many) is
    passed over, the object's own time then stands in."""
    for key in ("ModDate", "CreationDate"):
        moment = pdf_date(metadata.get(key, ""))
        if moment is not None:
            return as_utc(moment)
    return None


def _check_page_limit(page_count: int, filename: str, max_pages: int) -> None:
    if page_count > max_pages:
        raise PayloadTooLargeError(
            f"{filename!r} has {page_count} pages; at most {max_pages} are accepted",
            details={"filename": filename, "page_count": page_count, "max_pages": max_pages},
        )


def _page_text(document: pdfium.PdfDocument, index: int, filename: str) -> str:
    """The page's lines, a blank line between paragraphs."""
    try:
        page = document[index]
    except pdfium.PdfiumError as exc:
        # The page tree declared a page it cannot deliver: the file is damaged.
        raise parse_error(filename, f"it is not a readable PDF (page {index + 1}: {exc})") from exc
    try:
        text_page = page.get_textpage()
        try:
            return "\n\n".join("\n".join(paragraph) for paragraph in paragraphs(_lines(text_page)))
        finally:
            text_page.close()
    finally:
        page.close()


def _lines(text_page: pdfium.PdfTextPage) -> list[Line]:
    """Each line of the page with the loose box (font ascent to descent) of its first character."""
    text = text_page.get_text_range()
    lines: list[Line] = []
    offset = 0  # in UTF-16 code units, PDFium's text index
    for raw in text.split(_LINE_END):
        stripped = _SPACE_RUNS.sub(" ", raw).strip().replace(_HYPHEN_AT_LINE_END, "-\n")
        if stripped:
            leading = len(raw) - len(raw.lstrip())
            text_index = offset + len(raw[:leading].encode("utf-16-le")) // 2
            char_index = pdfium_c.FPDFText_GetCharIndexFromTextIndex(text_page, text_index)
            if char_index >= 0:
                _left, bottom, _right, top = text_page.get_charbox(char_index, loose=True)
                lines.append(Line(stripped, bottom, top))
            else:
                lines.append(Line(stripped, None, None))
        offset += len(raw.encode("utf-16-le")) // 2 + len(_LINE_END)
    return lines


def _title(metadata_title: str | None, texts: list[str]) -> str | None:
    """The metadata title, else the first line of text (the builder keeps a label's worth of either)."""
    title = " ".join((metadata_title or "").split())
    if title:
        return title
    return next((line for text in texts for line in text.split("\n") if line.strip()), None)
